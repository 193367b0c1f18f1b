// File invariants_test.go: the invariants, checked on every change the
// watches of pods, Nodes and Flocks deliver (stream_test.go), while the
// workload runs and the faults happen:
//
//   - same-node: no two pods of one Flock on one node at once (pods stream;
//     a pod counts from its creation until it is gone from the API, also
//     while terminating), and no two members of one Flock recorded on one
//     node, nor one ordinal twice (Flocks stream).
//   - recorded-node: every member pod runs on (is bound or pinned to) a node
//     that status.members recorded for its ordinal. The controller records
//     the node before it creates the pod, but pods and Flocks live in two
//     stores and the Flocks watch may be behind: a pod whose node is not yet
//     in the Flock's recorded history waits until the Flocks watch delivers
//     it; one still unexplained at the end is checked against fresh reads
//     (pod, Flock, pod again: the pod existed while the Flock was read).
//   - moves-only-off-lost-nodes: status.members[i].node changes from P to Q
//     (between two consecutive versions the watch delivered) only if P was
//     lost: its Node deleted or tainted node.kubernetes.io/out-of-service.
//   - no-second-copy: a member pod that was bound to a node is deleted
//     without a grace period (the watch's last state of it has no
//     deletionTimestamp, so no kubelet confirmed it stopped) only if its
//     node was lost at that resourceVersion. Pods and Nodes are in the same
//     etcd, so their resourceVersions order them; this relies on
//     kube-apiserver's resourceVersions being etcd revisions, which the
//     test may assume of the server it runs. Otherwise a partitioned node
//     might still run the member while its replacement starts. kwok, the
//     nodes' kubelet here, deletes a pod it finished by name, not by UID:
//     under load a delete it queued for a pod can take the next pod of the
//     same name. A deletion is put down to that (logged, not a violation)
//     only while kwok's log has more deletes of the name than the watch saw
//     pods of the name deleted gracefully.
//   - acknowledged-creates-stay: a Flock whose create returned success is
//     never deleted unless the workload asked for it.
//
// After each fault: every Flock converges, and nothing of a deleted Flock
// is left (checkConverged).

package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	flockv1alpha1 "flock.dev/flock/pkg/apis/flock/v1alpha1"
	flockcontroller "flock.dev/flock/pkg/controller/flock"
)

// Stream names.
const (
	streamPods   = "pods"
	streamNodes  = "nodes"
	streamFlocks = "flocks"
)

// checker holds what the watches saw and the invariants' verdicts.
type checker struct {
	ns string
	wl *workload

	mu sync.Mutex
	// checks counts invariant evaluations, by invariant.
	checks map[string]int
	// violations, first first.
	violations []string
	// watchBreaks counts lost watches, by stream.
	watchBreaks map[string]int

	pods   map[types.UID]*corev1.Pod
	flocks map[types.UID]*flockState
	nodes  map[string][]nodeTransition

	// Checks that wait for another stream.
	pendingRecorded map[types.UID]*corev1.Pod
	pendingLoss     []lossCheck
	// unverified counts pods whose recorded node could not be checked (the
	// Flock version was skipped by a relist and the pod is gone); forced
	// the member pods deleted without a grace period; moves the members
	// that moved to another node.
	unverified, forced, moves int
	// graceful counts, by namespace/name, the member pods deleted after a
	// graceful delete (deletionTimestamp set); kwokDeletes is how many of
	// those kwok's log accounts for (kwokStaleDelete).
	graceful map[string]int
	// kwokStale counts the deletes so explained; notes says what each
	// was (settle's caller logs and clears them).
	kwokStale int
	notes     []string
}

// flockState is one Flock (by UID) as the watch saw it.
type flockState struct {
	latest *flockv1alpha1.Flock
	// recorded: ordinal -> every node status.members recorded for it.
	recorded map[int32]map[string]bool
	gone     bool
}

// nodeTransition is a Node becoming lost (deleted, tainted out-of-service)
// or not lost (created, untainted) at a resourceVersion.
type nodeTransition struct {
	rv   int64
	lost bool
}

// lossCheck is a check that node was lost at rv; pod (namespace/name) is
// the pod deleted without a grace period, when that is what it checks.
type lossCheck struct {
	node, what, pod string
	rv              int64
}

func newChecker(ns string, wl *workload) *checker {
	return &checker{
		ns: ns, wl: wl, checks: map[string]int{}, watchBreaks: map[string]int{},
		pods: map[types.UID]*corev1.Pod{}, graceful: map[string]int{}, pendingRecorded: map[types.UID]*corev1.Pod{}, flocks: map[types.UID]*flockState{}, nodes: map[string][]nodeTransition{},
	}
}

// start runs the three streams until ctx ends.
func (c *checker) start(ctx context.Context) {
	pods := env.Kube.CoreV1().Pods(c.ns)
	nodes := env.Kube.CoreV1().Nodes()
	flocks := env.Flock.FlockV1alpha1().Flocks(c.ns)
	streams := []stream{
		{name: streamPods, list: func(ctx context.Context) ([]runtime.Object, string, error) {
			l, err := pods.List(ctx, metav1.ListOptions{})
			if err != nil {
				return nil, "", err
			}
			return objects(l.Items), l.ResourceVersion, nil
		}, watch: pods.Watch},
		{name: streamNodes, list: func(ctx context.Context) ([]runtime.Object, string, error) {
			l, err := nodes.List(ctx, metav1.ListOptions{})
			if err != nil {
				return nil, "", err
			}
			return objects(l.Items), l.ResourceVersion, nil
		}, watch: nodes.Watch},
		{name: streamFlocks, list: func(ctx context.Context) ([]runtime.Object, string, error) {
			l, err := flocks.List(ctx, metav1.ListOptions{})
			if err != nil {
				return nil, "", err
			}
			return objects(l.Items), l.ResourceVersion, nil
		}, watch: flocks.Watch},
	}
	for _, s := range streams {
		go s.run(ctx, c)
	}
}

// objects returns pointers to items as runtime.Objects.
func objects[T any, PT interface {
	*T
	runtime.Object
}](items []T) []runtime.Object {
	out := make([]runtime.Object, len(items))
	for i := range items {
		out[i] = PT(&items[i])
	}
	return out
}

func (c *checker) broken(stream string, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.watchBreaks[stream]++
}

func (c *checker) replace(stream string, objs []runtime.Object, rv string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch stream {
	case streamPods:
		c.pods = map[types.UID]*corev1.Pod{}
		for _, o := range objs {
			p := o.(*corev1.Pod)
			c.pods[p.UID] = p
		}
		for _, p := range c.pods {
			c.checkPod(p)
		}
	case streamNodes:
		seen := map[string]bool{}
		for _, o := range objs {
			n := o.(*corev1.Node)
			seen[n.Name] = true
			c.nodeAt(n.Name, parseRV(n.ResourceVersion), outOfService(n))
		}
		for name := range c.nodes {
			if !seen[name] {
				c.nodeAt(name, parseRV(rv), true)
			}
		}
	case streamFlocks:
		seen := map[types.UID]bool{}
		for _, o := range objs {
			f := o.(*flockv1alpha1.Flock)
			seen[f.UID] = true
			c.flockVersion(f, false)
		}
		for uid, st := range c.flocks {
			if !seen[uid] && !st.gone {
				c.flockGone(st.latest)
			}
		}
	}
}

func (c *checker) event(stream string, ev watch.Event) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch stream {
	case streamPods:
		p := ev.Object.(*corev1.Pod)
		if ev.Type == watch.Deleted {
			c.podDeleted(p)
			delete(c.pods, p.UID)
			return
		}
		c.pods[p.UID] = p
		c.checkPod(p)
	case streamNodes:
		n := ev.Object.(*corev1.Node)
		c.nodeAt(n.Name, parseRV(n.ResourceVersion), ev.Type == watch.Deleted || outOfService(n))
	case streamFlocks:
		f := ev.Object.(*flockv1alpha1.Flock)
		if ev.Type == watch.Deleted {
			c.flockGone(f)
			return
		}
		c.flockVersion(f, true)
	}
}

// violate records a broken invariant with the objects involved.
func (c *checker) violate(invariant, format string, args ...any) {
	msg := invariant + ": " + fmt.Sprintf(format, args...)
	c.violations = append(c.violations, msg)
}

// dump renders objects for a violation message.
func dump(objs ...any) string {
	var b strings.Builder
	for _, o := range objs {
		data, err := json.MarshalIndent(o, "  ", "  ")
		if err != nil {
			fmt.Fprintf(&b, "\n  %v", o)
			continue
		}
		b.WriteString("\n  ")
		b.Write(data)
	}
	return b.String()
}

// podSummary is what a violation shows of a pod.
func podSummary(p *corev1.Pod) map[string]any {
	return map[string]any{
		"name": p.Name, "uid": p.UID, "resourceVersion": p.ResourceVersion, "owner": ownerUID(p),
		"nodeName": p.Spec.NodeName, "pinnedNode": flockcontroller.PinnedNode(p), "deletionTimestamp": p.DeletionTimestamp,
		"phase": p.Status.Phase, "labels": p.Labels,
	}
}

// flockSummary is what a violation shows of a Flock.
func flockSummary(f *flockv1alpha1.Flock) map[string]any {
	return map[string]any{
		"name": f.Name, "uid": f.UID, "resourceVersion": f.ResourceVersion, "generation": f.Generation,
		"replicas": f.Spec.Replicas, "members": f.Status.Members, "observedGeneration": f.Status.ObservedGeneration,
	}
}

// ownerUID is the UID of the Flock that controls p ("" if none).
func ownerUID(p *corev1.Pod) types.UID {
	if ref := metav1.GetControllerOfNoCopy(p); ref != nil && ref.Kind == "Flock" {
		return ref.UID
	}
	return ""
}

// memberOf returns p's Flock UID, ordinal and node (bound, else pinned);
// ok is false for a pod that is not a placed member pod.
func memberOf(p *corev1.Pod) (owner types.UID, ord int32, node string, ok bool) {
	owner = ownerUID(p)
	o, err := strconv.ParseInt(p.Labels[flockv1alpha1.LabelOrdinal], 10, 32)
	node = flockcontroller.PinnedNode(p)
	return owner, int32(o), node, owner != "" && err == nil && node != ""
}

// checkPod runs the pod invariants on p (the pods map holds it).
func (c *checker) checkPod(p *corev1.Pod) {
	owner, ord, node, ok := memberOf(p)
	if !ok {
		return
	}
	c.checks["same-node (pods)"]++
	for _, q := range c.pods {
		if q.UID == p.UID {
			continue
		}
		if o2, ord2, n2, ok := memberOf(q); ok && o2 == owner && n2 == node && ord2 != ord {
			c.violate("same-node", "pods %s and %s of Flock %s are both on node %s%s", p.Name, q.Name, owner, node, dump(podSummary(p), podSummary(q)))
		}
	}
	if !c.recordedNode(p) {
		c.pendingRecorded[p.UID] = p
	}
}

// recordedNode reports (and counts) whether p's node was recorded for its
// ordinal by its Flock.
func (c *checker) recordedNode(p *corev1.Pod) bool {
	owner, ord, node, _ := memberOf(p)
	st := c.flocks[owner]
	if st == nil || !st.recorded[ord][node] {
		return false
	}
	c.checks["recorded-node"]++
	return true
}

// podDeleted checks a pod's deletion: without a grace period, the pod's
// node must have been lost.
func (c *checker) podDeleted(p *corev1.Pod) {
	if ownerUID(p) == "" || p.Spec.NodeName == "" {
		return
	}
	last := p
	if known := c.pods[p.UID]; known != nil && known.DeletionTimestamp != nil {
		last = known
	}
	c.checks["no-second-copy"]++
	if last.DeletionTimestamp != nil {
		c.graceful[p.Namespace+"/"+p.Name]++
		return
	}
	c.forced++
	lc := lossCheck{node: p.Spec.NodeName, rv: parseRV(p.ResourceVersion), pod: p.Namespace + "/" + p.Name,
		what: fmt.Sprintf("pod %s (uid %s) was deleted without a grace period while its node %s was not lost%s", p.Name, p.UID, p.Spec.NodeName, dump(podSummary(p)))}
	if !c.lostAt(lc.node, lc.rv) {
		c.pendingLoss = append(c.pendingLoss, lc)
	}
}

// nodeAt records node's state at rv.
func (c *checker) nodeAt(node string, rv int64, lost bool) {
	h := c.nodes[node]
	if len(h) > 0 && h[len(h)-1].lost == lost {
		return
	}
	c.nodes[node] = append(h, nodeTransition{rv: rv, lost: lost})
	if lost {
		c.pendingLoss = slices.DeleteFunc(c.pendingLoss, func(lc lossCheck) bool { return lc.node == node && c.lostAt(node, lc.rv) })
	}
}

// lostAt reports whether node was lost at resourceVersion rv, as far as
// the nodes stream has told.
func (c *checker) lostAt(node string, rv int64) bool {
	lost := false
	for _, tr := range c.nodes[node] {
		if tr.rv > rv {
			break
		}
		lost = tr.lost
	}
	return lost
}

// everLost reports whether node was ever lost.
func (c *checker) everLost(node string) bool {
	return slices.ContainsFunc(c.nodes[node], func(tr nodeTransition) bool { return tr.lost })
}

// flockVersion checks a version of a Flock; fromWatch says it came by a
// watch event right after the version the checker holds.
func (c *checker) flockVersion(f *flockv1alpha1.Flock, fromWatch bool) {
	st := c.flocks[f.UID]
	if st == nil {
		st = &flockState{recorded: map[int32]map[string]bool{}}
		c.flocks[f.UID] = st
	}
	c.checks["same-node (status)"]++
	byNode, byOrd := map[string]int32{}, map[int32]bool{}
	for _, m := range f.Status.Members {
		if o, dup := byNode[m.Node]; dup {
			c.violate("same-node", "Flock %s/%s records members %d and %d on node %s%s", f.Namespace, f.Name, o, m.Ordinal, m.Node, dump(flockSummary(f)))
		}
		if byOrd[m.Ordinal] {
			c.violate("same-node", "Flock %s/%s records ordinal %d twice%s", f.Namespace, f.Name, m.Ordinal, dump(flockSummary(f)))
		}
		byNode[m.Node], byOrd[m.Ordinal] = m.Ordinal, true
	}
	if fromWatch && st.latest != nil {
		prev := map[int32]string{}
		for _, m := range st.latest.Status.Members {
			prev[m.Ordinal] = m.Node
		}
		for _, m := range f.Status.Members {
			c.checks["moves-only-off-lost-nodes"]++
			if was, ok := prev[m.Ordinal]; ok && was != m.Node {
				c.moves++
				if !c.everLost(was) {
					c.pendingLoss = append(c.pendingLoss, lossCheck{node: was, rv: -1, what: fmt.Sprintf(
						"Flock %s/%s moved member %d from node %s to %s, but node %s was never lost%s", f.Namespace, f.Name, m.Ordinal, was, m.Node, was,
						dump(flockSummary(st.latest), flockSummary(f)))})
				}
			}
		}
	}
	for _, m := range f.Status.Members {
		if st.recorded[m.Ordinal] == nil {
			st.recorded[m.Ordinal] = map[string]bool{}
		}
		st.recorded[m.Ordinal][m.Node] = true
	}
	st.latest = f
	maps.DeleteFunc(c.pendingRecorded, func(_ types.UID, p *corev1.Pod) bool { return c.recordedNode(p) })
}

// flockGone records that a Flock is gone and checks the workload asked.
func (c *checker) flockGone(f *flockv1alpha1.Flock) {
	if st := c.flocks[f.UID]; st != nil {
		st.gone = true
	}
	c.checks["acknowledged-creates-stay"]++
	if c.wl.createdNotDeleted(f.UID) {
		c.violate("acknowledged-creates-stay", "Flock %s/%s (uid %s) is gone, but its create succeeded and the workload never deleted it%s", f.Namespace, f.Name, f.UID, dump(flockSummary(f)))
	}
}

// outOfService reports whether n has the out-of-service taint.
func outOfService(n *corev1.Node) bool {
	return slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == corev1.TaintNodeOutOfService })
}

// parseRV reads a kube-apiserver resourceVersion (an etcd revision).
func parseRV(rv string) int64 {
	n, _ := strconv.ParseInt(rv, 10, 64)
	return n
}

// counts returns a copy of the check counts and the number of violations.
func (c *checker) counts() (map[string]int, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]int{}
	for k, v := range c.checks {
		out[k] = v
	}
	return out, len(c.violations)
}

// firstViolation is the first broken invariant ("" if none).
func (c *checker) firstViolation() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.violations) == 0 {
		return ""
	}
	return c.violations[0]
}

// settle resolves the checks that waited for another stream, once the
// streams have caught up (after convergence): a loss never seen is a
// violation; a pod whose node is still not in its Flock's recorded history
// is read again with the Flock between two reads of the pod.
func (c *checker) settle(ctx context.Context) {
	c.mu.Lock()
	losses := c.pendingLoss
	c.pendingLoss = nil
	var kwokLog []string // read once, when needed
	excused := map[string]int{}
	for _, lc := range losses {
		if (lc.rv < 0 && c.everLost(lc.node)) || (lc.rv >= 0 && c.lostAt(lc.node, lc.rv)) {
			continue
		}
		if lc.pod != "" {
			if kwokLog == nil {
				kwokLog = logLines("kwok.log")
			}
			if kwokDeletes(kwokLog, lc.pod)-c.graceful[lc.pod]-excused[lc.pod] > 0 {
				excused[lc.pod]++
				c.kwokStale++
				c.notes = append(c.notes, fmt.Sprintf("KWOK STALE DELETE: %s\nkwok's log has more deletes of %s than there were graceful deletes of pods of that name: "+
					"kwok deletes by name, so a delete it queued for an earlier pod of the name took this one (a kubelet deletes by UID)%s", lc.what, lc.pod, kwokLogAbout(kwokLog, lc.pod[strings.Index(lc.pod, "/")+1:])))
				continue
			}
		}
		c.violate("no-second-copy", "%s", lc.what)
	}
	pending := c.pendingRecorded
	c.pendingRecorded = map[types.UID]*corev1.Pod{}
	c.mu.Unlock()

	for _, p := range pending {
		owner, ord, node, _ := memberOf(p)
		before, err := env.Kube.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
		if err != nil || before.UID != p.UID {
			c.mu.Lock()
			c.unverified++
			c.mu.Unlock()
			continue
		}
		f, ferr := env.Flock.FlockV1alpha1().Flocks(p.Namespace).Get(ctx, p.Labels[flockv1alpha1.LabelFlockName], metav1.GetOptions{})
		after, err := env.Kube.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
		if err != nil || after.UID != p.UID || ferr != nil || f.UID != owner {
			c.mu.Lock()
			c.unverified++
			c.mu.Unlock()
			continue
		}
		c.mu.Lock()
		c.checks["recorded-node"]++
		if !slices.ContainsFunc(f.Status.Members, func(m flockv1alpha1.FlockMember) bool { return m.Ordinal == ord && m.Node == node }) {
			c.violate("recorded-node", "pod %s runs on node %s, which status.members never recorded for member %d%s", p.Name, node, ord, dump(podSummary(after), flockSummary(f)))
		}
		c.mu.Unlock()
	}
}

// kwokDeletes counts kwok's log lines of a pod deleted, by namespace/name
// pod: kwok logs one for each delete that succeeded.
func kwokDeletes(kwokLog []string, pod string) int {
	n := 0
	for _, l := range kwokLog {
		if strings.Contains(l, `"msg":"Delete pod"`) && strings.Contains(l, `"pod":"`+pod+`"`) {
			n++
		}
	}
	return n
}
