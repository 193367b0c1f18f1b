package flock

// data_control.go is how the reconcile logic reads and writes members'
// PersistentVolumes and PersistentVolumeClaims: reads from the informers'
// caches, writes through the clientset with the field manager.

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
)

// DataControl reads and writes the PersistentVolumes and claims that hold
// members' data. Objects returned by the Get methods come from a cache and
// must not be modified. Tests use a fake.
type DataControl interface {
	// GetVolume returns a PersistentVolume from the cache.
	GetVolume(name string) (*corev1.PersistentVolume, error)
	// ListVolumes returns the PersistentVolumes in the cache that selector
	// matches.
	ListVolumes(selector labels.Selector) ([]*corev1.PersistentVolume, error)
	// CreateVolume creates pv.
	CreateVolume(ctx context.Context, pv *corev1.PersistentVolume) error
	// UpdateVolume updates pv (a copy the caller owns).
	UpdateVolume(ctx context.Context, pv *corev1.PersistentVolume) error
	// AnnotateVolume sets annotation key to value on pv by a patch that
	// fails if the volume is not pv any more (another UID), so it does not
	// conflict with the PersistentVolume controller's own writes.
	AnnotateVolume(ctx context.Context, pv *corev1.PersistentVolume, key, value string) error
	// DeleteVolume deletes pv on the precondition that its UID is still
	// pv.UID; a volume already gone is no error.
	DeleteVolume(ctx context.Context, pv *corev1.PersistentVolume) error
	// GetVolumeLive and ListVolumesLive read from the API server, not the
	// cache: for the decision that a member's data is gone, which a cache
	// behind a volume created just before must not make alone.
	GetVolumeLive(ctx context.Context, name string) (*corev1.PersistentVolume, error)
	ListVolumesLive(ctx context.Context, selector labels.Selector) ([]*corev1.PersistentVolume, error)

	// GetClaim returns a PersistentVolumeClaim from the cache, or as this
	// controller last wrote it while the cache still has the version that
	// write replaced, or as this controller created it while the cache
	// does not show it yet.
	GetClaim(namespace, name string) (*corev1.PersistentVolumeClaim, error)
	// CreateClaim creates claim and returns it as created.
	CreateClaim(ctx context.Context, claim *corev1.PersistentVolumeClaim) (*corev1.PersistentVolumeClaim, error)
	// UpdateClaim updates claim (a copy the caller owns) and returns it as
	// written.
	UpdateClaim(ctx context.Context, claim *corev1.PersistentVolumeClaim) (*corev1.PersistentVolumeClaim, error)
	// UpdateClaimStatus updates claim's status (a copy the caller owns)
	// and returns it as written.
	UpdateClaimStatus(ctx context.Context, claim *corev1.PersistentVolumeClaim) (*corev1.PersistentVolumeClaim, error)
	// DeleteClaim deletes claim on the precondition that its UID is still
	// claim.UID; a claim already gone is no error.
	DeleteClaim(ctx context.Context, claim *corev1.PersistentVolumeClaim) error
	// GetClaimLive reads a claim from the API server (as GetVolumeLive).
	GetClaimLive(ctx context.Context, namespace, name string) (*corev1.PersistentVolumeClaim, error)
}

// NewDataControl returns the DataControl that writes through client and
// reads through the informers' caches. It indexes the volumes by their
// Flock's UID: start the informers after it.
func NewDataControl(client kubernetes.Interface, volumeInformer coreinformers.PersistentVolumeInformer, claimInformer coreinformers.PersistentVolumeClaimInformer) (DataControl, error) {
	if err := volumeInformer.Informer().AddIndexers(cache.Indexers{volumeFlockUIDIndex: indexVolumeByFlockUID}); err != nil {
		return nil, fmt.Errorf("adding the volume index (start the informers after NewController): %w", err)
	}
	c := &realDataControl{client: client, volumeLister: volumeInformer.Lister(), volumeIndexer: volumeInformer.Informer().GetIndexer(),
		claimLister: claimInformer.Lister(), now: time.Now}
	// A created claim is read from the cache once the cache has it, and
	// is not awaited once it is deleted.
	seen := func(obj any) {
		if claim, ok := unwrapDeleted[*corev1.PersistentVolumeClaim](obj); ok {
			c.created.forget(claim.Namespace, claim.Name)
		}
	}
	if _, err := claimInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: seen, DeleteFunc: seen}); err != nil {
		return nil, err
	}
	return c, nil
}

// volumeFlockUIDIndex indexes PersistentVolumes by the LabelFlockUID
// label: a Flock's volumes are looked up among every volume of the
// cluster when one of its members is placed.
const volumeFlockUIDIndex = "flockUID"

func indexVolumeByFlockUID(obj any) ([]string, error) {
	if pv, ok := obj.(*corev1.PersistentVolume); ok && pv.Labels[LabelFlockUID] != "" {
		return []string{pv.Labels[LabelFlockUID]}, nil
	}
	return nil, nil
}

type realDataControl struct {
	client       kubernetes.Interface
	volumeLister corelisters.PersistentVolumeLister
	// volumeIndexer is the volume cache, with volumeFlockUIDIndex (nil:
	// ListVolumes scans every volume).
	volumeIndexer cache.Indexer
	claimLister   corelisters.PersistentVolumeClaimLister
	// claims are the claims this controller wrote, until the cache has them.
	claims writtenClaims
	// created are the claims this controller created, until the cache
	// shows them.
	created createdClaims
	now     func() time.Time
}

var _ DataControl = &realDataControl{}

func (c *realDataControl) GetVolume(name string) (*corev1.PersistentVolume, error) {
	return c.volumeLister.Get(name)
}

// ListVolumes looks a selector that names a Flock's UID up in the index
// of that label, and scans every volume otherwise.
func (c *realDataControl) ListVolumes(selector labels.Selector) ([]*corev1.PersistentVolume, error) {
	uid, ok := selector.RequiresExactMatch(LabelFlockUID)
	if !ok || c.volumeIndexer == nil {
		return c.volumeLister.List(selector)
	}
	objs, err := c.volumeIndexer.ByIndex(volumeFlockUIDIndex, uid)
	if err != nil {
		return nil, err
	}
	var out []*corev1.PersistentVolume
	for _, obj := range objs {
		if pv := obj.(*corev1.PersistentVolume); selector.Matches(labels.Set(pv.Labels)) {
			out = append(out, pv)
		}
	}
	return out, nil
}

func (c *realDataControl) CreateVolume(ctx context.Context, pv *corev1.PersistentVolume) error {
	_, err := c.client.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{FieldManager: FieldManager})
	return err
}

func (c *realDataControl) UpdateVolume(ctx context.Context, pv *corev1.PersistentVolume) error {
	_, err := c.client.CoreV1().PersistentVolumes().Update(ctx, pv, metav1.UpdateOptions{FieldManager: FieldManager})
	return err
}

func (c *realDataControl) AnnotateVolume(ctx context.Context, pv *corev1.PersistentVolume, key, value string) error {
	_, err := c.client.CoreV1().PersistentVolumes().Patch(ctx, pv.Name, types.MergePatchType, annotationPatch(key, value, pv.UID),
		metav1.PatchOptions{FieldManager: FieldManager})
	return err
}

func (c *realDataControl) DeleteVolume(ctx context.Context, pv *corev1.PersistentVolume) error {
	uid := pv.UID
	err := c.client.CoreV1().PersistentVolumes().Delete(ctx, pv.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

func (c *realDataControl) GetVolumeLive(ctx context.Context, name string) (*corev1.PersistentVolume, error) {
	return c.client.CoreV1().PersistentVolumes().Get(ctx, name, metav1.GetOptions{})
}

func (c *realDataControl) ListVolumesLive(ctx context.Context, selector labels.Selector) ([]*corev1.PersistentVolume, error) {
	list, err := c.client.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{LabelSelector: selector.String()})
	if err != nil {
		return nil, err
	}
	return itemPointers(list.Items), nil
}

func (c *realDataControl) GetClaimLive(ctx context.Context, namespace, name string) (*corev1.PersistentVolumeClaim, error) {
	return c.client.CoreV1().PersistentVolumeClaims(namespace).Get(ctx, name, metav1.GetOptions{})
}

func (c *realDataControl) GetClaim(namespace, name string) (*corev1.PersistentVolumeClaim, error) {
	claim, err := c.claimLister.PersistentVolumeClaims(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		if created := c.created.get(namespace, name, c.now()); created != nil {
			return c.claims.latest(created), nil // and written since, maybe
		}
	}
	if err != nil {
		return claim, err
	}
	return c.claims.latest(claim), nil
}

func (c *realDataControl) CreateClaim(ctx context.Context, claim *corev1.PersistentVolumeClaim) (*corev1.PersistentVolumeClaim, error) {
	created, err := c.client.CoreV1().PersistentVolumeClaims(claim.Namespace).Create(ctx, claim, metav1.CreateOptions{FieldManager: FieldManager})
	if err == nil {
		c.created.record(created, c.now())
	}
	return created, err
}

func (c *realDataControl) UpdateClaim(ctx context.Context, claim *corev1.PersistentVolumeClaim) (*corev1.PersistentVolumeClaim, error) {
	written, err := c.client.CoreV1().PersistentVolumeClaims(claim.Namespace).Update(ctx, claim, metav1.UpdateOptions{FieldManager: FieldManager})
	if err == nil {
		c.claims.record(claim, written, c.now())
	}
	return written, err
}

func (c *realDataControl) UpdateClaimStatus(ctx context.Context, claim *corev1.PersistentVolumeClaim) (*corev1.PersistentVolumeClaim, error) {
	written, err := c.client.CoreV1().PersistentVolumeClaims(claim.Namespace).UpdateStatus(ctx, claim, metav1.UpdateOptions{FieldManager: FieldManager})
	if err == nil {
		c.claims.record(claim, written, c.now())
	}
	return written, err
}

func (c *realDataControl) DeleteClaim(ctx context.Context, claim *corev1.PersistentVolumeClaim) error {
	c.created.forget(claim.Namespace, claim.Name)
	uid := claim.UID
	err := c.client.CoreV1().PersistentVolumeClaims(claim.Namespace).Delete(ctx, claim.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// writtenClaims are the claims whose binding this controller completed
// (completeBind), until its cache has them. A sync that follows the write
// within milliseconds (the volume's mark, the pod's event) read the claim
// from a cache that did not have the write yet: it completed the binding
// again, from the old version, and the server refused that with a conflict
// (7 of 317 completions at 50 x 3 in session 37's audit log of
// kube-apiserver).
type writtenClaims struct {
	writtenObjects[*corev1.PersistentVolumeClaim]
}

// record notes that base, a claim this controller read, was written as
// written.
func (w *writtenClaims) record(base, written *corev1.PersistentVolumeClaim, now time.Time) {
	if base == nil || written == nil {
		return
	}
	w.writtenObjects.record(base, written, func() *corev1.PersistentVolumeClaim {
		kept, _ := TrimClaim(written.DeepCopy()) // as the informer caches it
		return kept.(*corev1.PersistentVolumeClaim)
	}, now)
}

// createdClaimTTL bounds how long a created claim is read from this
// controller's memory while the cache does not show it: should the
// informer never deliver it (a watch gap in which it came and went), the
// cache is trusted again after that.
const createdClaimTTL = time.Minute

// createdClaims are the claims this controller created, by namespace and
// name, until its cache shows them (or their delete). A sync right after a
// claim's create (the member's volume, made next, brings one) read the
// claim from a cache that did not have it yet and created it again; the
// server refused that AlreadyExists, a request spent, and the member waited
// for the claim's watch event (1-3 of 150 claims at 50 x 3 in session 46's
// runs).
type createdClaims struct {
	mu sync.Mutex
	m  map[string]createdClaim
}

type createdClaim struct {
	claim *corev1.PersistentVolumeClaim
	at    time.Time
}

// record notes claim, as the server answered its create.
func (c *createdClaims) record(claim *corev1.PersistentVolumeClaim, now time.Time) {
	kept, _ := TrimClaim(claim.DeepCopy()) // as the informer caches it
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]createdClaim{}
	}
	for k, e := range c.m {
		if now.Sub(e.at) > createdClaimTTL {
			delete(c.m, k)
		}
	}
	c.m[claim.Namespace+"/"+claim.Name] = createdClaim{claim: kept.(*corev1.PersistentVolumeClaim), at: now}
}

// get returns the claim namespace/name as created, if it was created less
// than createdClaimTTL ago and its cache has not shown it (read-only).
func (c *createdClaims) get(namespace, name string, now time.Time) *corev1.PersistentVolumeClaim {
	c.mu.Lock()
	defer c.mu.Unlock()
	key := namespace + "/" + name
	e, ok := c.m[key]
	if !ok {
		return nil
	}
	if now.Sub(e.at) > createdClaimTTL {
		delete(c.m, key)
		return nil
	}
	return e.claim
}

// forget drops the claim namespace/name: the cache delivered it or its
// delete, or this controller deletes it.
func (c *createdClaims) forget(namespace, name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, namespace+"/"+name)
}

// len returns how many created claims are awaited.
func (c *createdClaims) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m)
}
