package flock

// memberdata_helpers.go runs the short helper pods that prepare and remove a
// member's data directory: one run per job and member, replaced after a
// failure, deleted once done, and swept when no step needs them.

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/klog/v2"

	"flock.dev/flock/pkg/apis/flock/v1alpha1"
)

// runHelper runs the helper pod with job for member m, once: it reports
// done when the helper succeeded (the caller records that and deletes it),
// and otherwise creates it, waits for it, or replaces it after a failure.
func (d *dataSyncer) runHelper(ctx context.Context, f *v1alpha1.Flock, m v1alpha1.FlockMember, job string, now time.Time) (bool, dataState, error) {
	name := HelperPodName(job, f.UID, m.Ordinal)
	h, err := d.pods.GetPod(d.helperNamespace, name)
	switch {
	case apierrors.IsNotFound(err):
		switch err := d.pods.CreatePod(ctx, NewHelperPod(f, m, job, d.helperNamespace, d.helperImage, d.dataRoot)); {
		case apierrors.IsAlreadyExists(err):
			// Made by an earlier sync that the cache does not show yet.
		case err != nil:
			d.event(f, corev1.EventTypeWarning, "FailedCreate", "create %s helper pod %s/%s on node %s failed: %v", job, d.helperNamespace, name, m.Node, err)
			return false, dataState{}, fmt.Errorf("creating helper pod %s/%s: %w", d.helperNamespace, name, err)
		default:
			klog.FromContext(ctx).V(2).Info("Created helper pod", "pod", klog.KRef(d.helperNamespace, name), "job", job, "node", m.Node)
		}
		if h, err = d.pods.GetPod(d.helperNamespace, name); err != nil {
			return false, dataState{}, nil // its events bring the next sync
		}
	case err != nil:
		return false, dataState{}, err
	}
	if ord, ok := helperOrdinal(f.UID, h); !ok || ord != m.Ordinal || h.Spec.NodeName != m.Node {
		// Not this member's helper on its node: one left from an earlier
		// assignment, whose node may be gone, so it goes at once when it
		// has finished or is already being deleted.
		if isTerminal(h) || isTerminating(h) {
			return false, dataState{}, d.pods.ForceDeletePod(ctx, h)
		}
		return false, dataState{}, d.pods.DeletePod(ctx, h)
	}
	switch {
	case isTerminating(h):
		return false, dataState{}, nil
	case HelperSucceeded(h):
		return true, dataState{}, nil
	case h.Status.Phase == corev1.PodFailed:
		retryAt := helperFinishedAt(h).Add(helperRetryDelay)
		if wait := retryAt.Sub(now); wait > 0 {
			return false, dataState{requeue: wait, blocked: &blockage{ReasonDataPreparing, fmt.Sprintf(
				"helper pod %s/%s failed (%s) on node %s; retrying at %s", d.helperNamespace, name, podFailureSummary(h), m.Node, retryAt.UTC().Format(time.RFC3339))}}, nil
		}
		d.event(f, corev1.EventTypeWarning, "HelperFailed", "%s helper pod %s/%s of member %d failed on node %s (%s); retrying",
			job, d.helperNamespace, name, m.Ordinal, m.Node, podFailureSummary(h))
		return false, dataState{}, d.pods.DeletePod(ctx, h)
	}
	return false, dataState{}, nil
}

// deleteHelpers deletes the helper pods of Flock f (by UID) for ordinal
// (any when ordinal < 0) and job (any when ""), at once when their node is
// gone. live lists them from the API server (the last look before nothing
// of a member may be left), not the cache.
func (d *dataSyncer) deleteHelpers(ctx context.Context, f *v1alpha1.Flock, ordinal int32, job string, live bool) error {
	helpers, err := d.listHelpers(ctx, f, job, live)
	if err != nil {
		return err
	}
	return d.deleteListedHelpers(ctx, helpers, f, ordinal)
}

// listHelpers lists the helper pods of Flock f (by UID) for job (any when
// ""), from the API server when live, else from the cache.
func (d *dataSyncer) listHelpers(ctx context.Context, f *v1alpha1.Flock, job string, live bool) ([]*corev1.Pod, error) {
	sel := labels.Set{LabelFlockUID: string(f.UID)}
	if job != "" {
		sel[LabelHelper] = job
	}
	if live {
		return d.pods.ListPodsLive(ctx, d.helperNamespace, labels.SelectorFromSet(sel))
	}
	return d.pods.ListPods(d.helperNamespace, labels.SelectorFromSet(sel))
}

// deleteListedHelpers deletes those of helpers (Flock f's) that are for
// ordinal (any when ordinal < 0) and not terminating.
func (d *dataSyncer) deleteListedHelpers(ctx context.Context, helpers []*corev1.Pod, f *v1alpha1.Flock, ordinal int32) error {
	var errs []error
	for _, h := range helpers {
		if ord, ok := helperOrdinal(f.UID, h); !ok || (ordinal >= 0 && ord != ordinal) || isTerminating(h) {
			continue
		}
		if err := d.deleteHelper(ctx, h); err != nil {
			errs = append(errs, fmt.Errorf("deleting helper pod %s/%s: %w", h.Namespace, h.Name, err))
		}
	}
	return utilerrors.NewAggregate(errs)
}

// sweepHelpers deletes the helper pods of Flock f (by UID) that keep says
// no step needs (by job and ordinal).
func (d *dataSyncer) sweepHelpers(ctx context.Context, f *v1alpha1.Flock, keep func(job string, ordinal int32) bool) error {
	helpers, err := d.pods.ListHelperPods(d.helperNamespace, f.UID)
	if err != nil {
		return err
	}
	var errs []error
	for _, h := range helpers {
		ord, ok := helperOrdinal(f.UID, h)
		if !ok || isTerminating(h) || keep(h.Labels[LabelHelper], ord) {
			continue
		}
		if err := d.deleteHelper(ctx, h); err != nil {
			errs = append(errs, fmt.Errorf("deleting helper pod %s/%s: %w", h.Namespace, h.Name, err))
		}
	}
	return utilerrors.NewAggregate(errs)
}

// deleteHelper deletes a helper pod; one that has finished (its phase is
// terminal, or its container has exited 0) goes at once: no process is left
// to stop, its node may be gone, and kubelet, told the pod is gone, stops
// what is left of it all the same, without one more status write and delete
// of its own.
func (d *dataSyncer) deleteHelper(ctx context.Context, h *corev1.Pod) error {
	if helperFinished(h) {
		return d.pods.ForceDeletePod(ctx, h)
	}
	return d.pods.DeletePod(ctx, h)
}
