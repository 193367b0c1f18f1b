// File snapshot_read.go: reading a sync's snapshot from the caches, once at
// the start of Sync and once more after adoption.

package flock

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"flock.dev/flock/pkg/apis/flock/v1alpha1"
)

// takeSnapshot reads what a sync of f needs from the caches. pods are the
// candidate pods the loop found.
func (fc *defaultFlockControl) takeSnapshot(ctx context.Context, f *v1alpha1.Flock, selector labels.Selector, pods []*corev1.Pod, now time.Time) (*snapshot, error) {
	nodeList, err := fc.nodeLister.List(labels.Everything())
	if err != nil {
		return nil, err
	}
	s := &snapshot{
		flock: f, now: now, selector: selector, candidates: pods,
		members:   membersByOrdinal(f.Status.Members),
		nodeList:  nodeList,
		nodes:     make(map[string]*corev1.Node, len(nodeList)),
		lostSince: map[string]time.Time{},
		awaited:   fc.awaitedPods(ctx, f, now),
	}
	for _, m := range f.Status.Members {
		if m.NodeLostSince != nil {
			fc.lost.recall(m.Node, m.NodeLostSince.Time)
		}
	}
	for _, n := range nodeList {
		s.nodes[n.Name] = n
		if since, lost := fc.lost.lostSince(n.Name, n, now); lost {
			s.lostSince[n.Name] = since
		}
	}
	for _, m := range f.Status.Members {
		if _, ok := s.nodes[m.Node]; !ok {
			since, _ := fc.lost.lostSince(m.Node, nil, now)
			s.lostSince[m.Node] = since
		}
	}
	s.foreignData = fc.foreignData(f, pods)
	s.volumes = map[int32]*corev1.PersistentVolume{}
	if !usesClaimTemplate(f) {
		for ord := range replicasOf(f) {
			if pv, err := fc.data.data.GetVolume(PersistentVolumeName(f.UID, ord)); err == nil && volumeConflict(f, ord, pv) == "" {
				s.volumes[ord] = pv
			}
		}
	}
	// The nodes of the Flock's node-local volumes, and every Flock's
	// members: read only when a member is placed or moved, not in every
	// sync.
	if !usesClaimTemplate(f) {
		s.retained = &lazy[map[int32]string]{compute: func() map[int32]string {
			vols, _ := fc.data.data.ListVolumes(labels.SelectorFromSet(labels.Set{LabelFlockUID: string(f.UID)}))
			out := map[int32]string{}
			for _, pv := range vols {
				if volumeGoing(pv) {
					continue
				}
				if ord, node := volumeOrdinalNode(f, pv, s.nodes); node != "" {
					out[ord] = node
				}
			}
			return out
		}}
	}
	s.others = &lazy[map[string]int]{compute: func() map[string]int {
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
		return usage
	}}
	return s, nil
}

// foreignData reads, for each orphan among pods named like a member, the
// member's claim: when it exists and is not the Flock's, the orphan runs on
// data that is not its member's (snapshot.foreignData). Orphans are rare, so
// this costs a sync nothing in the common case.
func (fc *defaultFlockControl) foreignData(f *v1alpha1.Flock, pods []*corev1.Pod) map[int32]string {
	var out map[int32]string
	for _, pod := range pods {
		if metav1.GetControllerOfNoCopy(pod) != nil {
			continue
		}
		ord, ok := ParseOrdinal(f.Name, pod.Name)
		if !ok {
			continue
		}
		claim, err := fc.data.data.GetClaim(f.Namespace, ClaimName(f, ord))
		if err != nil {
			continue
		}
		if why := claimConflict(f, ord, claim); why != "" {
			if out == nil {
				out = map[int32]string{}
			}
			out[ord] = why
		}
	}
	return out
}

// adopted returns a copy of s with the pods the Flock owns after adoption
// and release, and what stands in the way of creating the missing ones:
// pod names taken by pods the Flock does not control (read after the
// release, which may have just made one). (Members' data is
// dataSyncer.ensure's.)
func (fc *defaultFlockControl) adopted(s *snapshot, owned []*corev1.Pod) *snapshot {
	n := s.withPods(owned)
	f := s.flock
	n.nameTaken = map[int32]bool{}
	for ord := range replicasOf(f) {
		if n.pods[ord] != nil {
			continue
		}
		if other, err := fc.members.GetPod(f.Namespace, PodName(f.Name, ord)); err == nil && !isControlledBy(other, f) {
			n.nameTaken[ord] = true
		}
	}
	return n
}
