package flock

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"flock.dev/flock/pkg/apis/flock/v1alpha1"
)

// A replica that lost the lease made helper pods and volumes for a Flock
// that the new leader had already deleted (the fault suite saw it after a
// SIGSTOPped leader woke up). The key's next sync, with the Flock gone,
// deletes its helpers and the volumes no member used; a prepared volume
// (kept data under Retain) stays; and nothing of a Flock the API
// server still has is touched although the cache does not hold it yet.
func TestSweepStraysOfAGoneFlock(t *testing.T) {
	f := newFixture(t, "n-a", "n-b")
	f.members.instantPrepare = false
	f.createFlock(withRetention(newFlock("pg", 2), v1alpha1.DeleteRetentionPolicy, v1alpha1.DeleteRetentionPolicy))
	f.mustSync("pg")
	uid := f.getFlock("pg").UID
	if len(f.data.volumes) != 2 || len(f.helpers("pg")) != 2 {
		t.Fatalf("after the first sync: volumes %v, helpers %v; want two of each", f.data.volumes, f.helpers("pg"))
	}
	bound := f.data.volumes[PersistentVolumeName(uid, 1)].DeepCopy()
	bound.Annotations = map[string]string{AnnotationPrepared: "true"}
	bound.Status.Phase = corev1.VolumeReleased
	f.data.volumes[bound.Name] = bound
	f.data.claims = map[string]*corev1.PersistentVolumeClaim{} // the garbage collector took them

	// The cache lost the Flock, the API server has it: nothing goes.
	fl := f.getFlock("pg")
	if err := f.flocks.Delete(fl); err != nil {
		t.Fatal(err)
	}
	if err := f.controller.sync(f.ctx, testNamespace+"/pg"); err != nil {
		t.Fatal(err)
	}
	if len(f.data.volumes) != 2 || len(f.helpers("pg")) != 2 {
		t.Fatalf("a Flock the API server still has lost volumes %v or helpers %v", f.data.volumes, f.helpers("pg"))
	}

	// Gone from the API server too.
	if err := f.flockClient.FlockV1alpha1().Flocks(testNamespace).Delete(f.ctx, "pg", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := f.controller.sync(f.ctx, testNamespace+"/pg"); err != nil {
		t.Fatal(err)
	}
	if h := f.helpers("pg"); len(h) != 0 {
		t.Errorf("helper pods of the gone Flock left: %v", h)
	}
	if _, ok := f.data.volumes[PersistentVolumeName(uid, 0)]; ok {
		t.Errorf("the never-used volume of the gone Flock is left")
	}
	if _, ok := f.data.volumes[bound.Name]; !ok {
		t.Errorf("the prepared volume (kept data) was deleted")
	}
}
