package integration

import (
	"encoding/json"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"flock.dev/flock/pkg/apis/flock/v1alpha1"
)

// TestWatchCacheHistoryKeepsEachVersion checks what the watch cache serves
// of a Flock's past versions, whose unchanged parts it shares between them
// (pkg/registry/flock, shared_versions.go): a watch from the Flock's first
// version and an exact-version LIST of each give back every version as its
// write returned it, status, spec, metadata and managed fields, byte for
// byte as JSON, while a second Flock of the same shape is written in
// between.
func TestWatchCacheHistoryKeepsEachVersion(t *testing.T) {
	s := startServer(t)
	ctx := ctxT(t)
	c := s.client().FlockV1alpha1().Flocks(ns)

	var written []*v1alpha1.Flock // each version of "hist", as its write returned it
	record := func(f *v1alpha1.Flock, err error) *v1alpha1.Flock {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		if f.Name == "hist" {
			written = append(written, f.DeepCopy())
		}
		return f
	}
	f := record(c.Create(ctx, newFlock("hist", 2), metav1.CreateOptions{}))
	other := record(c.Create(ctx, newFlock("other", 2), metav1.CreateOptions{}))

	cond := func(status metav1.ConditionStatus, reason, msg string) metav1.Condition {
		return metav1.Condition{Type: "Available", Status: status, Reason: reason, Message: msg,
			ObservedGeneration: f.Generation, LastTransitionTime: metav1.NewTime(time.Date(2026, 12, 3, 6, 0, 0, 0, time.UTC))}
	}
	steps := []func(f *v1alpha1.Flock) (*v1alpha1.Flock, error){
		func(f *v1alpha1.Flock) (*v1alpha1.Flock, error) { // a first member, not ready
			f.Status.Replicas = 1
			f.Status.Members = []v1alpha1.FlockMember{{Ordinal: 0, Node: "n0", Pod: f.Name + "-0"}}
			f.Status.Conditions = []metav1.Condition{cond(metav1.ConditionFalse, "Waiting", "0 of 2 members available")}
			return c.UpdateStatus(ctx, f, metav1.UpdateOptions{FieldManager: "test-controller"})
		},
		func(f *v1alpha1.Flock) (*v1alpha1.Flock, error) { // it is ready; a second member
			f.Status.Replicas, f.Status.ReadyReplicas = 2, 1
			f.Status.Members[0].Ready = true
			f.Status.Members = append(f.Status.Members, v1alpha1.FlockMember{Ordinal: 1, Node: "n1", Pod: f.Name + "-1"})
			f.Status.Conditions[0].Message = "1 of 2 members available"
			return c.UpdateStatus(ctx, f, metav1.UpdateOptions{FieldManager: "test-controller"})
		},
		func(f *v1alpha1.Flock) (*v1alpha1.Flock, error) { // the spec changes, and a label
			f.Spec.Template.Spec.Containers[0].Image = "postgres:17"
			f.Labels = map[string]string{"tier": "db"}
			return c.Update(ctx, f, metav1.UpdateOptions{})
		},
		func(f *v1alpha1.Flock) (*v1alpha1.Flock, error) { // both ready
			f.Status.ReadyReplicas = 2
			f.Status.Members[1].Ready = true
			f.Status.Conditions = []metav1.Condition{cond(metav1.ConditionTrue, "MembersAvailable", "2 of 2 members available")}
			return c.UpdateStatus(ctx, f, metav1.UpdateOptions{FieldManager: "test-controller"})
		},
		func(f *v1alpha1.Flock) (*v1alpha1.Flock, error) { // a status write that changes one number
			f.Status.AvailableReplicas = 2
			return c.UpdateStatus(ctx, f, metav1.UpdateOptions{FieldManager: "test-controller"})
		},
	}
	// take runs one step and checks the write returned the status it
	// sent (a spec update keeps the status it had).
	take := func(step func(*v1alpha1.Flock) (*v1alpha1.Flock, error), from *v1alpha1.Flock) *v1alpha1.Flock {
		t.Helper()
		sent := from.DeepCopy()
		got := record(step(sent))
		if g, w := statusJSON(t, got), statusJSON(t, sent); g != w {
			t.Fatalf("a write of %s returned status\n%s\nwant\n%s", from.Name, g, w)
		}
		return got
	}
	for _, step := range steps {
		f = take(step, f)
		// The other Flock takes the same steps, so equal field sets of
		// two Flocks meet in the cache.
		other = take(step, other)
	}

	asJSON := func(f *v1alpha1.Flock) string {
		f = f.DeepCopy()
		f.TypeMeta = metav1.TypeMeta{} // a watch's objects carry it, a write's may not
		data, err := json.Marshal(f)
		if err != nil {
			t.Fatal(err)
		}
		return string(data)
	}

	// Every version, from the watch cache's history.
	w, err := c.Watch(ctx, metav1.ListOptions{
		FieldSelector:   "metadata.name=hist",
		ResourceVersion: written[0].ResourceVersion,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	for _, want := range written[1:] { // a watch starts after the version it names
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatal("the watch closed")
			}
			got, isFlock := ev.Object.(*v1alpha1.Flock)
			if ev.Type != watch.Modified || !isFlock {
				t.Fatalf("watch event %s %T, want MODIFIED of a Flock", ev.Type, ev.Object)
			}
			if g, w := asJSON(got), asJSON(want); g != w {
				t.Errorf("version %s from the watch:\n got %s\nwant %s", want.ResourceVersion, g, w)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("no watch event for version %s within 30s", want.ResourceVersion)
		}
	}

	// And each version on its own, as an exact-version LIST serves it.
	for _, want := range written {
		list, err := c.List(ctx, metav1.ListOptions{
			ResourceVersion: want.ResourceVersion, ResourceVersionMatch: metav1.ResourceVersionMatchExact,
		})
		if err != nil {
			t.Fatal(err)
		}
		var got *v1alpha1.Flock
		for i := range list.Items {
			if list.Items[i].Name == "hist" {
				got = &list.Items[i]
			}
		}
		if got == nil {
			t.Fatalf("no Flock hist in the LIST at %s", want.ResourceVersion)
		}
		if g, w := asJSON(got), asJSON(want); g != w {
			t.Errorf("version %s from an exact LIST:\n got %s\nwant %s", want.ResourceVersion, g, w)
		}
	}
	if len(written) != len(steps)+1 {
		t.Fatalf("recorded %d versions, want %d", len(written), len(steps)+1)
	}
}

func statusJSON(t *testing.T, f *v1alpha1.Flock) string {
	t.Helper()
	data, err := json.Marshal(f.Status)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}
