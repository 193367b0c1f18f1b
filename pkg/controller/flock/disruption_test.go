package flock

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"

	"flock.dev/flock/pkg/apis/flock/v1alpha1"
	flockfake "flock.dev/flock/pkg/generated/clientset/versioned/fake"
	flockinformers "flock.dev/flock/pkg/generated/informers/externalversions"
)

func TestNewPodDisruptionBudget(t *testing.T) {
	tests := []struct {
		name     string
		replicas int32
		budget   v1alpha1.FlockDisruptionBudget
		want     *intstr.IntOrString // minAvailable; nil: no budget
	}{
		{"default: one may go", 3, v1alpha1.FlockDisruptionBudget{Policy: v1alpha1.ManagedDisruptionBudget}, ptr.To(intstr.FromInt32(2))},
		{"maxUnavailable 2", 5, v1alpha1.FlockDisruptionBudget{Policy: v1alpha1.ManagedDisruptionBudget, MaxUnavailable: ptr.To(intstr.FromInt32(2))}, ptr.To(intstr.FromInt32(3))},
		{"percentage rounds down", 5, v1alpha1.FlockDisruptionBudget{Policy: v1alpha1.ManagedDisruptionBudget, MaxUnavailable: ptr.To(intstr.FromString("50%"))}, ptr.To(intstr.FromInt32(3))},
		{"small percentage is at least one", 3, v1alpha1.FlockDisruptionBudget{Policy: v1alpha1.ManagedDisruptionBudget, MaxUnavailable: ptr.To(intstr.FromString("10%"))}, ptr.To(intstr.FromInt32(2))},
		{"more than replicas: zero", 1, v1alpha1.FlockDisruptionBudget{Policy: v1alpha1.ManagedDisruptionBudget, MaxUnavailable: ptr.To(intstr.FromInt32(3))}, ptr.To(intstr.FromInt32(0))},
		{"None: no budget", 3, v1alpha1.FlockDisruptionBudget{Policy: v1alpha1.NoDisruptionBudget}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := &v1alpha1.Flock{
				ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "ns", UID: "uid-1"},
				Spec: v1alpha1.FlockSpec{
					Replicas:         ptr.To(tc.replicas),
					Selector:         &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}},
					DisruptionBudget: tc.budget,
				},
			}
			got := NewPodDisruptionBudget(f)
			if tc.want == nil {
				if got != nil {
					t.Fatalf("budget %+v, want none", got.Spec)
				}
				return
			}
			if got == nil || got.Spec.MinAvailable == nil || *got.Spec.MinAvailable != *tc.want || got.Spec.MaxUnavailable != nil {
				t.Fatalf("budget %+v, want minAvailable %v", got, tc.want)
			}
			if got.Name != "db" || got.Namespace != "ns" {
				t.Errorf("budget %s/%s, want ns/db", got.Namespace, got.Name)
			}
			if ref := metav1.GetControllerOf(got); ref == nil || ref.UID != "uid-1" || ref.Kind != "Flock" {
				t.Errorf("controller %+v, want the Flock", ref)
			}
			sel := got.Spec.Selector.MatchLabels
			if sel["app"] != "db" || sel[v1alpha1.LabelFlockName] != "db" || len(sel) != 2 {
				t.Errorf("selector %v, want the members' labels", sel)
			}
			if got.Spec.UnhealthyPodEvictionPolicy == nil || *got.Spec.UnhealthyPodEvictionPolicy != policyv1.AlwaysAllow {
				t.Errorf("unhealthyPodEvictionPolicy %v, want AlwaysAllow", got.Spec.UnhealthyPodEvictionPolicy)
			}
		})
	}
}

// TestDisruptionBudgetFollowsAScaleOverAStaleCache: after a scale the
// budget's minAvailable follows in one sync, though the cached budget is
// older than the stored one (kube-controller-manager has written its status
// since) and the API server refuses updates from stale resourceVersions. The
// status is kept, and a budget of the same name made since the cache was
// read (another UID) is left alone.
func TestDisruptionBudgetFollowsAScaleOverAStaleCache(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	fl := newFlock("web", 5)
	stale := NewPodDisruptionBudget(newFlock("web", 3))
	stale.UID, stale.ResourceVersion = "budget-uid", "10"
	stale.Spec.MaxUnavailable = ptr.To(intstr.FromInt32(1)) // someone's edit, taken back
	stored := stale.DeepCopy()
	stored.ResourceVersion = "11"
	stored.Status = policyv1.PodDisruptionBudgetStatus{ObservedGeneration: 1, CurrentHealthy: 3, DesiredHealthy: 2, ExpectedPods: 3}
	kubeClient := k8sfake.NewClientset(stored)
	kubeClient.PrependReactor("update", "poddisruptionbudgets", func(action clienttesting.Action) (bool, runtime.Object, error) {
		pdb := action.(clienttesting.UpdateAction).GetObject().(*policyv1.PodDisruptionBudget)
		have, err := kubeClient.Tracker().Get(policyv1.SchemeGroupVersion.WithResource("poddisruptionbudgets"), pdb.Namespace, pdb.Name)
		if err != nil {
			return true, nil, err
		}
		if rv := have.(*policyv1.PodDisruptionBudget).ResourceVersion; rv != pdb.ResourceVersion {
			return true, nil, apierrors.NewConflict(policyv1.Resource("poddisruptionbudgets"), pdb.Name, fmt.Errorf("resourceVersion %s, stored %s", pdb.ResourceVersion, rv))
		}
		return false, nil, nil
	})
	c, flocks, budgets, recorder := newBudgetController(ctx, t, kubeClient)
	if err := flocks.Add(fl); err != nil {
		t.Fatal(err)
	}
	if err := budgets.Add(stale); err != nil {
		t.Fatal(err)
	}
	if err := c.sync(ctx, testNamespace+"/web"); err != nil {
		t.Fatalf("sync: %v", err)
	}
	got, err := kubeClient.PolicyV1().PodDisruptionBudgets(testNamespace).Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Spec.MinAvailable == nil || got.Spec.MinAvailable.IntValue() != 4 || got.Spec.MaxUnavailable != nil {
		t.Errorf("budget spec %+v, want minAvailable 4 and no maxUnavailable", got.Spec)
	}
	if !equality.Semantic.DeepEqual(got.Status, stored.Status) {
		t.Errorf("budget status %+v, want it kept: %+v", got.Status, stored.Status)
	}
	if e := <-recorder.Events; !strings.HasPrefix(e, "Normal SuccessfulUpdate") || !strings.Contains(e, "minAvailable 4") {
		t.Errorf("event %q, want a SuccessfulUpdate naming minAvailable 4", e)
	}

	// Until the cache shows the patch, a sync writes nothing more.
	writes := len(kubeClient.Actions())
	if err := c.sync(ctx, testNamespace+"/web"); err != nil {
		t.Fatalf("sync: %v", err)
	}
	if got := kubeClient.Actions()[writes:]; len(got) != 0 {
		t.Errorf("a sync over the cache of before the patch sent %v, want nothing", got)
	}
	if e := recordedEvent(recorder); e != "" {
		t.Errorf("a sync over the cache of before the patch told %q", e)
	}

	// The budget was replaced since the cache was read, and the cache never
	// showed the patch: once the wait for it is over, a sync acts on the
	// cache again, and does not patch the new budget.
	now := time.Now()
	c.now = func() time.Time { return now.Add(budgetWriteTTL + time.Second) }
	if err := kubeClient.PolicyV1().PodDisruptionBudgets(testNamespace).Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	other := stored.DeepCopy()
	other.UID, other.OwnerReferences = "someone-elses", nil
	if _, err := kubeClient.PolicyV1().PodDisruptionBudgets(testNamespace).Create(ctx, other, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.sync(ctx, testNamespace+"/web"); err == nil {
		t.Error("sync patched a budget made since the cache was read")
	}
	got, err = kubeClient.PolicyV1().PodDisruptionBudgets(testNamespace).Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Spec.MinAvailable.IntValue() != 2 || got.Spec.MaxUnavailable == nil {
		t.Errorf("someone else's budget changed: %+v", got.Spec)
	}
}

// TestDisruptionBudgetFromTheFirstMemberPod: a Flock whose status counts no
// member pod yet gets no budget (it would protect nothing); once its status
// counts one, the budget is made; scaled back to zero, it is kept, at
// minAvailable 0. With policy None nothing is made.
func TestDisruptionBudgetFromTheFirstMemberPod(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	kubeClient := k8sfake.NewClientset()
	c, flocks, budgets, _ := newBudgetController(ctx, t, kubeClient)
	syncWith := func(fl *v1alpha1.Flock) *policyv1.PodDisruptionBudget {
		t.Helper()
		if err := flocks.Update(fl); err != nil {
			t.Fatal(err)
		}
		if err := c.sync(ctx, testNamespace+"/"+fl.Name); err != nil {
			t.Fatalf("sync: %v", err)
		}
		pdb, err := kubeClient.PolicyV1().PodDisruptionBudgets(testNamespace).Get(ctx, fl.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			t.Fatal(err)
		}
		if pdb.UID == "" { // as kube-apiserver gives it on create
			pdb.UID = "budget-" + types.UID(fl.Name)
			if err := kubeClient.Tracker().Update(policyv1.SchemeGroupVersion.WithResource("poddisruptionbudgets"), pdb, pdb.Namespace); err != nil {
				t.Fatal(err)
			}
		}
		if err := budgets.Update(pdb); err != nil { // the informer's copy
			t.Fatal(err)
		}
		return pdb
	}

	fl := newFlock("web", 3)
	if pdb := syncWith(fl); pdb != nil {
		t.Fatalf("budget %+v made before any member pod", pdb.Spec)
	}
	fl.Status.Replicas = 1
	pdb := syncWith(fl)
	if pdb == nil || pdb.Spec.MinAvailable.IntValue() != 2 || !metav1.IsControlledBy(pdb, fl) {
		t.Fatalf("budget %+v once a member pod exists, want minAvailable 2 controlled by the Flock", pdb)
	}
	fl.Spec.Replicas, fl.Status.Replicas = ptr.To[int32](0), 0
	if pdb := syncWith(fl); pdb == nil || pdb.Spec.MinAvailable.IntValue() != 0 {
		t.Fatalf("budget %v scaled to zero, want it kept at minAvailable 0", pdb)
	}

	none := newFlock("none", 3)
	none.Status.Replicas = 3
	none.Spec.DisruptionBudget.Policy = v1alpha1.NoDisruptionBudget
	if pdb := syncWith(none); pdb != nil {
		t.Fatalf("budget %+v with policy None", pdb.Spec)
	}
}

// newBudgetController returns a budget controller on kubeClient whose
// informers are not started: a test fills their caches (the returned
// indexers of Flocks and budgets) and calls sync itself.
func newBudgetController(ctx context.Context, t *testing.T, kubeClient *k8sfake.Clientset) (*DisruptionBudgetController, cache.Indexer, cache.Indexer, *record.FakeRecorder) {
	t.Helper()
	c, flocks, budgets, _, recorder := newBudgetControllerWithNamespaces(ctx, t, kubeClient)
	return c, flocks, budgets, recorder
}

// newBudgetControllerWithNamespaces is newBudgetController that also returns
// the indexer of its namespace cache.
func newBudgetControllerWithNamespaces(ctx context.Context, t *testing.T, kubeClient *k8sfake.Clientset) (c *DisruptionBudgetController, flocks, budgets, namespaces cache.Indexer, recorder *record.FakeRecorder) {
	t.Helper()
	return newBudgetControllerWithClients(ctx, t, kubeClient, flockfake.NewSimpleClientset())
}

// newBudgetControllerWithClients is newBudgetControllerWithNamespaces whose
// live reads of Flocks (before an adoption) go to flockClient.
func newBudgetControllerWithClients(ctx context.Context, t *testing.T, kubeClient *k8sfake.Clientset, flockClient *flockfake.Clientset) (c *DisruptionBudgetController, flocks, budgets, namespaces cache.Indexer, recorder *record.FakeRecorder) {
	t.Helper()
	flockInformer := flockinformers.NewSharedInformerFactory(flockClient, 0).Flock().V1alpha1().Flocks()
	kubeFactory := informers.NewSharedInformerFactory(kubeClient, 0)
	budgetInformer := kubeFactory.Policy().V1().PodDisruptionBudgets()
	namespaceInformer := kubeFactory.Core().V1().Namespaces()
	recorder = record.NewFakeRecorder(10)
	c, err := NewDisruptionBudgetController(ctx, kubeClient, flockClient, flockInformer, budgetInformer, namespaceInformer, recorder)
	if err != nil {
		t.Fatal(err)
	}
	return c, flockInformer.Informer().GetIndexer(), budgetInformer.Informer().GetIndexer(), namespaceInformer.Informer().GetIndexer(), recorder
}

// TestNoDisruptionBudgetInANamespaceBeingDeleted: a Flock whose budget the
// namespace's teardown deleted gets no new one while the namespace cache
// shows the namespace being deleted (kube-apiserver would refuse the
// create); in an active namespace it does.
func TestNoDisruptionBudgetInANamespaceBeingDeleted(t *testing.T) {
	for _, tc := range []struct {
		phase corev1.NamespacePhase
		want  bool
	}{{corev1.NamespaceTerminating, false}, {corev1.NamespaceActive, true}} {
		t.Run(string(tc.phase), func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			kubeClient := k8sfake.NewClientset()
			c, flocks, _, namespaces, _ := newBudgetControllerWithNamespaces(ctx, t, kubeClient)
			ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: testNamespace}, Status: corev1.NamespaceStatus{Phase: tc.phase}}
			if err := namespaces.Add(ns); err != nil {
				t.Fatal(err)
			}
			fl := newFlock("pg", 3)
			fl.Status.Replicas = 3
			if err := flocks.Add(fl); err != nil {
				t.Fatal(err)
			}
			if err := c.sync(ctx, testNamespace+"/pg"); err != nil {
				t.Fatalf("sync: %v", err)
			}
			_, err := kubeClient.PolicyV1().PodDisruptionBudgets(testNamespace).Get(ctx, "pg", metav1.GetOptions{})
			if got := err == nil; got != tc.want {
				t.Errorf("namespace %s: budget made %v (%v), want %v", tc.phase, got, err, tc.want)
			}
		})
	}
}

// TestDisruptionBudgetAdoptsItsOrphan: the budget a `kubectl delete
// --cascade=orphan` of a Flock left (no controller, labelled with the
// Flock's name) is adopted by a new Flock of that name, once a live read
// shows that Flock is not being deleted, and then made what the new Flock
// asks for. A budget of that name made by someone else (no such label), or
// controlled by something else, is left alone with a Warning; nothing is
// adopted for a Flock the live read shows deleting or replaced.
func TestDisruptionBudgetAdoptsItsOrphan(t *testing.T) {
	orphanOf := func(fl *v1alpha1.Flock) *policyv1.PodDisruptionBudget {
		pdb := NewPodDisruptionBudget(newFlock(fl.Name, 3)) // the old Flock had 3 replicas
		pdb.UID, pdb.OwnerReferences = "budget-uid", nil
		return pdb
	}
	for _, tc := range []struct {
		name  string
		edit  func(pdb *policyv1.PodDisruptionBudget)
		live  func(fl *v1alpha1.Flock) // the Flock kube-apiserver holds; nil: the cached one
		adopt bool
	}{
		{name: "orphan of a Flock of this name", adopt: true},
		{name: "made by someone else", edit: func(pdb *policyv1.PodDisruptionBudget) { pdb.Labels = map[string]string{"team": "db"} }},
		{name: "labelled for another Flock", edit: func(pdb *policyv1.PodDisruptionBudget) { pdb.Labels[v1alpha1.LabelFlockName] = "other" }},
		{name: "controlled by another object", edit: func(pdb *policyv1.PodDisruptionBudget) {
			pdb.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "x", UID: "cm", Controller: ptr.To(true)}}
		}},
		{name: "Flock being deleted", live: func(fl *v1alpha1.Flock) { fl.DeletionTimestamp = ptr.To(metav1.Now()) }},
		{name: "Flock replaced", live: func(fl *v1alpha1.Flock) { fl.UID = "newer" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			fl := newFlock("web", 5)
			fl.Status.Replicas = 5
			orphan := orphanOf(fl)
			if tc.edit != nil {
				tc.edit(orphan)
			}
			live := fl.DeepCopy()
			if tc.live != nil {
				tc.live(live)
			}
			kubeClient := k8sfake.NewClientset(orphan)
			c, flocks, budgets, _, recorder := newBudgetControllerWithClients(ctx, t, kubeClient, flockfake.NewSimpleClientset(live))
			if err := flocks.Add(fl); err != nil {
				t.Fatal(err)
			}
			if err := budgets.Add(orphan); err != nil {
				t.Fatal(err)
			}
			err := c.sync(ctx, testNamespace+"/web")
			got, getErr := kubeClient.PolicyV1().PodDisruptionBudgets(testNamespace).Get(ctx, "web", metav1.GetOptions{})
			if getErr != nil {
				t.Fatal(getErr)
			}
			if !tc.adopt {
				if tc.live != nil && err == nil {
					t.Error("sync succeeded without adopting; want the failed live check reported (and retried)")
				}
				if !equality.Semantic.DeepEqual(got.OwnerReferences, orphan.OwnerReferences) || !equality.Semantic.DeepEqual(got.Spec, orphan.Spec) {
					t.Errorf("budget changed to owners %v spec %+v; want it left alone", got.OwnerReferences, got.Spec)
				}
				if tc.live == nil {
					if e := recordedEvent(recorder); !strings.HasPrefix(e, "Warning DisruptionBudgetConflict") {
						t.Errorf("event %q, want a DisruptionBudgetConflict warning", e)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("sync: %v", err)
			}
			if !metav1.IsControlledBy(got, fl) || got.UID != orphan.UID {
				t.Errorf("budget uid %s owners %v; want the same budget, controlled by the Flock", got.UID, got.OwnerReferences)
			}
			if got.Spec.MinAvailable == nil || got.Spec.MinAvailable.IntValue() != 4 {
				t.Errorf("adopted budget's minAvailable %v, want 4 (5 replicas, one may go)", got.Spec.MinAvailable)
			}
			for _, want := range []string{"Normal AdoptedDisruptionBudget", "Normal SuccessfulUpdate"} {
				if e := recordedEvent(recorder); !strings.HasPrefix(e, want) {
					t.Errorf("event %q, want %s", e, want)
				}
			}
		})
	}
}

// recordedEvent returns the next event recorder holds, or "" when it holds
// none (the sync has returned: no event is still to come).
func recordedEvent(recorder *record.FakeRecorder) string {
	select {
	case e := <-recorder.Events:
		return e
	default:
		return ""
	}
}

// TestDisruptionBudgetWrittenOnceBeforeTheCacheShowsIt: a sync right after
// the budget's create or delete, before the cache shows it (a Flock's status
// writes come in bursts, each one a sync), neither sends the write again
// nor tells its event again; a budget made by someone else since the cache
// was read (a create refused AlreadyExists) tells no SuccessfulCreate; and
// once the cache shows the write, the next change is made.
func TestDisruptionBudgetWrittenOnceBeforeTheCacheShowsIt(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	kubeClient := k8sfake.NewClientset()
	c, flocks, budgets, recorder := newBudgetController(ctx, t, kubeClient)
	key := testNamespace + "/web"
	syncWrites := func(what string, want []string, wantEvent string) {
		t.Helper()
		before := len(kubeClient.Actions())
		if err := c.sync(ctx, key); err != nil {
			t.Fatalf("%s: sync: %v", what, err)
		}
		var got []string
		for _, a := range kubeClient.Actions()[before:] {
			got = append(got, a.GetVerb())
		}
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("%s: the sync sent %v, want %v", what, got, want)
		}
		e := recordedEvent(recorder)
		if wantEvent == "" && e != "" || !strings.Contains(e, wantEvent) {
			t.Errorf("%s: event %q, want %q", what, e, wantEvent)
		}
	}

	fl := newFlock("web", 3)
	fl.Status.Replicas = 3
	if err := flocks.Add(fl); err != nil {
		t.Fatal(err)
	}
	syncWrites("first sync", []string{"create"}, "SuccessfulCreate")
	syncWrites("a sync before the cache shows the budget", nil, "")

	made, err := kubeClient.PolicyV1().PodDisruptionBudgets(testNamespace).Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	made.UID, made.ResourceVersion = "budget-web", "20"
	if err := budgets.Add(made); err != nil { // the informer delivers it
		t.Fatal(err)
	}
	fl = fl.DeepCopy()
	fl.Spec.DisruptionBudget.Policy = v1alpha1.NoDisruptionBudget
	if err := flocks.Update(fl); err != nil {
		t.Fatal(err)
	}
	syncWrites("policy None once the cache shows the budget", []string{"delete"}, "SuccessfulDelete")
	syncWrites("a sync before the cache shows the delete", nil, "")

	// Someone else's create since the cache was read: refused
	// AlreadyExists, quietly.
	other := k8sfake.NewClientset(NewPodDisruptionBudget(newFlock("pg", 3)))
	c2, flocks2, _, recorder2 := newBudgetController(ctx, t, other)
	pg := newFlock("pg", 3)
	pg.Status.Replicas = 3
	if err := flocks2.Add(pg); err != nil {
		t.Fatal(err)
	}
	if err := c2.sync(ctx, testNamespace+"/pg"); err != nil {
		t.Fatalf("sync: %v", err)
	}
	if e := recordedEvent(recorder2); e != "" {
		t.Errorf("a create refused AlreadyExists told %q", e)
	}
}
