package flock

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
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
