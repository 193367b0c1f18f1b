// File ref_manager.go: adoption and release of pods and Services by ControllerRef rules.

package flock

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/klog/v2"

	"flock.dev/flock/pkg/apis/flock/v1alpha1"
)

// refManager adopts and releases the pods of one Flock by the ControllerRef
// rules of Kubernetes controllers:
//   - a pod controlled by anything else is never touched;
//   - a pod controlled by the Flock is kept while it matches, and released
//     (its ownerReference removed) when it no longer does;
//   - an orphan that matches is adopted, but only after a live read has
//     confirmed the Flock is not being deleted (the cache may be stale);
//   - nothing is adopted or released while the Flock is being deleted.
type refManager struct {
	flock   *v1alpha1.Flock
	control MemberControl
	// canAdopt checks, with a live read, that the Flock may adopt. It is
	// called at most once per refManager.
	canAdopt    func(ctx context.Context) error
	canAdoptRan bool
	canAdoptErr error
}

func newRefManager(f *v1alpha1.Flock, control MemberControl, canAdopt func(ctx context.Context) error) *refManager {
	return &refManager{flock: f, control: control, canAdopt: canAdopt}
}

func (m *refManager) checkCanAdopt(ctx context.Context) error {
	if !m.canAdoptRan {
		m.canAdoptRan = true
		m.canAdoptErr = m.canAdopt(ctx)
	}
	return m.canAdoptErr
}

// claimPods returns the pods of candidates the Flock controls once
// adoption and release are done. match says whether a pod belongs to the
// Flock at all; adoptable says whether an orphan that matches may be
// adopted now.
func (m *refManager) claimPods(ctx context.Context, candidates []*corev1.Pod, match, adoptable func(*corev1.Pod) bool) ([]*corev1.Pod, error) {
	logger := klog.FromContext(ctx)
	f := m.flock
	deleting := f.DeletionTimestamp != nil
	var claimed []*corev1.Pod
	var errs []error
	for _, pod := range candidates {
		ref := metav1.GetControllerOfNoCopy(pod)
		switch {
		case ref != nil && ref.UID != f.UID:
			// Someone else's.
		case ref != nil:
			if match(pod) {
				claimed = append(claimed, pod)
				continue
			}
			if deleting {
				continue
			}
			logger.V(2).Info("Releasing pod that no longer matches its Flock", "flock", klog.KObj(f), "pod", klog.KObj(pod))
			err := m.control.PatchPod(ctx, pod.Namespace, pod.Name, releasePatch(f.UID, pod.UID))
			if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsInvalid(err) {
				// NotFound: it is gone. Invalid: the UID changed, a new pod
				// of that name exists; either way there is nothing to release.
				errs = append(errs, fmt.Errorf("releasing pod %s/%s: %w", pod.Namespace, pod.Name, err))
			}
		default:
			if deleting || isTerminating(pod) || !match(pod) || !adoptable(pod) {
				continue
			}
			if err := m.checkCanAdopt(ctx); err != nil {
				errs = append(errs, fmt.Errorf("cannot adopt pod %s/%s: %w", pod.Namespace, pod.Name, err))
				continue
			}
			logger.V(2).Info("Adopting pod", "flock", klog.KObj(f), "pod", klog.KObj(pod))
			err := m.control.PatchPod(ctx, pod.Namespace, pod.Name, adoptPatch(f, pod.UID))
			if err != nil {
				if !apierrors.IsNotFound(err) {
					errs = append(errs, fmt.Errorf("adopting pod %s/%s: %w", pod.Namespace, pod.Name, err))
				}
				continue
			}
			adopted := pod.DeepCopy()
			adopted.OwnerReferences = append(adopted.OwnerReferences, *newControllerRef(f))
			claimed = append(claimed, adopted)
		}
	}
	return claimed, utilerrors.NewAggregate(errs)
}

// adoptService makes the Flock the controller of an orphaned Service.
func (m *refManager) adoptService(ctx context.Context, svc *corev1.Service) error {
	if err := m.checkCanAdopt(ctx); err != nil {
		return fmt.Errorf("cannot adopt Service %s/%s: %w", svc.Namespace, svc.Name, err)
	}
	return m.control.PatchService(ctx, svc.Namespace, svc.Name, adoptPatch(m.flock, svc.UID))
}

type patchOwnerRef struct {
	APIVersion         string    `json:"apiVersion,omitempty"`
	Kind               string    `json:"kind,omitempty"`
	Name               string    `json:"name,omitempty"`
	UID                types.UID `json:"uid"`
	Controller         *bool     `json:"controller,omitempty"`
	BlockOwnerDeletion *bool     `json:"blockOwnerDeletion,omitempty"`
	Patch              string    `json:"$patch,omitempty"`
}

type ownerRefPatch struct {
	Metadata struct {
		OwnerReferences []patchOwnerRef `json:"ownerReferences"`
		// UID makes the patch fail if the object was replaced by a new
		// one of the same name: metadata.uid cannot change.
		UID types.UID `json:"uid"`
	} `json:"metadata"`
}

// adoptPatch is a strategic merge patch that adds f as the controller of
// the object with UID uid.
func adoptPatch(f *v1alpha1.Flock, uid types.UID) []byte {
	ref := newControllerRef(f)
	var p ownerRefPatch
	p.Metadata.UID = uid
	p.Metadata.OwnerReferences = []patchOwnerRef{{
		APIVersion: ref.APIVersion, Kind: ref.Kind, Name: ref.Name, UID: ref.UID,
		Controller: ref.Controller, BlockOwnerDeletion: ref.BlockOwnerDeletion,
	}}
	data, _ := json.Marshal(p)
	return data
}

// releasePatch is a strategic merge patch that removes the ownerReference
// to owner from the object with UID uid.
func releasePatch(owner, uid types.UID) []byte {
	var p ownerRefPatch
	p.Metadata.UID = uid
	p.Metadata.OwnerReferences = []patchOwnerRef{{UID: owner, Patch: "delete"}}
	data, _ := json.Marshal(p)
	return data
}

// labelsPatch sets labels on the object with the given UID (the patch fails
// if the object was replaced by a new one of the same name).
func labelsPatch(labels map[string]string, uid types.UID) []byte {
	return metadataPatch("labels", labels, uid)
}

// annotationPatch sets annotation key to value on the object with the
// given UID, as labelsPatch does labels.
func annotationPatch(key, value string, uid types.UID) []byte {
	return metadataPatch("annotations", map[string]string{key: value}, uid)
}

// metadataPatch is a merge patch of metadata.<field> (labels or
// annotations) with the object's UID as precondition.
func metadataPatch(field string, values map[string]string, uid types.UID) []byte {
	b, _ := json.Marshal(map[string]any{"metadata": map[string]any{field: values, "uid": uid}})
	return b
}
