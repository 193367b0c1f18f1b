// File control.go: the reconcile logic's entry point: FlockControl and its Sync, which
// runs the steps of one sync in order and executes their plans.

package flock

import (
	"context"
	"fmt"
	"maps"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"flock.dev/flock/pkg/apis/flock/v1alpha1"
	"flock.dev/flock/pkg/generated/clientset/versioned"
	flocklisters "flock.dev/flock/pkg/generated/listers/flock/v1alpha1"
)

// Sync reconciles one Flock: the data-cleanup finalizer, placement (member
// nodes are recorded in status before anything else) and recovery of
// members on lost nodes, adoption/release of pods, planned member moves, the
// recorded nodes of members that follow their volume, the update plan,
// members' data and pods and the rolling update, the template's
// ControllerRevision, the Service, data cleanup, status, and last what
// waits for the status: pruning revisions, dropping the finalizer.
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
	// The cache may not show this controller's last write of f yet
	// (a status write brings the next sync at once).
	f = fc.written.latest(f)
	deleting := f.DeletionTimestamp != nil
	// A Flock whose namespace is being deleted is frozen as a deleted one
	// is: it gets no placement, pods, data, revision or Service. Every
	// create in that namespace would be refused (NamespaceLifecycle
	// admission), each event of the namespace's teardown would bring a
	// sync that tries again, and the namespace controller deletes the
	// Flock next. Its syncs still report its status.
	closing := !deleting && fc.namespaceClosing(f.Namespace)
	if closing {
		logger.V(2).Info("Flock's namespace is being deleted; nothing is created for it")
	}
	frozen := deleting || closing
	replicas := replicasOf(f)
	s, err := fc.takeSnapshot(ctx, f, selector, pods, now)
	if err != nil {
		return Result{}, err
	}
	var result Result

	// 0. The finalizer goes on before a Delete retention policy can have
	// anything to clean up, so deleting the Flock waits for the cleanup.
	if !deleting && wantsFinalizer(f) != hasFinalizer(f, v1alpha1.FinalizerDataCleanup) {
		if f, err = fc.setFinalizer(ctx, f, wantsFinalizer(f)); err != nil {
			return Result{}, err
		}
		s = s.withFlock(f)
	}

	// 1. Placement and recovery. No pod is created or adopted for a member
	// whose node is not recorded in status, so the writes must succeed
	// first.
	var losses map[int32]nodeLoss
	if !frozen {
		if f, err = fc.placeMembers(ctx, s); err != nil {
			return Result{}, err
		}
		s = s.withFlock(f)
		if !usesClaimTemplate(f) {
			// With a claim template a member follows its volume:
			// memberRecovery does not apply.
			var recovery recoveryPlan
			if f, recovery, err = fc.recoverMembers(ctx, s); err != nil {
				return Result{}, err
			}
			s = s.withFlock(f)
			losses = recovery.losses
			result.requeue(recovery.requeue)
		}
	}
	members, nodes := s.members, s.nodes

	// 2. Adoption and release.
	var errs []error
	rm := newRefManager(f, fc.members, fc.canAdopt(f))
	match := func(pod *corev1.Pod) bool {
		_, ok := ParseOrdinal(f.Name, pod.Name)
		return ok && selector.Matches(labels.Set(pod.Labels))
	}
	owned, err := rm.claimPods(ctx, pods, match, func(pod *corev1.Pod) bool { return adoptable(s, pod) })
	if err != nil {
		errs = append(errs, err)
	}
	s = fc.adopted(s, owned)
	podByOrdinal := s.pods

	// 2b. Planned moves (flocks/move), once the members' pods are known:
	// a moved member's new node is recorded before its pod is replaced.
	if !frozen {
		var requeue time.Duration
		if f, requeue, err = fc.moveMembers(ctx, s); err != nil {
			return Result{}, err
		}
		s = s.withFlock(f)
		members = s.members
		result.requeue(requeue)
	}

	// A member that follows its volume is recorded where its pod runs.
	if !frozen {
		if followed, err := fc.followMembers(ctx, s); err != nil {
			errs = append(errs, err)
		} else {
			f = followed
			s = s.withFlock(f)
			members = s.members
		}
	}

	// 3. The template's revision; a new one is created after the members'
	// writes (4), which do not need it.
	plan, revisions, newRevision, err := fc.syncRevisions(ctx, f, rm, podByOrdinal, frozen)
	if err != nil {
		errs = append(errs, err)
	}

	// 4. Member pods and the rolling update.
	blocked := blockedMembers(s, losses)
	if !frozen {
		changed := map[int32]bool{}
		dataBlocked := map[int32]blockage{}
		if err := fc.syncMembers(ctx, s, plan, changed, dataBlocked); err != nil {
			errs = append(errs, err)
		}
		for ord, b := range dataBlocked {
			if _, ok := blocked[ord]; !ok {
				blocked[ord] = b
			}
		}
		if err := fc.rollingUpdate(ctx, s, plan, changed); err != nil {
			errs = append(errs, err)
		}
	}
	if revisions, err = fc.createRevision(ctx, f, newRevision, revisions); err != nil {
		errs = append(errs, err)
	}

	// 5. The headless Service, after the members' writes, so that its
	// round trip is not on the way to a new Flock's volumes and helpers
	// (issue 17). A new Flock's node-local members get no pod in its first
	// sync (their helpers run first); a member with a claim template may,
	// a moment before the Service, which is well before it runs.
	// A Flock of no members gets its Service with its first member (its
	// DNS names are the members'), and keeps it from then on.
	needed := replicas > 0 || len(members) > 0 || len(podByOrdinal) > 0
	svcCond, err := fc.syncService(ctx, f, rm, frozen, needed)
	if err != nil {
		errs = append(errs, err)
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
		if ord >= replicas && podByOrdinal[ord] == nil && !cleanup.pending[ord] && !fc.memberPodMayExist(ctx, f, ord, now) {
			remove[ord] = m.Node
		}
	}
	maps.Copy(remove, cleanup.done)
	fc.recordDataNames(f, members)
	status, states := computeStatus(statusInput{
		Flock: f, Members: members, Pods: podByOrdinal, Blocked: blocked, Remove: remove, Cleanup: cleanup.messages, Losses: losses,
		UpdateRevision: plan.Update, ClusterDomain: fc.opts.ClusterDomain, ServiceCondition: svcCond,
		HaltAfter: fc.opts.RolloutHaltAfter, Now: now,
	})
	merge := func(st *v1alpha1.FlockStatus) { mergeStatus(st, status, remove) }
	statusWritten, afterStatus := false, f
	if wait := fc.paced.statusWait(f, len(status.Members), merge, now); wait > 0 {
		// A big Flock's status, or a change of messages alone, waits for
		// its spacing (status_spacing.go); the sync then asked for
		// computes it again.
		result.requeue(wait)
		logger.V(4).Info("Spacing the status write of the Flock", "members", len(status.Members), "after", wait)
	} else {
		written, err := fc.status.UpdateStatus(ctx, f, merge)
		statusWritten = err == nil
		if written != nil {
			// The Flock as the status write left it, with the
			// resourceVersion that write gave it, for the writes below.
			afterStatus = written
		}
		switch {
		case apierrors.IsNotFound(err):
			// Deleted meanwhile; the delete event ends its syncs.
		case err != nil:
			errs = append(errs, fmt.Errorf("updating status: %w", err))
		default:
			fc.reportTransitions(f, status)
		}
	}

	// 8. What waits for the status.
	if statusWritten {
		if deleting && cleanup.complete && hasFinalizer(f, v1alpha1.FinalizerDataCleanup) {
			if _, err := fc.setFinalizer(ctx, afterStatus, false); err != nil && !apierrors.IsNotFound(err) {
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

// canAdopt returns the check made before the first adoption of a sync: a
// live read that the Flock still exists with the same UID and is not being
// deleted (the cache may be behind; see kubernetes/kubernetes#42639).
func (fc *defaultFlockControl) canAdopt(f *v1alpha1.Flock) func(ctx context.Context) error {
	return func(ctx context.Context) error { return mayAdopt(ctx, fc.flockClient, f) }
}

// mayAdopt is the live read before an adoption: nil when Flock f still
// exists with the same UID and is not being deleted.
func mayAdopt(ctx context.Context, flockClient versioned.Interface, f *v1alpha1.Flock) error {
	fresh, err := flockClient.FlockV1alpha1().Flocks(f.Namespace).Get(ctx, f.Name, metav1.GetOptions{})
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

// NewDefaultFlockControl returns the FlockControl of the controller.
// members writes member pods and the Service, helpers the data helper pods
// (in opts.HelperNamespace), data members' PersistentVolumes and claims. revisions records templates as
// ControllerRevisions. flockClient is used
// for live reads before adoption and to add and remove the data-cleanup
// finalizer, flockLister to count every Flock's members per node,
// nodeLister for placement and for telling why a member is blocked,
// namespaceLister (nil: none) for the namespaces being deleted. opts must be
// completed.
func NewDefaultFlockControl(members, helpers MemberControl, data DataControl, revisions RevisionControl, status StatusUpdater, flockClient versioned.Interface,
	flockLister flocklisters.FlockLister, nodeLister corelisters.NodeLister, namespaceLister corelisters.NamespaceLister, recorder record.EventRecorder, opts Options) FlockControl {
	written, paced := &writtenFlocks{}, newStatusPacer(statusSpacing, clock.RealClock{})
	fc := &defaultFlockControl{
		members: members, revisions: revisions, status: recordingStatusUpdater{StatusUpdater: status, written: written, paced: paced}, flockClient: flockClient,
		flockLister: flockLister, nodeLister: nodeLister, namespaceLister: namespaceLister, recorder: recorder, opts: opts,
		lost: newNodeLossTracker(), written: written, paced: paced, created: &createdPods{},
	}
	fc.data = &dataSyncer{
		data: data, pods: helpers, event: fc.event,
		nodeByName: func(name string) *corev1.Node {
			n, err := nodeLister.Get(name)
			if err != nil {
				return nil
			}
			return n
		},
		dataRoot: opts.DataRoot, helperNamespace: opts.HelperNamespace, helperImage: opts.CleanupImage,
		agentGrace: opts.NodeAgentGrace,
	}
	return fc
}

// namespaceClosing reports whether the cache shows namespace ns being
// deleted.
func (fc *defaultFlockControl) namespaceClosing(ns string) bool {
	return namespaceClosing(fc.namespaceLister, ns)
}

// memberPodMayExist reports whether member ord's pod may exist although
// the sync's snapshot has none: its create was sent and the cache has not
// shown it yet, or the cache delivered it after the snapshot was taken. A
// scaled-down member stays recorded until its pod is surely gone, so that
// its node is not given to another member while the pod may run there.
func (fc *defaultFlockControl) memberPodMayExist(ctx context.Context, f *v1alpha1.Flock, ord int32, now time.Time) bool {
	if _, ok := fc.podAwaited(ctx, f, ord, now); ok {
		return true
	}
	pod, err := fc.members.GetPod(f.Namespace, PodName(f.Name, ord))
	return err == nil && isControlledBy(pod, f)
}
