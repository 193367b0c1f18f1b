// File member_follow.go: members that follow their volume (claim template): their
// recorded node follows where the scheduler put their pod.

package flock

import (
	"context"
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"flock.dev/flock/pkg/apis/flock/v1alpha1"
)

// followMove is a recorded member node that changes to where the member is.
type followMove struct {
	from, to string
	// scheduled: the member's pod runs on to. Otherwise the member's pod
	// is not scheduled yet and another member's pod took its recorded
	// node: it is recorded on a node freed by the moves instead.
	scheduled bool
}

// planFollow decides, for the members of a Flock that follow their volume
// (followsVolume), the recorded nodes that change: a member whose pod is
// scheduled is recorded on the pod's node (spec.nodeName). A member whose
// pod is not scheduled keeps its recorded node unless a pod of another
// member now runs there; it then takes a node the moves freed (lowest
// name first), so that no two members are ever recorded on one node.
// Members pinned to their node (the others) never move here. When the
// recorded nodes cannot be made distinct (two pods on one node, which
// anti-affinity forbids), nothing moves.
func planFollow(s *snapshot) map[int32]followMove {
	f := s.flock
	if !usesClaimTemplate(f) {
		return nil
	}
	members := sortedMembers(s.members)
	final := make(map[int32]string, len(members))
	holder := map[string]int32{}
	take := func(ord int32, node string) bool {
		if _, taken := holder[node]; taken {
			return false
		}
		holder[node], final[ord] = ord, node
		return true
	}
	// Pinned members keep their node; scheduled followers take their pod's.
	for _, m := range members {
		if !followsVolume(f, m.Ordinal) && !take(m.Ordinal, m.Node) {
			return nil
		}
	}
	for _, m := range members {
		if pod := s.pods[m.Ordinal]; followsVolume(f, m.Ordinal) && pod != nil && pod.Spec.NodeName != "" {
			take(m.Ordinal, pod.Spec.NodeName)
		}
	}
	// The others keep their node while it is free, or take a freed one.
	var displaced []int32
	for _, m := range members {
		if _, done := final[m.Ordinal]; !done && !take(m.Ordinal, m.Node) {
			displaced = append(displaced, m.Ordinal)
		}
	}
	var freed []string
	for _, m := range members {
		if _, taken := holder[m.Node]; !taken {
			freed = append(freed, m.Node)
		}
	}
	slices.Sort(freed)
	if len(freed) < len(displaced) {
		return nil
	}
	for i, ord := range displaced {
		take(ord, freed[i])
	}

	moves := map[int32]followMove{}
	for _, m := range members {
		if to := final[m.Ordinal]; to != m.Node {
			pod := s.pods[m.Ordinal]
			moves[m.Ordinal] = followMove{from: m.Node, to: to, scheduled: pod != nil && pod.Spec.NodeName == to}
		}
	}
	return moves
}

// followMembers records the moves planFollow decides in status, all or
// none (status changed meanwhile: the next sync decides again), and
// returns the Flock as written.
func (fc *defaultFlockControl) followMembers(ctx context.Context, s *snapshot) (*v1alpha1.Flock, error) {
	f := s.flock
	moves := planFollow(s)
	if len(moves) == 0 {
		return f, nil
	}
	applied := false
	updated, err := fc.status.UpdateStatus(ctx, f, func(st *v1alpha1.FlockStatus) {
		applied = false
		next := slices.Clone(st.Members)
		seen := map[string]bool{}
		found := 0
		for i := range next {
			if mv, ok := moves[next[i].Ordinal]; ok {
				if next[i].Node != mv.from {
					return
				}
				next[i].Node = mv.to
				found++
			}
			if seen[next[i].Node] {
				return
			}
			seen[next[i].Node] = true
		}
		if found != len(moves) {
			return
		}
		st.Members = next
		applied = true
	})
	if err != nil {
		if failureToTell(ctx, err, f) {
			fc.event(f, corev1.EventTypeWarning, "FailedFollow", "recording the nodes members' pods run on failed: %v", err)
		}
		return nil, fmt.Errorf("recording followed member nodes: %w", err)
	}
	if !applied {
		return updated, nil
	}
	logger := klog.FromContext(ctx)
	for _, ord := range slices.Sorted(maps.Keys(moves)) {
		mv := moves[ord]
		logger.V(2).Info("Member follows its pod", "ordinal", ord, "from", mv.from, "to", mv.to, "scheduled", mv.scheduled)
		if mv.scheduled {
			fc.event(f, corev1.EventTypeNormal, "MemberFollowed", "member %d (pod %s) runs on node %s, where its volume is used (was recorded on node %s)",
				ord, PodName(f.Name, ord), mv.to, mv.from)
		}
	}
	return updated, nil
}
