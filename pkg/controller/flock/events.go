// File events.go: events on Flocks: recording them by ObjectReference, the events
// of condition transitions (blocked members, halted and completed rollouts), and
// no events in namespaces being deleted.

package flock

import (
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/record"

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

// NewNamespaceAwareSink returns an event sink that writes through sink
// every event but those of a namespace that namespaces shows being deleted,
// which it answers as kube-apiserver would (403, the namespace terminating;
// the broadcaster drops such an event without a retry or an error log)
// without the round trip. The broadcaster writes events one at a time, so on
// a busy control plane an event reaches the sink seconds after it was
// recorded: when a bench run's namespace of 50 Flocks was deleted right after
// its members were Ready, about 320 of their events came to the sink after,
// each refused.
func NewNamespaceAwareSink(sink record.EventSink, namespaces corelisters.NamespaceLister) record.EventSink {
	return &namespaceAwareSink{EventSink: sink, namespaces: namespaces}
}

type namespaceAwareSink struct {
	record.EventSink
	namespaces corelisters.NamespaceLister
}

// refusal is the answer to a write of event e in a namespace being deleted,
// or nil when it is to be written.
func (s *namespaceAwareSink) refusal(e *corev1.Event) error {
	if !namespaceClosing(s.namespaces, e.Namespace) {
		return nil
	}
	err := apierrors.NewForbidden(corev1.Resource("events"), e.Name,
		fmt.Errorf("unable to create new content in namespace %s because it is being terminated", e.Namespace))
	addNamespaceTerminatingCause(err, fmt.Sprintf("namespace %s is being terminated", e.Namespace))
	return err
}

// Create also marks kube-apiserver's refusal of an event whose namespace
// is gone (404, namespaces NAME not found: the namespace was deleted while
// the event waited in the broadcaster's queue) as the broadcaster's quiet
// refusals are marked, with the namespace-terminating cause: otherwise it
// logs each such event as an error ("Server rejected event"). A patch of an
// event that is gone is left as it is: the broadcaster then creates the
// event anew, which comes here.
func (s *namespaceAwareSink) Create(e *corev1.Event) (*corev1.Event, error) {
	if err := s.refusal(e); err != nil {
		return nil, err
	}
	out, err := s.EventSink.Create(e)
	return out, quietIfNamespaceGone(err, e.Namespace)
}

// quietIfNamespaceGone adds the namespace-terminating cause to err when it
// is kube-apiserver's answer that namespace ns does not exist.
func quietIfNamespaceGone(err error, ns string) error {
	var status apierrors.APIStatus
	if !apierrors.IsNotFound(err) || !errors.As(err, &status) {
		return err
	}
	d := status.Status().Details
	if d == nil || d.Kind != "namespaces" || d.Name != ns || apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
		return err
	}
	st := status.Status()
	gone := &apierrors.StatusError{ErrStatus: *st.DeepCopy()}
	addNamespaceTerminatingCause(gone, fmt.Sprintf("namespace %s is gone", ns))
	return gone
}

// addNamespaceTerminatingCause adds to err the cause on which the event
// broadcaster drops a refused event without an error log.
func addNamespaceTerminatingCause(err *apierrors.StatusError, message string) {
	err.ErrStatus.Details.Causes = append(err.ErrStatus.Details.Causes, metav1.StatusCause{
		Type: corev1.NamespaceTerminatingCause, Field: "metadata.namespace", Message: message,
	})
}

func (s *namespaceAwareSink) Update(e *corev1.Event) (*corev1.Event, error) {
	if err := s.refusal(e); err != nil {
		return nil, err
	}
	return s.EventSink.Update(e)
}

func (s *namespaceAwareSink) Patch(e *corev1.Event, data []byte) (*corev1.Event, error) {
	if err := s.refusal(e); err != nil {
		return nil, err
	}
	return s.EventSink.Patch(e, data)
}
