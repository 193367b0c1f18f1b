// File workload_test.go: the workload the faults hit: several Flocks being
// created, scaled up and down, rolled (template changes) and deleted, one
// operation at a time in a bounded loop; and the convergence check after a
// fault (every Flock Available at its generation, nothing of a deleted Flock
// left).

package faults

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	flockv1alpha1 "flock.dev/flock/pkg/apis/flock/v1alpha1"
	flockcontroller "flock.dev/flock/pkg/controller/flock"
)

const (
	// minFlocks and maxFlocks bound how many Flocks the workload keeps.
	minFlocks, maxFlocks = 3, 6
	// maxMembers bounds a Flock's replicas (faultNodes nodes in all).
	maxMembers = 4
	// opTimeout bounds one workload operation.
	opTimeout = 10 * time.Second
	// opPause is the pause between operations.
	opPause = 300 * time.Millisecond
	// revisionAnnotation is the template annotation a roll changes.
	revisionAnnotation = "faults.flock.dev/rev"
)

// workload drives the Flocks of one namespace.
type workload struct {
	ns  string
	rng *rand.Rand

	mu  sync.Mutex
	seq int
	// live: created (the create returned success), not asked to be deleted.
	live map[types.UID]string
	// deleted: asked to be deleted (name by UID).
	deleted map[types.UID]string
	// ops counts successful operations by kind; failed the failed ones.
	ops    map[string]int
	failed int
}

func newWorkload(ns string) *workload {
	return &workload{ns: ns, rng: rand.New(rand.NewPCG(16, 1)), live: map[types.UID]string{}, deleted: map[types.UID]string{}, ops: map[string]int{}}
}

// createdNotDeleted reports whether Flock uid was created by the workload
// and never asked to be deleted.
func (w *workload) createdNotDeleted(uid types.UID) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	_, ok := w.live[uid]
	return ok
}

// counts returns the successful operations so far (by kind) and the failed ones.
func (w *workload) counts() (map[string]int, int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[string]int{}
	for k, v := range w.ops {
		out[k] = v
	}
	return out, w.failed
}

// run performs operations until ctx ends.
func (w *workload) run(ctx context.Context) {
	for ctx.Err() == nil {
		kind, err := w.step(ctx)
		w.mu.Lock()
		if err != nil {
			w.failed++
		} else {
			w.ops[kind]++
		}
		w.mu.Unlock()
		sleepCtx(ctx, opPause)
	}
}

// step performs one operation: create while there are few Flocks, else a
// scale, a roll, a delete or a create.
func (w *workload) step(ctx context.Context) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	w.mu.Lock()
	var live []string
	for _, name := range w.live {
		live = append(live, name)
	}
	slices.Sort(live)
	roll := w.rng.IntN(100)
	var pick string
	if len(live) > 0 {
		pick = live[w.rng.IntN(len(live))]
	}
	w.mu.Unlock()
	switch {
	case len(live) < minFlocks || (roll < 15 && len(live) < maxFlocks):
		return "create", w.create(ctx)
	case roll < 50:
		return "scale", w.update(ctx, pick, func(f *flockv1alpha1.Flock) {
			r := flockv1alpha1.ReplicasOf(&f.Spec)
			switch {
			case r >= maxMembers:
				r--
			case r <= 1:
				r++
			case w.rng.IntN(2) == 0:
				r--
			default:
				r++
			}
			f.Spec.Replicas = &r
		})
	case roll < 80:
		return "roll", w.update(ctx, pick, func(f *flockv1alpha1.Flock) {
			n, _ := strconv.Atoi(f.Spec.Template.Annotations[revisionAnnotation])
			if f.Spec.Template.Annotations == nil {
				f.Spec.Template.Annotations = map[string]string{}
			}
			f.Spec.Template.Annotations[revisionAnnotation] = strconv.Itoa(n + 1)
		})
	default:
		return "delete", w.delete(ctx, pick)
	}
}

// create makes a new Flock of 1-3 members: Parallel or OrderedReady,
// memberRecovery Reassign (after 5s) or Wait, data deleted with the Flock
// and, for some, on scale down.
func (w *workload) create(ctx context.Context) error {
	w.mu.Lock()
	w.seq++
	name := fmt.Sprintf("w%d", w.seq)
	replicas := int32(1 + w.rng.IntN(3))
	parallel, reassign, dropScaled := w.rng.IntN(2) == 0, w.rng.IntN(2) == 0, w.rng.IntN(2) == 0
	w.mu.Unlock()
	labels := map[string]string{"app": name}
	f := &flockv1alpha1.Flock{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: w.ns},
		Spec: flockv1alpha1.FlockSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: map[string]string{revisionAnnotation: "0"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "app", Image: "busybox:1.36", Command: []string{"sleep", "infinity"},
				}}},
			},
		},
	}
	if parallel {
		f.Spec.PodManagementPolicy = flockv1alpha1.ParallelPodManagement
	}
	if reassign {
		after := int32(5)
		f.Spec.MemberRecovery = flockv1alpha1.MemberRecovery{Policy: flockv1alpha1.ReassignMemberRecovery, AfterSeconds: &after}
	}
	f.Spec.Storage.Retention.WhenDeleted = flockv1alpha1.DeleteRetentionPolicy
	if dropScaled {
		f.Spec.Storage.Retention.WhenScaled = flockv1alpha1.DeleteRetentionPolicy
	}
	created, err := env.Flock.FlockV1alpha1().Flocks(w.ns).Create(ctx, f, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	w.mu.Lock()
	w.live[created.UID] = created.Name
	w.mu.Unlock()
	return nil
}

// update changes Flock name with mutate (one retry on a conflict).
func (w *workload) update(ctx context.Context, name string, mutate func(*flockv1alpha1.Flock)) error {
	flocks := env.Flock.FlockV1alpha1().Flocks(w.ns)
	var err error
	for range 2 {
		var f *flockv1alpha1.Flock
		if f, err = flocks.Get(ctx, name, metav1.GetOptions{}); err != nil {
			return err
		}
		mutate(f)
		if _, err = flocks.Update(ctx, f, metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
			return err
		}
	}
	return err
}

// delete deletes Flock name, recording the intent first (a delete whose
// answer is lost may still have happened).
func (w *workload) delete(ctx context.Context, name string) error {
	w.mu.Lock()
	for uid, n := range w.live {
		if n == name {
			delete(w.live, uid)
			w.deleted[uid] = name
		}
	}
	w.mu.Unlock()
	err := env.Flock.FlockV1alpha1().Flocks(w.ns).Delete(ctx, name, metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// converged says why the workload's namespace has not converged (nil when
// it has): every Flock there is Available at its generation with its
// members recorded, Ready and at the update revision; every Flock created
// and not deleted exists; every deleted Flock is gone with its pods,
// Service, ControllerRevisions, PodDisruptionBudget, claims and volumes.
func (w *workload) converged(ctx context.Context) error {
	list, err := env.Flock.FlockV1alpha1().Flocks(w.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	present := map[types.UID]*flockv1alpha1.Flock{}
	for i := range list.Items {
		present[list.Items[i].UID] = &list.Items[i]
	}
	w.mu.Lock()
	live, deleted := map[types.UID]string{}, map[types.UID]string{}
	for k, v := range w.live {
		live[k] = v
	}
	for k, v := range w.deleted {
		deleted[k] = v
	}
	w.mu.Unlock()
	for uid, name := range live {
		if present[uid] == nil {
			return fmt.Errorf("Flock %s (uid %s) was created and not deleted, but is gone", name, uid)
		}
	}
	for _, f := range present {
		if _, ok := deleted[f.UID]; !ok {
			if err := flockConvergedErr(f); err != nil {
				return fmt.Errorf("Flock %s: %w", f.Name, err)
			}
		}
	}
	for uid, name := range deleted {
		if f := present[uid]; f != nil {
			if f.DeletionTimestamp == nil {
				// The delete failed (its server was down): the workload's
				// intent stands, so it asks again.
				err := env.Flock.FlockV1alpha1().Flocks(w.ns).Delete(ctx, name, metav1.DeleteOptions{Preconditions: metav1.NewUIDPreconditions(string(uid))})
				return fmt.Errorf("Flock %s (uid %s) is deleted again: its delete failed (now: %v)", name, uid, err)
			}
			return fmt.Errorf("Flock %s (uid %s) was deleted but is still there: finalizers %v, members %+v, conditions %+v",
				name, uid, f.Finalizers, f.Status.Members, f.Status.Conditions)
		}
		if err := w.remnants(ctx, uid, name); err != nil {
			return fmt.Errorf("deleted Flock %s (uid %s): %w", name, uid, err)
		}
	}
	return nil
}

// remnants says what is left of deleted Flock name (uid).
func (w *workload) remnants(ctx context.Context, uid types.UID, name string) error {
	byName := metav1.ListOptions{LabelSelector: flockv1alpha1.LabelFlockName + "=" + name}
	byUID := metav1.ListOptions{LabelSelector: flockcontroller.LabelFlockUID + "=" + string(uid)}
	pods, err := env.Kube.CoreV1().Pods(w.ns).List(ctx, byName)
	if err != nil {
		return err
	}
	if len(pods.Items) > 0 {
		return fmt.Errorf("%d pods left, e.g. %s", len(pods.Items), pods.Items[0].Name)
	}
	crs, err := env.Kube.AppsV1().ControllerRevisions(w.ns).List(ctx, byName)
	if err != nil {
		return err
	}
	if len(crs.Items) > 0 {
		return fmt.Errorf("%d ControllerRevisions left, e.g. %s", len(crs.Items), crs.Items[0].Name)
	}
	claims, err := env.Kube.CoreV1().PersistentVolumeClaims(w.ns).List(ctx, byUID)
	if err != nil {
		return err
	}
	if len(claims.Items) > 0 {
		return fmt.Errorf("%d claims left, e.g. %s", len(claims.Items), claims.Items[0].Name)
	}
	helpers, err := env.Kube.CoreV1().Pods(flockcontroller.DefaultHelperNamespace).List(ctx, byUID)
	if err != nil {
		return err
	}
	if len(helpers.Items) > 0 {
		return fmt.Errorf("%d data helper pods left, e.g. %s/%s", len(helpers.Items), helpers.Items[0].Namespace, helpers.Items[0].Name)
	}
	pvs, err := env.Kube.CoreV1().PersistentVolumes().List(ctx, byUID)
	if err != nil {
		return err
	}
	if len(pvs.Items) > 0 {
		return fmt.Errorf("%d PersistentVolumes left, e.g. %s", len(pvs.Items), pvs.Items[0].Name)
	}
	if _, err := env.Kube.CoreV1().Services(w.ns).Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		return errors.Join(fmt.Errorf("Service %s left", name), err)
	}
	if _, err := env.Kube.PolicyV1().PodDisruptionBudgets(w.ns).Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		return errors.Join(fmt.Errorf("PodDisruptionBudget %s left", name), err)
	}
	return nil
}

// flockConvergedErr says why f has not converged, or nil: Available for
// its generation, members 0..replicas-1 recorded and Ready, every member at
// the update revision.
func flockConvergedErr(f *flockv1alpha1.Flock) error {
	replicas := flockv1alpha1.ReplicasOf(&f.Spec)
	st := f.Status
	available := meta.FindStatusCondition(st.Conditions, flockv1alpha1.FlockAvailable)
	if f.DeletionTimestamp != nil {
		return fmt.Errorf("being deleted since %s", f.DeletionTimestamp)
	}
	if st.ObservedGeneration != f.Generation || available == nil || available.Status != metav1.ConditionTrue ||
		st.ReadyReplicas != replicas || int32(len(st.Members)) != replicas ||
		st.UpdatedReplicas != replicas || st.CurrentRevision != st.UpdateRevision {
		return fmt.Errorf("observedGeneration %d of %d, Available %+v, %d ready and %d updated of %d, revisions %s/%s, members %+v",
			st.ObservedGeneration, f.Generation, available, st.ReadyReplicas, st.UpdatedReplicas, replicas, st.CurrentRevision, st.UpdateRevision, st.Members)
	}
	for i, m := range st.Members {
		if m.Ordinal != int32(i) || !m.Ready {
			return fmt.Errorf("members %+v", st.Members)
		}
	}
	return nil
}
