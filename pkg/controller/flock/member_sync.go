// File member_sync.go: member pods: create, recreate and delete them in the order the pod
// management policy says.

package flock

import (
	"context"
	"fmt"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"flock.dev/flock/pkg/apis/flock/v1alpha1"
)

// syncMembers creates, recreates and deletes member pods. With
// OrderedReady it works on one ordinal at a time, from 0 up: each member's
// pod must be Running and available before the next is created, and the
// pods of a scale down are deleted from the highest ordinal down, one at a
// time, once every remaining member is available. With Parallel it does
// all at once. New pods get the revision plan.templateFor says. The
// ordinals whose pods it creates or deletes are added to changed.
func (fc *defaultFlockControl) syncMembers(ctx context.Context, s *snapshot, plan updatePlan, changed map[int32]bool, dataBlocked map[int32]blockage) error {
	f := s.flock
	logger := klog.FromContext(ctx)
	replicas := replicasOf(f)
	monotonic := f.Spec.PodManagementPolicy != v1alpha1.ParallelPodManagement
	var errs []error

	for _, d := range planReassignedDeletions(s) {
		changed[d.ord] = true
		if err := fc.deletePod(ctx, f, d.pod, d.why, d.force); err != nil {
			errs = append(errs, err)
		}
	}

	if monotonic {
		for ord := range replicas {
			if changed[ord] {
				return utilerrors.NewAggregate(errs)
			}
			out := fc.syncMember(ctx, s, ord, plan)
			out.record(ord, changed, dataBlocked)
			if out.err != nil {
				errs = append(errs, out.err)
			}
			if out.wait || out.err != nil {
				errs = append(errs, fc.prepareAhead(ctx, s, ord+1)...)
				// The scale down waits for this member too, but for
				// pods that have terminated: none of them runs.
				errs = append(errs, fc.deleteForScaleDown(ctx, s, planTerminatedScaleDown(s), changed)...)
				return utilerrors.NewAggregate(errs)
			}
		}
	} else {
		var ords []int32
		for ord := range replicas {
			if !changed[ord] {
				ords = append(ords, ord)
			}
		}
		for i, out := range fc.syncMembersInParallel(ctx, s, ords, plan) {
			out.record(ords[i], changed, dataBlocked)
			if out.err != nil {
				errs = append(errs, out.err)
			}
		}
	}

	deletions, waiting := planScaleDown(s)
	errs = append(errs, fc.deleteForScaleDown(ctx, s, deletions, changed)...)
	if waiting != nil {
		logger.V(4).Info("Waiting for pod to terminate before scaling down further", "pod", klog.KObj(waiting))
	}
	return utilerrors.NewAggregate(errs)
}

// prepareAhead makes the data of the members from ordinal from up that an
// OrderedReady Flock has not reached yet and that have no pod: their
// volumes, claims and prepared directories are ready when their turn
// comes, so each member waits only for the one before it, not for its own
// data too. No pod is created.
func (fc *defaultFlockControl) prepareAhead(ctx context.Context, s *snapshot, from int32) []error {
	var errs []error
	for ord := from; ord < replicasOf(s.flock); ord++ {
		m, ok := s.members[ord]
		if _, awaited := s.awaited[ord]; !ok || s.pods[ord] != nil || s.nameTaken[ord] || awaited {
			continue
		}
		// No pod is created here: a finished helper goes at once.
		st, err := fc.data.ensure(ctx, s.flock, m, s.nodes[m.Node], s.now)
		if err := st.runAfter(ctx, err); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// podDeletion is a pod a decision deletes.
type podDeletion struct {
	ord   int32
	pod   *corev1.Pod
	why   string
	force bool
	// changes: the deletion changes the member (it is not of a pod
	// already terminating).
	changes bool
}

// planReassignedDeletions returns the pods pinned to another node than
// their member's (the member was reassigned off a lost node, or moved on
// purpose; the pod goes gracefully unless its node is lost; a member that
// follows its volume is never reassigned): such a pod is
// not the member any more and goes at once, whatever the order, so it
// cannot keep serving the member's name if its node comes back.
func planReassignedDeletions(s *snapshot) []podDeletion {
	var out []podDeletion
	for _, ord := range sortedOrdinals(s.pods) {
		pod := s.pods[ord]
		m, ok := s.members[ord]
		node := PinnedNode(pod)
		force := ok && mustForceDelete(pod, s.nodes)
		if !ok || node == "" || node == m.Node || followsVolume(s.flock, ord) || (isTerminating(pod) && !force) {
			continue
		}
		out = append(out, podDeletion{ord: ord, pod: pod, force: force, changes: true,
			why: fmt.Sprintf("member %d was moved from node %s to node %s", ord, node, m.Node)})
	}
	return out
}

// planScaleDown returns the pods of ordinals at or above replicas to
// delete, highest first: with OrderedReady one at a time (waiting is then
// a pod still terminating that the next must wait for), with Parallel all
// at once. A terminating pod whose node is gone is force-deleted.
func planScaleDown(s *snapshot) (deletions []podDeletion, waiting *corev1.Pod) {
	replicas := replicasOf(s.flock)
	monotonic := s.flock.Spec.PodManagementPolicy != v1alpha1.ParallelPodManagement
	var condemned []int32
	for ord := range s.pods {
		if ord >= replicas {
			condemned = append(condemned, ord)
		}
	}
	slices.SortFunc(condemned, func(a, b int32) int { return int(b) - int(a) })
	for _, ord := range condemned {
		pod := s.pods[ord]
		force := mustForceDelete(pod, s.nodes)
		if isTerminating(pod) {
			if force {
				deletions = append(deletions, podDeletion{ord: ord, pod: pod, why: "scale down; its node is gone", force: true})
			}
			if monotonic {
				return deletions, pod
			}
			continue
		}
		deletions = append(deletions, podDeletion{ord: ord, pod: pod, why: "scale down", force: force, changes: true})
		if monotonic {
			break
		}
	}
	return deletions, nil
}

// planTerminatedScaleDown returns the pods of ordinals at or above replicas
// that have terminated (Failed or Succeeded) and are not being deleted: an
// OrderedReady Flock's scale down, which waits for its lower members, need
// not wait to delete them, as none of them runs.
func planTerminatedScaleDown(s *snapshot) []podDeletion {
	replicas := replicasOf(s.flock)
	var out []podDeletion
	for _, ord := range sortedOrdinals(s.pods) {
		if pod := s.pods[ord]; ord >= replicas && isTerminal(pod) && !isTerminating(pod) {
			out = append(out, podDeletion{ord: ord, pod: pod, why: "scale down; it has terminated", force: mustForceDelete(pod, s.nodes), changes: true})
		}
	}
	return out
}

// deleteForScaleDown deletes the pods of a scale down, noting the members
// they change.
func (fc *defaultFlockControl) deleteForScaleDown(ctx context.Context, s *snapshot, deletions []podDeletion, changed map[int32]bool) []error {
	var errs []error
	for _, d := range deletions {
		if d.changes {
			klog.FromContext(ctx).V(2).Info("Deleting pod for scale down", "pod", klog.KObj(d.pod))
			changed[d.ord] = true
		}
		if err := fc.deletePod(ctx, s.flock, d.pod, d.why, d.force); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// memberActionKind is what a sync writes for one member.
type memberActionKind int

const (
	// memberKeep: nothing to write.
	memberKeep memberActionKind = iota
	// memberCreate: create the member's pod.
	memberCreate
	// memberDelete: delete the member's pod (to recreate it).
	memberDelete
	// memberRelabel: put the member labels back on its pod.
	memberRelabel
)

// memberAction is planMember's decision for one member.
type memberAction struct {
	kind memberActionKind
	// wait: an OrderedReady Flock must not go past this member yet.
	wait bool
	// template and revision of the pod to create.
	template *corev1.PodTemplateSpec
	revision string
	// why the pod is deleted, whether at once (its node cannot confirm),
	// and the warning recorded as an event first ("": none).
	why     string
	force   bool
	warning string
}

// planMember decides what member ord needs so that it has a healthy pod
// on its node: nothing while it is unplaced, its pod name is taken or its
// data directory is being removed (it is reported as blocked); a new pod
// from the template plan.templateFor says; the deletion of a pod that
// never finishes terminating (its node is lost), has terminated, or is not
// the member it claims to be (so it is recreated); or its labels put back.
func planMember(s *snapshot, ord int32, plan updatePlan) memberAction {
	f, pod := s.flock, s.pods[ord]
	m, ok := s.members[ord]
	switch {
	case !ok, pod == nil && s.nameTaken[ord]:
		return memberAction{kind: memberKeep, wait: true}
	case pod == nil:
		tmpl, revision := plan.templateFor(f, ord)
		return memberAction{kind: memberCreate, wait: true, template: tmpl, revision: revision}
	}
	force := mustForceDelete(pod, s.nodes)
	switch {
	case isTerminating(pod) && force:
		// A pod whose node is gone (or that is being moved off a lost
		// node) never finishes terminating by itself.
		return memberAction{kind: memberDelete, wait: true, why: "its node is lost", force: true}
	case isTerminating(pod):
		return memberAction{kind: memberKeep, wait: true}
	case isTerminal(pod):
		return memberAction{kind: memberDelete, wait: true, why: "recreate", force: force, warning: fmt.Sprintf(
			"pod %s of member %d is %s; deleting it to recreate it on node %s", pod.Name, ord, pod.Status.Phase, m.Node)}
	}
	if why := identityMismatch(f, m, pod); why != "" {
		return memberAction{kind: memberDelete, wait: true, why: "recreate", force: force, warning: why + "; deleting it to recreate it"}
	}
	wait := !isAvailable(pod, f.Spec.MinReadySeconds, s.now)
	if !labelsMatch(f, ord, pod) {
		return memberAction{kind: memberRelabel, wait: wait}
	}
	return memberAction{kind: memberKeep, wait: wait}
}

// memberOutcome is what syncMember did for one member.
type memberOutcome struct {
	// wait: an OrderedReady Flock must not go past this member yet.
	wait bool
	// changed: its pod was created or deleted.
	changed bool
	// blocked says why its data is not ready (nil: it is, or it was not
	// looked at).
	blocked *blockage
	err     error
}

// record adds the outcome of member ord to the sync's changed and
// dataBlocked.
func (o memberOutcome) record(ord int32, changed map[int32]bool, dataBlocked map[int32]blockage) {
	if o.changed {
		changed[ord] = true
	}
	if o.blocked != nil {
		dataBlocked[ord] = *o.blocked
	}
}

// syncMembersInParallel runs syncMember for each of ords, at most
// Options.MemberParallelism at a time, and returns their outcomes in the
// order of ords. Without it a sync makes every member's volume, claim,
// helper and pod one after another: with a few workers, the round trips of
// the first Flocks' members hold up everything else (the StatefulSet
// controller, too, creates a Parallel set's pods concurrently).
func (fc *defaultFlockControl) syncMembersInParallel(ctx context.Context, s *snapshot, ords []int32, plan updatePlan) []memberOutcome {
	out := make([]memberOutcome, len(ords))
	fc.eachMember(len(ords), func(i int) { out[i] = fc.syncMember(ctx, s, ords[i], plan) })
	return out
}

// eachMember runs do(i) for i from 0 to n-1, at most
// Options.MemberParallelism at a time (one after another when that is 1,
// or when there is at most one), and returns once all have.
func (fc *defaultFlockControl) eachMember(n int, do func(i int)) {
	if n <= 1 || fc.opts.MemberParallelism <= 1 {
		for i := range n {
			do(i)
		}
		return
	}
	sem := make(chan struct{}, fc.opts.MemberParallelism)
	var wg sync.WaitGroup
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			do(i)
		})
	}
	wg.Wait()
}

// syncMember writes what planMember decides for member ord. It reads s
// and writes nothing but the API, so that members of one Flock can be
// synced at the same time.
func (fc *defaultFlockControl) syncMember(ctx context.Context, s *snapshot, ord int32, plan updatePlan) memberOutcome {
	f, m, pod := s.flock, s.members[ord], s.pods[ord]
	a := planMember(s, ord, plan)
	switch a.kind {
	case memberCreate:
		name := PodName(f.Name, ord)
		key := cache.NewObjectName(f.Namespace, name).String()
		if _, ok := fc.podAwaited(ctx, f, ord, s.now); ok {
			// Created by an earlier sync; the cache is behind, and the
			// pod's event brings us back. Nothing is done for the member
			// meanwhile, its data included: the pod may use it.
			return memberOutcome{wait: true}
		}
		if _, err := fc.members.GetPod(f.Namespace, name); err == nil {
			// Delivered after this sync's snapshot was taken: the
			// informer's store has a pod before its handler tells the
			// control (which then no longer awaits it), so a pod not
			// awaited is in the cache by now if it exists. Its event
			// brings the next sync, which sees it.
			return memberOutcome{wait: true}
		}
		// The member's data first: its volume, claim and prepared
		// directory (why it is not ready is reported as blocked).
		data, err := fc.data.ensure(ctx, f, m, s.nodes[m.Node], s.now)
		if !data.ready {
			return memberOutcome{wait: true, blocked: data.blocked, err: err}
		}
		fc.created.expect(key, m.Node, s.now)
		err = fc.members.CreatePod(ctx, newMemberPodFromTemplate(f, a.template, m, a.revision))
		switch {
		case apierrors.IsAlreadyExists(err):
			// The cache is behind; the pod's event brings us back.
			return memberOutcome{wait: true, changed: true, err: data.runAfter(ctx, nil)}
		case err != nil:
			fc.created.forget(key)
			out := memberOutcome{wait: true, changed: true, err: data.runAfter(ctx, fmt.Errorf("creating pod %s/%s: %w", f.Namespace, name, err))}
			if failureToTell(ctx, err, f) {
				fc.event(f, corev1.EventTypeWarning, "FailedCreate", "create Pod %s for member %d on node %s failed: %v", name, ord, m.Node, err)
				out.blocked = refusal(ord, fmt.Sprintf("pod %s on node %s", name, m.Node), err)
			}
			return out
		}
		klog.FromContext(ctx).V(2).Info("Created member pod", "pod", klog.KRef(f.Namespace, name), "node", m.Node, "revision", a.revision)
		fc.event(f, corev1.EventTypeNormal, "SuccessfulCreate", "created Pod %s for member %d on node %s (revision %s)", name, ord, m.Node, a.revision)
		return memberOutcome{wait: a.wait, changed: true, err: data.runAfter(ctx, nil)}
	case memberDelete:
		if a.warning != "" {
			fc.event(f, corev1.EventTypeWarning, "RecreatingPod", "%s", a.warning)
		}
		return memberOutcome{wait: a.wait, changed: true, err: fc.deletePod(ctx, f, pod, a.why, a.force)}
	case memberRelabel:
		// A patch, not an update: the cached copy of a pod that was adopted
		// in this sync holds only what the controller reads (TrimPod).
		if err := fc.members.PatchPod(ctx, pod.Namespace, pod.Name, labelsPatch(memberLabels(f, ord), pod.UID)); err != nil {
			return memberOutcome{wait: true, err: fmt.Errorf("labelling pod %s/%s: %w", pod.Namespace, pod.Name, err)}
		}
	}
	return memberOutcome{wait: a.wait}
}

// refusal is why member ord is blocked when kube-apiserver refused the
// create of what it needs (what: "pod <name> on node <node>", "claim <name>")
// for good, with 403 Forbidden, 422 Invalid or 400 BadRequest, as quota,
// Pod Security, admission policies, webhooks and LimitRanges do: status
// says so until they let it be, as a ReplicaSet's ReplicaFailure condition
// does. It is nil for a failure that a retry may get past (unavailable,
// timeout, conflict).
func refusal(ord int32, what string, err error) *blockage {
	if !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err) && !apierrors.IsBadRequest(err) {
		return nil
	}
	return &blockage{ReasonFailedCreate, fmt.Sprintf("member %d cannot start: creating %s was refused: %v", ord, what, err)}
}
