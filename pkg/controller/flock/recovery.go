// File recovery.go: memberRecovery: members on lost nodes wait, or are reassigned to a
// free node after afterSeconds.

package flock

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"flock.dev/flock/pkg/apis/flock/v1alpha1"
	"flock.dev/flock/pkg/placement"
)

// memberMove is a member moving off a lost node.
type memberMove struct {
	from, to string
	// note is the member's status message from now on.
	note string
}

// recoveryPlan is the outcome of planRecovery.
type recoveryPlan struct {
	// moves are the members to reassign, by ordinal.
	moves map[int32]memberMove
	// losses say, for each member left on a lost node, since when and what
	// memberRecovery does about it.
	losses map[int32]nodeLoss
	// requeue, when positive, is when a member is due to be reassigned.
	requeue time.Duration
	// unconfirmed are the members due to be reassigned that wait because
	// their node is NotReady but not known to be down.
	unconfirmed []int32
}

// reassignUnconfirmedPrefix starts the note of a member due to be
// reassigned whose node is not known to be down.
const reassignUnconfirmedPrefix = "memberRecovery Reassign does not move it: "

// planRecovery applies spec.memberRecovery to the members (ordinals below
// replicas) whose node is lost.
//
// With Wait nothing moves. With Reassign, once the node has been NotReady
// or gone for afterSeconds, the member moves to an eligible, Ready node
// that no member of the Flock uses, chosen like a new member's
// (placement.Assign: least used across Flocks), but only when the old node
// is known to run nothing any more: its Node object is gone or carries the
// node.kubernetes.io/out-of-service taint. A node that is merely NotReady
// may be partitioned and still run the member's pod, so the member waits
// and says so (a new copy elsewhere would make two copies of one member).
// The new node is recorded in status first (recoverMembers); the old pod is
// then replaced by syncMember (force-deleted, as its node is down), and the
// new pod starts with a fresh data directory. Without a free node the member waits and says so. A
// member named by spec.placement.nodes is never moved. A node that comes
// back gets nothing back: the member's recorded node is the new one.
func planRecovery(s *snapshot) recoveryPlan {
	f, now := s.flock, s.now
	replicas := replicasOf(f)
	rec := f.Spec.MemberRecovery
	reassign := rec.Policy == v1alpha1.ReassignMemberRecovery && rec.AfterSeconds != nil
	var after time.Duration
	if reassign {
		after = time.Duration(*rec.AfterSeconds) * time.Second
	}

	plan := recoveryPlan{moves: map[int32]memberMove{}, losses: map[int32]nodeLoss{}}
	taken := map[string]bool{}
	existing := map[int32]string{}
	for _, m := range f.Status.Members {
		taken[m.Node] = true
		existing[m.Ordinal] = m.Node
	}
	// Nor to a node that a pod of the Flock still holds (a moved member's
	// old pod, terminating, or one created and not yet in the cache):
	// Relocate counts those as used under ordinals below zero.
	for _, node := range s.podNodes() {
		if !taken[node] {
			taken[node] = true
			existing[-1-int32(len(existing))] = node
		}
	}
	// Read only when a member moves: every sync plans recovery, and both
	// walk every node and every Flock.
	var candidates []*corev1.Node
	var usage map[string]int

	for _, m := range sortedMembers(s.members) {
		if m.Ordinal >= replicas {
			continue
		}
		since, lost := s.lostSince[m.Node]
		if !lost {
			continue
		}
		loss := nodeLoss{Since: since}
		deadline := since.Add(after)
		switch {
		case !reassign:
			loss.Note = "memberRecovery Wait keeps it on that node until the node is back"
		case int(m.Ordinal) < len(f.Spec.Placement.Nodes):
			loss.Note = fmt.Sprintf("it is not reassigned: spec.placement.nodes[%d] names that node", m.Ordinal)
		case now.Before(deadline):
			loss.Note = fmt.Sprintf("memberRecovery Reassign moves it to another node at %s", formatTime(deadline))
			if d := deadline.Sub(now); plan.requeue == 0 || d < plan.requeue {
				plan.requeue = d
			}
		case !nodeConfirmedDown(s.nodes[m.Node]):
			loss.Note = fmt.Sprintf("%snode %s is NotReady but not known to be down, so its pod may still run there; "+
				"once the node is down, delete its Node object or taint it %s:NoExecute and the member moves",
				reassignUnconfirmedPrefix, m.Node, corev1.TaintNodeOutOfService)
			plan.unconfirmed = append(plan.unconfirmed, m.Ordinal)
		default:
			if usage == nil {
				candidates, usage = s.readyNodes(), s.usage()
			}
			to, ok := placement.Relocate(candidates, placement.RequirementFromFlock(f), existing, m.Ordinal, usage)
			if !ok || taken[to] {
				loss.Note = "memberRecovery Reassign cannot move it yet: no other eligible Ready node is free of this Flock's members"
				break
			}
			state := "NotReady"
			if s.nodes[m.Node] == nil {
				state = "gone"
			}
			plan.moves[m.Ordinal] = memberMove{from: m.Node, to: to, note: fmt.Sprintf(
				"%s%s (%s since %s) to node %s at %s; its data directory there started empty",
				reassignNotePrefix, m.Node, state, formatTime(since), to, formatTime(now))}
			taken[to] = true
			existing[m.Ordinal] = to
			usage[to]++
			continue
		}
		plan.losses[m.Ordinal] = loss
	}
	return plan
}

// recoverMembers records the moves planRecovery decides in status, and
// returns the Flock as written and the plan.
func (fc *defaultFlockControl) recoverMembers(ctx context.Context, s *snapshot) (*v1alpha1.Flock, recoveryPlan, error) {
	logger := klog.FromContext(ctx)
	f := s.flock
	plan := planRecovery(s)
	for _, ord := range plan.unconfirmed {
		// Said once, when the member starts waiting; the status says it
		// all along (MembersBlocked and the member's message).
		if m := s.members[ord]; !strings.Contains(m.Message, reassignUnconfirmedPrefix) {
			fc.event(f, corev1.EventTypeWarning, "ReassignWaiting",
				"member %d is not reassigned: its node %s is NotReady but not known to be down, and its pod %s may still run there; delete the Node object or taint it %s once the node is down",
				ord, m.Node, PodName(f.Name, ord), corev1.TaintNodeOutOfService)
		}
	}
	moves := plan.moves
	if len(moves) == 0 {
		return f, plan, nil
	}
	var moved []int32
	updated, err := fc.status.UpdateStatus(ctx, f, func(st *v1alpha1.FlockStatus) {
		moved = moved[:0]
		used := map[string]bool{}
		for _, m := range st.Members {
			used[m.Node] = true
		}
		for i := range st.Members {
			m := &st.Members[i]
			mv, ok := moves[m.Ordinal]
			if !ok || m.Node != mv.from || used[mv.to] {
				continue // changed meanwhile: the next sync decides again
			}
			used[mv.to] = true
			m.Node = mv.to
			m.Ready = false
			m.Revision = ""
			m.Message = mv.note
			moved = append(moved, m.Ordinal)
		}
	})
	if err != nil {
		if failureToTell(ctx, err, f) {
			fc.event(f, corev1.EventTypeWarning, "FailedReassign", "recording the new nodes of members on lost nodes failed: %v", err)
		}
		return nil, recoveryPlan{}, fmt.Errorf("recording reassigned members: %w", err)
	}
	for _, ord := range moved {
		mv := moves[ord]
		logger.Info("Reassigned member to another node", "ordinal", ord, "from", mv.from, "to", mv.to)
		fc.event(f, corev1.EventTypeWarning, "MemberReassigned",
			"member %d (pod %s) moved from node %s to node %s (memberRecovery Reassign after %ds); it starts there with an empty data directory",
			ord, PodName(f.Name, ord), mv.from, mv.to, *f.Spec.MemberRecovery.AfterSeconds)
	}
	return updated, plan, nil
}
