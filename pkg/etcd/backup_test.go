package etcd

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

func memberClient(t *testing.T, s *Server) *clientv3.Client {
	t.Helper()
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{s.ClientURL()}, DialTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// writeAfterFirstGet is a KV that writes key once its first Get has
// answered.
type writeAfterFirstGet struct {
	clientv3.KV
	key   string
	wrote bool
}

func (w *writeAfterFirstGet) Get(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	resp, err := w.KV.Get(ctx, key, opts...)
	if err == nil && !w.wrote {
		w.wrote = true
		_, err = w.KV.Put(ctx, w.key, "late")
	}
	return resp, err
}

// TestBackupAndRestore: a backup holds every key under the prefix, read at
// one revision over several pages, and nothing else; a restore puts back
// the keys that are gone, byte for byte, and leaves the keys present as
// they are; a namespace limits both; a backup cut short, of another
// format or of another prefix is refused before anything is written.
func TestBackupAndRestore(t *testing.T) {
	ctx := context.Background()
	s := startMember(t)
	defer s.Stop()
	c := memberClient(t, s)
	const prefix = "/registry/flock.dev"
	stored := map[string]string{
		prefix + "/flock.dev/flocks/a/pg":    "flock:zstd:\x00\x01pg",
		prefix + "/flock.dev/flocks/a/web":   "web\xff",
		prefix + "/flock.dev/flocks/a/cache": "cache",
		prefix + "/flock.dev/flocks/b/pg":    "b-pg",
	}
	for k, v := range stored {
		if _, err := c.Put(ctx, k, v); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Put(ctx, "/registry/flock.devx/other", "not ours"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Put(ctx, "compact_rev_key", "1"); err != nil {
		t.Fatal(err)
	}

	backupPage = 2
	defer func() { backupPage = 500 }()
	var all, onlyA bytes.Buffer
	h, n, err := Backup(ctx, c, prefix+"/", "", &all, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if n != len(stored) || h.Prefix != prefix || h.Revision == 0 {
		t.Fatalf("backup: %d keys, header %+v; want %d keys under %s", n, h, len(stored), prefix)
	}
	if _, n, err := Backup(ctx, c, prefix, "a", &onlyA, time.Now()); err != nil || n != 3 {
		t.Fatalf("backup of namespace a: %d keys, %v; want 3", n, err)
	}
	// A key written after the backup's first page is not in it: every
	// page is read at the first one's revision.
	late := &writeAfterFirstGet{KV: c, key: prefix + "/flock.dev/flocks/a/zz-late"}
	if _, n, err := Backup(ctx, late, prefix, "", &bytes.Buffer{}, time.Now()); err != nil || n != len(stored) || !late.wrote {
		t.Fatalf("backup with a write after its first page: %d keys, %v (written: %v); want %d", n, err, late.wrote, len(stored))
	}
	if _, err := c.Delete(ctx, late.key); err != nil {
		t.Fatal(err)
	}

	// The Flocks of namespace a are deleted, a/web made again since.
	if _, err := c.Delete(ctx, prefix+"/flock.dev/flocks/a/", clientv3.WithPrefix()); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Put(ctx, prefix+"/flock.dev/flocks/a/web", "a new web"); err != nil {
		t.Fatal(err)
	}
	res, err := Restore(ctx, c, prefix, "", bytes.NewReader(all.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(res.Restored)
	slices.Sort(res.Present)
	if want := []string{prefix + "/flock.dev/flocks/a/cache", prefix + "/flock.dev/flocks/a/pg"}; !slices.Equal(res.Restored, want) {
		t.Errorf("restored %v, want %v", res.Restored, want)
	}
	if want := []string{prefix + "/flock.dev/flocks/a/web", prefix + "/flock.dev/flocks/b/pg"}; !slices.Equal(res.Present, want) {
		t.Errorf("left present %v, want %v", res.Present, want)
	}
	for k, want := range map[string]string{
		prefix + "/flock.dev/flocks/a/pg":  stored[prefix+"/flock.dev/flocks/a/pg"],
		prefix + "/flock.dev/flocks/a/web": "a new web",
	} {
		got, err := c.Get(ctx, k)
		if err != nil || len(got.Kvs) != 1 || string(got.Kvs[0].Value) != want {
			t.Errorf("%s after the restore: %v %v, want %q", k, got, err, want)
		}
	}

	// A namespace's restore touches no other namespace.
	if _, err := c.Delete(ctx, prefix+"/flock.dev/flocks/", clientv3.WithPrefix()); err != nil {
		t.Fatal(err)
	}
	if res, err := Restore(ctx, c, prefix, "b", bytes.NewReader(all.Bytes())); err != nil || len(res.Restored) != 1 || res.Restored[0] != prefix+"/flock.dev/flocks/b/pg" {
		t.Fatalf("restore of namespace b: %+v, %v", res, err)
	}

	lines := strings.SplitAfter(all.String(), "\n")
	for name, tc := range map[string]struct {
		backup, prefix, want string
	}{
		"cut short":      {strings.Join(lines[:3], ""), prefix, "cut short"},
		"a wrong count":  {strings.Join(append(slices.Clone(lines[:2]), lines[len(lines)-2]), ""), prefix, "says it holds 4"},
		"another format": {`{"format":"something/else"}` + "\n", prefix, "not a backup"},
		"empty":          {"", prefix, "empty"},
		"another prefix": {all.String(), "/registry/other", "under /registry/flock.dev, the server reads them under /registry/other"},
	} {
		res, err := Restore(ctx, c, tc.prefix, "", strings.NewReader(tc.backup))
		if err == nil || !strings.Contains(err.Error(), tc.want) || len(res.Restored) != 0 {
			t.Errorf("%s: restored %v, error %v; want an error saying %q", name, res.Restored, err, tc.want)
		}
	}
	if got, err := c.Get(ctx, prefix+"/", clientv3.WithPrefix(), clientv3.WithCountOnly()); err != nil || got.Count != 1 {
		t.Errorf("refused restores wrote keys: %d left, want 1 (%v)", got.Count, err)
	}
}
