// File restore_test.go: flock-apiserver's etcd lost and its Flocks
// restored from a backup (README, "Backup and restore").

package faults

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	flockv1alpha1 "flock.dev/flock/pkg/apis/flock/v1alpha1"
	"flock.dev/flock/test/cluster"
)

// restoreTimeout bounds each wait of the test: the members Ready, the
// garbage collector's collection, the members back.
const restoreTimeout = 3 * time.Minute

// TestEtcdLostThenRestoredFromBackup: `flock-apiserver backup` of the
// running store; then both flock-apiservers stop, their etcd loses its data
// directory and starts empty, and the servers start on it and serve no
// Flocks (as a server whose embedded member's volume was lost does).
// kube-controller-manager's garbage collector finds each Flock's owner
// reference dangling and collects the members' pods and claims; the
// PersistentVolumes stay (Released). `flock-apiserver restore` then puts
// every Flock back with its UID, and each member runs again on the node it
// had, its claim bound to the PersistentVolume it had. The Flocks the fault
// suite left in its namespace are in the backup too, and come back. Then
// the store is lost again and the backup restored before the servers start
// (as an external etcd allows): the collector never sees the Flocks gone,
// and the members' pods run on.
func TestEtcdLostThenRestoredFromBackup(t *testing.T) {
	ctx := t.Context()
	const ns, name = "etcd-lost", "kept"
	if _, err := env.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	replicas := int32(2)
	labels := map[string]string{"app": name}
	f := &flockv1alpha1.Flock{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: flockv1alpha1.FlockSpec{
			Replicas:            &replicas,
			Selector:            &metav1.LabelSelector{MatchLabels: labels},
			PodManagementPolicy: flockv1alpha1.ParallelPodManagement,
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "app", Image: "busybox:1.36", Command: []string{"sleep", "infinity"},
				}}},
			},
		},
	}
	if _, err := env.Flock.FlockV1alpha1().Flocks(ns).Create(ctx, f, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	first := waitMembersReady(t, ctx, ns, name, "", replicas)
	before, err := env.Flock.FlockV1alpha1().Flocks(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}

	bin := filepath.Join(env.BinDir(), "flock-apiserver")
	file := filepath.Join(t.TempDir(), "flocks.backup")
	etcdFlags := []string{"--etcd-servers=" + pair.Etcd.URL, "--file=" + file}
	out := runFlockTool(t, ctx, bin, append([]string{"backup"}, etcdFlags...)...)
	var wrote int
	if m := regexp.MustCompile(`wrote (\d+) Flocks? \(`).FindStringSubmatch(out); m == nil {
		t.Fatalf("backup: no count in\n%s", out)
	} else if wrote, _ = strconv.Atoi(m[1]); wrote < 1 || wrote > len(before.Items) {
		t.Fatalf("backup wrote %d Flocks; %d were listed just before, one of them %s/%s\n%s", wrote, len(before.Items), ns, name, out)
	}

	// The store is lost: both servers stop, the etcd's data directory goes.
	loseFlockStore(t, ctx, nil)
	lost := time.Now()
	if err := wait.PollUntilContextTimeout(ctx, time.Second, restoreTimeout, true, func(ctx context.Context) (bool, error) {
		claims, err := env.Kube.CoreV1().PersistentVolumeClaims(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		pods, err := env.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		return err == nil && len(claims.Items) == 0 && len(pods.Items) == 0, nil
	}); err != nil {
		t.Fatalf("the garbage collector did not collect the pods and claims of the Flock the empty store lacks: %v", err)
	}
	t.Logf("the garbage collector collected the members' pods and claims %s after the servers served the empty store", time.Since(lost).Round(time.Millisecond))
	for _, m := range first.Status.Members {
		pv, err := env.Kube.CoreV1().PersistentVolumes().Get(ctx, m.PersistentVolume, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("member %d's PersistentVolume %s after its claim was collected: %v", m.Ordinal, m.PersistentVolume, err)
		}
		t.Logf("member %d: PersistentVolume %s is %s", m.Ordinal, pv.Name, pv.Status.Phase)
	}

	restore := func() {
		out := runFlockTool(t, ctx, bin, append([]string{"restore"}, etcdFlags...)...)
		if want := fmt.Sprintf("%d restored, 0 left as they are", wrote); !strings.Contains(out, want) {
			t.Fatalf("restore: want %q in\n%s", want, out)
		}
	}
	restore()
	after, err := env.Flock.FlockV1alpha1().Flocks(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Each Flock is back with its UID (one the fault suite was deleting
	// may finish its deletion).
	got := flockUIDs(after.Items)
	for _, want := range flockUIDs(slices.DeleteFunc(before.Items, func(f flockv1alpha1.Flock) bool { return f.DeletionTimestamp != nil })) {
		if !slices.Contains(got, want) {
			t.Errorf("Flock %s is not back; after the restore: %v", want, got)
		}
	}

	restored := time.Now()
	back := waitMembersReady(t, ctx, ns, name, first.UID, replicas)
	t.Logf("the members Ready again, on their nodes, %s after the restore", time.Since(restored).Round(time.Millisecond))
	for i, m := range back.Status.Members {
		was := first.Status.Members[i]
		if m.Ordinal != was.Ordinal || m.Node != was.Node || m.PersistentVolume != was.PersistentVolume {
			t.Errorf("member %d back on node %s, volume %s; it had node %s, volume %s", m.Ordinal, m.Node, m.PersistentVolume, was.Node, was.PersistentVolume)
		}
		claim, err := env.Kube.CoreV1().PersistentVolumeClaims(ns).Get(ctx, m.Claim, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if claim.Spec.VolumeName != was.PersistentVolume || claim.Status.Phase != corev1.ClaimBound {
			t.Errorf("member %d: claim %s on volume %q (%s), want %s Bound", m.Ordinal, claim.Name, claim.Spec.VolumeName, claim.Status.Phase, was.PersistentVolume)
		}
	}
	collected := restored.Sub(lost)

	// Lost again, and restored before the servers start (an external
	// etcd allows it): the collector never sees the Flocks gone, and the
	// members' pods that ran before run on.
	running := memberPodUIDs(t, ctx, ns, back)
	loseFlockStore(t, ctx, restore)
	again := waitMembersReady(t, ctx, ns, name, first.UID, replicas)
	// A collection would come within the time it took above; look again
	// after twice that.
	time.Sleep(min(max(2*collected, 5*time.Second), 90*time.Second))
	if got := memberPodUIDs(t, ctx, ns, again); !slices.Equal(got, running) {
		t.Errorf("restored before the servers started: member pods %v, before the loss %v (collected and made again)", got, running)
	}
}

// memberPodUIDs returns the UIDs of f's members' pods, by ordinal.
func memberPodUIDs(t *testing.T, ctx context.Context, ns string, f *flockv1alpha1.Flock) []types.UID {
	t.Helper()
	var out []types.UID
	for _, m := range f.Status.Members {
		p, err := env.Kube.CoreV1().Pods(ns).Get(ctx, m.Pod, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, p.UID)
	}
	return out
}

// waitMembersReady waits until Flock ns/name (of UID uid, if set) has
// replicas members, each with its volume and a Ready pod of the Flock on the
// member's node, and returns the Flock.
func waitMembersReady(t *testing.T, ctx context.Context, ns, name string, uid types.UID, replicas int32) *flockv1alpha1.Flock {
	t.Helper()
	var f *flockv1alpha1.Flock
	var why error
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, restoreTimeout, true, func(ctx context.Context) (bool, error) {
		f, why = membersReady(ctx, ns, name, uid, replicas)
		return why == nil, nil
	})
	if err != nil {
		t.Fatalf("Flock %s/%s: %v (last: %v)", ns, name, err, why)
	}
	return f
}

func membersReady(ctx context.Context, ns, name string, uid types.UID, replicas int32) (*flockv1alpha1.Flock, error) {
	f, err := env.Flock.FlockV1alpha1().Flocks(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	if uid != "" && f.UID != uid {
		return nil, fmt.Errorf("UID %s, want %s", f.UID, uid)
	}
	if int32(len(f.Status.Members)) != replicas {
		return nil, fmt.Errorf("%d members", len(f.Status.Members))
	}
	pods, err := env.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for _, m := range f.Status.Members {
		if m.PersistentVolume == "" || m.Claim == "" {
			return nil, fmt.Errorf("member %d has no volume yet", m.Ordinal)
		}
		i := slices.IndexFunc(pods.Items, func(p corev1.Pod) bool {
			ref := metav1.GetControllerOf(&p)
			return p.Name == m.Pod && ref != nil && ref.UID == f.UID
		})
		if i < 0 {
			return nil, fmt.Errorf("member %d: no pod %s of the Flock", m.Ordinal, m.Pod)
		}
		p := &pods.Items[i]
		if p.Spec.NodeName != m.Node || podCondition(p, corev1.PodReady) != corev1.ConditionTrue {
			return nil, fmt.Errorf("member %d: pod %s on %q, Ready %s; its node is %s", m.Ordinal, p.Name, p.Spec.NodeName, podCondition(p, corev1.PodReady), m.Node)
		}
	}
	return f, nil
}

// loseFlockStore stops both flock-apiservers, kills their etcd, removes its
// data directory, and starts the etcd (empty) and, after beforeServers (if
// set), the servers again.
func loseFlockStore(t *testing.T, ctx context.Context, beforeServers func()) {
	t.Helper()
	if err := pair.A.Stop(cluster.DefaultStopGrace); err != nil {
		t.Fatal(err)
	}
	if err := pair.B.Stop(cluster.DefaultStopGrace); err != nil {
		t.Fatal(err)
	}
	if err := pair.Etcd.Kill(); err != nil {
		t.Fatal(err)
	}
	dataDir := pair.Etcd.DataDir()
	if dataDir == "" {
		t.Fatal("the Flocks' etcd has no --data-dir")
	}
	if err := os.RemoveAll(dataDir); err != nil {
		t.Fatal(err)
	}
	t.Logf("stopped both flock-apiservers and %s, removed %s", pair.Etcd.Process, dataDir)
	startCtx, cancel := context.WithTimeout(ctx, serverStartTimeout)
	defer cancel()
	var err error
	if pair.Etcd.Process, err = env.RestartComponent(startCtx, pair.Etcd.Process); err != nil {
		t.Fatal(err)
	}
	if beforeServers != nil {
		beforeServers()
	}
	if pair.A.Process, err = env.RestartComponent(startCtx, pair.A.Process); err != nil {
		t.Fatal(err)
	}
	if pair.B, err = env.RestartComponent(startCtx, pair.B); err != nil {
		t.Fatal(err)
	}
	if beforeServers != nil {
		return
	}
	list, err := env.Flock.FlockV1alpha1().Flocks(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 0 {
		t.Fatalf("%d Flocks served from the emptied store", len(list.Items))
	}
}

// runFlockTool runs a flock-apiserver subcommand and returns its output.
func runFlockTool(t *testing.T, ctx context.Context, bin string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", bin, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// flockUIDs returns the namespace/name=UID of each Flock, sorted.
func flockUIDs(flocks []flockv1alpha1.Flock) []string {
	var out []string
	for _, f := range flocks {
		out = append(out, f.Namespace+"/"+f.Name+"="+string(f.UID))
	}
	slices.Sort(out)
	return out
}
