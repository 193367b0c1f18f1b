// File status.go: the Flock's status: member states, conditions and counters computed
// from what a sync observed, and merging them onto a newer status. Pure.

package flock

import (
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"flock.dev/flock/pkg/apis/flock/v1alpha1"
)

// MemberState classifies one member (ordinal < replicas) for status
// messages and the members-by-state metric. Every member has exactly one.
type MemberState string

// Member states.
const (
	// MemberReady: its pod is Running and Ready.
	MemberReady MemberState = "Ready"
	// MemberNotReady: its pod exists and is not (yet) Running and Ready.
	MemberNotReady MemberState = "NotReady"
	// MemberMissing: it has a node and no pod yet.
	MemberMissing MemberState = "Missing"
	// MemberBlocked: it cannot run, e.g. its node is gone, cordoned or
	// NotReady, or its pod name is taken by a pod the Flock does not own.
	MemberBlocked MemberState = "Blocked"
	// MemberUnplaced: no node could be assigned to it.
	MemberUnplaced MemberState = "Unplaced"
)

// AllMemberStates lists the member states in a fixed order.
var AllMemberStates = []MemberState{MemberReady, MemberNotReady, MemberMissing, MemberBlocked, MemberUnplaced}

// Reasons of conditions and of blocked members.
const (
	ReasonMembersAvailable   = "MembersAvailable"
	ReasonMembersUnavailable = "MembersUnavailable"
	ReasonCreatingMembers    = "CreatingMembers"
	ReasonScalingDown        = "ScalingDown"
	ReasonComplete           = "Complete"
	ReasonNoneBlocked        = "NoneBlocked"
	ReasonNodeGone           = "NodeGone"
	ReasonNodeCordoned       = "NodeCordoned"
	ReasonNodeNotReady       = "NodeNotReady"
	ReasonNodeTainted        = "NodeTainted"
	ReasonUnschedulable      = "Unschedulable"
	ReasonPodNameTaken       = "PodNameTaken"
	ReasonFailedCreate       = "FailedCreate"
	ReasonUnplaceable        = "Unplaceable"
	ReasonServiceReady       = "ServiceReady"
	ReasonServiceNotOwned    = "ServiceNotOwned"
	ReasonServiceNotHeadless = "ServiceNotHeadless"
	ReasonServiceMissing     = "ServiceMissing"
	ReasonServiceNotNeeded   = "NoMembers"
	ReasonDataCleanup        = "DataCleanup"
	ReasonRollingUpdate      = "RollingUpdate"
	ReasonRolloutHalted      = "RolloutHalted"
)

// ReasonDataNodeUnavailable is the reason of a member with retained data
// that waits for the node that holds it.
const ReasonDataNodeUnavailable = "DataNodeUnavailable"

// statusInput is everything computeStatus needs; it is gathered by the
// reconcile logic from the caches at the start of a sync.
type statusInput struct {
	Flock *v1alpha1.Flock
	// Members are the recorded members, by ordinal.
	Members map[int32]v1alpha1.FlockMember
	// Pods are the Flock's own pods, by ordinal.
	Pods map[int32]*corev1.Pod
	// Blocked says why members cannot run, by ordinal.
	Blocked map[int32]blockage
	// Remove are members (ordinal -> node) to drop from status: scaled
	// down, and their pods are gone.
	Remove map[int32]string
	// Cleanup are the status messages of members whose data directory is
	// being removed (retention Delete), by ordinal.
	Cleanup map[int32]string
	// Losses are the members on lost nodes, by ordinal (their
	// NodeLostSince).
	Losses map[int32]nodeLoss
	// UpdateRevision is the revision of the current template.
	UpdateRevision string
	// HaltAfter is Options.RolloutHaltAfter (see haltedPod).
	HaltAfter time.Duration
	// ClusterDomain is for the members' FQDNs.
	ClusterDomain string
	// ServiceCondition is the ServiceReady condition.
	ServiceCondition metav1.Condition
	Now              time.Time
}

// computeStatus returns the status of a Flock from what the controller
// observed, and the number of members (ordinals < replicas) in each state.
// It starts from in.Flock's status so that condition transition times are
// kept when a condition does not change.
func computeStatus(in statusInput) (v1alpha1.FlockStatus, map[MemberState]int) {
	f := in.Flock
	replicas := replicasOf(f)
	minReady := f.Spec.MinReadySeconds
	status := *f.Status.DeepCopy()
	status.ObservedGeneration = f.Generation
	status.UpdateRevision = in.UpdateRevision
	if sel, err := metav1.LabelSelectorAsSelector(f.Spec.Selector); err == nil {
		status.Selector = sel.String()
	}

	// Counters over every pod of the Flock, condemned ones included. A pod
	// off its member's node is not counted Ready.
	status.Replicas, status.ReadyReplicas, status.AvailableReplicas = 0, 0, 0
	for ord, pod := range in.Pods {
		status.Replicas++
		if isRunningAndReady(pod) && !offMemberNode(pod, in.Members, ord) {
			status.ReadyReplicas++
			if isAvailable(pod, minReady, in.Now) {
				status.AvailableReplicas++
			}
		}
	}

	// Revisions: the current revision becomes the update revision once
	// every member's pod is at it and no condemned pod is left.
	if status.CurrentRevision == "" {
		status.CurrentRevision = in.UpdateRevision
	}
	allUpdated := true
	for ord := range replicas {
		if pod := in.Pods[ord]; pod == nil || podRevision(pod) != in.UpdateRevision {
			allUpdated = false
		}
	}
	condemned := 0
	for ord := range in.Pods {
		if ord >= replicas {
			condemned++
		}
	}
	if allUpdated && condemned == 0 {
		status.CurrentRevision = in.UpdateRevision
	}
	status.CurrentReplicas, status.UpdatedReplicas = 0, 0
	for _, pod := range in.Pods {
		rev := podRevision(pod)
		if rev == status.CurrentRevision {
			status.CurrentReplicas++
		}
		if rev == in.UpdateRevision {
			status.UpdatedReplicas++
		}
	}

	// Members: every recorded member not being removed, in ordinal order.
	states := make(map[MemberState]int, len(AllMemberStates))
	for _, s := range AllMemberStates {
		states[s] = 0
	}
	status.Members = status.Members[:0:0]
	for _, m := range sortedMembers(in.Members) {
		if node, ok := in.Remove[m.Ordinal]; ok && node == m.Node {
			continue
		}
		pod := in.Pods[m.Ordinal]
		m.Pod = PodName(f.Name, m.Ordinal)
		m.Hostname = MemberHostname(m.Pod, serviceNameOf(f), f.Namespace, in.ClusterDomain)
		m.Ready = pod != nil && isRunningAndReady(pod) && !offMemberNode(pod, in.Members, m.Ordinal)
		m.Revision = ""
		if pod != nil {
			m.Revision = podRevision(pod)
		}
		state, msg := memberState(m, pod, in.Blocked, replicas)
		if c, ok := in.Cleanup[m.Ordinal]; ok {
			state, msg = MemberNotReady, c
		}
		// A reassigned member keeps the note that says so.
		if note := reassignNote(m.Message); note != "" && !strings.Contains(msg, note) {
			if msg == "" {
				msg = note
			} else {
				msg += "; " + note
			}
		}
		m.Message = msg
		m.NodeLostSince = nil
		if loss, ok := in.Losses[m.Ordinal]; ok {
			m.NodeLostSince = &metav1.Time{Time: loss.Since}
		}
		if m.Ordinal < replicas {
			states[state]++
		}
		status.Members = append(status.Members, m)
	}
	var blocked []int32
	for ord := range in.Blocked {
		if ord < replicas {
			blocked = append(blocked, ord)
		}
	}
	slices.Sort(blocked)
	for _, ord := range blocked {
		if _, ok := in.Members[ord]; !ok {
			states[MemberUnplaced]++
		}
	}

	// Conditions.
	gen := f.Generation
	now := metav1.NewTime(in.Now)
	// A member whose pod still says Ready on a gone or NotReady node is
	// blocked, and not available; so is one whose pod is still the old one
	// on the node it was reassigned from.
	available := int32(0)
	for ord := range replicas {
		if _, blocked := in.Blocked[ord]; !blocked && in.Pods[ord] != nil && isAvailable(in.Pods[ord], minReady, in.Now) &&
			!offMemberNode(in.Pods[ord], in.Members, ord) {
			available++
		}
	}
	summary := fmt.Sprintf("%d of %d members available", available, replicas)
	if available >= replicas {
		setCondition(&status, v1alpha1.FlockAvailable, metav1.ConditionTrue, ReasonMembersAvailable, summary, gen, now)
	} else {
		setCondition(&status, v1alpha1.FlockAvailable, metav1.ConditionFalse, ReasonMembersUnavailable, summary, gen, now)
	}
	rollout := rolloutSummary(f, in.Pods, in.UpdateRevision, status.CurrentRevision, minReady, in.Now)
	halted, why, _ := haltedPod(f, in.Pods, in.UpdateRevision, status.CurrentRevision, in.HaltAfter, in.Now)
	switch {
	case halted != nil:
		setCondition(&status, v1alpha1.FlockProgressing, metav1.ConditionFalse, ReasonRolloutHalted, fmt.Sprintf(
			"rolling update to revision %s halted at pod %s on node %s: %s; fix the template and the rollout resumes (the pod is replaced without being deleted by hand)",
			in.UpdateRevision, halted.Name, PinnedNode(halted), why), gen, now)
	case condemned > 0 || len(in.Remove) > 0 || hasMembersAbove(in.Members, replicas):
		setCondition(&status, v1alpha1.FlockProgressing, metav1.ConditionTrue, ReasonScalingDown,
			fmt.Sprintf("scaling down to %d members; %s", replicas, summary), gen, now)
	case rollout.active:
		setCondition(&status, v1alpha1.FlockProgressing, metav1.ConditionTrue, ReasonRollingUpdate, rollout.message+"; "+summary, gen, now)
	case available < replicas:
		setCondition(&status, v1alpha1.FlockProgressing, metav1.ConditionTrue, ReasonCreatingMembers, summary, gen, now)
	default:
		msg := summary
		if rollout.message != "" {
			msg += "; " + rollout.message
		}
		setCondition(&status, v1alpha1.FlockProgressing, metav1.ConditionFalse, ReasonComplete, msg, gen, now)
	}
	if len(blocked) > 0 {
		setCondition(&status, v1alpha1.FlockMembersBlocked, metav1.ConditionTrue, in.Blocked[blocked[0]].Reason,
			blockedMessage(in.Blocked, blocked), gen, now)
	} else {
		setCondition(&status, v1alpha1.FlockMembersBlocked, metav1.ConditionFalse, ReasonNoneBlocked, "no member is blocked", gen, now)
	}
	if in.ServiceCondition.Type != "" {
		c := in.ServiceCondition
		setCondition(&status, c.Type, c.Status, c.Reason, c.Message, gen, now)
	}
	return status, states
}

// offMemberNode reports whether pod, of ordinal ord, is bound or pinned to
// another node than its member's: the old pod of a member reassigned off a
// lost node, not gone yet. It is not the member, whatever it says.
func offMemberNode(pod *corev1.Pod, members map[int32]v1alpha1.FlockMember, ord int32) bool {
	m, ok := members[ord]
	node := PinnedNode(pod)
	return ok && node != "" && node != m.Node
}

// memberState returns the state of a member and its status message.
func memberState(m v1alpha1.FlockMember, pod *corev1.Pod, blocked map[int32]blockage, replicas int32) (MemberState, string) {
	if b, ok := blocked[m.Ordinal]; ok {
		return MemberBlocked, b.Message
	}
	switch {
	case m.Ordinal >= replicas && pod != nil:
		return MemberNotReady, "being removed by a scale down"
	case pod == nil:
		return MemberMissing, "pod not created yet"
	case PinnedNode(pod) != "" && PinnedNode(pod) != m.Node:
		return MemberNotReady, fmt.Sprintf("pod %s on node %s is being replaced by one on node %s", pod.Name, PinnedNode(pod), m.Node)
	case isTerminating(pod):
		return MemberNotReady, "pod is terminating"
	case isRunningAndReady(pod):
		return MemberReady, ""
	case pod.Spec.NodeName == "":
		return MemberNotReady, "pod is waiting to be scheduled"
	default:
		return MemberNotReady, fmt.Sprintf("pod is %s and not Ready", pod.Status.Phase)
	}
}

func hasMembersAbove(members map[int32]v1alpha1.FlockMember, replicas int32) bool {
	for ord := range members {
		if ord >= replicas {
			return true
		}
	}
	return false
}

// mergeStatus writes desired onto current, a status that may be newer than
// the one desired was computed from (after a conflict). Counters,
// revisions, selector and conditions are taken from desired. Members are
// durable, so they are merged: a member of current is updated from desired
// only when desired has the same ordinal on the same node, dropped only
// when remove names it on that node, and otherwise left as it is; a member
// desired has and current lacks is not added back (recording new members
// is recordMembers' job).
func mergeStatus(current *v1alpha1.FlockStatus, desired v1alpha1.FlockStatus, remove map[int32]string) {
	members := current.Members
	conditions := current.Conditions
	*current = *desired.DeepCopy()
	current.Conditions = conditions
	for _, c := range desired.Conditions {
		meta.SetStatusCondition(&current.Conditions, c)
	}

	want := make(map[int32]v1alpha1.FlockMember, len(desired.Members))
	for _, m := range desired.Members {
		want[m.Ordinal] = m
	}
	current.Members = nil
	for _, m := range members {
		if node, ok := remove[m.Ordinal]; ok && node == m.Node {
			continue
		}
		if d, ok := want[m.Ordinal]; ok && d.Node == m.Node {
			// A planned move is the move subresource's to set and
			// moveMembers' to clear: one accepted after this sync read
			// the Flock is kept.
			d.Move = m.Move
			m = d
		}
		current.Members = append(current.Members, m)
	}
	slices.SortFunc(current.Members, func(a, b v1alpha1.FlockMember) int { return int(a.Ordinal) - int(b.Ordinal) })
}
