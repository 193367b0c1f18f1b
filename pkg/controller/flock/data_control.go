package flock

// data_control.go is how the reconcile logic reads and writes members'
// PersistentVolumes and PersistentVolumeClaims: reads from the informers'
// caches, writes through the clientset with the field manager.

import (
	"context"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
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
	// write replaced.
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
// reads through the listers.
func NewDataControl(client kubernetes.Interface, volumeLister corelisters.PersistentVolumeLister, claimLister corelisters.PersistentVolumeClaimLister) DataControl {
	return &realDataControl{client: client, volumeLister: volumeLister, claimLister: claimLister, now: time.Now}
}

type realDataControl struct {
	client       kubernetes.Interface
	volumeLister corelisters.PersistentVolumeLister
	claimLister  corelisters.PersistentVolumeClaimLister
	// claims are the claims this controller wrote, until the cache has them.
	claims writtenClaims
	now    func() time.Time
}

var _ DataControl = &realDataControl{}

func (c *realDataControl) GetVolume(name string) (*corev1.PersistentVolume, error) {
	return c.volumeLister.Get(name)
}

func (c *realDataControl) ListVolumes(selector labels.Selector) ([]*corev1.PersistentVolume, error) {
	return c.volumeLister.List(selector)
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
	if err != nil {
		return claim, err
	}
	return c.claims.latest(claim, c.now()), nil
}

func (c *realDataControl) CreateClaim(ctx context.Context, claim *corev1.PersistentVolumeClaim) (*corev1.PersistentVolumeClaim, error) {
	return c.client.CoreV1().PersistentVolumeClaims(claim.Namespace).Create(ctx, claim, metav1.CreateOptions{FieldManager: FieldManager})
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

// writtenClaimTTL bounds how long a written claim is kept when no read
// comes to drop it (the claim was deleted, or no sync read it again).
const writtenClaimTTL = 2 * time.Minute

// writtenClaims remembers, by UID, each claim as this controller last wrote
// it (completing its binding) and the resourceVersion that write replaced.
// A sync that follows the write within milliseconds (the volume's mark, the
// pod's event) read the claim from a cache that did not have the write yet:
// it completed the binding again, from the old version, and the server
// refused that with a conflict (about one claim in ten at 50 x 3 members, in
// session 37's audit log of kube-apiserver). A cached claim at the replaced
// version is behind the write, and the write is the fresher copy; at any
// other version (the write itself, or a later one of someone else's) the
// cache is trusted and the entry goes, as for the Flocks (written.go).
type writtenClaims struct {
	mu sync.Mutex
	m  map[types.UID]writtenClaim
}

type writtenClaim struct {
	claim *corev1.PersistentVolumeClaim
	// replaced are the versions the write made old: the one it was based
	// on and, when that was this controller's previous write, the ones
	// that write replaced.
	replaced []string
	at       time.Time
}

// record notes that base, a claim read from the cache, was written as
// written.
func (w *writtenClaims) record(base, written *corev1.PersistentVolumeClaim, now time.Time) {
	if base == nil || written == nil || written.UID != base.UID || written.ResourceVersion == base.ResourceVersion {
		return
	}
	kept, _ := TrimClaim(written.DeepCopy()) // as the informer caches it
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.m == nil {
		w.m = map[types.UID]writtenClaim{}
	}
	for uid, e := range w.m {
		if now.Sub(e.at) > writtenClaimTTL {
			delete(w.m, uid)
		}
	}
	replaced := []string{base.ResourceVersion}
	if e, ok := w.m[written.UID]; ok && e.claim.ResourceVersion == base.ResourceVersion {
		replaced = append(replaced, e.replaced...)
	}
	replaced = replaced[:min(len(replaced), maxReplacedVersions)]
	w.m[written.UID] = writtenClaim{claim: kept.(*corev1.PersistentVolumeClaim), replaced: replaced, at: now}
}

// latest returns the fresher of cached and this controller's last write of
// it (read-only, as cached objects are).
func (w *writtenClaims) latest(cached *corev1.PersistentVolumeClaim, now time.Time) *corev1.PersistentVolumeClaim {
	w.mu.Lock()
	defer w.mu.Unlock()
	e, ok := w.m[cached.UID]
	if !ok {
		return cached
	}
	if slices.Contains(e.replaced, cached.ResourceVersion) && now.Sub(e.at) <= writtenClaimTTL {
		return e.claim
	}
	delete(w.m, cached.UID)
	return cached
}

func (c *realDataControl) DeleteClaim(ctx context.Context, claim *corev1.PersistentVolumeClaim) error {
	uid := claim.UID
	err := c.client.CoreV1().PersistentVolumeClaims(claim.Namespace).Delete(ctx, claim.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
