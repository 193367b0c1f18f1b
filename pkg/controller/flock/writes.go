// File writes.go: writes that several steps of a sync share: deleting pods (member
// and helper, forced when their node cannot confirm) and the data-cleanup
// finalizer.

package flock

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"flock.dev/flock/pkg/apis/flock/v1alpha1"
)

// deletePod deletes a member pod of the Flock, at once when force is set,
// and records an event saying why.
func (fc *defaultFlockControl) deletePod(ctx context.Context, f *v1alpha1.Flock, pod *corev1.Pod, why string, force bool) error {
	if force {
		why += "; forced: its node " + PinnedNode(pod) + " cannot confirm"
	}
	if err := fc.removePod(ctx, pod, force); err != nil {
		if failureToTell(ctx, err, f) {
			fc.event(f, corev1.EventTypeWarning, "FailedDelete", "delete Pod %s (%s) failed: %v", pod.Name, why, err)
		}
		return err
	}
	fc.event(f, corev1.EventTypeNormal, "SuccessfulDelete", "deleted Pod %s (%s)", pod.Name, why)
	return nil
}

// removePod deletes a pod, with grace period 0 when force is set: the one
// way member pods (deletePod) and cleanup helpers are deleted.
func (fc *defaultFlockControl) removePod(ctx context.Context, pod *corev1.Pod, force bool) error {
	del := fc.members.DeletePod
	if force {
		del = fc.members.ForceDeletePod
	}
	if err := del(ctx, pod); err != nil {
		return fmt.Errorf("deleting pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	klog.FromContext(ctx).V(2).Info("Deleted pod", "pod", klog.KObj(pod), "force", force)
	return nil
}

// setFinalizer adds or removes the data-cleanup finalizer with an update of
// the Flock (optimistic concurrency: a conflict fails the sync, which is
// retried), and returns the Flock as written.
func (fc *defaultFlockControl) setFinalizer(ctx context.Context, f *v1alpha1.Flock, want bool) (*v1alpha1.Flock, error) {
	upd := f.DeepCopy()
	if want {
		upd.Finalizers = append(upd.Finalizers, v1alpha1.FinalizerDataCleanup)
	} else {
		upd.Finalizers = slices.DeleteFunc(upd.Finalizers, func(s string) bool { return s == v1alpha1.FinalizerDataCleanup })
	}
	written, err := fc.flockClient.FlockV1alpha1().Flocks(f.Namespace).Update(ctx, upd, metav1.UpdateOptions{FieldManager: FieldManager})
	if err != nil {
		verb := "adding"
		if !want {
			verb = "removing"
		}
		return nil, fmt.Errorf("%s finalizer %s: %w", verb, v1alpha1.FinalizerDataCleanup, err)
	}
	klog.FromContext(ctx).V(2).Info("Updated the data-cleanup finalizer", "present", want)
	fc.written.record(f, written, time.Now())
	return written, nil
}
