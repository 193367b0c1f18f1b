package apiserver

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"

	"flock.dev/flock/pkg/apis/flock/v1alpha1"
	flockscheme "flock.dev/flock/pkg/generated/clientset/versioned/scheme"
)

// A Flock that has had many events of one reason (a volume, claim, helper
// and pod per member) still gets a later event of another reason recorded:
// the spam filter's bucket is per object and reason. With client-go's
// default key (per object) the 26th event on the Flock is dropped.
func TestEventsOfARareReasonAreNotDropped(t *testing.T) {
	client := fake.NewClientset()
	broadcast := newEventBroadcaster(t.Context())
	defer broadcast.Shutdown()
	broadcast.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
	recorder := broadcast.NewRecorder(flockscheme.Scheme, corev1.EventSource{Component: "flock-controller"})

	f := &v1alpha1.Flock{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: "u1"}}
	f.SetGroupVersionKind(v1alpha1.SchemeGroupVersion.WithKind("Flock"))
	for i := range 40 {
		recorder.Eventf(f, corev1.EventTypeNormal, "SuccessfulCreate", "created object %d", i)
	}
	recorder.Event(f, corev1.EventTypeNormal, "DataCleanupDone", "removed data directory of member 2")

	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		events, err := client.CoreV1().Events("ns").List(t.Context(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range events.Items {
			if e.Reason == "DataCleanupDone" {
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("the DataCleanupDone event after 40 SuccessfulCreate events on the same Flock was never recorded")
}

func TestEventSpamKeyIsPerReason(t *testing.T) {
	e := func(reason, name string) *corev1.Event {
		return &corev1.Event{Reason: reason, Source: corev1.EventSource{Component: "flock-controller"},
			InvolvedObject: corev1.ObjectReference{Kind: "Flock", Namespace: "ns", Name: name, UID: "u1"}}
	}
	if eventSpamKey(e("A", "web")) != eventSpamKey(e("A", "web")) {
		t.Error("one object and reason: two keys")
	}
	for _, other := range []*corev1.Event{e("B", "web"), e("A", "db")} {
		if eventSpamKey(e("A", "web")) == eventSpamKey(other) {
			t.Errorf("%s: the same key as reason A on web", fmt.Sprint(other.Reason, "/", other.InvolvedObject.Name))
		}
	}
}
