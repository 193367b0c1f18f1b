package flock

import (
	"context"
	"slices"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"

	"flock.dev/flock/pkg/apis/flock/v1alpha1"
)

// A sync right after the controller completed a claim's binding reads the
// claim as written while the cache still has the version the write
// replaced, so it does not complete the binding again from that version
// (which the server refuses with a conflict). Once the cache moves on, by
// the write itself or by someone else's, the cache is read again.
func TestClaimReadAfterItsWriteIsTheWrite(t *testing.T) {
	claims := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	cached := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "data-pg-0", UID: "c-1", ResourceVersion: "10"},
		Spec:       corev1.PersistentVolumeClaimSpec{VolumeName: "pv-0"},
		Status:     corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimPending},
	}
	if err := claims.Add(cached); err != nil {
		t.Fatal(err)
	}
	client := fake.NewClientset()
	rv := 10
	client.PrependReactor("update", "persistentvolumeclaims", func(a clienttesting.Action) (bool, runtime.Object, error) {
		claim := a.(clienttesting.UpdateAction).GetObject().(*corev1.PersistentVolumeClaim).DeepCopy()
		rv++
		claim.ResourceVersion = strconv.Itoa(rv)
		claim.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: FieldManager}}
		return true, claim, nil
	})
	now := time.Unix(1000, 0)
	dc := &realDataControl{client: client, claimLister: corelisters.NewPersistentVolumeClaimLister(claims), now: func() time.Time { return now }}
	read := func() *corev1.PersistentVolumeClaim {
		t.Helper()
		c, err := dc.GetClaim("ns", "data-pg-0")
		if err != nil {
			t.Fatal(err)
		}
		return c
	}

	if got := read(); got != cached {
		t.Fatalf("before any write: read %s, want the cached claim", got.ResourceVersion)
	}
	upd := cached.DeepCopy()
	upd.Status.Phase = corev1.ClaimBound
	upd.Status.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOncePod}
	if _, err := dc.UpdateClaimStatus(context.Background(), upd); err != nil {
		t.Fatal(err)
	}
	got := read()
	if got.ResourceVersion != "11" || got.Status.Phase != corev1.ClaimBound {
		t.Fatalf("right after the status write, with the cache at 10: read version %s phase %s, want the write (11, Bound)", got.ResourceVersion, got.Status.Phase)
	}
	if got.ManagedFields != nil || got.Status.AccessModes != nil {
		t.Errorf("the written claim is read as the cache keeps it (TrimClaim): managedFields %v, access modes %v", got.ManagedFields, got.Status.AccessModes)
	}

	// A second write based on the first (the annotation in an update of
	// its own): a cache still at 10 is behind both.
	upd = got.DeepCopy()
	upd.Annotations = map[string]string{annBindCompleted: "yes"}
	if _, err := dc.UpdateClaim(context.Background(), upd); err != nil {
		t.Fatal(err)
	}
	if got := read(); got.ResourceVersion != "12" {
		t.Errorf("after two writes in a row, with the cache at 10: read version %s, want 12", got.ResourceVersion)
	}

	// The cache moves on: someone else's write, newer than ours.
	later := cached.DeepCopy()
	later.ResourceVersion = "13"
	later.Status.Phase = corev1.ClaimLost
	if err := claims.Update(later); err != nil {
		t.Fatal(err)
	}
	if got := read(); got.ResourceVersion != "13" || got.Status.Phase != corev1.ClaimLost {
		t.Errorf("with the cache past the write: read version %s phase %s, want the cache's (13, Lost)", got.ResourceVersion, got.Status.Phase)
	}
	// And the entry is gone: the cache back at an old version (a relist
	// cannot do that, but a test can) is read as it is.
	if err := claims.Update(cached); err != nil {
		t.Fatal(err)
	}
	if got := read(); got.ResourceVersion != "10" {
		t.Errorf("once the cache moved past the write, the write is forgotten: read version %s, want 10", got.ResourceVersion)
	}

	// A write the cache never catches up with (no sync read the claim
	// again) is dropped after writtenTTL, on the next write.
	upd = cached.DeepCopy()
	upd.Status.Phase = corev1.ClaimBound
	if _, err := dc.UpdateClaimStatus(context.Background(), upd); err != nil {
		t.Fatal(err)
	}
	now = now.Add(writtenTTL + time.Second)
	other := cached.DeepCopy()
	other.Name, other.UID = "data-pg-1", "c-2"
	if _, err := dc.UpdateClaimStatus(context.Background(), other); err != nil {
		t.Fatal(err)
	}
	if got := read(); got.ResourceVersion != "10" || dc.claims.len() != 1 {
		t.Errorf("a write older than writtenTTL: read version %s, want the cache's 10; %d claims remembered, want 1", got.ResourceVersion, dc.claims.len())
	}
}

// A claim this controller created is read as created until its cache
// shows it, so a sync right after the create does not create it again
// (which the server refuses AlreadyExists); once the informer delivers it,
// or its delete, the cache answers; a create the cache never shows is
// trusted for createdClaimTTL.
func TestClaimReadAfterItsCreateIsTheCreate(t *testing.T) {
	client := fake.NewClientset()
	rv := 0
	client.PrependReactor("create", "persistentvolumeclaims", func(a clienttesting.Action) (bool, runtime.Object, error) {
		claim := a.(clienttesting.CreateAction).GetObject().(*corev1.PersistentVolumeClaim)
		rv++
		claim.ResourceVersion = strconv.Itoa(rv)
		claim.UID = types.UID("c-" + strconv.Itoa(rv))
		claim.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: FieldManager}}
		return false, nil, nil // the tracker stores it, as changed here
	})
	factory := informers.NewSharedInformerFactory(client, 0)
	claimInformer := factory.Core().V1().PersistentVolumeClaims()
	if err := claimInformer.Informer().SetTransform(TrimClaim); err != nil {
		t.Fatal(err)
	}
	control, err := NewDataControl(client, factory.Core().V1().PersistentVolumes(), claimInformer)
	if err != nil {
		t.Fatal(err)
	}
	dc := control.(*realDataControl)
	now := time.Unix(1000, 0)
	dc.now = func() time.Time { return now }
	ctx, cancel := context.WithCancel(t.Context())
	defer factory.Shutdown() // after cancel, which stops the informers
	defer cancel()
	newClaim := func(name string) *corev1.PersistentVolumeClaim {
		return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
			Spec: corev1.PersistentVolumeClaimSpec{VolumeName: "pv-" + name}}
	}

	// The informers are not started: the cache shows nothing.
	if _, err := dc.CreateClaim(ctx, newClaim("data-pg-0")); err != nil {
		t.Fatal(err)
	}
	got, err := dc.GetClaim("ns", "data-pg-0")
	if err != nil {
		t.Fatalf("right after the create, with the cache behind: %v, want the claim as created", err)
	}
	if got.UID != "c-1" || got.Spec.VolumeName != "pv-data-pg-0" || got.ManagedFields != nil {
		t.Errorf("read UID %s volume %s managedFields %v, want the create's (c-1, pv-data-pg-0), trimmed as the cache keeps it", got.UID, got.Spec.VolumeName, got.ManagedFields)
	}
	// Its binding completed before the cache showed it: read as written.
	upd := got.DeepCopy()
	upd.Status.Phase = corev1.ClaimBound
	client.PrependReactor("update", "persistentvolumeclaims", func(a clienttesting.Action) (bool, runtime.Object, error) {
		claim := a.(clienttesting.UpdateAction).GetObject().(*corev1.PersistentVolumeClaim).DeepCopy()
		rv++
		claim.ResourceVersion = strconv.Itoa(rv)
		return true, claim, nil
	})
	if _, err := dc.UpdateClaimStatus(ctx, upd); err != nil {
		t.Fatal(err)
	}
	if got, err := dc.GetClaim("ns", "data-pg-0"); err != nil || got.Status.Phase != corev1.ClaimBound || got.ResourceVersion != "2" {
		t.Errorf("created, then its status written, the cache behind both: read %v (%v), want the status write (version 2, Bound)", got, err)
	}
	if _, err := dc.GetClaim("ns", "data-pg-9"); !apierrors.IsNotFound(err) {
		t.Errorf("a claim never created: %v, want NotFound", err)
	}

	// A create the cache never shows is trusted for createdClaimTTL only.
	if _, err := dc.CreateClaim(ctx, newClaim("data-pg-1")); err != nil {
		t.Fatal(err)
	}
	now = now.Add(createdClaimTTL + time.Second)
	if _, err := dc.GetClaim("ns", "data-pg-1"); !apierrors.IsNotFound(err) {
		t.Errorf("a create older than createdClaimTTL, not in the cache: %v, want NotFound", err)
	}
	now = now.Add(-createdClaimTTL - time.Second)

	// The informer delivers the claims: each is forgotten, and read from
	// the cache.
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), claimInformer.Informer().HasSynced) {
		t.Fatal("claim cache not synced")
	}
	if n := dc.created.len(); n != 0 {
		t.Errorf("after the cache delivered the created claims, %d are still remembered", n)
	}
	if got, err := dc.GetClaim("ns", "data-pg-0"); err != nil || got.UID != "c-1" {
		t.Errorf("from the cache: %v, %v; want claim c-1", got, err)
	}

	// A claim deleted is not read from memory: its delete reached the
	// cache, or this controller deleted it.
	if _, err := dc.CreateClaim(ctx, newClaim("data-pg-2")); err != nil {
		t.Fatal(err)
	}
	if err := client.CoreV1().PersistentVolumeClaims("ns").Delete(ctx, "data-pg-2", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(wait.ForeverTestTimeout); time.Now().Before(deadline); {
		if _, err := dc.GetClaim("ns", "data-pg-2"); apierrors.IsNotFound(err) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := dc.GetClaim("ns", "data-pg-2"); !apierrors.IsNotFound(err) {
		t.Errorf("a claim created and deleted, both seen by the cache: %v, want NotFound", err)
	}
	created, err := dc.CreateClaim(ctx, newClaim("data-pg-3"))
	if err != nil {
		t.Fatal(err)
	}
	if err := dc.DeleteClaim(ctx, created); err != nil {
		t.Fatal(err)
	}
	if n := dc.created.len(); n != 0 {
		t.Errorf("a claim this controller deleted is still remembered as created (%d)", n)
	}
}

// A selector naming a Flock's UID is answered from the volumes' index by
// that label, as a scan of every volume answers it.
func TestListVolumesByFlockUID(t *testing.T) {
	volumes := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{volumeFlockUIDIndex: indexVolumeByFlockUID})
	for _, pv := range []*corev1.PersistentVolume{
		{ObjectMeta: metav1.ObjectMeta{Name: "a-0", Labels: map[string]string{LabelFlockUID: "a", v1alpha1.LabelOrdinal: "0"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "a-1", Labels: map[string]string{LabelFlockUID: "a", v1alpha1.LabelOrdinal: "1"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "b-0", Labels: map[string]string{LabelFlockUID: "b", v1alpha1.LabelOrdinal: "0"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "other"}},
	} {
		if err := volumes.Add(pv); err != nil {
			t.Fatal(err)
		}
	}
	indexed := &realDataControl{volumeLister: corelisters.NewPersistentVolumeLister(volumes), volumeIndexer: volumes}
	scanned := &realDataControl{volumeLister: corelisters.NewPersistentVolumeLister(volumes)}
	names := func(dc *realDataControl, set labels.Set) []string {
		t.Helper()
		pvs, err := dc.ListVolumes(labels.SelectorFromSet(set))
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, pv := range pvs {
			out = append(out, pv.Name)
		}
		slices.Sort(out)
		return out
	}
	for _, tc := range []struct {
		set  labels.Set
		want []string
	}{
		{labels.Set{LabelFlockUID: "a"}, []string{"a-0", "a-1"}},
		{labels.Set{LabelFlockUID: "a", v1alpha1.LabelOrdinal: "1"}, []string{"a-1"}},
		{labels.Set{LabelFlockUID: "c"}, nil},
		{labels.Set{v1alpha1.LabelOrdinal: "0"}, []string{"a-0", "b-0"}},
	} {
		if got := names(indexed, tc.set); !slices.Equal(got, tc.want) {
			t.Errorf("indexed %v: %v, want %v", tc.set, got, tc.want)
		}
		if got := names(scanned, tc.set); !slices.Equal(got, tc.want) {
			t.Errorf("scanned %v: %v, want %v", tc.set, got, tc.want)
		}
	}
}
