// File rollout.go: the template's ControllerRevisions (record, adopt, renumber, prune)
// and the rolling update that replaces outdated pods.

package flock

import (
	"context"
	"fmt"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/klog/v2"

	"flock.dev/flock/pkg/apis/flock/v1alpha1"
	"flock.dev/flock/pkg/placement"
)

// syncRevisions records the Flock's template in a ControllerRevision
// <flock>-<revision> (adopting an orphan of that name, or renumbering it
// when an earlier template comes back) and returns the update plan, the
// revisions the Flock controls and, when the template has no revision yet,
// the one to create. The caller creates it (createRevision) after the
// members' writes: the plan never needs it (a template is read back from
// its revision only while it is the current one and not the update), so a
// new Flock's first sync does not wait for that round trip before its
// members' data (issue 17). Failing to write a revision does not stop the
// sync: pods are then created from the Flock's template, and the error is
// returned so the sync is retried. A frozen Flock (being deleted, or its
// namespace is) adopts, renumbers and creates nothing.
func (fc *defaultFlockControl) syncRevisions(ctx context.Context, f *v1alpha1.Flock, rm *refManager, pods map[int32]*corev1.Pod, frozen bool) (updatePlan, []*appsv1.ControllerRevision, *appsv1.ControllerRevision, error) {
	logger := klog.FromContext(ctx)
	update := Revision(&f.Spec.Template)
	current := f.Status.CurrentRevision
	if current == "" {
		current = update
	}
	var errs []error

	list, err := fc.revisions.ListRevisions(f.Namespace, f.Name)
	if err != nil {
		return newUpdatePlan(f, pods, update, current, nil), nil, nil, err
	}
	var own []*appsv1.ControllerRevision
	for _, cr := range list {
		ref := metav1.GetControllerOfNoCopy(cr)
		switch {
		case ref != nil && ref.UID == f.UID:
			own = append(own, cr)
		case ref == nil && !frozen && cr.DeletionTimestamp == nil && strings.HasPrefix(cr.Name, f.Name+"-"):
			if err := rm.checkCanAdopt(ctx); err != nil {
				errs = append(errs, fmt.Errorf("cannot adopt ControllerRevision %s/%s: %w", cr.Namespace, cr.Name, err))
				continue
			}
			if err := fc.revisions.PatchRevision(ctx, cr.Namespace, cr.Name, adoptPatch(f, cr.UID)); err != nil {
				if !apierrors.IsNotFound(err) {
					errs = append(errs, fmt.Errorf("adopting ControllerRevision %s/%s: %w", cr.Namespace, cr.Name, err))
				}
				continue
			}
			logger.V(2).Info("Adopted ControllerRevision", "revision", klog.KObj(cr))
			adopted := cr.DeepCopy()
			adopted.OwnerReferences = append(adopted.OwnerReferences, *newControllerRef(f))
			own = append(own, adopted)
		}
	}

	var create *appsv1.ControllerRevision
	if !frozen {
		var newest int64
		var updateCR *appsv1.ControllerRevision
		for _, cr := range own {
			newest = max(newest, cr.Revision)
			if cr.Name == RevisionName(f.Name, update) {
				updateCR = cr
			}
		}
		switch {
		case updateCR == nil:
			create = NewControllerRevision(f, &f.Spec.Template, update, newest+1)
		case updateCR.Revision < newest:
			// An earlier template is back: it becomes the newest revision.
			upd := updateCR.DeepCopy()
			upd.Revision = newest + 1
			if err := fc.revisions.UpdateRevision(ctx, upd); err != nil {
				errs = append(errs, fmt.Errorf("renumbering ControllerRevision %s/%s: %w", upd.Namespace, upd.Name, err))
			} else {
				own = slices.DeleteFunc(own, func(cr *appsv1.ControllerRevision) bool { return cr.Name == upd.Name })
				own = append(own, upd)
			}
		}
	}

	var currentTemplate *corev1.PodTemplateSpec
	if current != update {
		for _, cr := range own {
			if cr.Name != RevisionName(f.Name, current) {
				continue
			}
			tmpl, err := TemplateOf(cr)
			if err != nil {
				logger.Error(err, "Cannot read the current revision; pods are created from the Flock's template")
				break
			}
			currentTemplate = tmpl
		}
	}
	return newUpdatePlan(f, pods, update, current, currentTemplate), own, create, utilerrors.NewAggregate(errs)
}

// createRevision creates cr, the revision syncRevisions found missing (nil:
// none), and returns own with it added once created.
func (fc *defaultFlockControl) createRevision(ctx context.Context, f *v1alpha1.Flock, cr *appsv1.ControllerRevision, own []*appsv1.ControllerRevision) ([]*appsv1.ControllerRevision, error) {
	if cr == nil {
		return own, nil
	}
	err := fc.revisions.CreateRevision(ctx, cr)
	switch {
	case err == nil:
		klog.FromContext(ctx).V(2).Info("Recorded template revision", "revision", klog.KObj(cr), "number", cr.Revision)
		return append(own, cr), nil
	case apierrors.IsAlreadyExists(err):
		// The cache is behind, or the name is someone else's; the
		// revision's event brings us back.
		return own, nil
	default:
		if failureToTell(ctx, err, f) {
			fc.event(f, corev1.EventTypeWarning, "FailedCreate", "create ControllerRevision %s failed: %v", cr.Name, err)
		}
		return own, fmt.Errorf("creating ControllerRevision %s/%s: %w", cr.Namespace, cr.Name, err)
	}
}

// planRollingUpdate decides, under the RollingUpdate strategy, which pods
// of members at or above the partition that run an earlier revision to
// replace now, in order: from the highest ordinal down, keeping at most
// maxUnavailable members unavailable (missing, not Ready, Ready for less
// than minReadySeconds, or on a gone or NotReady node). A pod that is
// already unavailable costs nothing to replace, so it is replaced when its
// turn comes even without budget: that is how a rollout halted on a pod of a
// broken template resumes once the template is fixed. The order is never
// skipped: the first available pod that the budget does not allow stops the
// update until the next sync (waiting is then that pod). changed are
// ordinals whose pods this sync already created or deleted; they count as
// unavailable and are left alone.
func planRollingUpdate(s *snapshot, plan updatePlan, changed map[int32]bool) (replace []int32, waiting *corev1.Pod) {
	if plan.Strategy != v1alpha1.RollingUpdateFlockStrategyType {
		return nil, nil
	}
	f, pods := s.flock, s.pods
	replicas := replicasOf(f)
	minReady := f.Spec.MinReadySeconds
	// A pod on a gone or NotReady node is not available, whatever it says.
	available := func(pod *corev1.Pod) bool {
		node := s.nodes[PinnedNode(pod)]
		return node != nil && placement.IsReady(node) && isAvailable(pod, minReady, s.now)
	}
	unavailable := 0
	for ord := range replicas {
		pod := pods[ord]
		if changed[ord] || pod == nil || isTerminating(pod) || !available(pod) {
			unavailable++
		}
	}
	budget := plan.MaxUnavailable - unavailable
	for ord := replicas - 1; ord >= plan.Partition; ord-- {
		pod := pods[ord]
		if changed[ord] || pod == nil || isTerminating(pod) || podRevision(pod) == plan.Update {
			continue
		}
		if available(pod) {
			if budget <= 0 {
				return replace, pod
			}
			budget--
		}
		replace = append(replace, ord)
	}
	return replace, nil
}

// rollingUpdate replaces the pods planRollingUpdate says, in its order,
// and adds their ordinals to changed.
func (fc *defaultFlockControl) rollingUpdate(ctx context.Context, s *snapshot, plan updatePlan, changed map[int32]bool) error {
	logger := klog.FromContext(ctx)
	replace, waiting := planRollingUpdate(s, plan, changed)
	for _, ord := range replace {
		pod := s.pods[ord]
		logger.V(2).Info("Replacing pod for rolling update", "pod", klog.KObj(pod), "from", podRevision(pod), "to", plan.Update)
		changed[ord] = true
		if err := fc.deletePod(ctx, s.flock, pod, "rolling update to revision "+plan.Update, mustForceDelete(pod, s.nodes)); err != nil {
			return err
		}
	}
	if waiting != nil {
		logger.V(4).Info("Rolling update waits for unavailable members", "next", klog.KObj(waiting), "maxUnavailable", plan.MaxUnavailable)
	}
	return nil
}

// pruneRevisions deletes the Flock's oldest ControllerRevisions beyond
// spec.revisionHistoryLimit. Live revisions (the update and current
// revisions and those of existing pods) are kept and do not count.
func (fc *defaultFlockControl) pruneRevisions(ctx context.Context, f *v1alpha1.Flock, own []*appsv1.ControllerRevision, live map[string]bool) error {
	limit := int(v1alpha1.DefaultRevisionHistoryLimit)
	if f.Spec.RevisionHistoryLimit != nil {
		limit = max(int(*f.Spec.RevisionHistoryLimit), 0)
	}
	var old []*appsv1.ControllerRevision
	for _, cr := range own {
		if !live[revisionOf(cr)] && cr.DeletionTimestamp == nil {
			old = append(old, cr)
		}
	}
	if len(old) <= limit {
		return nil
	}
	slices.SortFunc(old, func(a, b *appsv1.ControllerRevision) int {
		if a.Revision != b.Revision {
			return int(a.Revision - b.Revision)
		}
		return strings.Compare(a.Name, b.Name)
	})
	var errs []error
	for _, cr := range old[:len(old)-limit] {
		if err := fc.revisions.DeleteRevision(ctx, cr); err != nil {
			errs = append(errs, fmt.Errorf("deleting ControllerRevision %s/%s: %w", cr.Namespace, cr.Name, err))
			continue
		}
		klog.FromContext(ctx).V(2).Info("Pruned old template revision", "revision", klog.KObj(cr), "number", cr.Revision)
	}
	return utilerrors.NewAggregate(errs)
}

// liveRevisions returns the revisions that must be kept: the update and
// current revisions and those of the given pods.
func liveRevisions(update, current string, pods []*corev1.Pod) map[string]bool {
	live := map[string]bool{update: true, current: true}
	for _, pod := range pods {
		if rev := podRevision(pod); rev != "" {
			live[rev] = true
		}
	}
	return live
}
