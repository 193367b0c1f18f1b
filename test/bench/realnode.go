// File realnode.go: the real-node readiness case of bench-e2e (-real-nodes=N): the
// control plane runs N real nodes (kubelet with containerd on this machine, test/cluster's
// realnode.go) and no kwok node, and the three readiness kinds create N members Parallel of
// the offline test image there, so every member pod, and every Flock member's prepare
// helper, is a real container. It also records when each member passed each step (claim
// Bound, helper done, pod scheduled, container started, Ready) for the timeline table, and
// checks after the teardown that the machine is as it was before.

package main

import (
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	flockcontroller "flock.dev/flock/pkg/controller/flock"
	"flock.dev/flock/test/cluster"
)

// realGracePeriod is the member pods' termination grace on real nodes, so
// the teardown's drain is quick (the test image exits on SIGTERM anyway).
const realGracePeriod = int64(2)

// onlyRealNodes sets opts up for the real-node case: n real nodes and no
// kwok node (so no toleration or node selector is needed and the kinds
// compare on the same nodes), the cluster DNS the real nodes need, the
// members' data root under the work directory, and the offline test image
// as the Flock helpers' image (no registry is reachable). It fails with
// the reason when this machine cannot run real nodes.
func onlyRealNodes(opts *cluster.Options, n int) error {
	if err := cluster.RealNodeSupport(opts.BinDir); err != nil {
		return fmt.Errorf("-real-nodes=%d: %w", n, err)
	}
	opts.Nodes = -1
	opts.RealNodes = n
	opts.WithoutDNS = false
	opts.DataRoot = filepath.Join(opts.WorkDir, "data")
	opts.FlockArgs = append([]string{"--helper-image=" + cluster.TestImage}, opts.FlockArgs...)
	return nil
}

// onRealNodes makes spec, a member pod template's, run on a real node: the
// offline test image with its default command (it idles), never pulled.
func onRealNodes(spec *corev1.PodSpec) {
	c := &spec.Containers[0]
	c.Image, c.Command, c.ImagePullPolicy = cluster.TestImage, nil, corev1.PullNever
	spec.TerminationGracePeriodSeconds = ptr.To(realGracePeriod)
}

// checkTeardown stops c and reports what of the machine differs from
// before, the state SnapshotMachine took before the real nodes started.
func checkTeardown(c *cluster.Cluster, before cluster.MachineState) error {
	if err := c.Down(); err != nil {
		return fmt.Errorf("stopping the control plane and its real nodes: %w", err)
	}
	if diff := cluster.SnapshotMachine(c.BinDir()).Diff(before); len(diff) > 0 {
		return fmt.Errorf("the machine differs after the real nodes' teardown:\n  %s", strings.Join(diff, "\n  "))
	}
	return nil
}

// The steps of a member the timeline records, in their order.
const (
	stepClaimCreated  = "claims created"
	stepVolumeCreated = "volumes created"
	stepVolumeBound   = "volumes Bound (the PersistentVolume controller)"
	stepClaimBound    = "claims Bound"
	stepHelperCreated = "prepare helpers created"
	stepHelperDone    = "prepare helpers done"
	stepPrepared      = "data directories prepared"
	stepPodCreated    = "member pods created"
	stepPodScheduled  = "member pods on a node"
	stepPodStarted    = "member containers started"
	stepPodReady      = "member pods Ready"
)

var timelineSteps = []string{stepClaimCreated, stepVolumeCreated, stepHelperCreated, stepHelperDone, stepPrepared, stepVolumeBound, stepClaimBound, stepPodCreated, stepPodScheduled, stepPodStarted, stepPodReady}

// timeline records, from watches, when each object of one run first
// passed each step.
type timeline struct {
	mu      sync.Mutex
	seen    map[string]map[string]time.Time // step -> object -> first seen
	watches watchSet
}

// watchTimeline starts watching the member pods and claims of ns, the
// Flock prepare helpers working for ns (in the helpers' namespace) and the
// Flock member volumes of ns (marked prepared by a helper's end or by the
// node agent).
func watchTimeline(ctx context.Context, kube kubernetes.Interface, ns string) (*timeline, error) {
	tl := &timeline{seen: map[string]map[string]time.Time{}}
	helpers := flockcontroller.LabelHelper + "=" + flockcontroller.HelperPrepare + "," + flockcontroller.LabelFlockNamespace + "=" + ns
	volumes := flockcontroller.LabelFlockNamespace + "=" + ns
	err := tl.watches.start(ctx, podWatch(kube, ns, "", tl.memberPod),
		podWatch(kube, flockcontroller.DefaultHelperNamespace, helpers, tl.helperPod),
		watchSpec{func(ctx context.Context, opts metav1.ListOptions) (string, error) {
			l, err := kube.CoreV1().PersistentVolumeClaims(ns).List(ctx, opts)
			return listRV(l, err)
		}, func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			return kube.CoreV1().PersistentVolumeClaims(ns).Watch(ctx, opts)
		}, tl.claim},
		watchSpec{func(ctx context.Context, opts metav1.ListOptions) (string, error) {
			opts.LabelSelector = volumes
			l, err := kube.CoreV1().PersistentVolumes().List(ctx, opts)
			return listRV(l, err)
		}, func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			opts.LabelSelector = volumes
			return kube.CoreV1().PersistentVolumes().Watch(ctx, opts)
		}, tl.volume})
	if err != nil {
		return nil, err
	}
	return tl, nil
}

// podWatch watches the pods of ns that selector (may be empty) selects.
func podWatch(kube kubernetes.Interface, ns, selector string, observe func(watch.Event)) watchSpec {
	return watchSpec{func(ctx context.Context, opts metav1.ListOptions) (string, error) {
		opts.LabelSelector = selector
		l, err := kube.CoreV1().Pods(ns).List(ctx, opts)
		return listRV(l, err)
	}, func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
		opts.LabelSelector = selector
		return kube.CoreV1().Pods(ns).Watch(ctx, opts)
	}, observe}
}

// close stops the watches and waits for their readers.
func (tl *timeline) close() { tl.watches.close() }

// mark records that object passed step now, unless it had before.
func (tl *timeline) mark(step, object string) {
	at := time.Now()
	tl.mu.Lock()
	defer tl.mu.Unlock()
	if tl.seen[step] == nil {
		tl.seen[step] = map[string]time.Time{}
	}
	if _, ok := tl.seen[step][object]; !ok {
		tl.seen[step][object] = at
	}
}

func (tl *timeline) memberPod(ev watch.Event) {
	p, ok := ev.Object.(*corev1.Pod)
	if !ok || ev.Type == watch.Deleted {
		return
	}
	tl.mark(stepPodCreated, p.Name)
	if p.Spec.NodeName != "" {
		tl.mark(stepPodScheduled, p.Name)
	}
	if cs := p.Status.ContainerStatuses; len(cs) > 0 && !slices.ContainsFunc(cs, func(s corev1.ContainerStatus) bool { return s.State.Running == nil }) {
		tl.mark(stepPodStarted, p.Name)
	}
	if isReady(p) {
		tl.mark(stepPodReady, p.Name)
	}
}

// helperPod records a prepare helper's creation and its end: done as the
// controller counts it (flockcontroller.HelperSucceeded: its container
// exited 0, before kubelet reports the phase Succeeded), or deleted (the
// controller deletes it once done; the watch may not show it done before).
func (tl *timeline) helperPod(ev watch.Event) {
	p, ok := ev.Object.(*corev1.Pod)
	if !ok {
		return
	}
	tl.mark(stepHelperCreated, p.Name)
	if flockcontroller.HelperSucceeded(p) || ev.Type == watch.Deleted {
		tl.mark(stepHelperDone, p.Name)
	}
}

// volume records when a Flock member's volume is made, marked prepared,
// and taken up by kube-controller-manager's PersistentVolume controller
// (its phase Bound, which only that controller writes).
func (tl *timeline) volume(ev watch.Event) {
	pv, ok := ev.Object.(*corev1.PersistentVolume)
	if !ok || ev.Type == watch.Deleted {
		return
	}
	tl.mark(stepVolumeCreated, pv.Name)
	if pv.Annotations[flockcontroller.AnnotationPrepared] == "true" {
		tl.mark(stepPrepared, pv.Name)
	}
	if pv.Status.Phase == corev1.VolumeBound {
		tl.mark(stepVolumeBound, pv.Name)
	}
}

func (tl *timeline) claim(ev watch.Event) {
	pvc, ok := ev.Object.(*corev1.PersistentVolumeClaim)
	if !ok || ev.Type == watch.Deleted {
		return
	}
	tl.mark(stepClaimCreated, pvc.Name)
	if pvc.Status.Phase == corev1.ClaimBound {
		tl.mark(stepClaimBound, pvc.Name)
	}
}

// last returns, for each step that members objects passed, how long after
// start the last of them did (a step fewer passed, e.g. claims of a kind
// without any, is left out).
func (tl *timeline) last(start time.Time, members int) map[string]time.Duration {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	out := map[string]time.Duration{}
	for step, objs := range tl.seen {
		if len(objs) < members {
			continue
		}
		out[step] = slices.MaxFunc(slices.Collect(maps.Values(objs)), time.Time.Compare).Sub(start)
	}
	return out
}

// namedRows collect one row per measure of a case, by name, each kind's
// samples one per run; prefix starts each row's Case.
type namedRows struct {
	rows     map[string]*row
	caseName string
	prefix   string
	unit     string
}

func (n *namedRows) add(kind, name string, v float64) {
	if n.rows == nil {
		n.rows = map[string]*row{}
	}
	r := n.rows[name]
	if r == nil {
		r = &row{Case: n.prefix + n.caseName + ": " + name, Unit: n.unit, Values: map[string]float64{}, Samples: map[string][]float64{}}
		n.rows[name] = r
	}
	r.Samples[kind] = append(r.Samples[kind], v)
}

// inOrder returns the rows of names that were added, in that order, with
// medians.
func (n *namedRows) inOrder(names []string) []row {
	var out []row
	for _, name := range names {
		if r := n.rows[name]; r != nil {
			out = append(out, r.medians())
		}
	}
	return out
}

// kindsLine is the table line of the row whose measure is name: a cell per
// readiness kind, its value in format or "-".
func kindsLine(name string, r row, format string) string {
	cells := []string{name}
	for _, kind := range readyKinds {
		if v, ok := r.Values[kind]; ok {
			cells = append(cells, fmt.Sprintf(format, v))
		} else {
			cells = append(cells, "-")
		}
	}
	return "| " + strings.Join(cells, " | ") + " |"
}

// timelineRows are one row per step, each kind's samples the time the
// last member passed the step in each run; add collects them.
type timelineRows struct{ namedRows }

func newTimelineRows(caseName string) *timelineRows {
	return &timelineRows{namedRows{caseName: caseName, prefix: "timeline of ", unit: "ms"}}
}

func (t *timelineRows) add(kind string, steps map[string]time.Duration) {
	for step, d := range steps {
		t.namedRows.add(kind, step, float64(d.Microseconds())/1000)
	}
}

// result returns the rows in the steps' order, with medians.
func (t *timelineRows) result() []row { return t.inOrder(timelineSteps) }

// printTimeline prints the real-node case's timeline table: for each step,
// the time after create at which the last member passed it, per kind.
func printTimeline(rows []row) {
	if len(rows) == 0 {
		return
	}
	caseName, _, _ := strings.Cut(strings.TrimPrefix(rows[0].Case, "timeline of "), ": ")
	fmt.Printf("\nTimeline of the case %s: ms after create at which the last member passed each step, medians\n"+
		"(as seen by watches; -: no such step for that kind, or not run).\n\n| step | %s |\n|---|---|---|---|\n", caseName, strings.Join(readyKinds, " | "))
	for _, r := range rows {
		_, step, _ := strings.Cut(r.Case, ": ")
		fmt.Println(kindsLine(step, r, "%.0f"))
	}
}
