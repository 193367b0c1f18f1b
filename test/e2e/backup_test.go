package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestBackupBringsADeletedFlockBackWithItsData: `flock-apiserver backup` of
// a namespace, then the Flock deleted (its pods and claims collected, its
// volumes retained and released), then `flock-apiserver restore` into the
// running server: the Flock is back with its UID, each member runs again on
// its own node, its claim bound to the PersistentVolume it had (the same
// directory); made again from its YAML instead, a Flock gets a new UID and
// new volumes (TestStorageRecreatedFlockGetsNewData). A second restore
// leaves the Flock as it is.
func TestBackupBringsADeletedFlockBackWithItsData(t *testing.T) {
	if env.FlockEtcdURL == "" {
		t.Fatal("flock-apiserver runs with an external etcd; this test backs up the embedded one")
	}
	ns := newNamespace(t)
	lcNodes(t, ns, 2)
	const name = "kept"
	first, old := stStart(t, lcFlock(name, ns, 2))
	bin := filepath.Join(env.BinDir(), "flock-apiserver")
	file := filepath.Join(t.TempDir(), "flocks.backup")
	etcdFlags := []string{"--etcd-servers=" + env.FlockEtcdURL, "--namespace=" + ns, "--file=" + file}

	out, err := runTool(t, time.Minute, "", nil, bin, append([]string{"backup"}, etcdFlags...)...)
	if err != nil || !strings.Contains(out, "wrote 1 Flock (") {
		t.Fatalf("backup: %v\n%s", err, out)
	}

	ctlDeleteFlock(t, ns, name, true)
	stWaitNoClaims(t, ns)

	out, err = runTool(t, time.Minute, "", nil, bin, append([]string{"restore"}, etcdFlags...)...)
	if err != nil || !strings.Contains(out, "restored flocks/"+ns+"/"+name) || !strings.Contains(out, "1 restored, 0 left as they are") {
		t.Fatalf("restore: %v\n%s", err, out)
	}
	// The status put back is the one backed up (members Ready): wait for
	// the members' pods themselves, made again for the Flock's UID.
	eventually(t, lcTimeout, "the members' pods back and Ready", func(ctx context.Context) error {
		pods := ctlMemberPods(t, ns, name)
		if len(pods) != 2 {
			return fmt.Errorf("%d member pods", len(pods))
		}
		for _, p := range pods {
			if ref := metav1.GetControllerOf(p); ref == nil || ref.UID != first.UID || !podReady(p) {
				return fmt.Errorf("pod %s: controller %v, Ready %v", p.Name, ref, podReady(p))
			}
		}
		return nil
	})
	back := waitFlockAvailable(t, ns, name)
	if back.UID != first.UID {
		t.Fatalf("the Flock came back with UID %s, it had %s", back.UID, first.UID)
	}
	if got, want := memberNodes(back), memberNodes(first); !slices.Equal(got, want) {
		t.Errorf("members on nodes %v, they were on %v", got, want)
	}
	for ord, pv := range stCheckMemberData(t, back) {
		was := old[ord]
		if pv.Name != was.Name || pv.Spec.HostPath == nil || pv.Spec.HostPath.Path != was.Spec.HostPath.Path || stVolumeHost(pv) != stVolumeHost(was) {
			t.Errorf("member %d: volume %s, the one it had is %s", ord, pv.Name, was.Name)
		}
	}

	out, err = runTool(t, time.Minute, "", nil, bin, append([]string{"restore"}, etcdFlags...)...)
	if err != nil || !strings.Contains(out, "0 restored, 1 left as they are") {
		t.Fatalf("second restore: %v\n%s", err, out)
	}
}
