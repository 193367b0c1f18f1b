// File blockage.go: why a member cannot run (unplaced, node gone, NotReady, cordoned,
// tainted, unschedulable, pod name taken, waiting for a data cleanup).

package flock

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"flock.dev/flock/pkg/apis/flock/v1alpha1"
	"flock.dev/flock/pkg/placement"
)

// blockage says why a member cannot run.
type blockage struct {
	Reason  string
	Message string
}

// memberBlockage says why member m, whose pod is pod (nil: none), cannot
// run on its node (nil: the node object is gone), or returns nil. A member
// on a gone or NotReady node is blocked even if its pod still reports Ready
// (nothing on such a node can update it). Otherwise a member whose pod is
// Ready is never blocked: a cordon or a taint does not stop a running pod.
// tolerations are the template's.
func memberBlockage(m v1alpha1.FlockMember, pod *corev1.Pod, node *corev1.Node, tolerations []corev1.Toleration) *blockage {
	waits := fmt.Sprintf("member %d waits for node %s", m.Ordinal, m.Node)
	if node == nil {
		return &blockage{ReasonNodeGone, waits + ", which is gone"}
	}
	if !placement.IsReady(node) {
		return &blockage{ReasonNodeNotReady, waits + ", which is NotReady"}
	}
	if pod != nil && isRunningAndReady(pod) {
		return nil
	}
	scheduled := pod != nil && pod.Spec.NodeName != ""
	if !scheduled {
		if node.Spec.Unschedulable {
			return &blockage{ReasonNodeCordoned, waits + ", which is cordoned"}
		}
		if ok, ex := placement.IsEligible(node, placement.Requirement{Tolerations: tolerations}); !ok && ex.Reason == placement.ReasonTaint {
			msg := waits + ", which has a taint the template does not tolerate"
			if ex.Detail != "" {
				msg = waits + ", which " + ex.Detail
			}
			return &blockage{ReasonNodeTainted, msg}
		}
	}
	if pod != nil && !scheduled {
		return unschedulable(m.Ordinal, pod, " on node "+m.Node)
	}
	return nil
}

// followerBlockage is memberBlockage for member m that follows its volume
// (followsVolume) and whose pod (nil: none) is not scheduled yet: its
// recorded node does not hold it back, only what the scheduler says.
func followerBlockage(m v1alpha1.FlockMember, pod *corev1.Pod) *blockage {
	if pod == nil {
		return nil
	}
	return unschedulable(m.Ordinal, pod, "")
}

// unschedulable says that member ord cannot be scheduled (where, e.g. " on
// node n", says where) with the scheduler's message, when pod's
// PodScheduled condition says so; else nil.
func unschedulable(ord int32, pod *corev1.Pod, where string) *blockage {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return &blockage{ReasonUnschedulable, fmt.Sprintf("member %d cannot be scheduled%s: %s", ord, where, c.Message)}
		}
	}
	return nil
}

// unplacedBlockage says why ordinal could not be given a node. nodes are
// the cluster's nodes by name, members the recorded members by ordinal.
func unplacedBlockage(f *v1alpha1.Flock, ordinal int32, nodes map[string]*corev1.Node, members map[int32]v1alpha1.FlockMember) blockage {
	if int(ordinal) < len(f.Spec.Placement.Nodes) {
		name := f.Spec.Placement.Nodes[ordinal]
		prefix := fmt.Sprintf("member %d cannot be placed on node %s (spec.placement.nodes[%d])", ordinal, name, ordinal)
		for _, m := range sortedMembers(members) {
			if m.Node == name {
				return blockage{ReasonUnplaceable, fmt.Sprintf("%s: the node holds member %d", prefix, m.Ordinal)}
			}
		}
		node, ok := nodes[name]
		if !ok {
			return blockage{ReasonUnplaceable, prefix + ": no such node"}
		}
		if ok, ex := placement.IsEligible(node, placement.RequirementFromFlock(f)); !ok {
			return blockage{ReasonUnplaceable, fmt.Sprintf("%s: the node is not eligible (%s)", prefix, exclusionDetail(ex))}
		}
		return blockage{ReasonUnplaceable, prefix}
	}
	return blockage{ReasonUnplaceable, fmt.Sprintf("member %d cannot be placed: no eligible node is free of this Flock's members", ordinal)}
}

// dataNodeBlockage says why ordinal, which has no member, waits for the
// node that holds its retained node-local volume (planPlacement holds it
// back rather than start it elsewhere without its data), or nil when it
// does not wait for one.
func dataNodeBlockage(s *snapshot, ordinal int32) *blockage {
	f := s.flock
	pv := s.volumes[ordinal]
	if usesClaimTemplate(f) || pv == nil || volumeGoing(pv) {
		return nil
	}
	_, name := volumeOrdinalNode(f, pv, s.nodes)
	node := s.nodes[name]
	if node == nil || (int(ordinal) < len(f.Spec.Placement.Nodes) && f.Spec.Placement.Nodes[ordinal] != node.Name) {
		return nil // planPlacement does not hold it back
	}
	prefix := fmt.Sprintf("member %d waits for node %s, which holds its retained data (PersistentVolume %s)", ordinal, node.Name, pv.Name)
	for _, m := range sortedMembers(s.members) {
		if m.Node == node.Name {
			return &blockage{ReasonDataNodeUnavailable, fmt.Sprintf(
				"%s: member %d is there; move member %d to another node (kubectl flock move %s %d), or delete the PersistentVolume to let member %d start on another node without its data",
				prefix, m.Ordinal, m.Ordinal, f.Name, m.Ordinal, ordinal)}
		}
	}
	if ok, ex := placement.IsEligible(node, placement.RequirementFromFlock(f)); !ok {
		return &blockage{ReasonDataNodeUnavailable, fmt.Sprintf("%s: the node is not eligible (%s)", prefix, exclusionDetail(ex))}
	}
	return &blockage{ReasonDataNodeUnavailable, prefix + ": a pod of this Flock is still on the node"}
}

// blockedMembers says, for every ordinal below replicas, why it cannot
// run, if it cannot: no node could be placed for it, its node is gone,
// NotReady (with since when, and what memberRecovery does about it, from
// losses), cordoned or tainted, its pod is unschedulable, its pod name is
// taken by a pod the Flock does not control. A member that follows its
// volume is held back by its recorded node only once its pod runs there.
// (Why a member's data is not ready comes from syncMembers.)
func blockedMembers(s *snapshot, losses map[int32]nodeLoss) map[int32]blockage {
	f, members, pods, nodes := s.flock, s.members, s.pods, s.nodes
	blocked := map[int32]blockage{}
	for ord := range replicasOf(f) {
		m, ok := members[ord]
		if !ok {
			if f.DeletionTimestamp == nil {
				if b := dataNodeBlockage(s, ord); b != nil {
					blocked[ord] = *b
				} else {
					blocked[ord] = unplacedBlockage(f, ord, nodes, members)
				}
			}
			continue
		}
		pod := pods[ord]
		if pod == nil {
			name := PodName(f.Name, ord)
			if s.nameTaken[ord] {
				msg := fmt.Sprintf("member %d cannot start: pod %s exists and is not a pod of this Flock on node %s; delete it to let the member start", ord, name, m.Node)
				if why, ok := s.foreignData[ord]; ok {
					msg = fmt.Sprintf("member %d cannot start: pod %s exists and is not a pod of this Flock: it uses data that is not this member's (%s); "+
						"delete the pod and the claim to let the member start with fresh data on node %s", ord, name, why, m.Node)
				}
				blocked[ord] = blockage{ReasonPodNameTaken, msg}
				continue
			}
		}
		var b *blockage
		if followsVolume(f, ord) && (pod == nil || pod.Spec.NodeName == "") {
			b = followerBlockage(m, pod)
		} else {
			b = memberBlockage(m, pod, nodes[m.Node], f.Spec.Template.Spec.Tolerations)
		}
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

// exclusionDetail says in a few words why a node is not eligible.
func exclusionDetail(ex placement.Exclusion) string {
	if ex.Detail != "" {
		return ex.Detail
	}
	return string(ex.Reason)
}
