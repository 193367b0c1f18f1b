// File move.go: planned member moves (the flocks/move subresource records
// them in status.members[].move): when each is carried out, waits or is
// canceled (planMoves, a pure decision), and recording the outcome
// (moveMembers).

package flock

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"flock.dev/flock/pkg/apis/flock/v1alpha1"
	"flock.dev/flock/pkg/placement"
)

// movePlan is the outcome of planMoves.
type movePlan struct {
	// moves are the planned moves to carry out now, by ordinal.
	moves map[int32]memberMove
	// canceled are the planned moves that can no longer be made: ordinal
	// -> why.
	canceled map[int32]string
	// waiting are the planned moves that wait: ordinal -> why.
	waiting map[int32]string
}

// planMoves decides what happens to the planned moves recorded in
// status.members[].move. A move is canceled when it can no longer be made:
// the member is being scaled away, is pinned by spec.placement.nodes or has
// a claim template, or the target is gone, not eligible any more (the
// placement rule of admission), or holds another member. It waits while
// the target is not Ready, and, unless forced, while any other member
// below replicas is not available (its pod missing, not Ready, or not
// Ready for minReadySeconds), as a rolling update with maxUnavailable 1
// would: so a move never takes a second member of a quorum down, and
// unforced moves go one at a time. Otherwise it is carried out: the
// target becomes the member's node. Nothing moves while the Flock is being
// deleted.
func planMoves(s *snapshot) movePlan {
	f := s.flock
	plan := movePlan{moves: map[int32]memberMove{}, canceled: map[int32]string{}, waiting: map[int32]string{}}
	if s.deleting() {
		return plan
	}
	replicas := replicasOf(f)
	req := placement.RequirementFromFlock(f)
	holder := map[string]int32{}
	for _, m := range s.members {
		holder[m.Node] = m.Ordinal
	}
	// unavailable are the members below replicas that are not available;
	// a member moved in this sync counts as unavailable from then on.
	var unavailable []int32
	for ord := range replicas {
		if pod := s.pods[ord]; pod == nil || isTerminating(pod) || !isAvailable(pod, f.Spec.MinReadySeconds, s.now) {
			unavailable = append(unavailable, ord)
		}
	}
	for _, m := range sortedMembers(s.members) {
		mv := m.Move
		if mv == nil {
			continue
		}
		ord, to := m.Ordinal, mv.Node
		node := s.nodes[to]
		if why := moveCanceled(f, m, node, req, holder, replicas); why != "" {
			plan.canceled[ord] = why
			continue
		}
		if !placement.IsReady(node) {
			plan.waiting[ord] = fmt.Sprintf("node %s is not Ready", to)
			continue
		}
		if !mv.Force {
			if other, ok := firstOther(unavailable, ord); ok {
				plan.waiting[ord] = fmt.Sprintf("member %d is unavailable (use force to move anyway)", other)
				continue
			}
		}
		plan.moves[ord] = memberMove{from: m.Node, to: to, note: fmt.Sprintf(
			"%s%s to node %s at %s (planned move); its data directory there started empty", movedNotePrefix, m.Node, to, formatTime(s.now))}
		delete(holder, m.Node)
		holder[to] = ord
		unavailable = append(unavailable, ord)
	}
	return plan
}

// moveCanceled says why member m's planned move can no longer be made, ""
// when it can: node is its target (nil when gone), req the Flock's
// placement requirement, holder the ordinal on each used node.
func moveCanceled(f *v1alpha1.Flock, m v1alpha1.FlockMember, node *corev1.Node, req placement.Requirement, holder map[string]int32, replicas int32) string {
	to := m.Move.Node
	switch {
	case m.Ordinal >= replicas:
		return fmt.Sprintf("member %d is removed by a scale down (spec.replicas is %d)", m.Ordinal, replicas)
	case int(m.Ordinal) < len(f.Spec.Placement.Nodes):
		return fmt.Sprintf("spec.placement.nodes[%d] pins the member to node %s", m.Ordinal, f.Spec.Placement.Nodes[m.Ordinal])
	case usesClaimTemplate(f):
		return "the member has a claim template: it follows its volume"
	case to == m.Node:
		return fmt.Sprintf("the member is already on node %s", to)
	case node == nil:
		return fmt.Sprintf("node %s is gone", to)
	}
	if eligible, ex := placement.IsEligible(node, req); !eligible {
		return fmt.Sprintf("node %s is not eligible any more: %s", to, ex.Detail)
	}
	if other, ok := holder[to]; ok && other != m.Ordinal {
		return fmt.Sprintf("node %s holds member %d", to, other)
	}
	return ""
}

// sameMove reports whether a and b are the same planned move (nil is none,
// and never the same).
func sameMove(a, b *v1alpha1.FlockMemberMove) bool {
	return a != nil && b != nil && a.Node == b.Node && a.Force == b.Force && a.RequestedAt.Equal(&b.RequestedAt)
}

// firstOther returns the first of ords that is not ord.
func firstOther(ords []int32, ord int32) (int32, bool) {
	for _, o := range ords {
		if o != ord {
			return o, true
		}
	}
	return 0, false
}

// movedNotePrefix starts the note a member moved on purpose keeps in its
// status message (as reassignNotePrefix does for a reassigned one).
const movedNotePrefix = "moved from node "

// moveMembers carries out what planMoves decides: in one status write, a
// moving member's node becomes its target (its pod, pinned to the old
// node, is then deleted gracefully by syncMembers, and its data is made
// fresh on the new node before its new pod starts), and canceled moves are
// cleared. Events: MemberMoved (from where to where), MoveCanceled, and
// MoveWaiting. It returns the Flock as written, and when to sync again for
// a move that waits.
func (fc *defaultFlockControl) moveMembers(ctx context.Context, s *snapshot) (*v1alpha1.Flock, time.Duration, error) {
	logger := klog.FromContext(ctx)
	f := s.flock
	plan := planMoves(s)
	for ord, why := range plan.waiting {
		logger.V(2).Info("Planned member move waits", "ordinal", ord, "to", s.members[ord].Move.Node, "reason", why)
		fc.event(f, corev1.EventTypeNormal, "MoveWaiting", "member %d waits to move from node %s to node %s: %s",
			ord, s.members[ord].Node, s.members[ord].Move.Node, why)
	}
	var requeue time.Duration
	if len(plan.waiting) > 0 {
		requeue = moveRequeue
	}
	if len(plan.moves) == 0 && len(plan.canceled) == 0 {
		return f, requeue, nil
	}
	var moved, canceled []int32
	updated, err := fc.status.UpdateStatus(ctx, f, func(st *v1alpha1.FlockStatus) {
		moved, canceled = moved[:0], canceled[:0]
		for i := range st.Members {
			m := &st.Members[i]
			want := s.members[m.Ordinal].Move
			if !sameMove(m.Move, want) {
				continue // asked again or changed meanwhile: the next sync decides
			}
			if _, ok := plan.canceled[m.Ordinal]; ok {
				m.Move = nil
				canceled = append(canceled, m.Ordinal)
				continue
			}
			mv, ok := plan.moves[m.Ordinal]
			if !ok || m.Node != mv.from {
				continue
			}
			m.Node, m.Move = mv.to, nil
			m.Ready, m.Revision, m.Message, m.NodeLostSince = false, "", mv.note, nil
			moved = append(moved, m.Ordinal)
		}
	})
	if err != nil {
		if failureToTell(ctx, err, f) {
			fc.event(f, corev1.EventTypeWarning, "FailedMove", "recording planned member moves failed: %v", err)
		}
		return nil, 0, fmt.Errorf("recording planned member moves: %w", err)
	}
	for _, ord := range canceled {
		logger.Info("Canceled planned member move", "ordinal", ord, "reason", plan.canceled[ord])
		fc.event(f, corev1.EventTypeWarning, "MoveCanceled", "the move of member %d to node %s is canceled: %s",
			ord, s.members[ord].Move.Node, plan.canceled[ord])
	}
	retention := "kept there (spec.storage.retention.whenScaled Retain)"
	if f.Spec.Storage.Retention.WhenScaled == v1alpha1.DeleteRetentionPolicy {
		retention = "removed (spec.storage.retention.whenScaled Delete)"
	}
	for _, ord := range moved {
		mv := plan.moves[ord]
		logger.Info("Moved member to another node", "ordinal", ord, "from", mv.from, "to", mv.to, "force", s.members[ord].Move.Force)
		fc.event(f, corev1.EventTypeNormal, "MemberMoved",
			"member %d (pod %s) moved from node %s to node %s (planned move): its pod there starts with a fresh data directory; the old one on node %s is %s",
			ord, PodName(f.Name, ord), mv.from, mv.to, mv.from, retention)
	}
	return updated, requeue, nil
}

// moveRequeue is how soon a Flock with a waiting planned move is synced
// again, besides the pod and node events that usually bring it first.
const moveRequeue = 5 * time.Second
