package flock

import (
	"context"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"flock.dev/flock/pkg/apis/flock/v1alpha1"
	"flock.dev/flock/pkg/generated/clientset/versioned"
	flocklisters "flock.dev/flock/pkg/generated/listers/flock/v1alpha1"
	"flock.dev/flock/pkg/placement"
)

// Options configure the controller.
type Options struct {
	// ClusterDomain is the cluster's DNS domain, for members' FQDNs
	// (default "cluster.local").
	ClusterDomain string
	// DataRoot is the absolute host directory under which members' data
	// directories are made: <DataRoot>/<namespace>/<flock> (default
	// "/var/lib/flock").
	DataRoot string
	// CleanupImage is the image of the helper pod that removes a member's
	// data directory under the Delete retention policy (default
	// "busybox:1.36"). It needs sh and rm.
	CleanupImage string
	// RolloutHaltAfter is how long a pod of a rolling update's new revision
	// may stay not Ready before the rollout is reported halted (condition
	// Progressing False, reason RolloutHalted, and an event); a pod whose
	// containers crash or cannot start halts it at once (default 30s).
	RolloutHaltAfter time.Duration
	// Workers is the number of Flocks synced in parallel when Run is given
	// no positive number (default 1).
	Workers int
}

// Complete returns o with defaults filled in, or an error when a value is
// invalid.
func (o Options) Complete() (Options, error) {
	if o.ClusterDomain == "" {
		o.ClusterDomain = DefaultClusterDomain
	}
	if o.DataRoot == "" {
		o.DataRoot = DefaultDataRoot
	}
	if o.Workers <= 0 {
		o.Workers = 1
	}
	if o.CleanupImage == "" {
		o.CleanupImage = DefaultCleanupImage
	}
	if o.RolloutHaltAfter <= 0 {
		o.RolloutHaltAfter = DefaultRolloutHaltAfter
	}
	var errs []error
	if !path.IsAbs(o.DataRoot) || path.Clean(o.DataRoot) != o.DataRoot || o.DataRoot == "/" {
		errs = append(errs, fmt.Errorf("data root %q must be a clean absolute path other than /", o.DataRoot))
	}
	if strings.HasPrefix(o.ClusterDomain, ".") || strings.HasSuffix(o.ClusterDomain, ".") {
		errs = append(errs, fmt.Errorf("cluster domain %q must not start or end with a dot", o.ClusterDomain))
	}
	return o, utilerrors.NewAggregate(errs)
}

// FlockControl reconciles one Flock: it places members, adopts and releases
// pods, keeps the headless Service, creates and deletes member pods and
// writes the status. The loop depends on this interface; defaultFlockControl
// is its implementation.
type FlockControl interface {
	// Sync drives flock towards its spec. pods are the pods flock controls
	// and the orphans its selector matches, from the cache (read-only).
	// now is the time the sync started.
	Sync(ctx context.Context, flock *v1alpha1.Flock, pods []*corev1.Pod, now time.Time) (Result, error)
}

// Result is what one Sync tells the loop.
type Result struct {
	// RequeueAfter, when positive, asks for another sync after that long
	// (a pod becomes available after minReadySeconds).
	RequeueAfter time.Duration
	// Members counts the members (ordinals < replicas) by state; nil when
	// the status was not computed.
	Members map[MemberState]int
}

// NewDefaultFlockControl returns the FlockControl of the controller.
// revisions records templates as ControllerRevisions. flockClient is used
// for live reads before adoption and to add and remove the data-cleanup
// finalizer, flockLister to count every Flock's members per node,
// nodeLister for placement and for telling why a member is blocked. opts
// must be completed.
func NewDefaultFlockControl(members MemberControl, revisions RevisionControl, status StatusUpdater, flockClient versioned.Interface,
	flockLister flocklisters.FlockLister, nodeLister corelisters.NodeLister, recorder record.EventRecorder, opts Options) FlockControl {
	return &defaultFlockControl{
		members: members, revisions: revisions, status: status, flockClient: flockClient,
		flockLister: flockLister, nodeLister: nodeLister, recorder: recorder, opts: opts,
		lost: newNodeLossTracker(),
	}
}

type defaultFlockControl struct {
	members     MemberControl
	revisions   RevisionControl
	status      StatusUpdater
	flockClient versioned.Interface
	flockLister flocklisters.FlockLister
	nodeLister  corelisters.NodeLister
	recorder    record.EventRecorder
	opts        Options
	// lost remembers since when nodes have been lost (memberRecovery).
	lost *nodeLossTracker
}

var _ FlockControl = &defaultFlockControl{}

// Sync reconciles one Flock: the data-cleanup finalizer, placement (member
// nodes are recorded in status before anything else) and recovery of
// members on lost nodes, adoption/release of pods, the template's
// ControllerRevision, the Service, member pods and the rolling update, data
// cleanup, status, and last what waits for the status: deleting finished
// cleanup helpers, pruning revisions, dropping the finalizer.
func (fc *defaultFlockControl) Sync(ctx context.Context, f *v1alpha1.Flock, pods []*corev1.Pod, now time.Time) (Result, error) {
	logger := klog.FromContext(ctx).WithValues("flock", klog.KObj(f))
	ctx = klog.NewContext(ctx, logger)

	if f.Spec.Selector == nil {
		fc.event(f, corev1.EventTypeWarning, "InvalidSelector", "spec.selector is empty; the Flock cannot select its pods")
		return Result{}, nil
	}
	selector, err := metav1.LabelSelectorAsSelector(f.Spec.Selector)
	if err != nil || selector.Empty() {
		fc.event(f, corev1.EventTypeWarning, "InvalidSelector", "spec.selector is invalid or empty; the Flock cannot select its pods")
		return Result{}, nil
	}
	deleting := f.DeletionTimestamp != nil
	replicas := replicasOf(f)
	nodeList, err := fc.nodeLister.List(labels.Everything())
	if err != nil {
		return Result{}, err
	}
	nodes := make(map[string]*corev1.Node, len(nodeList))
	for _, n := range nodeList {
		nodes[n.Name] = n
	}
	var result Result

	// 0. The finalizer goes on before a Delete retention policy can have
	// anything to clean up, so deleting the Flock waits for the cleanup.
	if !deleting && wantsFinalizer(f) != hasFinalizer(f, v1alpha1.FinalizerDataCleanup) {
		if f, err = fc.setFinalizer(ctx, f, wantsFinalizer(f)); err != nil {
			return Result{}, err
		}
	}

	// 1. Placement and recovery. No pod is created or adopted for a member
	// whose node is not recorded in status, so the writes must succeed
	// first.
	var losses map[int32]nodeLoss
	if !deleting {
		f, err = fc.placeMembers(ctx, f, selector, pods, nodeList)
		if err != nil {
			return Result{}, err
		}
		var wait time.Duration
		f, losses, wait, err = fc.recoverMembers(ctx, f, nodeList, nodes, now)
		if err != nil {
			return Result{}, err
		}
		result.requeue(wait)
	}
	members := make(map[int32]v1alpha1.FlockMember, len(f.Status.Members))
	for _, m := range f.Status.Members {
		members[m.Ordinal] = m
	}

	// 2. Adoption and release.
	var errs []error
	rm := newRefManager(f, fc.members, fc.canAdopt(f))
	match := func(pod *corev1.Pod) bool {
		_, ok := ParseOrdinal(f.Name, pod.Name)
		return ok && selector.Matches(labels.Set(pod.Labels))
	}
	adoptable := func(pod *corev1.Pod) bool {
		ord, _ := ParseOrdinal(f.Name, pod.Name)
		m, ok := members[ord]
		return ok && PinnedNode(pod) == m.Node
	}
	owned, err := rm.claimPods(ctx, pods, match, adoptable)
	if err != nil {
		errs = append(errs, err)
	}
	podByOrdinal := make(map[int32]*corev1.Pod, len(owned))
	for _, pod := range owned {
		ord, _ := ParseOrdinal(f.Name, pod.Name)
		podByOrdinal[ord] = pod
	}

	// 3. The template's revision.
	plan, revisions, err := fc.syncRevisions(ctx, f, rm, podByOrdinal)
	if err != nil {
		errs = append(errs, err)
	}

	// 4. The headless Service.
	svcCond, err := fc.syncService(ctx, f, rm)
	if err != nil {
		errs = append(errs, err)
	}

	// 5. Member pods and the rolling update.
	blocked := fc.blockedMembers(f, members, podByOrdinal, nodes, losses)
	if !deleting {
		changed := map[int32]bool{}
		if err := fc.syncMembers(ctx, f, members, podByOrdinal, nodes, plan, changed, now); err != nil {
			errs = append(errs, err)
		}
		if err := fc.rollingUpdate(ctx, f, podByOrdinal, plan, changed, nodes, now); err != nil {
			errs = append(errs, err)
		}
	}

	// 6. Data cleanup (retention Delete).
	cleanup, err := fc.syncCleanup(ctx, f, members, podByOrdinal, nodes, now)
	if err != nil {
		errs = append(errs, err)
	}
	result.requeue(cleanup.requeue)

	// 7. Status. Scaled-down members leave it once their pods are gone and
	// their data directories are removed (when they are to be).
	remove := map[int32]string{}
	for ord, m := range members {
		if ord >= replicas && podByOrdinal[ord] == nil && !cleanup.pending[ord] {
			remove[ord] = m.Node
		}
	}
	maps.Copy(remove, cleanup.done)
	status, states := computeStatus(statusInput{
		Flock: f, Members: members, Pods: podByOrdinal, Blocked: blocked, Remove: remove, Cleanup: cleanup.messages,
		UpdateRevision: plan.Update, ClusterDomain: fc.opts.ClusterDomain, ServiceCondition: svcCond,
		HaltAfter: fc.opts.RolloutHaltAfter, Now: now,
	})
	_, err = fc.status.UpdateStatus(ctx, f, func(st *v1alpha1.FlockStatus) { mergeStatus(st, status, remove) })
	statusWritten := err == nil
	switch {
	case apierrors.IsNotFound(err):
		// Deleted meanwhile; the delete event ends its syncs.
	case err != nil:
		errs = append(errs, fmt.Errorf("updating status: %w", err))
	default:
		fc.reportTransitions(f, status)
	}

	// 8. What waits for the status.
	if statusWritten {
		helpersLeft := false
		for _, h := range cleanup.finished {
			if err := fc.deleteHelper(ctx, f, h, false); err != nil {
				errs = append(errs, err)
				helpersLeft = true
			}
		}
		if deleting && cleanup.complete && !helpersLeft && hasFinalizer(f, v1alpha1.FinalizerDataCleanup) {
			if _, err := fc.setFinalizer(ctx, f, false); err != nil && !apierrors.IsNotFound(err) {
				errs = append(errs, err)
			} else {
				logger.V(2).Info("Data cleanup complete; released the Flock for deletion")
			}
		}
	}
	if !deleting && len(revisions) > 0 {
		if err := fc.pruneRevisions(ctx, f, revisions, liveRevisions(plan.Update, status.CurrentRevision, owned)); err != nil {
			errs = append(errs, err)
		}
	}

	result.Members = states
	if f.Spec.MinReadySeconds > 0 {
		for _, pod := range owned {
			if d, ok := availableAfter(pod, f.Spec.MinReadySeconds, now); ok && d > 0 {
				result.requeue(d)
			}
		}
	}
	if _, _, recheck := haltedPod(f, podByOrdinal, plan.Update, status.CurrentRevision, fc.opts.RolloutHaltAfter, now); recheck > 0 {
		result.requeue(recheck)
	}
	return result, utilerrors.NewAggregate(errs)
}

// requeue asks for another sync after d, or sooner if already asked.
func (r *Result) requeue(d time.Duration) {
	if d > 0 && (r.RequeueAfter == 0 || d < r.RequeueAfter) {
		r.RequeueAfter = d
	}
}

// placeMembers records in status the node of every ordinal below replicas
// that has none, and of every pod the Flock owns or could adopt that has
// no member, and returns the Flock as written. Recorded members are never
// changed. A pod that already sits on (or is pinned to) a free node keeps
// that node, so an adopted member finds its data; other ordinals are placed
// by placement.Assign, least-used nodes first, across all Flocks.
func (fc *defaultFlockControl) placeMembers(ctx context.Context, f *v1alpha1.Flock, selector labels.Selector, pods []*corev1.Pod, nodes []*corev1.Node) (*v1alpha1.Flock, error) {
	logger := klog.FromContext(ctx)
	replicas := replicasOf(f)
	existing := make(map[int32]string, len(f.Status.Members))
	used := map[string]bool{}
	for _, m := range f.Status.Members {
		existing[m.Ordinal] = m.Node
		used[m.Node] = true
	}
	add := map[int32]string{}

	// Pods first, in ordinal order, those the Flock controls before orphans.
	sorted := slices.Clone(pods)
	slices.SortStableFunc(sorted, func(a, b *corev1.Pod) int {
		oa, _ := ParseOrdinal(f.Name, a.Name)
		ob, _ := ParseOrdinal(f.Name, b.Name)
		if oa != ob {
			return int(oa) - int(ob)
		}
		ca, cb := isControlledBy(a, f), isControlledBy(b, f)
		switch {
		case ca && !cb:
			return -1
		case cb && !ca:
			return 1
		}
		return 0
	})
	for _, pod := range sorted {
		ord, ok := ParseOrdinal(f.Name, pod.Name)
		if !ok || isTerminating(pod) {
			continue
		}
		if _, ok := existing[ord]; ok {
			continue
		}
		if _, ok := add[ord]; ok {
			continue
		}
		if !isControlledBy(pod, f) && (metav1.GetControllerOfNoCopy(pod) != nil || !selector.Matches(labels.Set(pod.Labels))) {
			continue
		}
		node := PinnedNode(pod)
		if node == "" || used[node] {
			continue
		}
		if int(ord) < len(f.Spec.Placement.Nodes) && f.Spec.Placement.Nodes[ord] != node {
			continue // the explicit map wins over where a pod happens to be
		}
		add[ord] = node
		used[node] = true
	}

	// New ordinals.
	all := maps.Clone(existing)
	maps.Copy(all, add)
	top := replicas
	for ord := range all {
		top = max(top, ord+1)
	}
	missing := false
	for ord := range replicas {
		if _, ok := all[ord]; !ok {
			missing = true
			break
		}
	}
	if missing {
		req := requirementOf(f)
		req.Replicas = top // so every recorded node, condemned members' too, counts as used
		assigned, unplaced := placement.Assign(nodes, req, all, fc.usage(f))
		for ord, node := range assigned {
			if _, ok := all[ord]; ok || ord >= replicas || used[node] {
				continue
			}
			add[ord] = node
			used[node] = true
		}
		if len(unplaced) > 0 {
			logger.V(2).Info("Members cannot be placed", "ordinals", unplaced)
		}
	}
	if len(add) == 0 {
		return f, nil
	}

	var added []int32
	updated, err := fc.status.UpdateStatus(ctx, f, func(st *v1alpha1.FlockStatus) {
		added = recordMembers(st, add, func(ord int32, node string) v1alpha1.FlockMember {
			pod := PodName(f.Name, ord)
			return v1alpha1.FlockMember{
				Ordinal: ord, Node: node, Pod: pod,
				Hostname: MemberHostname(pod, serviceNameOf(f), f.Namespace, fc.opts.ClusterDomain),
				Message:  "placed; pod not created yet",
			}
		})
	})
	if err != nil {
		fc.event(f, corev1.EventTypeWarning, "FailedPlacement", "recording the nodes of new members failed: %v", err)
		return nil, fmt.Errorf("recording member nodes: %w", err)
	}
	for _, ord := range added {
		logger.V(2).Info("Placed member", "ordinal", ord, "node", add[ord])
		fc.event(f, corev1.EventTypeNormal, "MemberPlaced", "member %d (pod %s) placed on node %s", ord, PodName(f.Name, ord), add[ord])
	}
	return updated, nil
}

// usage counts the members of all Flocks per node, with f's own members
// taken from f (which may be newer than the cache).
func (fc *defaultFlockControl) usage(f *v1alpha1.Flock) map[string]int {
	usage := map[string]int{}
	flocks, _ := fc.flockLister.List(labels.Everything())
	for _, g := range flocks {
		if g.UID == f.UID {
			continue
		}
		for _, m := range g.Status.Members {
			usage[m.Node]++
		}
	}
	for _, m := range f.Status.Members {
		usage[m.Node]++
	}
	return usage
}

// canAdopt returns the check made before the first adoption of a sync: a
// live read that the Flock still exists with the same UID and is not being
// deleted (the cache may be behind; see kubernetes/kubernetes#42639).
func (fc *defaultFlockControl) canAdopt(f *v1alpha1.Flock) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		fresh, err := fc.flockClient.FlockV1alpha1().Flocks(f.Namespace).Get(ctx, f.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if fresh.UID != f.UID {
			return fmt.Errorf("flock %s/%s is gone: got uid %s, want %s", f.Namespace, f.Name, fresh.UID, f.UID)
		}
		if fresh.DeletionTimestamp != nil {
			return fmt.Errorf("flock %s/%s is being deleted", f.Namespace, f.Name)
		}
		return nil
	}
}

// syncService keeps the Flock's headless Service and returns the
// ServiceReady condition. A Service of that name that the Flock does not
// control is never modified; the one exception is an orphan the controller
// made for this Flock (labelled flock.dev/name=<flock>, headless), which is
// adopted back.
func (fc *defaultFlockControl) syncService(ctx context.Context, f *v1alpha1.Flock, rm *refManager) (metav1.Condition, error) {
	logger := klog.FromContext(ctx)
	name := serviceNameOf(f)
	deleting := f.DeletionTimestamp != nil
	cond := func(s metav1.ConditionStatus, reason, format string, args ...any) metav1.Condition {
		return metav1.Condition{Type: v1alpha1.FlockServiceReady, Status: s, Reason: reason, Message: fmt.Sprintf(format, args...)}
	}

	svc, err := fc.members.GetService(f.Namespace, name)
	switch {
	case apierrors.IsNotFound(err):
		if deleting {
			return cond(metav1.ConditionFalse, ReasonServiceMissing, "Service %s does not exist", name), nil
		}
		if err := fc.members.CreateService(ctx, NewService(f)); err != nil {
			if apierrors.IsAlreadyExists(err) {
				// The cache is behind; the Service's event brings us back.
				return metav1.Condition{}, nil
			}
			fc.event(f, corev1.EventTypeWarning, "FailedCreate", "create Service %s failed: %v", name, err)
			return cond(metav1.ConditionFalse, ReasonServiceMissing, "creating Service %s failed: %v", name, err), err
		}
		logger.V(2).Info("Created headless Service", "service", klog.KRef(f.Namespace, name))
		fc.event(f, corev1.EventTypeNormal, "SuccessfulCreate", "created headless Service %s", name)
		return cond(metav1.ConditionTrue, ReasonServiceCreated, "headless Service %s created", name), nil
	case err != nil:
		return metav1.Condition{}, err
	}

	ref := metav1.GetControllerOfNoCopy(svc)
	if ref == nil && svc.Labels[v1alpha1.LabelFlockName] == f.Name && svc.Spec.ClusterIP == corev1.ClusterIPNone && !deleting {
		if err := rm.adoptService(ctx, svc); err != nil {
			return metav1.Condition{}, err
		}
		fc.event(f, corev1.EventTypeNormal, "AdoptedService", "adopted orphaned headless Service %s", name)
		svc = svc.DeepCopy()
		svc.OwnerReferences = append(svc.OwnerReferences, *newControllerRef(f))
		ref = newControllerRef(f)
	}
	if ref == nil || ref.UID != f.UID {
		c := cond(metav1.ConditionFalse, ReasonServiceNotOwned,
			"Service %s exists and is not controlled by this Flock; it is left as it is, so member DNS names may not resolve", name)
		fc.eventOnTransition(f, c, corev1.EventTypeWarning, "ServiceConflict")
		return c, nil
	}
	if svc.Spec.ClusterIP != corev1.ClusterIPNone {
		c := cond(metav1.ConditionFalse, ReasonServiceNotHeadless,
			"Service %s is not headless (clusterIP %s), so members get no DNS names; delete it to have it recreated", name, svc.Spec.ClusterIP)
		fc.eventOnTransition(f, c, corev1.EventTypeWarning, "ServiceConflict")
		return c, nil
	}
	if !deleting {
		want := NewService(f)
		if !equality.Semantic.DeepEqual(svc.Spec.Selector, want.Spec.Selector) ||
			!equality.Semantic.DeepEqual(svc.Spec.Ports, want.Spec.Ports) ||
			svc.Spec.PublishNotReadyAddresses != want.Spec.PublishNotReadyAddresses {
			upd := svc.DeepCopy()
			upd.Spec.Selector = want.Spec.Selector
			upd.Spec.Ports = want.Spec.Ports
			upd.Spec.PublishNotReadyAddresses = want.Spec.PublishNotReadyAddresses
			if err := fc.members.UpdateService(ctx, upd); err != nil {
				return metav1.Condition{}, fmt.Errorf("updating Service %s/%s: %w", f.Namespace, name, err)
			}
			fc.event(f, corev1.EventTypeNormal, "SuccessfulUpdate", "updated the selector and ports of headless Service %s", name)
		}
	}
	return cond(metav1.ConditionTrue, ReasonServiceReady, "headless Service %s selects the members", name), nil
}

// syncMembers creates, recreates and deletes member pods. With
// OrderedReady it works on one ordinal at a time, from 0 up: each member's
// pod must be Running and available before the next is created, and the
// pods of a scale down are deleted from the highest ordinal down, one at a
// time, once every remaining member is available. With Parallel it does
// all at once. New pods get the revision plan.templateFor says. The
// ordinals whose pods it creates or deletes are added to changed.
func (fc *defaultFlockControl) syncMembers(ctx context.Context, f *v1alpha1.Flock, members map[int32]v1alpha1.FlockMember, pods map[int32]*corev1.Pod,
	nodes map[string]*corev1.Node, plan updatePlan, changed map[int32]bool, now time.Time) error {
	logger := klog.FromContext(ctx)
	replicas := replicasOf(f)
	monotonic := f.Spec.PodManagementPolicy != v1alpha1.ParallelPodManagement
	var errs []error

	// A pod pinned to another node than its member's (the member was
	// reassigned off a lost node) is not the member any more: it goes at
	// once, whatever the order, so it cannot keep serving the member's name
	// if its node comes back.
	for _, ord := range sortedOrdinals(pods) {
		pod := pods[ord]
		m, ok := members[ord]
		node := PinnedNode(pod)
		if !ok || node == "" || node == m.Node || (isTerminating(pod) && !mustForceDelete(pod, m.Node, nodes)) {
			continue
		}
		changed[ord] = true
		why := fmt.Sprintf("member %d was reassigned from node %s to node %s", ord, node, m.Node)
		if err := fc.deletePod(ctx, f, pod, why, mustForceDelete(pod, m.Node, nodes)); err != nil {
			errs = append(errs, err)
		}
	}

	for ord := range replicas {
		if changed[ord] {
			if monotonic {
				return utilerrors.NewAggregate(errs)
			}
			continue
		}
		wait, err := fc.syncMember(ctx, f, members, pods[ord], ord, nodes, plan, changed, now)
		if err != nil {
			errs = append(errs, err)
		}
		if monotonic && (wait || err != nil) {
			return utilerrors.NewAggregate(errs)
		}
	}

	var condemned []int32
	for ord := range pods {
		if ord >= replicas {
			condemned = append(condemned, ord)
		}
	}
	slices.SortFunc(condemned, func(a, b int32) int { return int(b) - int(a) })
	for _, ord := range condemned {
		pod := pods[ord]
		if isTerminating(pod) {
			if mustForceDelete(pod, "", nodes) {
				errs = append(errs, fc.deletePod(ctx, f, pod, "scale down; its node is gone", true))
			}
			if monotonic {
				logger.V(4).Info("Waiting for pod to terminate before scaling down further", "pod", klog.KObj(pod))
				break
			}
			continue
		}
		logger.V(2).Info("Deleting pod for scale down", "pod", klog.KObj(pod))
		changed[ord] = true
		if err := fc.deletePod(ctx, f, pod, "scale down", mustForceDelete(pod, "", nodes)); err != nil {
			errs = append(errs, err)
		}
		if monotonic {
			break
		}
	}
	return utilerrors.NewAggregate(errs)
}

// syncMember makes sure member ord has a healthy pod on its node. It
// returns wait=true when an OrderedReady Flock must not go past this member
// yet.
func (fc *defaultFlockControl) syncMember(ctx context.Context, f *v1alpha1.Flock, members map[int32]v1alpha1.FlockMember, pod *corev1.Pod, ord int32,
	nodes map[string]*corev1.Node, plan updatePlan, changed map[int32]bool, now time.Time) (bool, error) {
	logger := klog.FromContext(ctx)
	m, ok := members[ord]
	if !ok {
		return true, nil // unplaced; reported as blocked
	}
	name := PodName(f.Name, ord)
	if pod == nil {
		if other, err := fc.members.GetPod(f.Namespace, name); err == nil && !isControlledBy(other, f) {
			return true, nil // the name is taken; reported as blocked
		}
		if _, err := fc.members.GetPod(f.Namespace, CleanupPodName(f.Name, ord)); err == nil {
			return true, nil // scaled back up while its data is removed; reported as blocked
		}
		tmpl, revision := plan.templateFor(f, ord)
		changed[ord] = true
		err := fc.members.CreatePod(ctx, newMemberPodFromTemplate(f, tmpl, m, revision, fc.opts.DataRoot))
		switch {
		case apierrors.IsAlreadyExists(err):
			// The cache is behind; the pod's event brings us back.
			return true, nil
		case err != nil:
			fc.event(f, corev1.EventTypeWarning, "FailedCreate", "create Pod %s for member %d on node %s failed: %v", name, ord, m.Node, err)
			return true, fmt.Errorf("creating pod %s/%s: %w", f.Namespace, name, err)
		}
		logger.V(2).Info("Created member pod", "pod", klog.KRef(f.Namespace, name), "node", m.Node, "revision", revision)
		fc.event(f, corev1.EventTypeNormal, "SuccessfulCreate", "created Pod %s for member %d on node %s (revision %s)", name, ord, m.Node, revision)
		return true, nil
	}
	force := mustForceDelete(pod, m.Node, nodes)
	if isTerminating(pod) {
		if force {
			// A pod whose node is gone (or that is being moved off a lost
			// node) never finishes terminating by itself.
			changed[ord] = true
			return true, fc.deletePod(ctx, f, pod, "its node is lost", true)
		}
		return true, nil
	}
	if isTerminal(pod) {
		fc.event(f, corev1.EventTypeWarning, "RecreatingPod", "pod %s of member %d is %s; deleting it to recreate it on node %s", name, ord, pod.Status.Phase, m.Node)
		changed[ord] = true
		return true, fc.deletePod(ctx, f, pod, "recreate", force)
	}
	if why := identityMismatch(f, m, pod); why != "" {
		fc.event(f, corev1.EventTypeWarning, "RecreatingPod", "%s; deleting it to recreate it", why)
		changed[ord] = true
		return true, fc.deletePod(ctx, f, pod, "recreate", force)
	}
	if !labelsMatch(f, ord, pod) {
		upd := pod.DeepCopy()
		if upd.Labels == nil {
			upd.Labels = map[string]string{}
		}
		maps.Copy(upd.Labels, memberLabels(f, ord))
		if err := fc.members.UpdatePod(ctx, upd); err != nil {
			return true, fmt.Errorf("labelling pod %s/%s: %w", pod.Namespace, pod.Name, err)
		}
	}
	return !isAvailable(pod, f.Spec.MinReadySeconds, now), nil
}

// mustForceDelete reports whether pod has to be deleted with grace period
// 0: the node it is pinned to is gone, so no kubelet will ever confirm that
// it stopped; or it belongs on memberNode ("" when it has no member) but is
// pinned to another node that is not Ready, i.e. its member was reassigned
// away from a lost node.
func mustForceDelete(pod *corev1.Pod, memberNode string, nodes map[string]*corev1.Node) bool {
	name := PinnedNode(pod)
	if name == "" {
		return false
	}
	node, ok := nodes[name]
	if !ok {
		return true
	}
	return memberNode != "" && name != memberNode && !isNodeReady(node)
}

// deletePod deletes a pod of the Flock, at once when force is set, and
// records an event.
func (fc *defaultFlockControl) deletePod(ctx context.Context, f *v1alpha1.Flock, pod *corev1.Pod, why string, force bool) error {
	del := fc.members.DeletePod
	if force {
		del = fc.members.ForceDeletePod
		why += "; forced: its node " + PinnedNode(pod) + " cannot confirm"
	}
	if err := del(ctx, pod); err != nil {
		fc.event(f, corev1.EventTypeWarning, "FailedDelete", "delete Pod %s (%s) failed: %v", pod.Name, why, err)
		return fmt.Errorf("deleting pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	fc.event(f, corev1.EventTypeNormal, "SuccessfulDelete", "deleted Pod %s (%s)", pod.Name, why)
	return nil
}

// blockedMembers says, for every ordinal below replicas, why it cannot
// run, if it cannot: no node could be placed for it, its node is gone,
// NotReady (with since when, and what memberRecovery does about it, from
// losses), cordoned or tainted, its pod is unschedulable, its pod name is
// taken by a pod the Flock does not control, or it waits for the cleanup
// of its data directory after a scale down.
func (fc *defaultFlockControl) blockedMembers(f *v1alpha1.Flock, members map[int32]v1alpha1.FlockMember, pods map[int32]*corev1.Pod,
	nodes map[string]*corev1.Node, losses map[int32]nodeLoss) map[int32]blockage {
	blocked := map[int32]blockage{}
	for ord := range replicasOf(f) {
		m, ok := members[ord]
		if !ok {
			if f.DeletionTimestamp == nil {
				blocked[ord] = unplacedBlockage(f, ord, nodes, members)
			}
			continue
		}
		pod := pods[ord]
		if pod == nil {
			name := PodName(f.Name, ord)
			if other, err := fc.members.GetPod(f.Namespace, name); err == nil && !isControlledBy(other, f) {
				blocked[ord] = blockage{ReasonPodNameTaken, fmt.Sprintf(
					"member %d cannot start: pod %s exists and is not a pod of this Flock on node %s; delete it to let the member start", ord, name, m.Node)}
				continue
			}
			if h, err := fc.members.GetPod(f.Namespace, CleanupPodName(f.Name, ord)); err == nil && f.DeletionTimestamp == nil {
				blocked[ord] = blockage{ReasonDataCleanup, fmt.Sprintf(
					"member %d waits for pod %s to finish removing its data directory on node %s", ord, h.Name, h.Spec.NodeName)}
				continue
			}
		}
		b := memberBlockage(m, pod, nodes[m.Node], f.Spec.Template.Spec.Tolerations)
		if b == nil {
			continue
		}
		if loss, ok := losses[ord]; ok && (b.Reason == ReasonNodeGone || b.Reason == ReasonNodeNotReady) {
			b.Message += " since " + formatTime(loss.Since)
			if loss.Note != "" {
				b.Message += "; " + loss.Note
			}
		}
		blocked[ord] = *b
	}
	return blocked
}

// reportTransitions records events for conditions that warn the user when
// they become true or change their message (MembersBlocked, a halted
// rollout), and for a completed rollout.
func (fc *defaultFlockControl) reportTransitions(f *v1alpha1.Flock, status v1alpha1.FlockStatus) {
	if now := meta.FindStatusCondition(status.Conditions, v1alpha1.FlockMembersBlocked); now != nil && now.Status == metav1.ConditionTrue {
		before := meta.FindStatusCondition(f.Status.Conditions, v1alpha1.FlockMembersBlocked)
		if before == nil || before.Status != now.Status || before.Message != now.Message {
			fc.event(f, corev1.EventTypeWarning, "MembersBlocked", "%s", now.Message)
		}
	}
	if now := meta.FindStatusCondition(status.Conditions, v1alpha1.FlockProgressing); now != nil && now.Reason == ReasonRolloutHalted {
		before := meta.FindStatusCondition(f.Status.Conditions, v1alpha1.FlockProgressing)
		if before == nil || before.Reason != now.Reason || before.Message != now.Message {
			fc.event(f, corev1.EventTypeWarning, "RolloutHalted", "%s", now.Message)
		}
	}
	if old := f.Status.CurrentRevision; old != "" && old != status.CurrentRevision && status.CurrentRevision == status.UpdateRevision {
		fc.event(f, corev1.EventTypeNormal, "RolloutComplete", "every member runs revision %s (was %s)", status.UpdateRevision, old)
	}
}

// eventOnTransition records an event for c unless the Flock's status
// already has c with the same status and reason.
func (fc *defaultFlockControl) eventOnTransition(f *v1alpha1.Flock, c metav1.Condition, eventType, reason string) {
	if before := meta.FindStatusCondition(f.Status.Conditions, c.Type); before != nil && before.Status == c.Status && before.Reason == c.Reason {
		return
	}
	fc.event(f, eventType, reason, "%s", c.Message)
}

// event records an event on the Flock. It refers to the Flock by an
// ObjectReference, so the recorder's scheme need not know the Flock type.
func (fc *defaultFlockControl) event(f *v1alpha1.Flock, eventType, reason, format string, args ...any) {
	fc.recorder.Eventf(flockRef(f), eventType, reason, format, args...)
}

// flockRef returns an ObjectReference to a Flock.
func flockRef(f *v1alpha1.Flock) *corev1.ObjectReference {
	return &corev1.ObjectReference{
		APIVersion: controllerKind.GroupVersion().String(), Kind: controllerKind.Kind,
		Namespace: f.Namespace, Name: f.Name, UID: f.UID, ResourceVersion: f.ResourceVersion,
	}
}
