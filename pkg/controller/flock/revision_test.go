package flock

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"flock.dev/flock/pkg/apis/flock/v1alpha1"
)

func TestRevision(t *testing.T) {
	a := newFlock("pg", 1).Spec.Template
	b := *a.DeepCopy()
	if Revision(&a) != Revision(&b) {
		t.Fatal("equal templates, different revisions")
	}
	b.Labels = map[string]string{"app": "pg"} // same content, new map
	if Revision(&a) != Revision(&b) {
		t.Fatal("equal templates, different revisions")
	}
	b.Spec.Containers[0].Image = "postgres:18"
	if Revision(&a) == Revision(&b) {
		t.Fatal("an image change kept the revision")
	}
	if r := Revision(&a); len(r) == 0 || len(r) > 63 {
		t.Fatalf("revision %q is not a label value", r)
	}
	// Pinned value: a revision must not change across releases for an
	// unchanged template, or every pod would look outdated after an upgrade.
	if got, want := Revision(&corev1.PodTemplateSpec{}), "658c46c486"; got != want {
		t.Fatalf("empty template revision = %q, want %q", got, want)
	}
}

// A new Flock's first sync writes its members' data and pods before it
// records its template's revision, which none of them needs: the revision's
// round trip is not on the way to the members (issue 17). It is still
// recorded in that sync.
func TestNewFlocksRevisionComesAfterItsMembers(t *testing.T) {
	f := newFixture(t, "n-a", "n-b")
	fl := newFlock("pg", 2)
	fl.Spec.PodManagementPolicy = v1alpha1.ParallelPodManagement
	var dataWrites, podWrites, creates int
	f.history.beforeCreate = func(*appsv1.ControllerRevision) {
		creates++
		dataWrites, podWrites = len(f.data.ops), len(createOps(f.members.ops))
	}
	f.createFlock(fl)
	f.mustSync("pg")
	if creates != 1 {
		t.Fatalf("%d revision creates in the first sync, want 1", creates)
	}
	if dataWrites == 0 || podWrites != 2 {
		t.Errorf("when the revision was created: %d data writes and %d member pods created, want some and 2", dataWrites, podWrites)
	}
	if _, ok := f.history.get(testNamespace, RevisionName("pg", Revision(&fl.Spec.Template))); !ok {
		t.Error("the revision was not recorded in the first sync")
	}
	for _, p := range f.allPods() {
		if got := p.Labels[v1alpha1.LabelRevision]; got != Revision(&fl.Spec.Template) {
			t.Errorf("pod %s has revision %q, want %q", p.Name, got, Revision(&fl.Spec.Template))
		}
	}
}

// A new revision carries the Flock's kubernetes.io/change-cause, what
// `kubectl flock rollout history` prints beside it, as a StatefulSet's
// revisions carry the StatefulSet's.
func TestRevisionCarriesTheFlocksChangeCause(t *testing.T) {
	f := newFixture(t, "n-a")
	fl := newFlock("pg", 1)
	fl.Annotations = map[string]string{ChangeCauseAnnotation: "first", "other": "not copied"}
	f.createFlock(fl)
	f.mustSync("pg")
	cr, ok := f.history.get(testNamespace, RevisionName("pg", Revision(&fl.Spec.Template)))
	if !ok {
		t.Fatal("no revision recorded")
	}
	if len(cr.Annotations) != 1 || cr.Annotations[ChangeCauseAnnotation] != "first" {
		t.Errorf("revision annotations %v, want only %s: first", cr.Annotations, ChangeCauseAnnotation)
	}
}
