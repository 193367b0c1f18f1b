package flock

// memberdata_move.go: the data a member leaves on the node it moved off
// (a planned move, or a reassignment off a lost node). Its PersistentVolume
// and claim are named per ordinal, so fresh ones are made on the new node
// after the old ones are deleted (replaceVolume); the old directory follows
// spec.storage.retention.whenScaled: Retain keeps it on the old node,
// Delete removes it first, with the cleanup helper, when that node can run
// it (it exists, is Ready and not out of service).

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"

	"flock.dev/flock/pkg/apis/flock/v1alpha1"
	"flock.dev/flock/pkg/placement"
)

// removeLeftData removes, under whenScaled Delete, the directory member m
// left on the node of its volume pv (which is not m's node any more). It
// returns wait=true with the state to report while the removal runs; false
// when the volume may be replaced now: the policy is Retain, the directory
// is removed, or the old node cannot run the helper (an event says the
// directory is left there).
func (d *dataSyncer) removeLeftData(ctx context.Context, f *v1alpha1.Flock, m v1alpha1.FlockMember, pv *corev1.PersistentVolume, now time.Time) (dataState, bool, error) {
	if f.Spec.Storage.Retention.WhenScaled != v1alpha1.DeleteRetentionPolicy || pv.Annotations[AnnotationRemoved] == "true" {
		return dataState{}, false, nil
	}
	host := volumeHostname(pv)
	var old *corev1.Node
	if d.nodeByName != nil && host != "" {
		if n := d.nodeByName(host); n != nil && NodeHostname(n) == host {
			old = n
		}
	}
	if old == nil || !placement.IsReady(old) || nodeConfirmedDown(old) {
		d.event(f, corev1.EventTypeWarning, "DataCleanupSkipped",
			"member %d moved off node %s, which cannot run a helper now (gone, NotReady or out of service): its data directory %s there is not removed",
			m.Ordinal, host, MemberDataDir(d.dataRoot, f))
		return dataState{}, false, nil
	}
	left := m
	left.Node = old.Name
	st, err := d.remove(ctx, f, left, old, now, nil)
	if st.done {
		return dataState{}, false, err
	}
	state := waiting("", "", "member %d moved to node %s: %s", m.Ordinal, m.Node, st.message)
	state.requeue = st.requeue
	return state, true, err
}

// volumeHostname returns the kubernetes.io/hostname a node-local volume's
// node affinity names ("" when none).
func volumeHostname(pv *corev1.PersistentVolume) string {
	na := pv.Spec.NodeAffinity
	if na == nil || na.Required == nil {
		return ""
	}
	for _, term := range na.Required.NodeSelectorTerms {
		for _, r := range term.MatchExpressions {
			if r.Key == hostnameLabel && r.Operator == corev1.NodeSelectorOpIn && len(r.Values) > 0 {
				return r.Values[0]
			}
		}
	}
	return ""
}
