// File faults_test.go: TestFaults, the faults one at a time and then
// overlapping, each while the workload runs, followed by the convergence
// check; and the harness's side of each fault (kill and restart a
// component, as its supervisor would; hang a leader; delete or partition a
// node).

package faults

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"

	flockcontroller "flock.dev/flock/pkg/controller/flock"
	"flock.dev/flock/test/cluster"
)

const (
	// convergeTimeout bounds how long the Flocks may take to converge after
	// a fault: a test timeout, not a performance target.
	convergeTimeout = 3 * time.Minute
	// warmup and cooldown: the workload runs this long before a fault and
	// after it ends.
	warmup, cooldown = 3 * time.Second, 2 * time.Second
	// downtime is how long a killed component stays down.
	downtime = 2 * time.Second
	// hangFor is how long a hung leader stays stopped: longer than the
	// 6s lease (serverArgs).
	hangFor = 10 * time.Second
	// nodeAwayFor is how long a deleted node stays away and a partitioned
	// node NotReady: longer than the 5s afterSeconds of the workload's
	// Reassign Flocks.
	nodeAwayFor = 10 * time.Second
	// leaderTimeout bounds the wait for a live leader.
	leaderTimeout = 60 * time.Second
)

// fault is one fault: inject starts it and returns heal, which ends it.
type fault struct {
	name   string
	inject func(t *testing.T, ctx context.Context) (heal func(ctx context.Context) error)
}

func TestFaults(t *testing.T) {
	ns := "faults"
	ctx := t.Context()
	if _, err := env.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	wl := newWorkload(ns)
	chk := newChecker(ns, wl)
	watchCtx, stopWatches := context.WithCancel(ctx)
	defer stopWatches()
	chk.start(watchCtx)

	faults := []fault{
		{"SIGKILL flock-apiserver (behind the APIService)", killMainFlock},
		{"SIGKILL flock-apiserver (controller leader)", killLeader},
		{"SIGKILL flock's etcd", killComponent(func() *cluster.Process { return pair.Etcd.Process }, func(p *cluster.Process) { pair.Etcd.Process = p })},
		{"SIGKILL kube-apiserver", killNamed("kube-apiserver")},
		{"SIGKILL kube's etcd", killNamed("etcd")},
		{"SIGKILL kube-controller-manager", killNamed("kube-controller-manager")},
		{"SIGSTOP flock-apiserver leader > lease, SIGCONT", hangLeader},
		{"leader hand-over (SIGTERM leader, restart)", handOver},
		{"node deleted, back after 10s", deleteNode},
		{"node NotReady (partition), back after 10s", partitionNode},
		{"overlap: SIGKILL leader + node deleted", overlap(killLeader, deleteNode)},
		{"overlap: SIGKILL kube-apiserver + kube-controller-manager + node NotReady", overlap(partitionNode, killNamed("kube-controller-manager"), killNamed("kube-apiserver"))},
		{"overlap: SIGKILL flock-apiserver (behind the APIService) + flock's etcd", overlap(killMainFlock,
			killComponent(func() *cluster.Process { return pair.Etcd.Process }, func(p *cluster.Process) { pair.Etcd.Process = p }))},
	}
	if only := os.Getenv("FLOCK_FAULTS"); only != "" {
		// FLOCK_FAULTS=regexp runs only the faults whose names match (to
		// chase one fault); FLOCK_FAULTS_REPEAT=n runs each n times.
		re, err := regexp.Compile(only)
		if err != nil {
			t.Fatalf("FLOCK_FAULTS: %v", err)
		}
		faults = slices.DeleteFunc(faults, func(f fault) bool { return !re.MatchString(f.name) })
	}
	if n, _ := strconv.Atoi(os.Getenv("FLOCK_FAULTS_REPEAT")); n > 1 {
		var repeated []fault
		for _, f := range faults {
			for range n {
				repeated = append(repeated, f)
			}
		}
		faults = repeated
	}
	var report []string
	for _, f := range faults {
		line := runFault(t, ctx, wl, chk, f)
		report = append(report, line)
		t.Log(line)
		if t.Failed() {
			break
		}
	}
	t.Logf("per fault: workload operations, invariant checks, convergence after the fault ended\n%s", strings.Join(report, "\n"))
	breaks := map[string]int{}
	chk.mu.Lock()
	for k, v := range chk.watchBreaks {
		breaks[k] = v
	}
	unverified, forced, moves, kwokStale := chk.unverified, chk.forced, chk.moves, chk.kwokStale
	chk.mu.Unlock()
	t.Logf("watches re-established: %v; members moved off lost nodes: %d; member pods deleted without a grace period (node lost): %d; "+
		"pods whose recorded node could not be checked (gone before a relist caught up): %d; upstream components that exited on their own and were started again: %d; "+
		"pods kwok left stuck after a dropped stage and was made to look at again (as a kubelet's sync retries): %d; "+
		"member pods kwok deleted by name with a delete queued for an earlier pod of that name: %d",
		breaks, moves, forced, unverified, supervisorRestarts, podResyncs, kwokStale)
}

// runFault runs the workload, injects f, heals it, stops the workload and
// waits for convergence; it returns the fault's report line and fails the
// test on the first broken invariant.
func runFault(t *testing.T, ctx context.Context, wl *workload, chk *checker, f fault) string {
	t.Helper()
	ops0, failed0 := wl.counts()
	checks0, _ := chk.counts()

	wctx, stopWorkload := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		wl.run(wctx)
	}()
	defer func() {
		stopWorkload()
		<-done
	}()
	sleepCtx(ctx, warmup)
	superviseComponents(t, ctx)
	heal := f.inject(t, ctx)
	if t.Failed() {
		return f.name + ": injecting failed"
	}
	if err := heal(ctx); err != nil {
		t.Fatalf("%s: ending the fault: %v", f.name, err)
	}
	ended := time.Now()
	sleepCtx(ctx, cooldown)
	stopWorkload()
	<-done

	var lastErr error
	deadline := time.Now().Add(convergeTimeout)
	for {
		superviseComponents(t, ctx)
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		resyncStuckPods(t, cctx, wl.ns)
		resyncStuckPods(t, cctx, flockcontroller.DefaultHelperNamespace)
		lastErr = wl.converged(cctx)
		cancel()
		if lastErr == nil || time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
		sleepCtx(ctx, time.Second)
	}
	convergedIn := time.Since(ended)
	settleCtx, cancel := context.WithTimeout(ctx, time.Minute)
	chk.settle(settleCtx)
	cancel()
	chk.mu.Lock()
	for _, n := range chk.notes {
		t.Log(n)
	}
	chk.notes = nil
	chk.mu.Unlock()

	ops1, failed1 := wl.counts()
	checks1, violations := chk.counts()
	var opsDone, checksDone int
	var opParts, checkParts []string
	for _, k := range []string{"create", "scale", "roll", "delete"} {
		opsDone += ops1[k] - ops0[k]
		opParts = append(opParts, fmt.Sprintf("%s %d", k, ops1[k]-ops0[k]))
	}
	var kinds []string
	for k := range checks1 {
		kinds = append(kinds, k)
	}
	slices.Sort(kinds)
	for _, k := range kinds {
		checksDone += checks1[k] - checks0[k]
		checkParts = append(checkParts, fmt.Sprintf("%s %d", k, checks1[k]-checks0[k]))
	}
	line := fmt.Sprintf("%-75s ops %3d (%s; %d failed) | checks %5d (%s) | converged %.1fs after the fault ended",
		f.name, opsDone, strings.Join(opParts, ", "), failed1-failed0, checksDone, strings.Join(checkParts, ", "), convergedIn.Seconds())
	if violations > 0 {
		t.Fatalf("%s: invariant broken (%d in all); the first:\n%s", f.name, violations, chk.firstViolation())
	}
	if lastErr != nil {
		t.Fatalf("%s: the Flocks did not converge within %v after the fault: %v%s%s%s", f.name, convergeTimeout, lastErr,
			unscheduledPods(ctx, wl.ns), terminatingPods(ctx, wl.ns), terminatingPods(ctx, flockcontroller.DefaultHelperNamespace))
	}
	if opsDone == 0 || checksDone == 0 {
		t.Fatalf("%s: %d workload operations and %d invariant checks; the fault hit nothing", f.name, opsDone, checksDone)
	}
	return line
}

// overlap injects several faults at once, in order, and heals them in the
// reverse order (a component others need is injected last, healed first).
func overlap(faults ...func(t *testing.T, ctx context.Context) func(ctx context.Context) error) func(t *testing.T, ctx context.Context) func(ctx context.Context) error {
	return func(t *testing.T, ctx context.Context) func(ctx context.Context) error {
		var heals []func(ctx context.Context) error
		for _, f := range faults {
			heals = append(heals, f(t, ctx))
			if t.Failed() {
				break
			}
		}
		return func(ctx context.Context) error {
			for i := len(heals) - 1; i >= 0; i-- {
				if err := heals[i](ctx); err != nil {
					return err
				}
			}
			return nil
		}
	}
}

// killComponent SIGKILLs the process get returns; healing restarts it
// (same flags and data) after downtime and hands the new process to set.
func killComponent(get func() *cluster.Process, set func(*cluster.Process)) func(t *testing.T, ctx context.Context) func(ctx context.Context) error {
	return func(t *testing.T, ctx context.Context) func(ctx context.Context) error {
		p := get()
		if err := p.Kill(); err != nil {
			t.Fatal(err)
		}
		t.Logf("SIGKILLed %s", p)
		return func(ctx context.Context) error {
			sleepCtx(ctx, downtime)
			np, err := env.RestartComponent(ctx, p)
			if err != nil {
				return err
			}
			set(np)
			return nil
		}
	}
}

// killNamed is killComponent of the harness's component name.
func killNamed(name string) func(t *testing.T, ctx context.Context) func(ctx context.Context) error {
	return killComponent(func() *cluster.Process { return env.Component(name) }, func(*cluster.Process) {})
}

// killMainFlock kills the flock-apiserver behind the APIService.
func killMainFlock(t *testing.T, ctx context.Context) func(ctx context.Context) error {
	return killComponent(env.FlockProcess, func(p *cluster.Process) { pair.B = p })(t, ctx)
}

// killLeader kills the flock-apiserver that holds the controller Lease.
func killLeader(t *testing.T, ctx context.Context) func(ctx context.Context) error {
	get, set := leader(t, ctx)
	return killComponent(get, set)(t, ctx)
}

// hangLeader stops (SIGSTOP) the leader for longer than its lease, then
// lets it go on (SIGCONT): it finds the Lease taken by the other server.
func hangLeader(t *testing.T, ctx context.Context) func(ctx context.Context) error {
	get, _ := leader(t, ctx)
	p := get()
	if err := p.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Logf("SIGSTOPped %s", p)
	return func(ctx context.Context) error {
		sleepCtx(ctx, hangFor)
		return p.Signal(syscall.SIGCONT)
	}
}

// handOver stops the leader gracefully (it releases the Lease, the other
// server takes over) and starts it again.
func handOver(t *testing.T, ctx context.Context) func(ctx context.Context) error {
	get, set := leader(t, ctx)
	p := get()
	if err := p.Stop(cluster.DefaultStopGrace); err != nil {
		t.Fatal(err)
	}
	t.Logf("stopped %s", p)
	return func(ctx context.Context) error {
		np, err := env.RestartComponent(ctx, p)
		if err != nil {
			return err
		}
		set(np)
		return nil
	}
}

// leader waits until the controller Lease is held by one of the two
// running flock-apiservers and returns a getter and setter of that server's
// process.
func leader(t *testing.T, ctx context.Context) (func() *cluster.Process, func(*cluster.Process)) {
	t.Helper()
	servers := []struct {
		get func() *cluster.Process
		set func(*cluster.Process)
	}{
		{func() *cluster.Process { return pair.A.Process }, func(p *cluster.Process) { pair.A.Process = p }},
		{env.FlockProcess, func(p *cluster.Process) { pair.B = p }},
	}
	deadline := time.Now().Add(leaderTimeout)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		lease, err := env.Kube.CoordinationV1().Leases(cluster.FlockNamespace).Get(ctx, "flock-controller", metav1.GetOptions{})
		if err == nil && lease.Spec.HolderIdentity != nil && *lease.Spec.HolderIdentity != "" {
			for _, s := range servers {
				p := s.get()
				if log, err := cluster.LatestRunLog(p.LogFile); err == nil && !p.Exited() &&
					strings.Contains(log, `identity="`+*lease.Spec.HolderIdentity+`"`) {
					return s.get, s.set
				}
			}
		}
		sleepCtx(ctx, 500*time.Millisecond)
	}
	t.Fatalf("no running flock-apiserver holds the controller Lease after %v", leaderTimeout)
	return nil, nil
}

// busiestNode is a node that runs the most member pods of the namespace.
func busiestNode(t *testing.T, ctx context.Context, ns string) string {
	t.Helper()
	pods, err := env.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	best := env.NodeNames[0]
	for i := range pods.Items {
		if node := flockcontroller.PinnedNode(&pods.Items[i]); node != "" {
			count[node]++
			if count[node] > count[best] {
				best = node
			}
		}
	}
	return best
}

// deleteNode deletes the node with the most members; healing creates it
// again (same name, so its members' volumes fit it) after nodeAwayFor.
func deleteNode(t *testing.T, ctx context.Context) func(ctx context.Context) error {
	node := busiestNode(t, ctx, "faults")
	if err := env.Kube.CoreV1().Nodes().Delete(ctx, node, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Logf("deleted node %s", node)
	return func(ctx context.Context) error {
		sleepCtx(ctx, nodeAwayFor)
		var err error
		for range 30 {
			if _, err = env.AddNode(ctx, node, nil, nil); err == nil || apierrors.IsAlreadyExists(err) {
				return nil
			}
			sleepCtx(ctx, time.Second)
		}
		return err
	}
}

// partitionNode makes the node with the most members NotReady (kwok stops
// reporting it Ready) and Ready again after nodeAwayFor.
func partitionNode(t *testing.T, ctx context.Context) func(ctx context.Context) error {
	node := busiestNode(t, ctx, "faults")
	if err := setNotReady(ctx, node, true); err != nil {
		t.Fatal(err)
	}
	t.Logf("node %s NotReady", node)
	return func(ctx context.Context) error {
		sleepCtx(ctx, nodeAwayFor)
		var err error
		for range 30 {
			if err = setNotReady(ctx, node, false); err == nil {
				if err := env.WaitNodeReady(ctx, node); err != nil {
					return err
				}
				return resumePodReadiness(ctx, node)
			}
			sleepCtx(ctx, time.Second)
		}
		return err
	}
}

// setNotReady adds or removes the kwok marker that makes node NotReady.
func setNotReady(ctx context.Context, node string, notReady bool) error {
	value := `"true"`
	if !notReady {
		value = "null"
	}
	_, err := env.Kube.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType,
		fmt.Appendf(nil, `{"metadata":{"labels":{%q:%s}}}`, cluster.NodeNotReadyLabel, value), metav1.PatchOptions{})
	return err
}

// resumePodReadiness does what a kubelet does when its node is back: it
// reports its running pods' readiness again. While the node was NotReady
// kube-controller-manager set their Ready condition False (ContainersReady
// stays True); kwok's stages make pods Ready only once, when they start, so
// without this a member that ran through the partition would stay
// unavailable for good — a gap of the fake node, not of the product.
func resumePodReadiness(ctx context.Context, node string) error {
	pods, err := env.Kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		return err
	}
	for i := range pods.Items {
		ns, name := pods.Items[i].Namespace, pods.Items[i].Name
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			pod, err := env.Kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if pod.DeletionTimestamp != nil || pod.Status.Phase != corev1.PodRunning ||
				podCondition(pod, corev1.ContainersReady) != corev1.ConditionTrue || podCondition(pod, corev1.PodReady) == corev1.ConditionTrue {
				return nil
			}
			for j := range pod.Status.Conditions {
				if c := &pod.Status.Conditions[j]; c.Type == corev1.PodReady {
					c.Status, c.Reason, c.Message, c.LastTransitionTime = corev1.ConditionTrue, "", "", metav1.Now()
				}
			}
			_, err = env.Kube.CoreV1().Pods(ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
			return err
		})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("reporting pod %s/%s Ready again: %w", ns, name, err)
		}
	}
	return nil
}

// podCondition is the status of pod's condition t ("" when absent).
func podCondition(pod *corev1.Pod, t corev1.PodConditionType) corev1.ConditionStatus {
	for _, c := range pod.Status.Conditions {
		if c.Type == t {
			return c.Status
		}
	}
	return ""
}

// unscheduledPods describes the namespace's pods that have no node yet,
// with the scheduler's condition and its last log lines about them (a
// convergence failure in CI once left a member's pod unscheduled for
// minutes after kube-apiserver restarted).
func unscheduledPods(ctx context.Context, ns string) string {
	pods, err := env.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return "\nlisting pods: " + err.Error()
	}
	schedulerLog := logLines("kube-scheduler.log")
	var b strings.Builder
	for _, p := range pods.Items {
		if p.Spec.NodeName != "" {
			continue
		}
		fmt.Fprintf(&b, "\npod %s (created %s) has no node", p.Name, p.CreationTimestamp.Format(time.RFC3339))
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled {
				fmt.Fprintf(&b, "; PodScheduled %s %s: %s", c.Status, c.Reason, c.Message)
			}
		}
		b.WriteString(lastLinesAbout(schedulerLog, 8, "scheduler", func(l string) bool {
			return strings.Contains(l, ns+"/"+p.Name) || strings.Contains(l, `"`+p.Name+`"`)
		}))
	}
	return b.String()
}

// stuckAfter is how long a pod may sit in a state one of kwok's stages
// moves on from before resyncStuckPods makes kwok look at it again (kwok's
// own stages take milliseconds).
const stuckAfter = 20 * time.Second

// resyncAnnotation is the annotation resyncStuckPods sets (the time).
const resyncAnnotation = "flock.dev/e2e-kubelet-resync"

// resyncStuckPods (the workload's pods, and the helpers' namespace) does
// what a kubelet's periodic sync does and kwok does
// not: it retries. kwok plays a stage once per change of a pod, and retries
// a failed stage only on errors it counts as transient (connection refused,
// 429, 503, timeouts); the 500 kube-apiserver returns while its own etcd
// is down ends the stage for good. A pod can then stay terminating forever
// (its final delete dropped; a deleted Flock's data cleanup waits on it),
// or bound but Pending, or a helper Running and never done: gaps of the
// fake node, not of the product. A pod in one of those states for longer
// than stuckAfter gets resyncAnnotation, a change that makes kwok match
// and play its stage again; kwok still does the work. Each is logged and
// counted.
func resyncStuckPods(t *testing.T, ctx context.Context, ns string) {
	t.Helper()
	pods, err := env.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return // the convergence check reports the API's state
	}
	var kwokLog []string // read once, when a pod is stuck
	for i := range pods.Items {
		p := &pods.Items[i]
		state, since := kwokPending(p)
		if state == "" {
			continue
		}
		if last, err := time.Parse(time.RFC3339Nano, p.Annotations[resyncAnnotation]); err == nil && last.After(since) {
			since = last
		}
		if time.Since(since) < stuckAfter {
			continue
		}
		if kwokLog == nil {
			kwokLog = logLines("kwok.log")
		}
		_, err := env.Kube.CoreV1().Pods(ns).Patch(ctx, p.Name, types.MergePatchType,
			fmt.Appendf(nil, `{"metadata":{"uid":%q,"annotations":{%q:%q}}}`, p.UID, resyncAnnotation, time.Now().Format(time.RFC3339Nano)), metav1.PatchOptions{})
		t.Logf("KUBELET RESYNC: pod %s/%s on node %s %s for %s; kwok dropped its stage, so it is made to look again (err: %v)%s",
			p.Namespace, p.Name, p.Spec.NodeName, state, time.Since(since).Round(time.Second), err, kwokLogAbout(kwokLog, p.Name))
		if err == nil {
			podResyncs++
		}
	}
}

// kwokPending says which of kwok's stages p waits for ("" when none) and
// since when: its final delete, its start, or (a helper) its completion.
func kwokPending(p *corev1.Pod) (string, time.Time) {
	switch {
	case p.DeletionTimestamp != nil:
		if len(p.Finalizers) > 0 {
			return "", time.Time{}
		}
		grace := time.Duration(0)
		if p.DeletionGracePeriodSeconds != nil {
			grace = time.Duration(*p.DeletionGracePeriodSeconds) * time.Second
		}
		return "terminating", p.DeletionTimestamp.Add(-grace)
	case p.Spec.NodeName != "" && p.Status.Phase == corev1.PodPending:
		since := p.CreationTimestamp.Time
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.LastTransitionTime.After(since) {
				since = c.LastTransitionTime.Time
			}
		}
		return "bound and not started", since
	case p.Status.Phase == corev1.PodRunning && p.Spec.RestartPolicy != corev1.RestartPolicyAlways && p.Status.StartTime != nil:
		return "running and not completed", p.Status.StartTime.Time
	}
	return "", time.Time{}
}

// podResyncs counts resyncStuckPods's resyncs (reported at the end).
var podResyncs int

// terminatingPods describes the namespace's terminating pods (a deleted
// Flock's data cleanup waits for them), with kwok's log lines about each.
func terminatingPods(ctx context.Context, ns string) string {
	pods, err := env.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return "\nlisting pods: " + err.Error()
	}
	kwokLog := logLines("kwok.log")
	var b strings.Builder
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			continue
		}
		fmt.Fprintf(&b, "\npod %s (uid %s) on node %s terminating since %s, finalizers %v, phase %s%s",
			p.Name, p.UID, p.Spec.NodeName, p.DeletionTimestamp.Format(time.RFC3339), p.Finalizers, p.Status.Phase, kwokLogAbout(kwokLog, p.Name))
	}
	return b.String()
}

// kwokLogAbout returns kwok's last log lines (of kwokLog) that name pod.
func kwokLogAbout(kwokLog []string, pod string) string {
	names := regexp.MustCompile("/" + regexp.QuoteMeta(pod) + `(["\s]|$)`)
	return lastLinesAbout(kwokLog, 4, "kwok", names.MatchString)
}

// logLines returns the lines of the component log file name.
func logLines(name string) []string {
	data, _ := os.ReadFile(filepath.Join(env.LogDir(), name))
	return strings.Split(string(data), "\n")
}

// lastLinesAbout returns the last n of lines that match, each on a line of
// its own after "  from: ".
func lastLinesAbout(lines []string, n int, from string, match func(string) bool) string {
	var about []string
	for _, l := range lines {
		if match(l) {
			about = append(about, l)
		}
	}
	var b strings.Builder
	for _, l := range about[max(0, len(about)-n):] {
		b.WriteString("\n  " + from + ": " + l)
	}
	return b.String()
}

// upstreamComponents are the control plane's own processes, which a
// production cluster runs under a supervisor (kubelet, systemd) that starts
// them again when they exit.
var upstreamComponents = []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok"}

// superviseComponents does what those supervisors do, outside the harness's
// own faults (it runs before a fault is injected and after it is healed):
// an upstream component that exited on its own is logged with the end of
// its log and started again. kube-scheduler, for one, exits by design when
// its cache sees a pod move nodes ("Scheduler cache is corrupted"), which
// a member recreated under its name on another node during a watch gap can
// cause. A flock-apiserver that exited on its own fails the test: nothing
// in these faults is a reason for it to.
func superviseComponents(t *testing.T, ctx context.Context) {
	t.Helper()
	for _, name := range upstreamComponents {
		p := env.Component(name)
		if p == nil || !p.Exited() {
			continue
		}
		t.Logf("SUPERVISOR: %s; started again, as its supervisor would", p.ExitDescription())
		if _, err := env.RestartComponent(ctx, p); err != nil {
			t.Fatalf("restarting %s: %v", name, err)
		}
		supervisorRestarts++
	}
	for _, p := range []*cluster.Process{pair.A.Process, env.FlockProcess()} {
		if p != nil && p.Exited() {
			t.Fatalf("flock-apiserver exited on its own: %s", p.ExitDescription())
		}
	}
}

// supervisorRestarts counts the upstream components superviseComponents
// started again (reported at the end).
var supervisorRestarts int
