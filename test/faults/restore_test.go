// File restore_test.go: flock-apiserver's etcd lost and its Flocks
// restored from a backup (README, "Backup and restore").

package faults

import (
	"context"
	"fmt"
	"io"
	"net/http"
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
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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
// directory and starts empty, and the servers start on it (as a server
// whose embedded member's volume was lost does).
//
// The servers refuse to serve the store (the store guard): it holds no
// Flock and no mark of being served, while members' pods and claims name
// Flocks as owners. Requests for Flocks get 503 with the reason, through
// kube-apiserver and from each server; kube-controller-manager's garbage
// collector, asking for the members' owner, is refused too, and deletes
// nothing. `flock-apiserver restore` puts every Flock back with its UID (the
// Flocks the fault suite left in its namespace too), the servers serve them
// within seconds, and the members' pods and claims are the ones from before
// the loss.
//
// Then the store is lost again, and given up (`flock-apiserver
// accept-empty-store`): the servers serve it empty, the collector deletes the
// members' pods and claims, and the PersistentVolumes stay (Released). A
// restore then brings the Flocks back, and each member runs again on the node
// it had, its claim bound to the PersistentVolume it had.
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

	// Lost: the servers start on the empty etcd and refuse to serve it.
	running := memberPodUIDs(t, ctx, ns, first)
	claims := memberClaimUIDs(t, ctx, ns, first)
	kcmFrom := len(logLines("kube-controller-manager.log"))
	loseFlockStore(t, ctx)
	lost := time.Now()
	refusal := waitRefused(t, ctx)
	for _, want := range []string{"pods and", "PersistentVolumeClaims in the cluster belong to Flocks", "flock-apiserver restore", "accept-empty-store"} {
		if !strings.Contains(refusal, want) {
			t.Errorf("the refusal lacks %q: %s", want, refusal)
		}
	}
	t.Logf("both servers refuse the empty store: %s", refusal)
	// The collector asked for a member's owner and was refused: until a
	// NotFound, it deletes nothing.
	var refusedGC string
	if err := wait.PollUntilContextTimeout(ctx, time.Second, restoreTimeout, true, func(context.Context) (bool, error) {
		lines := logLines("kube-controller-manager.log")
		if i := slices.IndexFunc(lines[min(kcmFrom, len(lines)):], func(l string) bool { return strings.Contains(l, "refuses to serve Flocks") }); i >= 0 {
			refusedGC = lines[kcmFrom+i]
		}
		return refusedGC != "", nil
	}); err != nil {
		t.Fatalf("kube-controller-manager's log shows no refused request for a Flock %s after the loss", restoreTimeout)
	}
	t.Logf("the garbage collector was refused %s after the servers started: %.300s", time.Since(lost).Round(time.Millisecond), refusedGC)
	if got := memberPodUIDs(t, ctx, ns, first); !slices.Equal(got, running) {
		t.Errorf("while the store was refused: member pods %v, before the loss %v", got, running)
	}

	restore := func() {
		out := runFlockTool(t, ctx, bin, append([]string{"restore"}, etcdFlags...)...)
		if want := fmt.Sprintf("%d restored, 0 left as they are", wrote); !strings.Contains(out, want) {
			t.Fatalf("restore: want %q in\n%s", want, out)
		}
	}
	restore()
	restored := time.Now()
	waitPairServes(t, ctx)
	t.Logf("both servers serve the restored store %s after the restore", time.Since(restored).Round(time.Millisecond))
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
	back := waitMembersReady(t, ctx, ns, name, first.UID, replicas)
	if got := memberPodUIDs(t, ctx, ns, back); !slices.Equal(got, running) {
		t.Errorf("after the restore: member pods %v, before the loss %v (collected and made again)", got, running)
	}
	if got := memberClaimUIDs(t, ctx, ns, back); !slices.Equal(got, claims) {
		t.Errorf("after the restore: member claims %v, before the loss %v", got, claims)
	}

	// Lost again, and given up: the servers serve the empty store, and the
	// collector deletes the members.
	loseFlockStore(t, ctx)
	waitRefused(t, ctx)
	out = runFlockTool(t, ctx, bin, "accept-empty-store", "--etcd-servers="+pair.Etcd.URL)
	if !strings.Contains(out, "marked the store under /registry/flock.dev as served") {
		t.Fatalf("accept-empty-store:\n%s", out)
	}
	accepted := time.Now()
	waitPairServes(t, ctx)
	if list, err := env.Flock.FlockV1alpha1().Flocks(metav1.NamespaceAll).List(ctx, metav1.ListOptions{}); err != nil || len(list.Items) != 0 {
		t.Fatalf("the store accepted empty: %v Flocks served (%v)", list, err)
	}
	if err := wait.PollUntilContextTimeout(ctx, time.Second, restoreTimeout, true, func(ctx context.Context) (bool, error) {
		claims, err := env.Kube.CoreV1().PersistentVolumeClaims(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		pods, err := env.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		return err == nil && len(claims.Items) == 0 && len(pods.Items) == 0, nil
	}); err != nil {
		t.Fatalf("the garbage collector did not collect the pods and claims of the Flock the store accepted empty lacks: %v", err)
	}
	t.Logf("the garbage collector collected the members' pods and claims %s after the store was accepted empty", time.Since(accepted).Round(time.Millisecond))
	for _, m := range first.Status.Members {
		pv, err := env.Kube.CoreV1().PersistentVolumes().Get(ctx, m.PersistentVolume, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("member %d's PersistentVolume %s after its claim was collected: %v", m.Ordinal, m.PersistentVolume, err)
		}
		t.Logf("member %d: PersistentVolume %s is %s", m.Ordinal, pv.Name, pv.Status.Phase)
	}

	restore()
	restored = time.Now()
	back = waitMembersReady(t, ctx, ns, name, first.UID, replicas)
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
}

// waitRefused waits until flock-apiserver refuses to serve Flocks, both
// through kube-apiserver (what kubectl sees) and from server A, and returns
// the refusal.
func waitRefused(t *testing.T, ctx context.Context) string {
	t.Helper()
	client, err := env.HTTPClient(env.PKI.Admin)
	if err != nil {
		t.Fatal(err)
	}
	var why string
	if err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, serverStartTimeout, true, func(ctx context.Context) (bool, error) {
		_, err := env.Flock.FlockV1alpha1().Flocks(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
		if !apierrors.IsServiceUnavailable(err) || !strings.Contains(err.Error(), "refuses to serve Flocks") {
			why = fmt.Sprintf("a list through kube-apiserver: %v", err)
			return false, nil
		}
		msg := err.Error()
		code, body := httpGet(ctx, client, pair.A.URL+"/apis/flock.dev/v1alpha1/flocks")
		if code != http.StatusServiceUnavailable || !strings.Contains(body, "refuses to serve Flocks") {
			why = fmt.Sprintf("a list from A: %d %.200s", code, body)
			return false, nil
		}
		if code, body := httpGet(ctx, client, pair.A.URL+"/readyz?verbose"); code == http.StatusOK || !strings.Contains(body, "[-]flock-store failed") {
			why = fmt.Sprintf("A's /readyz: %d %.300s", code, body)
			return false, nil
		}
		why = msg
		return true, nil
	}); err != nil {
		t.Fatalf("the servers on the lost store do not refuse it: %s", why)
	}
	return why
}

// waitPairServes waits until both servers are ready and Flocks are served
// through kube-apiserver.
func waitPairServes(t *testing.T, ctx context.Context) {
	t.Helper()
	client, err := env.HTTPClient(env.PKI.Admin)
	if err != nil {
		t.Fatal(err)
	}
	var why string
	if err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, serverStartTimeout, true, func(ctx context.Context) (bool, error) {
		if code, body := httpGet(ctx, client, pair.A.URL+"/readyz"); code != http.StatusOK {
			why = fmt.Sprintf("A's /readyz: %d %.300s", code, body)
			return false, nil
		}
		if _, err := env.Flock.FlockV1alpha1().Flocks(metav1.NamespaceAll).List(ctx, metav1.ListOptions{Limit: 1}); err != nil {
			why = fmt.Sprintf("a list through kube-apiserver: %v", err)
			return false, nil
		}
		return true, nil
	}); err != nil {
		t.Fatalf("the servers do not serve Flocks again: %s", why)
	}
}

// httpGet returns the code and body of a GET of url (0 and the error when
// it fails).
func httpGet(ctx context.Context, client *http.Client, url string) (int, string) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err.Error()
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	return resp.StatusCode, string(body)
}

// memberClaimUIDs returns the UIDs of f's members' claims, by ordinal.
func memberClaimUIDs(t *testing.T, ctx context.Context, ns string, f *flockv1alpha1.Flock) []types.UID {
	t.Helper()
	return memberUIDs(t, f, func(m flockv1alpha1.FlockMember) (metav1.Object, error) {
		return env.Kube.CoreV1().PersistentVolumeClaims(ns).Get(ctx, m.Claim, metav1.GetOptions{})
	})
}

// memberPodUIDs returns the UIDs of f's members' pods, by ordinal.
func memberPodUIDs(t *testing.T, ctx context.Context, ns string, f *flockv1alpha1.Flock) []types.UID {
	t.Helper()
	return memberUIDs(t, f, func(m flockv1alpha1.FlockMember) (metav1.Object, error) {
		return env.Kube.CoreV1().Pods(ns).Get(ctx, m.Pod, metav1.GetOptions{})
	})
}

// memberUIDs returns the UID of the object get returns for each of f's
// members, by ordinal.
func memberUIDs(t *testing.T, f *flockv1alpha1.Flock, get func(flockv1alpha1.FlockMember) (metav1.Object, error)) []types.UID {
	t.Helper()
	var out []types.UID
	for _, m := range f.Status.Members {
		o, err := get(m)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, o.GetUID())
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
// data directory, and starts the etcd (empty) and the servers again,
// without waiting for them to be ready (they refuse the store).
func loseFlockStore(t *testing.T, ctx context.Context) {
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
	if pair.A.Process, err = env.RestartComponentUnready(startCtx, pair.A.Process); err != nil {
		t.Fatal(err)
	}
	if pair.B, err = env.RestartComponentUnready(startCtx, pair.B); err != nil {
		t.Fatal(err)
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
