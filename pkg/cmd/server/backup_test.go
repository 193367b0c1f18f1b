package server

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"

	"flock.dev/flock/pkg/etcd"
	"flock.dev/flock/test/cluster"
)

func freeLoopbackPort(t *testing.T) int {
	t.Helper()
	port, err := cluster.FreeLoopbackPort()
	if err != nil {
		t.Fatal(err)
	}
	return port
}

// TestBackupAndRestoreCommandsOverTLS: the commands reach an etcd member
// that asks for client certificates (overlays/ha's) with the certificate
// flags, and are refused without them; a backup to a file that exists is
// refused (it is never overwritten); what restore puts back is what was
// backed up; accept-empty-store marks only a store without Flocks, once.
func TestBackupAndRestoreCommandsOverTLS(t *testing.T) {
	dir := t.TempDir()
	ca, kp, err := cluster.NewLoopbackEtcdTLS(dir)
	if err != nil {
		t.Fatal(err)
	}
	files := etcd.TLSFiles{CertFile: kp.CertFile, KeyFile: kp.KeyFile, TrustedCAFile: ca.CertFile}
	peer := fmt.Sprintf("https://127.0.0.1:%d", freeLoopbackPort(t))
	client := fmt.Sprintf("https://127.0.0.1:%d", freeLoopbackPort(t))
	s, err := etcd.Start(context.Background(), etcd.Config{DataDir: filepath.Join(dir, "data"), Cluster: &etcd.ClusterConfig{
		Name: "flock-0", InitialCluster: map[string]string{"flock-0": peer},
		ClientURL: client, ClusterClientURLs: []string{client}, Peer: files, Client: files, Token: "test",
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	tlsConfig, err := transport.TLSInfo{CertFile: kp.CertFile, KeyFile: kp.KeyFile, TrustedCAFile: ca.CertFile}.ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{client}, DialTimeout: 10 * time.Second, TLS: tlsConfig})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	key := defaultEtcdPathPrefix + "/flock.dev/flocks/db/pg"
	if _, err := c.Put(context.Background(), key, "stored pg"); err != nil {
		t.Fatal(err)
	}

	backupFile := filepath.Join(dir, "flocks.backup")
	tlsFlags := []string{"--etcd-servers=" + client, "--etcd-cafile=" + ca.CertFile, "--etcd-certfile=" + kp.CertFile, "--etcd-keyfile=" + kp.KeyFile,
		"--file=" + backupFile, "--timeout=20s"}
	run := func(name string, args ...string) (string, error) {
		cmd := newBackupCommand()
		switch name {
		case "restore":
			cmd = newRestoreCommand()
		case "accept-empty-store":
			cmd = newAcceptEmptyStoreCommand()
		}
		var out, errOut bytes.Buffer
		cmd.SetArgs(args)
		cmd.SetOut(&out)
		cmd.SetErr(&errOut)
		err := cmd.ExecuteContext(context.Background())
		return out.String() + errOut.String(), err
	}

	if out, err := run("backup", "--etcd-servers="+client, "--etcd-cafile="+ca.CertFile, "--file="+backupFile, "--timeout=5s"); err == nil {
		t.Fatalf("a backup without a client certificate passed: %s", out)
	}
	if _, err := os.Stat(backupFile); !os.IsNotExist(err) {
		t.Fatalf("a failed backup left its file: %v", err)
	}
	if out, err := run("backup", tlsFlags...); err != nil || !strings.Contains(out, "wrote 1 Flock (") {
		t.Fatalf("backup: %v\n%s", err, out)
	}
	if out, err := run("backup", tlsFlags...); err == nil || !strings.Contains(err.Error(), "exists") {
		t.Fatalf("a backup over an existing file: %v\n%s", err, out)
	}
	if _, err := c.Delete(context.Background(), key); err != nil {
		t.Fatal(err)
	}
	if out, err := run("restore", tlsFlags...); err != nil || !strings.Contains(out, "restored flocks/db/pg") {
		t.Fatalf("restore: %v\n%s", err, out)
	}
	got, err := c.Get(context.Background(), key)
	if err != nil || len(got.Kvs) != 1 || string(got.Kvs[0].Value) != "stored pg" {
		t.Fatalf("after the restore: %v %v", got, err)
	}

	// accept-empty-store marks a store without Flocks, once; a store
	// with Flocks is left to the server.
	etcdFlags := tlsFlags[:4]
	for _, step := range []struct {
		del  bool
		want string
	}{
		{false, "holds Flocks; a server marks it when it serves it: nothing to do"},
		{true, "marked the store under " + defaultEtcdPathPrefix + " as served"},
		{false, "is marked as served already"},
	} {
		if step.del {
			if _, err := c.Delete(context.Background(), key); err != nil {
				t.Fatal(err)
			}
		}
		if out, err := run("accept-empty-store", etcdFlags...); err != nil || !strings.Contains(out, step.want) {
			t.Fatalf("accept-empty-store: %v\n%s\nwant %q", err, out, step.want)
		}
	}
	state, err := etcd.ReadStoreState(context.Background(), c, defaultEtcdPathPrefix)
	if err != nil || state.Mark == nil || !strings.Contains(state.Mark.Reason, "accept-empty-store") {
		t.Fatalf("the store's mark after accept-empty-store: %+v, %v", state.Mark, err)
	}
}
