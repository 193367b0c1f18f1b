// File member_placement.go: placement of new members: the node of every ordinal that has
// none, recorded in status before any pod is made for it.

package flock

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/klog/v2"

	"flock.dev/flock/pkg/apis/flock/v1alpha1"
	"flock.dev/flock/pkg/placement"
)

// placementPlan is the outcome of planPlacement.
type placementPlan struct {
	// add are the new members: ordinal -> node.
	add map[int32]string
	// unplaced are ordinals below replicas no node could be found for.
	unplaced []int32
}

// planPlacement decides the node of every ordinal below replicas that has
// none, and of every pod the Flock owns or could adopt that has no member.
// Recorded members are never changed. A pod that already sits on (or is
// pinned to) a free node keeps that node, so an adopted member finds its
// data; other ordinals are placed by placement.Assign, least-used nodes
// first, across all Flocks.
func planPlacement(s *snapshot) placementPlan {
	f, selector, pods, nodes := s.flock, s.selector, s.candidates, s.nodeList
	replicas := replicasOf(f)
	existing := make(map[int32]string, len(f.Status.Members))
	used := map[string]bool{}
	for _, m := range f.Status.Members {
		existing[m.Ordinal] = m.Node
		used[m.Node] = true
	}
	add := map[int32]string{}
	plan := placementPlan{add: add}

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
		if !isControlledBy(pod, f) && (metav1.GetControllerOfNoCopy(pod) != nil || !selector.Matches(labels.Set(pod.Labels)) ||
			!adoptionCandidate(s, pod)) {
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

	// A node that a pod of the Flock still holds (terminating, or one no
	// member records there, or one created and not yet in the cache) takes
	// no new member until that pod is gone, so that two pods of one Flock
	// never share a node. placement.Assign counts these nodes as used under
	// ordinals below zero, which it never assigns.
	held := map[int32]string{}
	for _, node := range s.podNodes() {
		if used[node] {
			continue
		}
		used[node] = true
		held[-1-int32(len(held))] = node
	}

	// Ordinals whose retained node-local volume is still there go back to
	// its node, so they find their data again; while that node exists but
	// cannot take them (cordoned, NotReady, tainted, used), they wait
	// unplaced rather than start elsewhere without their data.
	heldBack := map[int32]bool{}
	if !usesClaimTemplate(f) {
		req := placement.RequirementFromFlock(f)
		for ord := range replicas {
			if _, ok := existing[ord]; ok {
				continue
			}
			if _, ok := add[ord]; ok {
				continue
			}
			pv := s.volumes[ord]
			if pv == nil || volumeGoing(pv) {
				continue
			}
			for _, n := range nodes {
				if !volumeOnNode(pv, NodeHostname(n)) {
					continue
				}
				if int(ord) < len(f.Spec.Placement.Nodes) && f.Spec.Placement.Nodes[ord] != n.Name {
					break // the explicit map wins
				}
				if ok, _ := placement.IsEligible(n, req); !ok || used[n.Name] {
					heldBack[ord] = true
					break
				}
				add[ord] = n.Name
				used[n.Name] = true
				break
			}
		}
	}

	// New ordinals.
	all := maps.Clone(existing)
	maps.Copy(all, add)
	maps.Copy(all, held)
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
		req := placement.RequirementFromFlock(f)
		req.Replicas = top // so every recorded node, condemned members' too, counts as used
		assigned, unplaced := placement.Assign(nodes, req, all, s.usage())
		for ord, node := range assigned {
			if _, ok := all[ord]; ok || ord >= replicas || used[node] || heldBack[ord] {
				continue
			}
			add[ord] = node
			used[node] = true
		}
		plan.unplaced = unplaced
	}
	return plan
}

// placeMembers records the members planPlacement decides in status and
// returns the Flock as written.
func (fc *defaultFlockControl) placeMembers(ctx context.Context, s *snapshot) (*v1alpha1.Flock, error) {
	logger := klog.FromContext(ctx)
	f := s.flock
	plan := planPlacement(s)
	add := plan.add
	if len(plan.unplaced) > 0 {
		logger.V(2).Info("Members cannot be placed", "ordinals", plan.unplaced)
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
		if failureToTell(ctx, err, f) {
			fc.event(f, corev1.EventTypeWarning, "FailedPlacement", "recording the nodes of new members failed: %v", err)
		}
		return nil, fmt.Errorf("recording member nodes: %w", err)
	}
	for _, ord := range added {
		logger.V(2).Info("Placed member", "ordinal", ord, "node", add[ord])
	}
	if len(added) > 0 {
		fc.event(f, corev1.EventTypeNormal, "MemberPlaced", "%s", placedMessage(f.Name, added, add))
	}
	return updated, nil
}

// placedEventMembers is how many members a MemberPlaced event names.
const placedEventMembers = 10

// placedMessage says where the members in added (sorted ordinals) were
// placed: one event per placement, not one per member, as each event is a
// write to kube-apiserver. It names the first placedEventMembers members;
// status.members records every one.
func placedMessage(flock string, added []int32, nodes map[int32]string) string {
	var b strings.Builder
	for i, ord := range added {
		if i == placedEventMembers {
			fmt.Fprintf(&b, "; %d more (status.members lists every member)", len(added)-i)
			break
		}
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "member %d (pod %s) placed on node %s", ord, PodName(flock, ord), nodes[ord])
	}
	return b.String()
}

// recordMembers adds the members in add (ordinal -> node) to status, except
// those whose ordinal is already recorded or whose node already holds a
// member: recorded assignments always win. It returns the ordinals added.
func recordMembers(status *v1alpha1.FlockStatus, add map[int32]string, newMember func(ordinal int32, node string) v1alpha1.FlockMember) []int32 {
	have := map[int32]bool{}
	used := map[string]bool{}
	for _, m := range status.Members {
		have[m.Ordinal] = true
		used[m.Node] = true
	}
	ords := make([]int32, 0, len(add))
	for ord := range add {
		ords = append(ords, ord)
	}
	slices.Sort(ords)
	var added []int32
	for _, ord := range ords {
		node := add[ord]
		if have[ord] || used[node] {
			continue
		}
		status.Members = append(status.Members, newMember(ord, node))
		have[ord], used[node] = true, true
		added = append(added, ord)
	}
	slices.SortFunc(status.Members, func(a, b v1alpha1.FlockMember) int { return int(a.Ordinal) - int(b.Ordinal) })
	return added
}
