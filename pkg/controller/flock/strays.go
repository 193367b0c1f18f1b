package flock

// strays.go removes what a replica that had lost the controller lease may
// have made for a Flock that is gone by now: the write fence
// (pkg/apiserver) stops such writes, save one sent in the instant between
// its check and the request leaving the process. When a Flock's key is
// synced and the Flock is not in the cache, its name's helper pods and
// volumes that no member ever used are looked at.

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/klog/v2"

	"flock.dev/flock/pkg/apis/flock/v1alpha1"
)

// SweepStrays deletes, for the Flock namespace/name that the cache no
// longer holds, what belongs to a Flock of that name that no longer exists
// (its UID is not the one the API server now has under that name, if any):
//   - its data helper pods: they only ever work for a live Flock;
//   - its PersistentVolumes whose directory was never prepared and whose
//     claim does not exist: a member's pod starts only once its directory
//     is, so no pod ever mounted them and no data is lost. A prepared
//     volume stays: under whenDeleted: Retain that is the member's kept
//     data.
//
// Whether the Flock is gone is read from the API server, not the cache.
func (fc *defaultFlockControl) SweepStrays(ctx context.Context, namespace, name string) error {
	sel := labels.SelectorFromSet(labels.Set{LabelFlockNamespace: namespace, v1alpha1.LabelFlockName: name})
	helpers, err := fc.data.pods.ListPods(fc.data.helperNamespace, sel)
	if err != nil {
		return err
	}
	helpers = slices.DeleteFunc(helpers, isTerminating)
	vols, err := fc.data.data.ListVolumes(sel)
	if err != nil {
		return err
	}
	vols = slices.DeleteFunc(vols, func(pv *corev1.PersistentVolume) bool { return !neverUsed(pv) || fc.data.prepared.marked(pv.UID) })
	if len(helpers) == 0 && len(vols) == 0 {
		return nil
	}
	var current types.UID
	switch live, err := fc.flockClient.FlockV1alpha1().Flocks(namespace).Get(ctx, name, metav1.GetOptions{}); {
	case err == nil:
		current = live.UID
	case !apierrors.IsNotFound(err):
		return err
	}
	logger := klog.FromContext(ctx)
	var errs []error
	for _, h := range helpers {
		if types.UID(h.Labels[LabelFlockUID]) == current {
			continue
		}
		if err := fc.data.deleteHelper(ctx, h); err != nil {
			errs = append(errs, fmt.Errorf("deleting helper pod %s/%s of deleted Flock %s/%s: %w", h.Namespace, h.Name, namespace, name, err))
			continue
		}
		logger.Info("Deleted a data helper pod of a Flock that no longer exists", "pod", klog.KObj(h), "flock", klog.KRef(namespace, name), "uid", h.Labels[LabelFlockUID])
	}
	for _, pv := range vols {
		if types.UID(pv.Labels[LabelFlockUID]) == current {
			continue
		}
		if ref := pv.Spec.ClaimRef; ref != nil {
			_, err := fc.data.data.GetClaimLive(ctx, ref.Namespace, ref.Name)
			if err == nil {
				continue // a claim may still bind it
			}
			if !apierrors.IsNotFound(err) {
				errs = append(errs, err)
				continue
			}
		}
		if err := fc.data.data.DeleteVolume(ctx, pv); err != nil {
			errs = append(errs, fmt.Errorf("deleting PersistentVolume %s of deleted Flock %s/%s: %w", pv.Name, namespace, name, err))
			continue
		}
		logger.Info("Deleted a never-used PersistentVolume of a Flock that no longer exists", "persistentVolume", pv.Name, "flock", klog.KRef(namespace, name), "uid", pv.Labels[LabelFlockUID])
	}
	return utilerrors.NewAggregate(errs)
}

// neverUsed reports whether pv's directory was never prepared (so no member
// pod ever mounted it) and it is not being deleted.
func neverUsed(pv *corev1.PersistentVolume) bool {
	return pv.DeletionTimestamp == nil && pv.Annotations[AnnotationPrepared] != "true"
}
