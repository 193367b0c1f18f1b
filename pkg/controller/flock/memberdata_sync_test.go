package flock

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"flock.dev/flock/pkg/apis/flock/v1alpha1"
)

var (
	pvResource  = schema.GroupResource{Resource: "persistentvolumes"}
	pvcResource = schema.GroupResource{Resource: "persistentvolumeclaims"}
)

// fakeDataControl keeps PersistentVolumes and claims in maps; writes are
// seen at once, deletes remove at once, and ops logs the writes. Unless
// unbound, it plays the PersistentVolume controller too, at once: a new
// volume is Available, a new claim naming an existing volume is Bound.
type fakeDataControl struct {
	volumes map[string]*corev1.PersistentVolume
	claims  map[string]*corev1.PersistentVolumeClaim
	// uncachedVolumes and uncachedClaims are in the API server but not yet
	// in the cache: only the Live reads see them; a delete removes them.
	uncachedVolumes map[string]*corev1.PersistentVolume
	uncachedClaims  map[string]*corev1.PersistentVolumeClaim
	next            int
	ops             []string
	unbound         bool
	// statusKeepsMetadata makes UpdateClaimStatus write only the status,
	// as a server that resets metadata on status writes would.
	statusKeepsMetadata bool
	// claimStatusConflicts is how many of the next claim status writes
	// fail with a conflict, as when another writer came first.
	claimStatusConflicts int
	// volumesBehind makes CreateVolume leave the new volume out of the
	// cache (uncachedVolumes) until reveal.
	volumesBehind bool
	// mu makes the fake safe for a sync's members written at once.
	mu sync.Mutex
	// beforeCreateClaim, when set, runs at the start of CreateClaim,
	// outside mu.
	beforeCreateClaim func()
	// failCreateClaim, when set, is the error of the next CreateClaim.
	failCreateClaim error
	// liveVolumeGets counts GetVolumeLive's calls.
	liveVolumeGets int
}

func newFakeDataControl() *fakeDataControl {
	return &fakeDataControl{volumes: map[string]*corev1.PersistentVolume{}, claims: map[string]*corev1.PersistentVolumeClaim{},
		uncachedVolumes: map[string]*corev1.PersistentVolume{}, uncachedClaims: map[string]*corev1.PersistentVolumeClaim{}}
}

// hide moves every volume and claim out of the cache (the API server still
// has them), as a cache behind the writes of the last syncs would be.
func (c *fakeDataControl) hide() {
	for k, v := range c.volumes {
		c.uncachedVolumes[k] = v
	}
	for k, v := range c.claims {
		c.uncachedClaims[k] = v
	}
	clear(c.volumes)
	clear(c.claims)
}

func (c *fakeDataControl) GetVolumeLive(_ context.Context, name string) (*corev1.PersistentVolume, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.liveVolumeGets++
	if pv, ok := c.uncachedVolumes[name]; ok {
		return pv, nil
	}
	return c.getVolume(name)
}

func (c *fakeDataControl) ListVolumesLive(_ context.Context, selector labels.Selector) ([]*corev1.PersistentVolume, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	out, _ := c.listVolumes(selector)
	for _, pv := range c.uncachedVolumes {
		if selector.Matches(labels.Set(pv.Labels)) {
			out = append(out, pv)
		}
	}
	return out, nil
}

func (c *fakeDataControl) GetClaimLive(_ context.Context, namespace, name string) (*corev1.PersistentVolumeClaim, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if pvc, ok := c.uncachedClaims[namespace+"/"+name]; ok {
		return pvc, nil
	}
	return c.getClaim(namespace, name)
}

func (c *fakeDataControl) uid() types.UID {
	c.next++
	return types.UID(fmt.Sprintf("data-uid-%d", c.next))
}

func (c *fakeDataControl) getVolume(name string) (*corev1.PersistentVolume, error) {
	if pv, ok := c.volumes[name]; ok {
		return pv, nil
	}
	return nil, apierrors.NewNotFound(pvResource, name)
}

func (c *fakeDataControl) listVolumes(selector labels.Selector) ([]*corev1.PersistentVolume, error) {
	var out []*corev1.PersistentVolume
	for _, pv := range c.volumes {
		if selector.Matches(labels.Set(pv.Labels)) {
			out = append(out, pv)
		}
	}
	return out, nil
}

func (c *fakeDataControl) CreateVolume(_ context.Context, pv *corev1.PersistentVolume) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.volumes[pv.Name]; ok {
		return apierrors.NewAlreadyExists(pvResource, pv.Name)
	}
	if _, ok := c.uncachedVolumes[pv.Name]; ok { // the server has it
		return apierrors.NewAlreadyExists(pvResource, pv.Name)
	}
	pv = pv.DeepCopy()
	pv.UID = c.uid()
	pv.Status.Phase = corev1.VolumePending
	if !c.unbound {
		// The PersistentVolume controller takes it up: Available when
		// reserved by name only, Bound when made bound to a claim's UID.
		pv.Status.Phase = corev1.VolumeAvailable
		if ref := pv.Spec.ClaimRef; ref != nil && ref.UID != "" {
			pv.Status.Phase = corev1.VolumeBound
		}
	}
	if c.volumesBehind {
		c.uncachedVolumes[pv.Name] = pv
	} else {
		c.volumes[pv.Name] = pv
	}
	c.ops = append(c.ops, "create pv "+pv.Name)
	return nil
}

// reveal moves every uncached volume and claim into the cache, as the
// cache catching up does.
func (c *fakeDataControl) reveal() {
	c.mu.Lock()
	defer c.mu.Unlock()
	maps.Copy(c.volumes, c.uncachedVolumes)
	maps.Copy(c.claims, c.uncachedClaims)
	clear(c.uncachedVolumes)
	clear(c.uncachedClaims)
}

func (c *fakeDataControl) AnnotateVolume(_ context.Context, pv *corev1.PersistentVolume, key, value string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	store := c.volumes
	if _, ok := c.uncachedVolumes[pv.Name]; ok {
		store = c.uncachedVolumes
	}
	old, ok := store[pv.Name]
	if !ok || old.UID != pv.UID {
		return apierrors.NewConflict(pvResource, pv.Name, fmt.Errorf("gone"))
	}
	upd := old.DeepCopy()
	if upd.Annotations == nil {
		upd.Annotations = map[string]string{}
	}
	upd.Annotations[key] = value
	store[pv.Name] = upd
	c.ops = append(c.ops, "annotate pv "+pv.Name)
	return nil
}

func (c *fakeDataControl) UpdateVolume(_ context.Context, pv *corev1.PersistentVolume) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.volumes[pv.Name]; !ok || old.UID != pv.UID {
		return apierrors.NewConflict(pvResource, pv.Name, fmt.Errorf("gone"))
	}
	c.volumes[pv.Name] = pv.DeepCopy()
	c.ops = append(c.ops, "update pv "+pv.Name)
	return nil
}

func (c *fakeDataControl) DeleteVolume(_ context.Context, pv *corev1.PersistentVolume) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, m := range []map[string]*corev1.PersistentVolume{c.volumes, c.uncachedVolumes} {
		if old, ok := m[pv.Name]; ok && old.UID == pv.UID {
			delete(m, pv.Name)
			c.ops = append(c.ops, "delete pv "+pv.Name)
		}
	}
	return nil
}

func (c *fakeDataControl) getClaim(namespace, name string) (*corev1.PersistentVolumeClaim, error) {
	if pvc, ok := c.claims[namespace+"/"+name]; ok {
		return pvc, nil
	}
	return nil, apierrors.NewNotFound(pvcResource, name)
}

func (c *fakeDataControl) CreateClaim(_ context.Context, claim *corev1.PersistentVolumeClaim) (*corev1.PersistentVolumeClaim, error) {
	if c.beforeCreateClaim != nil {
		c.beforeCreateClaim()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.failCreateClaim; err != nil {
		c.failCreateClaim = nil
		return nil, err
	}
	key := claim.Namespace + "/" + claim.Name
	if _, ok := c.claims[key]; ok {
		return nil, apierrors.NewAlreadyExists(pvcResource, claim.Name)
	}
	claim = claim.DeepCopy()
	claim.UID = c.uid()
	claim.Status.Phase = corev1.ClaimPending
	if pv, ok := c.volumes[claim.Spec.VolumeName]; ok && !c.unbound && pv.Spec.ClaimRef != nil && pv.Spec.ClaimRef.UID == "" {
		// A volume reserved by name only: the PersistentVolume
		// controller binds the claim to it.
		bindClaim(claim, pv)
		pv.Spec.ClaimRef.UID = claim.UID
		pv.Status.Phase = corev1.VolumeBound
	}
	c.claims[key] = claim
	c.ops = append(c.ops, "create claim "+claim.Name)
	return claim.DeepCopy(), nil
}

// bindClaim marks claim bound to pv, as the PersistentVolume controller
// does.
func bindClaim(claim *corev1.PersistentVolumeClaim, pv *corev1.PersistentVolume) {
	metav1.SetMetaDataAnnotation(&claim.ObjectMeta, annBindCompleted, "yes")
	claim.Status.Phase = corev1.ClaimBound
	claim.Status.AccessModes = pv.Spec.AccessModes
	claim.Status.Capacity = pv.Spec.Capacity
}

func (c *fakeDataControl) UpdateClaim(_ context.Context, claim *corev1.PersistentVolumeClaim) (*corev1.PersistentVolumeClaim, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	key := claim.Namespace + "/" + claim.Name
	old, ok := c.claims[key]
	if !ok || old.UID != claim.UID {
		return nil, apierrors.NewConflict(pvcResource, claim.Name, fmt.Errorf("gone"))
	}
	upd := claim.DeepCopy()
	upd.Status = old.Status
	c.claims[key] = upd
	c.ops = append(c.ops, "update claim "+claim.Name)
	return upd.DeepCopy(), nil
}

func (c *fakeDataControl) UpdateClaimStatus(_ context.Context, claim *corev1.PersistentVolumeClaim) (*corev1.PersistentVolumeClaim, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	key := claim.Namespace + "/" + claim.Name
	old, ok := c.claims[key]
	if !ok || old.UID != claim.UID {
		return nil, apierrors.NewConflict(pvcResource, claim.Name, fmt.Errorf("gone"))
	}
	if c.claimStatusConflicts > 0 {
		c.claimStatusConflicts--
		return nil, apierrors.NewConflict(pvcResource, claim.Name, fmt.Errorf("the object has been modified"))
	}
	// As kube-apiserver's status strategy for claims: the spec stays, the
	// metadata and status are written (unless statusKeepsMetadata says
	// the server resets the metadata too).
	upd := claim.DeepCopy()
	upd.Spec = old.Spec
	if c.statusKeepsMetadata {
		upd.ObjectMeta = old.ObjectMeta
	}
	c.claims[key] = upd
	c.ops = append(c.ops, "update claim status "+claim.Name)
	return upd.DeepCopy(), nil
}

func (c *fakeDataControl) DeleteClaim(_ context.Context, claim *corev1.PersistentVolumeClaim) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	key := claim.Namespace + "/" + claim.Name
	for _, m := range []map[string]*corev1.PersistentVolumeClaim{c.claims, c.uncachedClaims} {
		if old, ok := m[key]; ok && old.UID == claim.UID {
			delete(m, key)
			c.ops = append(c.ops, "delete claim "+claim.Name)
		}
	}
	return nil
}

// dataFixture is a dataSyncer over fakes, with the events it recorded.
type dataFixture struct {
	t      *testing.T
	data   *fakeDataControl
	pods   *fakeMemberControl
	syncer *dataSyncer
	events []string
	now    time.Time
}

func newDataFixture(t *testing.T) *dataFixture {
	clk := testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	idx := func() cache.Indexer {
		return cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	}
	d := &dataFixture{t: t, data: newFakeDataControl(), pods: newFakeMemberControl(idx(), idx(), clk), now: clk.Now()}
	d.syncer = &dataSyncer{
		data: d.data, pods: d.pods, dataRoot: "/srv/flock", helperNamespace: "flock-system", helperImage: "busybox",
		event: func(_ *v1alpha1.Flock, eventType, reason, format string, args ...any) {
			d.events = append(d.events, reason+": "+fmt.Sprintf(format, args...))
		},
	}
	return d
}

// finishHelper makes a helper pod end in phase.
func (d *dataFixture) finishHelper(job string, f *v1alpha1.Flock, ord int32, phase corev1.PodPhase) {
	d.t.Helper()
	h, err := d.pods.GetPod("flock-system", HelperPodName(job, f.UID, ord))
	if err != nil {
		d.t.Fatalf("helper %s of member %d: %v", job, ord, err)
	}
	h = h.DeepCopy()
	h.Status.Phase = phase
	if err := d.pods.pods.Update(h); err != nil {
		d.t.Fatal(err)
	}
}

func (d *dataFixture) ensure(f *v1alpha1.Flock, m v1alpha1.FlockMember) dataState {
	d.t.Helper()
	st, err := d.syncer.ensure(context.Background(), f, m, newNode(m.Node), d.now)
	if err != nil {
		d.t.Fatalf("ensure: %v", err)
	}
	return st
}

// TestEnsureNodeLocalData walks member 1 of a Flock from nothing to a
// prepared volume, one sync at a time, and repeats each sync (as after a
// restart with a cache behind) to find no duplicate.
func TestEnsureNodeLocalData(t *testing.T) {
	d := newDataFixture(t)
	fl := uidFlock("pg", 3)
	fl.Spec.Template.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsUser: ptr.To(int64(999)), FSGroup: ptr.To(int64(999))}
	m := v1alpha1.FlockMember{Ordinal: 1, Node: "n-b"}
	pvName := PersistentVolumeName(fl.UID, 1)

	// One sync makes the volume, the claim and the helper (the fake's
	// cache is never behind), then waits for the helper.
	st := d.ensure(fl, m)
	helpers, _ := d.pods.ListPods("flock-system", labels.Everything())
	if st.ready || st.blocked == nil || st.blocked.Reason != ReasonDataPreparing || len(d.data.volumes) != 1 || len(d.data.claims) != 1 ||
		d.data.claims[testNamespace+"/data-pg-1"].Spec.VolumeName != pvName {
		t.Fatalf("after sync 1: %+v, volumes %v, claims %v", st, d.data.volumes, d.data.claims)
	}
	if len(helpers) != 1 || helpers[0].Labels[LabelHelper] != HelperPrepare || helpers[0].Spec.NodeName != "n-b" {
		t.Fatalf("helpers %d", len(helpers))
	}
	if !strings.Contains(st.blocked.Message, "to be prepared") {
		t.Errorf("message %q", st.blocked.Message)
	}
	// A sync while the helper runs changes nothing.
	ops := len(d.data.ops) + len(d.pods.ops)
	if st = d.ensure(fl, m); st.ready || len(d.data.ops)+len(d.pods.ops) != ops {
		t.Errorf("a sync while the helper runs wrote: %v %v", d.data.ops, d.pods.ops)
	}

	d.finishHelper(HelperPrepare, fl, 1, corev1.PodSucceeded)
	st = d.ensure(fl, m)
	if !st.ready || st.volume != pvName || st.claim != "data-pg-1" {
		t.Fatalf("after the helper: %+v", st)
	}
	if d.data.volumes[pvName].Annotations[AnnotationPrepared] != "true" {
		t.Error("volume not marked prepared")
	}
	// The finished helper goes after the member's pod is created: its
	// deletion is the ready state's after.
	if helpers, _ := d.pods.ListPods("flock-system", labels.Everything()); len(helpers) != 1 || st.after == nil {
		t.Fatalf("before the pod: %d helpers, after set %v; want the finished helper and its deletion to come", len(helpers), st.after != nil)
	}
	if err := st.runAfter(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	if helpers, _ := d.pods.ListPods("flock-system", labels.Everything()); len(helpers) != 0 {
		t.Errorf("helper left: %d", len(helpers))
	}
	// Prepared: no helper runs again.
	if st = d.ensure(fl, m); !st.ready {
		t.Errorf("second ready sync: %+v", st)
	}
	if helpers, _ := d.pods.ListPods("flock-system", labels.Everything()); len(helpers) != 0 {
		t.Error("a prepared directory is prepared again")
	}
	// The claim first, the volume bound to its UID, the binding completed
	// here once the volume controller took the volume up.
	want := []string{"create claim data-pg-1", "create pv " + pvName, "update claim status data-pg-1", "annotate pv " + pvName}
	if strings.Join(d.data.ops, ",") != strings.Join(want, ",") {
		t.Errorf("data writes %v, want %v", d.data.ops, want)
	}
	if !hasDataEvent(d.events, "DataPrepared", "owner 999:999, mode 770") {
		t.Errorf("events %v", d.events)
	}
	// One event tells of the claim and the volume (each event is a write).
	if !hasDataEvent(d.events, "VolumeCreated", "created PersistentVolume "+pvName+" for member 1 on node ") ||
		!hasDataEvent(d.events, "VolumeCreated", "bound to its claim data-pg-1") || hasDataEvent(d.events, "ClaimCreated", "") {
		t.Errorf("events %v, want one VolumeCreated naming the claim and no ClaimCreated", d.events)
	}
}

// A member's volume that is not in the cache yet after the sync that made
// it is reported as it is once the cache has it: the same reason, message,
// volume and claim, so that the cache catching up brings no status write.
func TestEnsureReportsAVolumeNotCachedYetAsPreparing(t *testing.T) {
	d := newDataFixture(t)
	d.data.volumesBehind = true
	fl := uidFlock("pg", 3)
	m := v1alpha1.FlockMember{Ordinal: 1, Node: "n-b"}
	first := d.ensure(fl, m)
	if len(d.data.uncachedVolumes) != 1 || len(d.data.volumes) != 0 {
		t.Fatalf("the volume should be made and not cached: cached %v, uncached %v", d.data.volumes, d.data.uncachedVolumes)
	}
	helpers, _ := d.pods.ListPods("flock-system", labels.Everything())
	if len(helpers) != 1 {
		t.Fatalf("the helper should start in the sync that made the volume: %d helpers", len(helpers))
	}
	d.data.reveal()
	second := d.ensure(fl, m)
	if first.ready || second.ready || first.blocked == nil || second.blocked == nil {
		t.Fatalf("both syncs should wait for the helper: %+v, %+v", first, second)
	}
	if *first.blocked != *second.blocked || first.volume != second.volume || first.claim != second.claim {
		t.Errorf("before the cache has the volume: %+v %+v; after: %+v %+v", first, *first.blocked, second, *second.blocked)
	}
	if first.volume != PersistentVolumeName(fl.UID, 1) || first.claim != "data-pg-1" {
		t.Errorf("volume %q, claim %q", first.volume, first.claim)
	}
}

// A sync between the one that made a member's volume and the cache showing
// it makes nothing and tells nothing again: the create refused
// AlreadyExists is not a second VolumeCreated.
func TestEnsureTellsOfAVolumeOnce(t *testing.T) {
	d := newDataFixture(t)
	d.data.volumesBehind = true
	fl := uidFlock("pg", 3)
	m := v1alpha1.FlockMember{Ordinal: 1, Node: "n-b"}
	d.ensure(fl, m)
	d.ensure(fl, m)
	pvName := PersistentVolumeName(fl.UID, 1)
	if want := []string{"create claim data-pg-1", "create pv " + pvName}; strings.Join(d.data.ops, ",") != strings.Join(want, ",") {
		t.Errorf("data writes %v, want %v", d.data.ops, want)
	}
	told := 0
	for _, e := range d.events {
		if strings.Contains(e, "VolumeCreated") {
			told++
		}
	}
	if told != 1 {
		t.Errorf("VolumeCreated told %d times, want once: %v", told, d.events)
	}
}

// TestEnsureWaitsForTheVolumeController walks a member's data with a
// PersistentVolume controller that is slow: the claim is made first, then
// the volume bound to the claim's UID, and the helper starts in that sync;
// the binding is completed (the claim annotated and Bound) only once the
// volume controller has taken the volume up (its phase Bound): that
// controller marks a claim Lost whose completed binding names a volume it
// does not hold. The pod waits for the claim to be bound.
func TestEnsureWaitsForTheVolumeController(t *testing.T) {
	d := newDataFixture(t)
	d.data.unbound = true
	fl := uidFlock("pg", 3)
	m := v1alpha1.FlockMember{Ordinal: 0, Node: "n-a"}
	pvName := PersistentVolumeName(fl.UID, 0)
	claimKey := testNamespace + "/data-pg-0"

	st := d.ensure(fl, m)
	helpers, _ := d.pods.ListPods("flock-system", labels.Everything())
	claim := d.data.claims[claimKey]
	if st.ready || len(d.data.volumes) != 1 || claim == nil || len(helpers) != 1 {
		t.Fatalf("sync 1: %+v, volumes %d, claims %d, helpers %d", st, len(d.data.volumes), len(d.data.claims), len(helpers))
	}
	if ref := d.data.volumes[pvName].Spec.ClaimRef; ref.UID != claim.UID || claim.Spec.VolumeName != pvName {
		t.Fatalf("volume's claimRef %+v, claim's volumeName %q: want them naming each other, with the claim's UID", ref, claim.Spec.VolumeName)
	}
	// The helper finishes before the volume controller looks: the
	// directory is recorded prepared, the claim is left alone.
	d.finishHelper(HelperPrepare, fl, 0, corev1.PodSucceeded)
	st = d.ensure(fl, m)
	if st.ready || d.data.volumes[pvName].Annotations[AnnotationPrepared] != "true" ||
		!strings.Contains(st.blocked.Message, "PersistentVolume controller to take up volume "+pvName) {
		t.Fatalf("sync 2: %+v (%v), volume %+v", st, st.blocked, d.data.volumes[pvName].Annotations)
	}
	if c := d.data.claims[claimKey]; metav1.HasAnnotation(c.ObjectMeta, annBindCompleted) || c.Status.Phase == corev1.ClaimBound {
		t.Fatalf("the binding was completed before the volume controller took the volume up: %+v", c)
	}
	// No pod follows a member that is not ready: its finished helper
	// went in this sync, not after a pod.
	if helpers, _ := d.pods.ListPods("flock-system", labels.Everything()); len(helpers) != 0 || st.after != nil {
		t.Fatalf("sync 2 left %d helpers (after set: %v)", len(helpers), st.after != nil)
	}
	d.data.volumes[pvName].Status.Phase = corev1.VolumeBound
	if st = d.ensure(fl, m); !st.ready || st.volume != pvName || st.claim != "data-pg-0" {
		t.Fatalf("sync 3: %+v (%v)", st, st.blocked)
	}
	if c := d.data.claims[claimKey]; !claimBound(c, pvName) || c.Status.Capacity.Storage().String() != "1Gi" || len(c.Status.AccessModes) != 1 {
		t.Errorf("claim after the bind: %+v", c)
	}
	// One write completes the binding: the annotation goes with the
	// status.
	want := []string{"create claim data-pg-0", "create pv " + pvName, "annotate pv " + pvName, "update claim status data-pg-0"}
	if strings.Join(d.data.ops, ",") != strings.Join(want, ",") {
		t.Errorf("data writes %v, want %v", d.data.ops, want)
	}
}

// readyToBind brings member 0 of a 1-member Flock to where its binding is
// completed next: directory prepared, volume taken up by the
// PersistentVolume controller (which binds nothing itself here).
func (d *dataFixture) readyToBind() (*v1alpha1.Flock, v1alpha1.FlockMember, string) {
	d.data.unbound = true
	fl := uidFlock("pg", 1)
	m := v1alpha1.FlockMember{Ordinal: 0, Node: "n-a"}
	pvName := PersistentVolumeName(fl.UID, 0)
	d.ensure(fl, m)
	d.finishHelper(HelperPrepare, fl, 0, corev1.PodSucceeded)
	d.data.volumes[pvName].Status.Phase = corev1.VolumeBound
	return fl, m, pvName
}

// TestCompleteBindConflictIsNoError: when the claim was written in between
// (the PersistentVolume controller finishing the same binding), the sync
// waits for the claim's event without an error (which would requeue the
// Flock with a backoff), and the next sync binds.
func TestCompleteBindConflictIsNoError(t *testing.T) {
	d := newDataFixture(t)
	fl, m, _ := d.readyToBind()
	d.data.claimStatusConflicts = 1
	if st := d.ensure(fl, m); st.ready || st.blocked == nil || !strings.Contains(st.blocked.Message, "read again") {
		t.Fatalf("after a conflict: %+v (%v)", st, st.blocked)
	}
	if st := d.ensure(fl, m); !st.ready {
		t.Fatalf("next sync: %+v (%v)", st, st.blocked)
	}
}

// TestCompleteBindWhereStatusWritesDropMetadata: against a server whose
// status writes keep the metadata as it was, the annotation follows in an
// update of its own, and the claim ends bound all the same.
func TestCompleteBindWhereStatusWritesDropMetadata(t *testing.T) {
	d := newDataFixture(t)
	d.data.statusKeepsMetadata = true
	fl, m, pvName := d.readyToBind()
	d.data.ops = nil
	if st := d.ensure(fl, m); !st.ready {
		t.Fatalf("not ready: %+v (%v)", st, st.blocked)
	}
	if c := d.data.claims[testNamespace+"/data-pg-0"]; !claimBound(c, pvName) {
		t.Errorf("claim not bound: %+v", c)
	}
	want := []string{"annotate pv " + pvName, "update claim status data-pg-0", "update claim data-pg-0"}
	if strings.Join(d.data.ops, ",") != strings.Join(want, ",") {
		t.Errorf("data writes %v, want %v", d.data.ops, want)
	}
}

func hasDataEvent(events []string, reason, part string) bool {
	for _, e := range events {
		if strings.HasPrefix(e, reason+": ") && strings.Contains(e, part) {
			return true
		}
	}
	return false
}

func TestEnsureDataConflicts(t *testing.T) {
	fl := uidFlock("pg", 3)
	m := v1alpha1.FlockMember{Ordinal: 0, Node: "n-a"}
	pvName := PersistentVolumeName(fl.UID, 0)
	tests := []struct {
		name  string
		setup func(d *fakeDataControl)
		want  string
	}{
		{name: "foreign volume", setup: func(d *fakeDataControl) {
			d.volumes[pvName] = &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: pvName, UID: "x"}}
		}, want: "PersistentVolume " + pvName + " exists and is not member 0's"},
		{name: "foreign claim", setup: func(d *fakeDataControl) {
			pv := NewMemberVolume(fl, m, "n-a", "/srv/flock", "")
			pv.UID = "pv"
			d.volumes[pvName] = pv
			d.claims[testNamespace+"/data-pg-0"] = &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data-pg-0", Namespace: testNamespace, UID: "c"}}
		}, want: "PersistentVolumeClaim " + testNamespace + "/data-pg-0 exists and is not controlled by this Flock"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := newDataFixture(t)
			tc.setup(d.data)
			for range 2 {
				st := d.ensure(fl, m)
				if st.ready || st.blocked == nil || st.blocked.Reason != ReasonDataConflict || !strings.Contains(st.blocked.Message, tc.want) {
					t.Errorf("state %+v, want DataConflict naming %q", st, tc.want)
				}
			}
			if len(d.data.ops) != 0 || len(d.pods.ops) != 0 {
				t.Errorf("a foreign object was touched: %v %v", d.data.ops, d.pods.ops)
			}
		})
	}
}

// A retained volume whose claim was deleted and made again is released for
// the new claim; a volume on another node (member reassigned) is replaced.
func TestEnsureRebindsAndReplaces(t *testing.T) {
	fl := uidFlock("pg", 3)
	m := v1alpha1.FlockMember{Ordinal: 0, Node: "n-a"}
	pvName := PersistentVolumeName(fl.UID, 0)

	d := newDataFixture(t)
	pv := NewMemberVolume(fl, m, "n-a", "/srv/flock", "")
	pv.UID = "pv"
	pv.Annotations = map[string]string{AnnotationPrepared: "true"}
	pv.Spec.ClaimRef.UID = "old-claim"
	d.data.volumes[pvName] = pv
	if st := d.ensure(fl, m); st.ready || d.data.volumes[pvName].Spec.ClaimRef.UID != "" || !hasDataEvent(d.events, "VolumeReleased", "new claim data-pg-0") {
		t.Errorf("state %+v, claimRef %+v", st, d.data.volumes[pvName].Spec.ClaimRef)
	}
	// The volume controller binds them by name (the volume's phase may be
	// stale: the binding is not completed here).
	claim := d.data.claims[testNamespace+"/data-pg-0"]
	bindClaim(claim, d.data.volumes[pvName])
	d.data.volumes[pvName].Spec.ClaimRef.UID = claim.UID
	if st := d.ensure(fl, m); !st.ready {
		t.Errorf("after the volume controller's bind: %+v", st)
	}

	// Member 0 recorded on n-z (reassigned): the volume is made again there.
	moved := v1alpha1.FlockMember{Ordinal: 0, Node: "n-z"}
	st := d.ensure(fl, moved)
	if st.ready || len(d.data.volumes) != 0 || len(d.data.claims) != 0 {
		t.Fatalf("after the move: %+v, volumes %v, claims %v", st, d.data.volumes, d.data.claims)
	}
	if !hasDataEvent(d.events, "VolumeReplaced", "it is on node n-z, not on its volume's node") {
		t.Errorf("events %v", d.events)
	}
	d.ensure(fl, moved)
	if !volumeOnNode(d.data.volumes[pvName], "n-z") || d.data.volumes[pvName].Annotations[AnnotationPrepared] != "" {
		t.Errorf("new volume %+v", d.data.volumes[pvName])
	}
}

func TestEnsureClaimTemplate(t *testing.T) {
	d := newDataFixture(t)
	fl := uidFlock("pg", 3)
	fl.Spec.Storage.Capacity, fl.Spec.Storage.Mode = "", nil
	fl.Spec.Storage.ClaimTemplate = &corev1.PersistentVolumeClaimTemplate{Spec: corev1.PersistentVolumeClaimSpec{
		AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
		StorageClassName: ptr.To("fast"),
		Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
	}}
	m := v1alpha1.FlockMember{Ordinal: 2, Node: "n-c"}
	d.ensure(fl, m)
	st := d.ensure(fl, m)
	if !st.ready || st.claim != "data-pg-2" || len(d.data.volumes) != 0 || len(d.pods.ops) != 0 {
		t.Errorf("state %+v, volumes %v, pod writes %v", st, d.data.volumes, d.pods.ops)
	}
	if c := d.data.claims[testNamespace+"/data-pg-2"]; *c.Spec.StorageClassName != "fast" {
		t.Errorf("claim %+v", c)
	}
}

// remove runs the cleanup helper, then deletes the claim, then the volume,
// and only then reports done.
func TestRemoveNodeLocalData(t *testing.T) {
	d := newDataFixture(t)
	fl := uidFlock("pg", 3)
	m := v1alpha1.FlockMember{Ordinal: 2, Node: "n-c"}
	pvName := PersistentVolumeName(fl.UID, 2)
	pv := NewMemberVolume(fl, m, "n-c", "/srv/flock", "")
	pv.UID = "pv"
	d.data.volumes[pvName] = pv
	claim := NewMemberClaim(fl, 2, pvName)
	claim.UID = "claim"
	d.data.claims[testNamespace+"/"+claim.Name] = claim

	remove := func() removeState {
		t.Helper()
		st, err := d.syncer.remove(context.Background(), fl, m, newNode("n-c"), d.now, nil)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	if st := remove(); st.done || !strings.Contains(st.message, "removing data directory") {
		t.Fatalf("step 1: %+v", st)
	}
	h, err := d.pods.GetPod("flock-system", HelperPodName(HelperCleanup, fl.UID, 2))
	if err != nil || h.Spec.NodeName != "n-c" || h.Spec.Volumes[0].HostPath.Path != "/srv/flock/"+testNamespace {
		t.Fatalf("cleanup helper %+v, %v", h, err)
	}
	if st := remove(); st.done || len(d.data.claims) != 1 {
		t.Fatalf("the claim went before the directory: %+v", st)
	}
	d.finishHelper(HelperCleanup, fl, 2, corev1.PodSucceeded)
	for i := 0; i < 5 && !remove().done; i++ {
	}
	want := []string{"annotate pv " + pvName, "delete claim data-pg-2", "delete pv " + pvName}
	if strings.Join(d.data.ops, ",") != strings.Join(want, ",") {
		t.Errorf("data writes %v, want %v", d.data.ops, want)
	}
	if helpers, _ := d.pods.ListPods("flock-system", labels.Everything()); len(helpers) != 0 {
		t.Errorf("helpers left: %d", len(helpers))
	}
	if !hasDataEvent(d.events, "DataCleanupDone", "/srv/flock/"+testNamespace+"/pg-0b4f6a2e") {
		t.Errorf("events %v", d.events)
	}
}

func TestRemoveSkipsGoneNode(t *testing.T) {
	d := newDataFixture(t)
	fl := uidFlock("pg", 3)
	m := v1alpha1.FlockMember{Ordinal: 0, Node: "n-a"}
	pv := NewMemberVolume(fl, m, "n-a", "/srv/flock", "")
	pv.UID = "pv"
	d.data.volumes[pv.Name] = pv
	done := false
	for i := 0; i < 5 && !done; i++ {
		st, err := d.syncer.remove(context.Background(), fl, m, nil, d.now, nil)
		if err != nil {
			t.Fatal(err)
		}
		done = st.done
	}
	if !done || len(d.data.volumes) != 0 || len(d.pods.ops) != 0 || !hasDataEvent(d.events, "DataCleanupSkipped", "node n-a of member 0 is gone") {
		t.Errorf("done %v, volumes %v, pod writes %v, events %v", done, d.data.volumes, d.pods.ops, d.events)
	}
}

func (c *fakeDataControl) GetVolume(name string) (*corev1.PersistentVolume, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.getVolume(name)
}

func (c *fakeDataControl) ListVolumes(selector labels.Selector) ([]*corev1.PersistentVolume, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.listVolumes(selector)
}

// GetClaim reads the claim as the controller's informer caches it
// (TrimClaim: a Bound claim without the rest of its status).
func (c *fakeDataControl) GetClaim(namespace, name string) (*corev1.PersistentVolumeClaim, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	claim, err := c.getClaim(namespace, name)
	if err != nil {
		return nil, err
	}
	cached, _ := TrimClaim(claim.DeepCopy())
	return cached.(*corev1.PersistentVolumeClaim), nil
}

// A volume this controller marked prepared counts as prepared while the
// cache still shows it without the mark: a member whose pod is made again
// in that window starts without its helper running a second time. A volume
// nobody marked is prepared as before.
func TestMarkedVolumeIsNotPreparedAgainWhileTheCacheIsBehind(t *testing.T) {
	f := newFixture(t, "n-a")
	f.createFlock(newFlock("pg", 1))
	f.settle("pg")
	uid := f.getFlock("pg").UID
	pvName, helper := PersistentVolumeName(uid, 0), HelperPodName(HelperPrepare, uid, 0)
	helperCreates := func() int {
		n := 0
		for _, op := range f.members.ops {
			if strings.HasPrefix(op, "create "+helper+" ") {
				n++
			}
		}
		return n
	}
	if f.pod("pg-0") == nil || helperCreates() != 1 || f.data.volumes[pvName].Annotations[AnnotationPrepared] != "true" {
		t.Fatalf("after settling: pod %v, %d helper creates, volume annotations %v; want a pod, one helper, the mark",
			f.pod("pg-0") != nil, helperCreates(), f.data.volumes[pvName].Annotations)
	}
	behind := func() {
		stale := f.data.volumes[pvName].DeepCopy()
		delete(stale.Annotations, AnnotationPrepared)
		f.data.volumes[pvName] = stale
	}

	behind()
	f.deletePod("pg-0")
	f.mustSync("pg")
	if f.pod("pg-0") == nil || helperCreates() != 1 {
		t.Errorf("cache behind the mark: pod %v, %d helper creates; want the pod made again, no second helper", f.pod("pg-0") != nil, helperCreates())
	}

	// Once the cache has shown the mark, the controller forgets it: a
	// volume whose mark is then gone is prepared again.
	f.data.volumes[pvName].Annotations[AnnotationPrepared] = "true"
	f.deletePod("pg-0")
	f.mustSync("pg")
	behind()
	f.deletePod("pg-0")
	f.settle("pg")
	if helperCreates() != 2 {
		t.Errorf("an unmarked volume the controller had seen marked: %d helper creates, want 2 (prepared again)", helperCreates())
	}
}

// The sync that finds a member's prepare helper finished marks the volume,
// creates the member's pod and only then deletes the helper: the helper's
// deletion is not on the way to the pod, and no helper is left.
func TestFinishedHelperGoesAfterThePod(t *testing.T) {
	f := newFixture(t, "n-a")
	f.createFlock(newFlock("pg", 1))
	f.settle("pg")
	uid := f.getFlock("pg").UID
	helper := HelperPodName(HelperPrepare, uid, 0)
	at := func(prefix string) int {
		return slices.IndexFunc(f.members.ops, func(op string) bool { return strings.HasPrefix(op, prefix) })
	}
	deleted := slices.IndexFunc(f.members.ops, func(op string) bool { return strings.HasSuffix(op, "delete "+helper) })
	created, pod := at("create "+helper+" "), at("create pg-0 ")
	if created < 0 || pod < 0 || deleted < 0 || !(created < pod && pod < deleted) {
		t.Fatalf("pod writes %v: want the helper created, then the member's pod, then the helper deleted", f.members.ops)
	}
	if helpers, _ := f.members.ListPods("flock-system", labels.Everything()); len(helpers) != 0 {
		t.Errorf("%d helpers left", len(helpers))
	}
	if f.data.volumes[PersistentVolumeName(uid, 0)].Annotations[AnnotationPrepared] != "true" {
		t.Error("the volume is not marked prepared")
	}
}

// exitHelper reports a helper's container as exited with code while its
// phase is still Running, as kubelet does until it has stopped the pod's
// sandbox, and stores it as the controller's cache holds it (TrimPod).
func (d *dataFixture) exitHelper(job string, f *v1alpha1.Flock, ord int32, code int32) {
	d.t.Helper()
	h, err := d.pods.GetPod("flock-system", HelperPodName(job, f.UID, ord))
	if err != nil {
		d.t.Fatalf("helper %s of member %d: %v", job, ord, err)
	}
	h = h.DeepCopy()
	h.Status.Phase = corev1.PodRunning
	h.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: job, State: corev1.ContainerState{
		Terminated: &corev1.ContainerStateTerminated{ExitCode: code, FinishedAt: metav1.NewTime(d.now)}}}}
	trimmed, err := TrimPod(h)
	if err != nil {
		d.t.Fatal(err)
	}
	if err := d.pods.pods.Update(trimmed.(*corev1.Pod)); err != nil {
		d.t.Fatal(err)
	}
}

// A helper is done when its container has exited 0, before kubelet reports
// the phase Succeeded (about a second later on a real node): the member's
// volume is marked prepared and the member is ready for its pod then, and
// the helper goes at once, as a finished one does. A helper that exited
// non-zero is not done.
func TestHelperIsDoneWhenItsContainerExits(t *testing.T) {
	d := newDataFixture(t)
	fl := uidFlock("pg", 3)
	m := v1alpha1.FlockMember{Ordinal: 1, Node: "n-b"}
	pvName := PersistentVolumeName(fl.UID, 1)
	if st := d.ensure(fl, m); st.ready {
		t.Fatalf("ready before the helper ran: %+v", st)
	}

	d.exitHelper(HelperPrepare, fl, 1, 1)
	if st := d.ensure(fl, m); st.ready || d.data.volumes[pvName].Annotations[AnnotationPrepared] == "true" {
		t.Fatalf("a helper that exited 1 counted as done: %+v", st)
	}

	d.exitHelper(HelperPrepare, fl, 1, 0)
	st := d.ensure(fl, m)
	if !st.ready || d.data.volumes[pvName].Annotations[AnnotationPrepared] != "true" {
		t.Fatalf("helper exited 0, phase Running: %+v, volume annotations %v; want ready and prepared", st, d.data.volumes[pvName].Annotations)
	}
	if err := st.runAfter(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	want := "force-delete " + HelperPodName(HelperPrepare, fl.UID, 1)
	if !slices.Contains(d.pods.ops, want) {
		t.Errorf("pod writes %v, want %q", d.pods.ops, want)
	}

	// The cleanup helper too: a member scaled back up while its data was
	// removed gets fresh data once the cleanup helper's container exited 0.
	d = newDataFixture(t)
	m = v1alpha1.FlockMember{Ordinal: 2, Node: "n-c"}
	pv := NewMemberVolume(fl, m, "n-c", "/srv/flock", "")
	pv.UID = "pv"
	d.data.volumes[pv.Name] = pv
	claim := NewMemberClaim(fl, 2, pv.Name)
	claim.UID = "claim"
	d.data.claims[testNamespace+"/"+claim.Name] = claim
	if st, err := d.syncer.remove(context.Background(), fl, m, newNode("n-c"), d.now, nil); err != nil || st.done {
		t.Fatalf("remove: %+v, %v", st, err)
	}
	if st := d.ensure(fl, m); st.blocked == nil || st.blocked.Reason != ReasonDataCleanup {
		t.Fatalf("scaled back up while the cleanup runs: %+v, want blocked by %s", st, ReasonDataCleanup)
	}
	d.exitHelper(HelperCleanup, fl, 2, 0)
	if st := d.ensure(fl, m); st.blocked != nil && st.blocked.Reason == ReasonDataCleanup {
		t.Fatalf("cleanup helper exited 0, still waited for: %+v", st)
	}
}
