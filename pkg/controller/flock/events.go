// File events.go: events on Flocks: recording them by ObjectReference, and the events
// of condition transitions (blocked members, halted and completed rollouts).

package flock

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"flock.dev/flock/pkg/apis/flock/v1alpha1"
)

// reportTransitions records events for conditions that warn the user when
// they become true or change their message (MembersBlocked, a halted
// rollout), and for a completed rollout. A member waiting only for its data
// to be made (DataPreparing) is a normal step with events of its own
// (SuccessfulCreate, DataPrepared), not a warning.
func (fc *defaultFlockControl) reportTransitions(f *v1alpha1.Flock, status v1alpha1.FlockStatus) {
	if now := meta.FindStatusCondition(status.Conditions, v1alpha1.FlockMembersBlocked); now != nil && now.Status == metav1.ConditionTrue && now.Reason != ReasonDataPreparing {
		before := meta.FindStatusCondition(f.Status.Conditions, v1alpha1.FlockMembersBlocked)
		if before == nil || before.Status != now.Status || before.Message != now.Message {
			fc.event(f, corev1.EventTypeWarning, "MembersBlocked", "%s", now.Message)
		}
	}
	if now := meta.FindStatusCondition(status.Conditions, v1alpha1.FlockProgressing); now != nil && now.Reason == ReasonRolloutHalted {
		before := meta.FindStatusCondition(f.Status.Conditions, v1alpha1.FlockProgressing)
		if before == nil || before.Reason != now.Reason || before.Message != now.Message {
			fc.event(f, corev1.EventTypeWarning, "RolloutHalted", "%s", now.Message)
		}
	}
	if old := f.Status.CurrentRevision; old != "" && old != status.CurrentRevision && status.CurrentRevision == status.UpdateRevision {
		fc.event(f, corev1.EventTypeNormal, "RolloutComplete", "every member runs revision %s (was %s)", status.UpdateRevision, old)
	}
}

// eventOnTransition records an event for c unless the Flock's status
// already has c with the same status and reason.
func (fc *defaultFlockControl) eventOnTransition(f *v1alpha1.Flock, c metav1.Condition, eventType, reason string) {
	if before := meta.FindStatusCondition(f.Status.Conditions, c.Type); before != nil && before.Status == c.Status && before.Reason == c.Reason {
		return
	}
	fc.event(f, eventType, reason, "%s", c.Message)
}

// event records an event on the Flock. It refers to the Flock by an
// ObjectReference, so the recorder's scheme need not know the Flock type.
func (fc *defaultFlockControl) event(f *v1alpha1.Flock, eventType, reason, format string, args ...any) {
	fc.recorder.Eventf(flockRef(f), eventType, reason, format, args...)
}

// flockRef returns an ObjectReference to a Flock.
func flockRef(f *v1alpha1.Flock) *corev1.ObjectReference {
	return &corev1.ObjectReference{
		APIVersion: controllerKind.GroupVersion().String(), Kind: controllerKind.Kind,
		Namespace: f.Namespace, Name: f.Name, UID: f.UID, ResourceVersion: f.ResourceVersion,
	}
}
