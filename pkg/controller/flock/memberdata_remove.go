package flock

// memberdata_remove.go removes a member's data under the Delete retention
// policy: its directory (a helper pod), then its claim, then its
// PersistentVolume.

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"flock.dev/flock/pkg/apis/flock/v1alpha1"
)

// removeState is where the removal of a member's data stands.
type removeState struct {
	// done: the member's data objects are gone; it may leave status.
	done bool
	// message says what the removal waits for.
	message string
	// requeue, when positive, asks for another sync.
	requeue time.Duration
}

// sharedReads are reads of the API server that the removals of one sync
// share, where each member's would otherwise make its own: the Flock's
// volumes, listed at the sync's start, and its helper pods, listed by the
// first member that needs them (a member's last step, after which no
// helper of its is made in the sync). nil: each member reads for itself.
type sharedReads struct {
	// volumes are the Flock's PersistentVolumes by name.
	volumes map[string]*corev1.PersistentVolume

	helpersOnce sync.Once
	helpers     []*corev1.Pod
	helpersErr  error
}

// newSharedReads returns the shared reads of a sync whose live list of the
// Flock's volumes is vols.
func newSharedReads(vols []*corev1.PersistentVolume) *sharedReads {
	r := &sharedReads{volumes: make(map[string]*corev1.PersistentVolume, len(vols))}
	for _, pv := range vols {
		r.volumes[pv.Name] = pv
	}
	return r
}

// volumeLive reads the PersistentVolume name from the API server, or from
// the sync's live list of the Flock's volumes when there is one.
func (d *dataSyncer) volumeLive(ctx context.Context, r *sharedReads, name string) (*corev1.PersistentVolume, error) {
	if r == nil {
		return d.data.GetVolumeLive(ctx, name)
	}
	if pv, ok := r.volumes[name]; ok {
		return pv, nil
	}
	return nil, apierrors.NewNotFound(corev1.Resource("persistentvolumes"), name)
}

// deleteMemberHelpers deletes the helper pods of member ord of f, listed
// from the API server: once a sync when r is set, else now.
func (d *dataSyncer) deleteMemberHelpers(ctx context.Context, f *v1alpha1.Flock, ord int32, r *sharedReads) error {
	if r == nil {
		return d.deleteHelpers(ctx, f, ord, "", true)
	}
	r.helpersOnce.Do(func() { r.helpers, r.helpersErr = d.listHelpers(ctx, f, "", true) })
	if r.helpersErr != nil {
		return r.helpersErr
	}
	return d.deleteListedHelpers(ctx, r.helpers, f, ord)
}

// remove deletes member m's data under the Delete retention policy, once
// its pod is gone: the directory (a helper pod on its node, skipped with an
// event when the node is gone), then the claim, then the PersistentVolume.
// With a claim template only the claim is deleted (its StorageClass's
// reclaim policy decides about the volume). node is m's node, nil when gone.
// reads, when set, are the sync's shared reads (see sharedReads).
func (d *dataSyncer) remove(ctx context.Context, f *v1alpha1.Flock, m v1alpha1.FlockMember, node *corev1.Node, now time.Time, reads *sharedReads) (removeState, error) {
	ord := m.Ordinal
	claimName := ClaimName(f, ord)
	pvName := PersistentVolumeName(f.UID, ord)
	dir := MemberDataDir(d.dataRoot, f)

	// What the cache says is gone is read again from the API server: a
	// volume, claim or helper pod made by a sync just before the removal
	// began may not be in the cache yet, and would be left for good once
	// the member leaves status.
	var pv *corev1.PersistentVolume
	if !usesClaimTemplate(f) {
		got, err := d.data.GetVolume(pvName)
		if apierrors.IsNotFound(err) {
			got, err = d.volumeLive(ctx, reads, pvName)
		}
		switch {
		case err == nil && volumeConflict(f, ord, got) == "":
			pv = got
		case err != nil && !apierrors.IsNotFound(err):
			return removeState{}, err
		}
	}

	// 1. The directory, while the volume says it is there.
	if pv != nil && pv.DeletionTimestamp == nil && pv.Annotations[AnnotationRemoved] != "true" {
		if node == nil {
			d.event(f, corev1.EventTypeWarning, "DataCleanupSkipped",
				"node %s of member %d is gone: its data directory %s there is not removed", m.Node, ord, dir)
		} else {
			done, st, err := d.runHelper(ctx, f, m, HelperCleanup, now)
			if err != nil || !done {
				msg := fmt.Sprintf("removing data directory %s on node %s (helper pod %s/%s)", dir, m.Node, d.helperNamespace, HelperPodName(HelperCleanup, f.UID, ord))
				if st.blocked != nil {
					msg = st.blocked.Message
				}
				return removeState{message: msg, requeue: st.requeue}, err
			}
			d.event(f, corev1.EventTypeNormal, "DataCleanupDone", "removed data directory %s of member %d on node %s", dir, ord, m.Node)
		}
		if err := d.data.AnnotateVolume(ctx, pv, AnnotationRemoved, "true"); err != nil {
			return removeState{message: "recording the removal of " + dir}, fmt.Errorf("marking PersistentVolume %s removed: %w", pvName, err)
		}
		return removeState{message: fmt.Sprintf("data directory %s removed; deleting claim %s and PersistentVolume %s", dir, claimName, pvName)}, nil
	}

	// 2. The claim.
	claim, err := d.data.GetClaim(f.Namespace, claimName)
	if apierrors.IsNotFound(err) {
		claim, err = d.data.GetClaimLive(ctx, f.Namespace, claimName)
	}
	switch {
	case err == nil && claimConflict(f, ord, claim) == "":
		if claim.DeletionTimestamp == nil {
			if err := d.data.DeleteClaim(ctx, claim); err != nil {
				return removeState{message: "deleting claim " + claimName}, fmt.Errorf("deleting claim %s/%s: %w", f.Namespace, claimName, err)
			}
			d.event(f, corev1.EventTypeNormal, "SuccessfulDelete", "deleted PersistentVolumeClaim %s of member %d", claimName, ord)
		}
		return removeState{message: fmt.Sprintf("waiting for claim %s to be deleted", claimName)}, nil
	case err != nil && !apierrors.IsNotFound(err):
		return removeState{}, err
	}

	// 3. The volume.
	if pv != nil {
		if pv.DeletionTimestamp == nil {
			if err := d.data.DeleteVolume(ctx, pv); err != nil {
				return removeState{message: "deleting PersistentVolume " + pvName}, fmt.Errorf("deleting PersistentVolume %s: %w", pvName, err)
			}
			d.event(f, corev1.EventTypeNormal, "SuccessfulDelete", "deleted PersistentVolume %s of member %d", pvName, ord)
		}
		return removeState{message: fmt.Sprintf("waiting for PersistentVolume %s to be deleted", pvName)}, nil
	}
	if err := d.deleteMemberHelpers(ctx, f, ord, reads); err != nil {
		return removeState{message: "deleting helper pods"}, err
	}
	return removeState{done: true}, nil
}
