package flock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"

	"flock.dev/flock/pkg/apis/flock/v1alpha1"
)

var flockResource = schema.GroupResource{Group: v1alpha1.SchemeGroupVersion.Group, Resource: "flocks"}

func TestOrderedReadyCreatesOneMemberAtATime(t *testing.T) {
	f := newFixture(t, "n-a", "n-b", "n-c")
	f.createFlock(newFlock("pg", 3))

	f.mustSync("pg")
	// Every member is placed (and recorded) up front; only pg-0 exists.
	if got, want := f.memberNodes("pg"), map[int32]string{0: "n-a", 1: "n-b", 2: "n-c"}; !equality.Semantic.DeepEqual(got, want) {
		t.Fatalf("members = %v, want %v", got, want)
	}
	if got := f.podNames(); !slices.Equal(got, []string{"pg-0"}) {
		t.Fatalf("pods = %v, want [pg-0]", got)
	}
	events := f.events()
	// One event tells of the whole placement (each event is a write).
	var placed []string
	for _, e := range events {
		if strings.HasPrefix(e, "Normal MemberPlaced ") {
			placed = append(placed, e)
		}
	}
	if want := "Normal MemberPlaced member 0 (pod pg-0) placed on node n-a; member 1 (pod pg-1) placed on node n-b; member 2 (pod pg-2) placed on node n-c"; !slices.Equal(placed, []string{want}) {
		t.Errorf("MemberPlaced events %q, want [%q]", placed, want)
	}
	if !hasEvent(events, "Normal SuccessfulCreate", "Pod pg-0", "n-a") {
		t.Errorf("no SuccessfulCreate event for pg-0 in %v", events)
	}
	// The members not reached yet have their data made ahead: a volume
	// and claim each, and their directories prepared.
	for ord := range int32(3) {
		pv, err := f.data.GetVolume(PersistentVolumeName(f.getFlock("pg").UID, ord))
		if err != nil || pv.Annotations[AnnotationPrepared] != "true" {
			t.Errorf("member %d's volume: %v, %v", ord, pv, err)
		}
		if _, err := f.data.GetClaim(testNamespace, ClaimName(f.getFlock("pg"), ord)); err != nil {
			t.Errorf("member %d's claim: %v", ord, err)
		}
	}

	// Until pg-0 is Running and Ready nothing else happens.
	f.mustSync("pg")
	f.updatePod("pg-0", func(p *corev1.Pod) { p.Spec.NodeName = "n-a"; p.Status.Phase = corev1.PodRunning })
	f.mustSync("pg")
	if got := f.podNames(); !slices.Equal(got, []string{"pg-0"}) {
		t.Fatalf("pods = %v, want [pg-0] while pg-0 is not Ready", got)
	}

	for i, want := range [][]string{{"pg-0", "pg-1"}, {"pg-0", "pg-1", "pg-2"}} {
		f.runPods()
		f.mustSync("pg")
		if got := f.podNames(); !slices.Equal(got, want) {
			t.Fatalf("round %d: pods = %v, want %v", i, got, want)
		}
	}
	f.runPods()
	f.mustSync("pg")

	st := f.getFlock("pg").Status
	if st.Replicas != 3 || st.ReadyReplicas != 3 || st.AvailableReplicas != 3 || st.UpdatedReplicas != 3 || st.CurrentReplicas != 3 {
		t.Errorf("counters = %+v", st)
	}
	if st.ObservedGeneration != 1 || st.Selector != "app=pg" || st.UpdateRevision == "" || st.CurrentRevision != st.UpdateRevision {
		t.Errorf("status = %+v", st)
	}
	for _, m := range st.Members {
		wantHost := fmt.Sprintf("pg-%d.pg.db.svc.cluster.local", m.Ordinal)
		if !m.Ready || m.Pod != PodName("pg", m.Ordinal) || m.Hostname != wantHost || m.Revision != st.UpdateRevision || m.Message != "" {
			t.Errorf("member = %+v", m)
		}
	}
	if c := f.condition("pg", v1alpha1.FlockAvailable); c.Status != metav1.ConditionTrue {
		t.Errorf("Available = %+v", c)
	}
	if c := f.condition("pg", v1alpha1.FlockProgressing); c.Status != metav1.ConditionFalse || c.Reason != ReasonComplete {
		t.Errorf("Progressing = %+v", c)
	}
	if c := f.condition("pg", v1alpha1.FlockMembersBlocked); c.Status != metav1.ConditionFalse {
		t.Errorf("MembersBlocked = %+v", c)
	}
	if c := f.condition("pg", v1alpha1.FlockServiceReady); c.Status != metav1.ConditionTrue {
		t.Errorf("ServiceReady = %+v", c)
	}
}

// TestServiceWithTheFirstMember: a Flock of no members gets no headless
// Service (it would publish no name), and says so in ServiceReady; scaled up,
// the sync that makes its first member makes the Service too; scaled back to
// zero, the Service is kept.
func TestServiceWithTheFirstMember(t *testing.T) {
	f := newFixture(t, "n-a")
	f.createFlock(newFlock("pg", 0))
	f.mustSync("pg")
	f.mustSync("pg")
	if n := len(f.services.List()); n != 0 {
		t.Fatalf("%d Services for a Flock of no members, want none", n)
	}
	if c := f.condition("pg", v1alpha1.FlockServiceReady); c.Status != metav1.ConditionTrue || c.Reason != ReasonServiceNotNeeded || !strings.Contains(c.Message, "pg") {
		t.Fatalf("ServiceReady with no members = %+v", c)
	}
	for _, e := range f.events() {
		if strings.Contains(e, "Service") {
			t.Errorf("event for a Flock of no members: %s", e)
		}
	}

	f.scale("pg", 1)
	f.mustSync("pg")
	if n := len(f.services.List()); n != 1 {
		t.Fatalf("%d Services after the scale up's first sync, want 1", n)
	}
	if c := f.condition("pg", v1alpha1.FlockServiceReady); c.Status != metav1.ConditionTrue || c.Reason != ReasonServiceReady {
		t.Fatalf("ServiceReady after the scale up = %+v", c)
	}
	f.settle("pg")
	if p := f.pod("pg-0"); p == nil || p.Spec.Subdomain != "pg" {
		t.Fatalf("pg-0 = %+v", p)
	}

	f.scale("pg", 0)
	f.settle("pg")
	if n := len(f.services.List()); n != 1 {
		t.Fatalf("%d Services after the scale down to zero, want the Service kept", n)
	}
	if c := f.condition("pg", v1alpha1.FlockServiceReady); c.Reason != ReasonServiceReady {
		t.Fatalf("ServiceReady after the scale down to zero = %+v", c)
	}
}

// The sync that creates the headless Service already reports it as the
// next sync finds it, so that sync has nothing to write for it.
func TestServiceReadyFromTheSyncThatCreatesIt(t *testing.T) {
	f := newFixture(t, "n-a")
	f.createFlock(newFlock("pg", 1))
	f.mustSync("pg")
	if len(f.services.List()) != 1 {
		t.Fatalf("%d Services after the first sync, want 1", len(f.services.List()))
	}
	first := f.condition("pg", v1alpha1.FlockServiceReady)
	if first.Status != metav1.ConditionTrue || first.Reason != ReasonServiceReady {
		t.Fatalf("ServiceReady after the Service's create = %+v", first)
	}
	f.mustSync("pg")
	if again := f.condition("pg", v1alpha1.FlockServiceReady); !equality.Semantic.DeepEqual(again, first) {
		t.Fatalf("ServiceReady changed on the next sync:\n%+v\n%+v", first, again)
	}
}

func TestMemberPodIdentity(t *testing.T) {
	f := newFixture(t, "n-a")
	fl := newFlock("pg", 1)
	fl.Spec.ServiceName = "pg-hl"
	fl.Spec.Template.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{
			{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "disk", Operator: corev1.NodeSelectorOpIn, Values: []string{"ssd"}}}},
			{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "disk", Operator: corev1.NodeSelectorOpIn, Values: []string{"nvme"}}}},
		}},
	}}
	f.createFlock(fl)
	f.mustSync("pg")

	p := f.pod("pg-0")
	if p == nil {
		t.Fatal("pg-0 not created")
	}
	if p.Spec.Hostname != "pg-0" || p.Spec.Subdomain != "pg-hl" {
		t.Errorf("hostname/subdomain = %q/%q", p.Spec.Hostname, p.Spec.Subdomain)
	}
	wantLabels := map[string]string{
		"app": "pg", v1alpha1.LabelFlockName: "pg", v1alpha1.LabelOrdinal: "0", v1alpha1.LabelPodName: "pg-0",
		v1alpha1.LabelRevision: Revision(&fl.Spec.Template),
	}
	if !equality.Semantic.DeepEqual(p.Labels, wantLabels) {
		t.Errorf("labels = %v, want %v", p.Labels, wantLabels)
	}
	terms := p.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	if len(terms) != 2 {
		t.Fatalf("terms = %+v", terms)
	}
	for i, term := range terms {
		if len(term.MatchExpressions) != 1 || len(term.MatchFields) != 1 ||
			term.MatchFields[0].Key != "metadata.name" || !slices.Equal(term.MatchFields[0].Values, []string{"n-a"}) {
			t.Errorf("term %d = %+v", i, term)
		}
	}
	var data *corev1.Volume
	for i := range p.Spec.Volumes {
		if p.Spec.Volumes[i].Name == "data" {
			data = &p.Spec.Volumes[i]
		}
	}
	if data == nil || data.HostPath != nil || data.PersistentVolumeClaim == nil || data.PersistentVolumeClaim.ClaimName != "data-pg-0" {
		t.Errorf("data volume = %+v", data)
	}
	ref := metav1.GetControllerOf(p)
	if ref == nil || ref.APIVersion != "flock.dev/v1alpha1" || ref.Kind != "Flock" || ref.Name != "pg" ||
		ref.UID != fl.UID || ref.BlockOwnerDeletion == nil || !*ref.BlockOwnerDeletion {
		t.Errorf("controller ref = %+v", ref)
	}
	// The Flock in the cache is not modified by building pods from it.
	if fl2 := f.getFlock("pg"); len(fl2.Spec.Template.Spec.Volumes) != 0 ||
		len(fl2.Spec.Template.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchFields) != 0 {
		t.Errorf("template was mutated: %+v", fl2.Spec.Template.Spec)
	}
}

// With Options.MemberParallelism above 1 the members of a Parallel Flock
// are written at the same time: every member's claim create is in flight
// before any returns (a barrier, bounded at 10 s, that serial writes would
// only pass by its timeout), and the sync still ends with every member's
// volume, claim and pod, each on its own node.
func TestParallelMembersAreWrittenAtOnce(t *testing.T) {
	f := newFixtureWithConfig(t, fixtureConfig{verbosity: 4, memberParallelism: 4}, "n-a", "n-b", "n-c")
	claims := newInFlight(3)
	f.data.beforeCreateClaim = claims.wait
	fl := newFlock("pg", 3)
	fl.Spec.PodManagementPolicy = v1alpha1.ParallelPodManagement
	f.createFlock(fl)
	f.mustSync("pg")
	if most := claims.most(); most != 3 {
		t.Errorf("at most %d claim creates were in flight at once, want 3 (one per member)", most)
	}
	if got := f.podNames(); !slices.Equal(got, []string{"pg-0", "pg-1", "pg-2"}) {
		t.Fatalf("pods = %v, want one per member after one sync", got)
	}
	nodes := map[string]bool{}
	for _, p := range f.allPods() {
		if p.Namespace != testNamespace {
			continue
		}
		nodes[PinnedNode(p)] = true
	}
	if len(nodes) != 3 {
		t.Errorf("member pods on nodes %v, want three different ones", nodes)
	}
	for ord := range int32(3) {
		if _, err := f.data.GetVolume(PersistentVolumeName(f.getFlock("pg").UID, ord)); err != nil {
			t.Errorf("member %d's volume: %v", ord, err)
		}
	}
	f.check()
}

// inFlight is a barrier for calls that a sync should make at once: each
// call waits until want calls are in flight together, or at most 10 s (so
// that calls made one after another pass, slowly), and most reports how
// many were in flight at once.
type inFlight struct {
	want int
	all  chan struct{}

	mu        sync.Mutex
	now, peak int
}

func newInFlight(want int) *inFlight { return &inFlight{want: want, all: make(chan struct{})} }

func (b *inFlight) wait() {
	b.mu.Lock()
	b.now++
	b.peak = max(b.peak, b.now)
	if b.now == b.want {
		close(b.all)
	}
	b.mu.Unlock()
	select {
	case <-b.all:
	case <-time.After(10 * time.Second):
	}
	b.mu.Lock()
	b.now--
	b.mu.Unlock()
}

func (b *inFlight) most() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.peak
}

// namespaceTerminatingError is kube-apiserver's refusal of a create in a
// namespace being deleted (the NamespaceLifecycle admission plugin's).
func namespaceTerminatingError(resource, name string) error {
	err := apierrors.NewForbidden(schema.GroupResource{Resource: resource}, name,
		fmt.Errorf("unable to create new content in namespace %s because it is being terminated", testNamespace))
	err.ErrStatus.Details.Causes = append(err.ErrStatus.Details.Causes, metav1.StatusCause{
		Type: corev1.NamespaceTerminatingCause, Field: "metadata.namespace",
		Message: fmt.Sprintf("namespace %s is being terminated", testNamespace),
	})
	return err
}

// TestNamespaceBeingDeletedIsNotRetried: creates refused because the
// Flock's namespace is being deleted end the sync without an error (no
// rate-limited retries, no error logged) and without FailedCreate events, as
// the built-in controllers do; any other failure among them is still an
// error.
func TestNamespaceBeingDeletedIsNotRetried(t *testing.T) {
	f := newFixtureCreatingOnlyPods(t)
	f.members.failNext("CreatePod", 3, namespaceTerminatingError("pods", "pg-0"))
	f.syncQuietly("pg", "Warning FailedCreate", "every create refused: the namespace is being deleted")

	// Another refusal among them is reported, with its event.
	f.members.failNext("CreatePod", 1, apierrors.NewInternalError(errors.New("boom")))
	if err := f.sync("pg"); err == nil || namespaceTerminating(err) {
		t.Fatalf("sync with an internal error among the creates: %v, want that error", err)
	}
	if events := f.events(); !hasEvent(events, "Warning FailedCreate", "boom") {
		t.Errorf("no FailedCreate event for the internal error: %v", events)
	}
}

// namespaceNotFoundError is kube-apiserver's refusal of a write in a
// namespace that does not exist (the NamespaceLifecycle admission plugin
// returns its live lookup's 404).
func namespaceNotFoundError(ns string) error {
	return apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, ns)
}

func TestNamespaceTerminating(t *testing.T) {
	terminating := namespaceTerminatingError("pods", "pg-0")
	gone := namespaceNotFoundError(testNamespace)
	other := apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "pg-0", errors.New("quota"))
	for _, tc := range []struct {
		name                     string
		err                      error
		terminating, refused, gc bool // namespaceTerminating, namespaceRefused, namespaceGone
	}{
		{"nil", nil, false, false, false},
		{"the refusal", terminating, true, true, false},
		{"wrapped", fmt.Errorf("creating pod: %w", terminating), true, true, false},
		{"joined", errors.Join(terminating, fmt.Errorf("creating claim: %w", terminating)), true, true, false},
		{"aggregated", utilerrors.NewAggregate([]error{terminating, errors.Join(terminating)}), true, true, false},
		{"another forbidden", other, false, false, false},
		{"mixed", utilerrors.NewAggregate([]error{terminating, other}), false, false, false},
		{"empty aggregate", errors.Join(), false, false, false},
		{"namespace gone", fmt.Errorf("creating claim: %w", gone), false, true, true},
		{"gone, then terminating", errors.Join(gone, terminating), false, true, true},
		{"gone among others", utilerrors.NewAggregate([]error{gone, other}), false, false, true},
		{"another namespace gone", namespaceNotFoundError("flock-system"), false, false, false},
		{"the object not found", apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, testNamespace), false, false, false},
		{"a namespaces resource of another group", apierrors.NewNotFound(schema.GroupResource{Group: "example.com", Resource: "namespaces"}, testNamespace), false, false, false},
	} {
		if got := namespaceTerminating(tc.err); got != tc.terminating {
			t.Errorf("%s: namespaceTerminating(%v) = %v, want %v", tc.name, tc.err, got, tc.terminating)
		}
		if got := namespaceRefused(tc.err, testNamespace); got != tc.refused {
			t.Errorf("%s: namespaceRefused(%v) = %v, want %v", tc.name, tc.err, got, tc.refused)
		}
		if got := namespaceGone(tc.err, testNamespace); got != tc.gc {
			t.Errorf("%s: namespaceGone(%v) = %v, want %v", tc.name, tc.err, got, tc.gc)
		}
	}
}

// TestNamespaceGoneIsRetriedQuietly: creates refused because the Flock's
// namespace no longer exists tell no FailedCreate (the event would be
// refused too), and the key is retried with backoff without the error log
// (the controller of Flocks whose namespace is gone deletes the Flock, or
// the namespace comes back); a namespace being deleted is not retried, and
// any other failure is retried and logged.
func TestNamespaceGoneIsRetriedQuietly(t *testing.T) {
	f := newFixtureCreatingOnlyPods(t)
	f.members.failNext("CreatePod", 3, namespaceNotFoundError(testNamespace))
	err := f.sync("pg")
	if !namespaceGone(err, testNamespace) || !namespaceRefused(err, testNamespace) {
		t.Fatalf("sync in a namespace that is gone: %v, want the refusals", err)
	}
	if events := f.events(); hasEvent(events, "Warning FailedCreate") {
		t.Errorf("FailedCreate event for a create refused in a namespace that is gone: %v", events)
	}

	key := testNamespace + "/pg"
	for _, tc := range []struct {
		name     string
		err      error
		requeued bool
		logged   bool
		termEnd  bool // the sync's context was canceled: a lost lease, a stop
	}{
		{"namespace gone", err, true, false, false},
		{"namespace being deleted", namespaceTerminatingError("pods", "pg-0"), false, false, false},
		{"another failure", apierrors.NewInternalError(errors.New("boom")), true, true, false},
		{"another namespace gone", namespaceNotFoundError("flock-system"), true, true, false},
		{"the term ended", fmt.Errorf("create pod: %w", context.Canceled), false, false, true},
	} {
		logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.BufferLogs(true)))
		ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), logger))
		if tc.termEnd {
			cancel()
		}
		q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())
		q.Add(key)
		processNext(ctx, q, func(context.Context, string) error { return tc.err }, "syncing failed")
		if got := q.NumRequeues(key) == 1; got != tc.requeued {
			t.Errorf("%s: requeued %v, want %v", tc.name, got, tc.requeued)
		}
		logs := logger.GetSink().(ktesting.Underlier).GetBuffer().String()
		if got := strings.Contains(logs, "syncing failed"); got != tc.logged {
			t.Errorf("%s: error logged %v, want %v; logs:\n%s", tc.name, got, tc.logged, logs)
		}
		q.ShutDown()
		cancel()
	}
}

// TestSyncCutShortByTheTermsEnd: writes that fail because the sync's term
// ended (a lost lease, a stop) tell no Warning event; the next term syncs
// the Flock again.
func TestSyncCutShortByTheTermsEnd(t *testing.T) {
	f := newFixtureCreatingOnlyPods(t)
	f.members.failNext("CreatePod", 3, fmt.Errorf("post pods: %w", context.Canceled))
	ctx, cancel := context.WithCancel(f.ctx)
	cancel()
	if err := f.controller.sync(ctx, testNamespace+"/pg"); !errors.Is(err, context.Canceled) {
		t.Fatalf("sync whose term ended: %v, want the canceled creates", err)
	}
	if events := f.events(); hasEvent(events, "Warning") {
		t.Errorf("Warning events for writes cut short by the term's end: %v", events)
	}
}

// newFixtureCreatingOnlyPods is newParallelFixture scaled to 0 and back to
// 3, its events read: the members' data is there, so the next sync's only
// creates are the member pods.
func newFixtureCreatingOnlyPods(t *testing.T) *fixture {
	f := newParallelFixture(t)
	f.scale("pg", 0)
	f.settle("pg")
	f.events()
	f.scale("pg", 3)
	return f
}

// syncQuietly syncs name, whose writes are refused for why, and checks that
// the sync ends without an error, makes no pod and tells no event.
func (f *fixture) syncQuietly(name, event, why string) {
	f.t.Helper()
	if err := f.sync(name); err != nil {
		f.t.Fatalf("sync (%s): %v, want no error", why, err)
	}
	if got := f.podNames(); len(got) != 0 {
		f.t.Fatalf("pods = %v, want none (%s)", got, why)
	}
	if events := f.events(); hasEvent(events, event) {
		f.t.Errorf("%s event (%s): %v", event, why, events)
	}
}

// newParallelFixture is a fixture of three nodes with a Parallel Flock pg
// of 3 members, synced once.
func newParallelFixture(t *testing.T) *fixture {
	f := newFixture(t, "n-a", "n-b", "n-c")
	fl := newFlock("pg", 3)
	fl.Spec.PodManagementPolicy = v1alpha1.ParallelPodManagement
	f.createFlock(fl)
	f.mustSync("pg")
	return f
}

func TestParallelCreatesAllMembersAtOnce(t *testing.T) {
	f := newParallelFixture(t)
	if got := f.podNames(); !slices.Equal(got, []string{"pg-0", "pg-1", "pg-2"}) {
		t.Fatalf("pods = %v", got)
	}
	// One failing create does not stop the others; the sync reports it.
	f.scale("pg", 0)
	f.settle("pg")
	if got := f.podNames(); len(got) != 0 {
		t.Fatalf("pods after scale to 0 = %v", got)
	}
	f.scale("pg", 3)
	f.members.failNext("CreatePod", 1, apierrors.NewInternalError(errors.New("boom")))
	if err := f.sync("pg"); err == nil {
		t.Fatal("sync with a failing create returned no error")
	}
	if got := f.podNames(); !slices.Equal(got, []string{"pg-1", "pg-2"}) {
		t.Fatalf("pods = %v, want pg-1, pg-2", got)
	}
	if !hasEvent(f.events(), "Warning FailedCreate", "pg-0", "boom") {
		t.Error("no FailedCreate event")
	}
	f.mustSync("pg")
	if got := f.podNames(); !slices.Equal(got, []string{"pg-0", "pg-1", "pg-2"}) {
		t.Fatalf("pods = %v", got)
	}
}

// An OrderedReady scale down waits for the members below, but not to delete
// the pods of the members it removes that have terminated (none of them
// runs): member 0 kept out by a pod of its name that is not the Flock's,
// the scaled-away member 2's Failed pod goes all the same, and member 1's
// running pod waits.
func TestTerminatedPodOfAScaledAwayMemberGoesWhileALowerMemberWaits(t *testing.T) {
	f := newFixture(t, "n-a", "n-b", "n-c")
	fl := newFlock("pg", 3)
	f.createFlock(fl)
	f.settle("pg")
	f.deletePod("pg-0")
	stray := NewMemberPod(fl, v1alpha1.FlockMember{Ordinal: 0, Node: "n-a"}, "")
	stray.OwnerReferences, stray.UID = nil, "stray"
	stray.Labels = map[string]string{"app": "other"}
	f.addPod(stray)
	f.updatePod("pg-2", func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed })
	f.scale("pg", 1)
	f.mustSync("pg")
	if c := f.condition("pg", v1alpha1.FlockMembersBlocked); c.Reason != ReasonPodNameTaken {
		t.Fatalf("MembersBlocked = %+v, want %s", c, ReasonPodNameTaken)
	}
	if p := f.pod("pg-2"); p != nil && p.DeletionTimestamp == nil {
		t.Fatalf("Failed pg-2 of scaled-away member 2 not deleted: %+v", p.Status)
	}
	if p := f.pod("pg-1"); p == nil || p.DeletionTimestamp != nil {
		t.Fatalf("running pg-1 deleted before member 0 is Ready: %v", p)
	}
}

func TestScaleDownAndUp(t *testing.T) {
	for _, policy := range []v1alpha1.PodManagementPolicyType{v1alpha1.OrderedReadyPodManagement, v1alpha1.ParallelPodManagement} {
		t.Run(string(policy), func(t *testing.T) {
			f := newFixture(t, "n-a", "n-b", "n-c", "n-d")
			f.members.graceful = true
			fl := newFlock("pg", 3)
			fl.Spec.PodManagementPolicy = policy
			f.createFlock(fl)
			f.settle("pg")
			before := f.memberNodes("pg")

			f.scale("pg", 1)
			f.mustSync("pg")
			var terminating []string
			for _, p := range f.allPods() {
				if p.DeletionTimestamp != nil && p.Namespace == testNamespace {
					terminating = append(terminating, p.Name)
				}
			}
			want := []string{"pg-2"}
			if policy == v1alpha1.ParallelPodManagement {
				want = []string{"pg-1", "pg-2"}
			}
			if !slices.Equal(terminating, want) {
				t.Fatalf("terminating = %v, want %v", terminating, want)
			}
			// Members stay recorded while their pods exist.
			if got := len(f.getFlock("pg").Status.Members); got != 3 {
				t.Fatalf("members = %d while pods terminate", got)
			}
			if c := f.condition("pg", v1alpha1.FlockProgressing); c.Status != metav1.ConditionTrue || c.Reason != ReasonScalingDown {
				t.Errorf("Progressing = %+v", c)
			}
			f.mustSync("pg") // nothing new while pg-2 terminates
			if policy == v1alpha1.OrderedReadyPodManagement && f.pod("pg-1").DeletionTimestamp != nil {
				t.Fatal("pg-1 deleted before pg-2 was gone")
			}
			for range 4 {
				f.finishTerminating()
				f.mustSync("pg")
			}
			if got := f.podNames(); !slices.Equal(got, []string{"pg-0"}) {
				t.Fatalf("pods = %v", got)
			}
			if got := f.memberNodes("pg"); !equality.Semantic.DeepEqual(got, map[int32]string{0: before[0]}) {
				t.Fatalf("members = %v", got)
			}
			if c := f.condition("pg", v1alpha1.FlockProgressing); c.Status != metav1.ConditionFalse {
				t.Errorf("Progressing = %+v", c)
			}

			// Scaling up again places the members on their old nodes: the
			// placement is deterministic and nothing else changed.
			f.scale("pg", 3)
			f.settle("pg")
			if got := f.memberNodes("pg"); !equality.Semantic.DeepEqual(got, before) {
				t.Fatalf("members after scale up = %v, want %v", got, before)
			}
			for ord, node := range before {
				if p := f.pod(PodName("pg", ord)); p == nil || p.Spec.NodeName != node || !isRunningAndReady(p) {
					t.Fatalf("pod of member %d = %+v", ord, p)
				}
			}
		})
	}
}

func TestDeletedPodComesBackOnItsNode(t *testing.T) {
	f := newFixture(t, "n-a", "n-b", "n-c")
	f.createFlock(newFlock("pg", 3))
	f.settle("pg")
	oldUID := f.pod("pg-1").UID

	f.deletePod("pg-1")
	f.mustSync("pg")
	p := f.pod("pg-1")
	if p == nil || p.UID == oldUID {
		t.Fatalf("pg-1 not recreated: %+v", p)
	}
	if PinnedNode(p) != "n-b" {
		t.Fatalf("pg-1 pinned to %q, want n-b", PinnedNode(p))
	}
	if c := f.condition("pg", v1alpha1.FlockAvailable); c.Status != metav1.ConditionFalse {
		t.Errorf("Available = %+v while pg-1 was missing", c)
	}
	f.settle("pg")
	if c := f.condition("pg", v1alpha1.FlockAvailable); c.Status != metav1.ConditionTrue {
		t.Errorf("Available = %+v", c)
	}
}

func TestFailedPodIsDeletedAndRecreated(t *testing.T) {
	f := newFixture(t, "n-a", "n-b", "n-c")
	f.createFlock(newFlock("pg", 3))
	f.settle("pg")
	f.events()
	oldUID := f.pod("pg-2").UID

	f.updatePod("pg-2", func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed })
	f.mustSync("pg")
	if p := f.pod("pg-2"); p != nil {
		t.Fatalf("failed pg-2 not deleted: %+v", p.Status)
	}
	if !hasEvent(f.events(), "Warning RecreatingPod", "pg-2", "Failed", "n-c") {
		t.Error("no RecreatingPod event")
	}
	f.mustSync("pg")
	p := f.pod("pg-2")
	if p == nil || p.UID == oldUID || PinnedNode(p) != "n-c" {
		t.Fatalf("pg-2 not recreated on n-c: %+v", p)
	}

	// A failing delete is retried.
	f.settle("pg")
	f.updatePod("pg-0", func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed })
	f.members.failNext("DeletePod", 1, apierrors.NewServiceUnavailable("try later"))
	if err := f.sync("pg"); err == nil {
		t.Fatal("sync with a failing delete returned no error")
	}
	if !hasEvent(f.events(), "Warning FailedDelete", "pg-0") {
		t.Error("no FailedDelete event")
	}
	f.mustSync("pg")
	if f.pod("pg-0") != nil {
		t.Fatal("pg-0 not deleted on retry")
	}
}

func TestPlacementCountsUsageAcrossFlocks(t *testing.T) {
	f := newFixture(t, "n-a", "n-b", "n-c", "n-d")
	a := newFlock("a", 2)
	a.Spec.PodManagementPolicy = v1alpha1.ParallelPodManagement
	f.createFlock(a)
	f.mustSync("a")
	if got := f.memberNodes("a"); !equality.Semantic.DeepEqual(got, map[int32]string{0: "n-a", 1: "n-b"}) {
		t.Fatalf("a = %v", got)
	}
	b := newFlock("b", 3)
	b.Spec.PodManagementPolicy = v1alpha1.ParallelPodManagement
	f.createFlock(b)
	f.mustSync("b")
	// Least used first (n-c, n-d are empty), ties by name, never twice on a node.
	if got := f.memberNodes("b"); !equality.Semantic.DeepEqual(got, map[int32]string{0: "n-c", 1: "n-d", 2: "n-a"}) {
		t.Fatalf("b = %v", got)
	}
}

func TestExplicitNodes(t *testing.T) {
	f := newFixture(t, "n-a", "n-b", "n-c")
	fl := newFlock("pg", 2)
	fl.Spec.Placement.Nodes = []string{"n-c", "n-x"}
	fl.Spec.PodManagementPolicy = v1alpha1.ParallelPodManagement
	f.createFlock(fl)
	f.mustSync("pg")
	if got := f.memberNodes("pg"); !equality.Semantic.DeepEqual(got, map[int32]string{0: "n-c"}) {
		t.Fatalf("members = %v", got)
	}
	c := f.condition("pg", v1alpha1.FlockMembersBlocked)
	if c.Status != metav1.ConditionTrue || c.Reason != ReasonUnplaceable || !strings.Contains(c.Message, "member 1 cannot be placed on node n-x") {
		t.Fatalf("MembersBlocked = %+v", c)
	}
	if got := f.podNames(); !slices.Equal(got, []string{"pg-0"}) {
		t.Fatalf("pods = %v", got)
	}
	// The node appears: the member is placed there.
	f.addNode(newNode("n-x"))
	f.settle("pg")
	if got := f.memberNodes("pg"); !equality.Semantic.DeepEqual(got, map[int32]string{0: "n-c", 1: "n-x"}) {
		t.Fatalf("members = %v", got)
	}
}

func TestMembersBlocked(t *testing.T) {
	f := newFixture(t, "n-a", "n-b", "n-c")
	f.createFlock(newFlock("pg", 3))
	f.mustSync("pg") // places 0:n-a 1:n-b 2:n-c, creates pg-0
	f.updateNode("n-b", setNodeReady(false))
	f.settle("pg")
	c := f.condition("pg", v1alpha1.FlockMembersBlocked)
	const notReady = "member 1 waits for node n-b, which is NotReady since 2026-11-30T12:00:00Z; memberRecovery Wait keeps it on that node until the node is back"
	if c.Status != metav1.ConditionTrue || c.Reason != ReasonNodeNotReady || c.Message != notReady {
		t.Fatalf("MembersBlocked = %+v", c)
	}
	if !hasEvent(f.events(), "Warning MembersBlocked", notReady) {
		t.Error("no MembersBlocked event")
	}
	// OrderedReady: member 2 waits behind member 1; its node is not changed.
	if got := f.podNames(); !slices.Equal(got, []string{"pg-0", "pg-1"}) {
		t.Fatalf("pods = %v", got)
	}
	if st := f.getFlock("pg").Status; st.Members[1].Message != notReady {
		t.Errorf("member 1 = %+v", st.Members[1])
	}

	f.updateNode("n-b", func(n *corev1.Node) { setNodeReady(true)(n); n.Spec.Unschedulable = true })
	f.settle("pg")
	if c := f.condition("pg", v1alpha1.FlockMembersBlocked); c.Reason != ReasonNodeCordoned || c.Message != "member 1 waits for node n-b, which is cordoned" {
		t.Fatalf("MembersBlocked = %+v", c)
	}

	f.clock.Step(time.Minute)
	f.deleteNode("n-b")
	f.settle("pg")
	if c := f.condition("pg", v1alpha1.FlockMembersBlocked); c.Reason != ReasonNodeGone ||
		c.Message != "member 1 waits for node n-b, which is gone since 2026-11-30T12:01:00Z; memberRecovery Wait keeps it on that node until the node is back" {
		t.Fatalf("MembersBlocked = %+v", c)
	}
	if got := f.memberNodes("pg")[1]; got != "n-b" {
		t.Fatalf("member 1 moved to %s", got)
	}

	f.addNode(newNode("n-b"))
	f.settle("pg")
	if c := f.condition("pg", v1alpha1.FlockMembersBlocked); c.Status != metav1.ConditionFalse {
		t.Fatalf("MembersBlocked = %+v", c)
	}
	if c := f.condition("pg", v1alpha1.FlockAvailable); c.Status != metav1.ConditionTrue {
		t.Fatalf("Available = %+v", c)
	}
}

func TestUnplaceableMember(t *testing.T) {
	f := newFixture(t, "n-a", "n-b")
	fl := newFlock("pg", 3)
	fl.Spec.PodManagementPolicy = v1alpha1.ParallelPodManagement
	f.createFlock(fl)
	f.settle("pg")
	if got := f.podNames(); !slices.Equal(got, []string{"pg-0", "pg-1"}) {
		t.Fatalf("pods = %v", got)
	}
	c := f.condition("pg", v1alpha1.FlockMembersBlocked)
	if c.Status != metav1.ConditionTrue || c.Message != "member 2 cannot be placed: no eligible node is free of this Flock's members" {
		t.Fatalf("MembersBlocked = %+v", c)
	}
	if c := f.condition("pg", v1alpha1.FlockAvailable); c.Status != metav1.ConditionFalse || c.Message != "2 of 3 members available" {
		t.Fatalf("Available = %+v", c)
	}
}

func TestAdoption(t *testing.T) {
	f := newFixture(t, "n-a", "n-b", "n-c", "n-d")
	fl := newFlock("pg", 3)
	orphan := func(ord int32, node string) *corev1.Pod {
		p := NewMemberPod(fl, v1alpha1.FlockMember{Ordinal: ord, Node: node}, Revision(&fl.Spec.Template))
		p.OwnerReferences = nil
		p.UID = types.UID("orphan-" + p.Name)
		p.Spec.NodeName = node
		p.Status.Phase = corev1.PodRunning
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
		return p
	}
	// Orphans of an earlier incarnation (kubectl delete --cascade=orphan):
	// pg-0 on n-c, pg-1 on n-a; pg-3 on n-d is beyond replicas and not a
	// recorded member, so it is no candidate (bounded adoption); pg-4 has
	// another data volume than its member would.
	f.addPod(orphan(0, "n-c"))
	f.addPod(orphan(1, "n-a"))
	f.addPod(orphan(3, "n-d"))
	foreign := orphan(4, "n-d")
	foreign.Spec.Volumes[len(foreign.Spec.Volumes)-1].PersistentVolumeClaim.ClaimName = "elsewhere"
	f.addPod(foreign)
	// Not adoptable: owned by another controller; and a pod that does not
	// match the selector.
	other := orphan(2, "n-b")
	other.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "rs", UID: "rs-uid", Controller: new(true)}}
	f.addPod(other)
	stranger := orphan(5, "n-b")
	stranger.Name, stranger.Labels = "pg-5", map[string]string{"app": "other"}
	f.addPod(stranger)

	f.createFlock(fl)
	f.mustSync("pg")

	// The orphans' nodes become their members' nodes, so they keep their data.
	members := f.memberNodes("pg")
	if _, ok := members[3]; members[0] != "n-c" || members[1] != "n-a" || ok {
		t.Fatalf("members = %v", members)
	}
	for _, name := range []string{"pg-0", "pg-1"} {
		if p := f.pod(name); !isControlledBy(p, fl) {
			t.Errorf("%s not adopted: %+v", name, p.OwnerReferences)
		}
	}
	for _, name := range []string{"pg-3", "pg-4"} {
		if p := f.pod(name); len(p.OwnerReferences) != 0 {
			t.Errorf("%s, no candidate, adopted: %+v", name, p.OwnerReferences)
		}
	}
	if p := f.pod("pg-2"); p.OwnerReferences[0].Kind != "ReplicaSet" || len(p.OwnerReferences) != 1 {
		t.Errorf("pg-2 of another controller was touched: %+v", p.OwnerReferences)
	}
	if p := f.pod("pg-5"); len(p.OwnerReferences) != 0 {
		t.Errorf("non-matching pg-5 adopted")
	}
	// pg-2's name is taken by another controller's pod: member 2 is
	// blocked and says so.
	f.settle("pg")
	c := f.condition("pg", v1alpha1.FlockMembersBlocked)
	if c.Reason != ReasonPodNameTaken || !strings.Contains(c.Message, "pod pg-2 exists and is not a pod of this Flock") {
		t.Fatalf("MembersBlocked = %+v", c)
	}
	// Once the other pod is gone, pg-2 is created; pg-3 and pg-4 are left
	// alone, never deleted nor recorded.
	f.deletePod("pg-2")
	f.settle("pg")
	if p := f.pod("pg-2"); !isControlledBy(p, fl) || !isRunningAndReady(p) {
		t.Fatalf("pg-2 = %+v", p)
	}
	for _, name := range []string{"pg-3", "pg-4"} {
		if p := f.pod(name); p == nil || len(p.OwnerReferences) != 0 {
			t.Errorf("%s, no candidate, was deleted or adopted: %+v", name, p)
		}
	}
	if got := f.memberNodes("pg"); !equality.Semantic.DeepEqual(got, map[int32]string{0: "n-c", 1: "n-a", 2: "n-b"}) {
		t.Fatalf("members = %v", got)
	}
}

// TestOrphanOnAnEarlierFlocksDataIsNotAdopted: after `kubectl delete
// --cascade=orphan` and a new Flock of the same name, the old pods still
// mount the old Flock's claims (orphaned too, bound to volumes keyed by the
// old UID). The new Flock does not adopt such a pod: it could never make the
// member's next pod on that data, so the first restart or rollout would
// block the member. The pod is left alone, the member is blocked with a
// message naming the claim, and once the pod and claim are gone it starts
// on fresh data of its own. An orphan whose claim is the Flock's is adopted.
func TestOrphanOnAnEarlierFlocksDataIsNotAdopted(t *testing.T) {
	f := newFixture(t, "n-a", "n-b")
	fl := newFlock("pg", 2)
	fl.UID = "new-uid"
	old := newFlock("pg", 2)
	old.UID = "old-uid"
	for ord, node := range []string{"n-a", "n-b"} {
		p := NewMemberPod(old, v1alpha1.FlockMember{Ordinal: int32(ord), Node: node}, Revision(&old.Spec.Template))
		p.OwnerReferences = nil
		p.UID = types.UID("orphan-" + p.Name)
		p.Spec.NodeName = node
		p.Status.Phase = corev1.PodRunning
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
		f.addPod(p)
	}
	// pg-0's claim is the old Flock's, released by the orphaning delete;
	// pg-1's claim is the new Flock's own (made for it, and this pod of
	// the same name came to use it).
	oldClaim := NewMemberClaim(old, 0, PersistentVolumeName(old.UID, 0))
	oldClaim.OwnerReferences, oldClaim.UID = nil, "old-claim"
	f.data.claims[testNamespace+"/"+oldClaim.Name] = oldClaim
	ownClaim := NewMemberClaim(fl, 1, PersistentVolumeName(fl.UID, 1))
	ownClaim.UID = "own-claim"
	f.data.claims[testNamespace+"/"+ownClaim.Name] = ownClaim

	f.createFlock(fl)
	f.mustSync("pg")
	if p := f.pod("pg-0"); p == nil || p.UID != "orphan-pg-0" || len(p.OwnerReferences) != 0 || p.DeletionTimestamp != nil {
		t.Fatalf("pg-0 on an earlier Flock's data: %+v; want it left alone", p)
	}
	if p := f.pod("pg-1"); p == nil || p.UID != "orphan-pg-1" || !isControlledBy(p, fl) {
		t.Fatalf("pg-1 on the Flock's own claim: %+v; want it adopted", p)
	}
	c := f.condition("pg", v1alpha1.FlockMembersBlocked)
	if c.Reason != ReasonPodNameTaken || !strings.Contains(c.Message, "member 0 cannot start: pod pg-0 exists and is not a pod of this Flock: it uses data that is not this member's") ||
		!strings.Contains(c.Message, "PersistentVolumeClaim "+testNamespace+"/data-pg-0 exists and is not controlled by this Flock") {
		t.Fatalf("MembersBlocked = %+v", c)
	}
	if claim := f.data.claims[testNamespace+"/data-pg-0"]; claim.UID != "old-claim" || len(claim.OwnerReferences) != 0 {
		t.Fatalf("the earlier Flock's claim changed: %+v", claim.ObjectMeta)
	}

	// The user deletes the old pod and its claim: member 0 starts on a
	// claim and volume of the new Flock's own.
	f.deletePod("pg-0")
	delete(f.data.claims, testNamespace+"/data-pg-0")
	f.settle("pg")
	if p := f.pod("pg-0"); p == nil || !isControlledBy(p, fl) || !isRunningAndReady(p) {
		t.Fatalf("pg-0 after the old pod and claim went: %+v", p)
	}
	claim := f.data.claims[testNamespace+"/data-pg-0"]
	if claim == nil || !isControlledBy(claim, fl) || claim.Spec.VolumeName != PersistentVolumeName(fl.UID, 0) {
		t.Fatalf("member 0's claim: %+v; want the new Flock's, for volume %s", claim, PersistentVolumeName(fl.UID, 0))
	}
}

func TestOrphanOnTakenNodeIsNotAdopted(t *testing.T) {
	f := newFixture(t, "n-a", "n-b")
	fl := newFlock("pg", 2)
	fl.Spec.PodManagementPolicy = v1alpha1.ParallelPodManagement
	f.createFlock(fl)
	f.mustSync("pg") // 0:n-a, 1:n-b; pods created
	f.deletePod("pg-1")
	// A stray pg-1 on n-a (member 0's node) appears.
	stray := NewMemberPod(fl, v1alpha1.FlockMember{Ordinal: 1, Node: "n-a"}, "")
	stray.OwnerReferences, stray.UID = nil, "stray"
	f.addPod(stray)
	f.mustSync("pg")
	if p := f.pod("pg-1"); p.UID != "stray" || len(p.OwnerReferences) != 0 {
		t.Fatalf("stray pg-1 was adopted or replaced: %+v", p.ObjectMeta)
	}
	if c := f.condition("pg", v1alpha1.FlockMembersBlocked); c.Reason != ReasonPodNameTaken {
		t.Fatalf("MembersBlocked = %+v", c)
	}
}

func TestReleaseOfPodThatNoLongerMatches(t *testing.T) {
	f := newFixture(t, "n-a", "n-b")
	fl := newFlock("pg", 2)
	f.createFlock(fl)
	f.settle("pg")
	// A user relabels pg-1 out of the Flock (to debug it, say).
	f.updatePod("pg-1", func(p *corev1.Pod) { p.Labels["app"] = "debug" })
	f.mustSync("pg")
	if p := f.pod("pg-1"); metav1.GetControllerOf(p) != nil {
		t.Fatalf("pg-1 not released: %+v", p.OwnerReferences)
	}
	if c := f.condition("pg", v1alpha1.FlockMembersBlocked); c.Reason != ReasonPodNameTaken {
		t.Fatalf("MembersBlocked = %+v", c)
	}
}

func TestAdoptionRechecksDeletion(t *testing.T) {
	f := newFixture(t, "n-a")
	fl := newFlock("pg", 1)
	p := NewMemberPod(fl, v1alpha1.FlockMember{Ordinal: 0, Node: "n-a"}, "")
	p.OwnerReferences, p.UID = nil, "orphan"
	f.addPod(p)
	fl.Status.Members = []v1alpha1.FlockMember{{Ordinal: 0, Node: "n-a"}}
	f.createFlock(fl)
	// The cache still shows the Flock alive; the API server says it is
	// being deleted: no adoption.
	live := f.getFlock("pg")
	now := metav1.Now()
	live.DeletionTimestamp = &now
	if err := f.flockClient.Tracker().Update(v1alpha1.SchemeGroupVersion.WithResource("flocks"), live, testNamespace); err != nil {
		t.Fatal(err)
	}
	if err := f.controller.sync(f.ctx, "db/pg"); err == nil || !strings.Contains(err.Error(), "being deleted") {
		t.Fatalf("sync error = %v, want a refusal to adopt", err)
	}
	if p := f.pod("pg-0"); len(p.OwnerReferences) != 0 {
		t.Fatalf("adopted by a Flock being deleted: %+v", p.OwnerReferences)
	}
}

func TestDeletingFlockGetsNoNewPods(t *testing.T) {
	f := newFixture(t, "n-a", "n-b")
	fl := newFlock("pg", 2)
	f.createFlock(fl)
	f.mustSync("pg")
	f.runPods()
	// Another finalizer holds it (with none, it would be gone at once).
	f.deleteFlock("pg", "example.com/hold")
	f.mustSync("pg")
	f.runPods()
	f.mustSync("pg")
	if got := f.podNames(); !slices.Equal(got, []string{"pg-0"}) {
		t.Fatalf("pods = %v", got)
	}
	f.deletePod("pg-0")
	f.mustSync("pg")
	if got := f.podNames(); len(got) != 0 {
		t.Fatalf("pods = %v, want none for a Flock being deleted", got)
	}
	if st := f.getFlock("pg").Status; st.Replicas != 0 {
		t.Errorf("status.replicas = %d", st.Replicas)
	}
}

func TestStatusConflicts(t *testing.T) {
	t.Run("retried", func(t *testing.T) {
		f := newFixture(t, "n-a", "n-b")
		conflicts := 2
		f.flockClient.PrependReactor("update", "flocks", func(action clienttesting.Action) (bool, runtime.Object, error) {
			if action.GetSubresource() == "status" && conflicts > 0 {
				conflicts--
				return true, nil, apierrors.NewConflict(flockResource, "pg", errors.New("stale"))
			}
			return false, nil, nil
		})
		f.createFlock(newFlock("pg", 2))
		f.mustSync("pg")
		if got := f.memberNodes("pg"); len(got) != 2 {
			t.Fatalf("members = %v", got)
		}
		if f.pod("pg-0") == nil {
			t.Fatal("pg-0 not created after the conflicts were retried")
		}
	})

	t.Run("another writer placed a member first", func(t *testing.T) {
		f := newFixture(t, "n-a", "n-b", "n-c")
		raced := false
		f.flockClient.PrependReactor("update", "flocks", func(action clienttesting.Action) (bool, runtime.Object, error) {
			if action.GetSubresource() != "status" || raced {
				return false, nil, nil
			}
			raced = true
			// Another (old) leader wins the race and records member 0 on
			// n-c, the node this controller wanted for member 2.
			obj, err := f.flockClient.Tracker().Get(v1alpha1.SchemeGroupVersion.WithResource("flocks"), testNamespace, "pg")
			if err != nil {
				t.Fatal(err)
			}
			cur := obj.(*v1alpha1.Flock).DeepCopy()
			cur.Status.Members = []v1alpha1.FlockMember{{Ordinal: 0, Node: "n-c"}}
			cur.ResourceVersion = "999"
			if err := f.flockClient.Tracker().Update(v1alpha1.SchemeGroupVersion.WithResource("flocks"), cur, testNamespace); err != nil {
				t.Fatal(err)
			}
			return true, nil, apierrors.NewConflict(flockResource, "pg", errors.New("stale"))
		})
		fl := newFlock("pg", 3)
		fl.Spec.PodManagementPolicy = v1alpha1.ParallelPodManagement
		f.createFlock(fl)
		f.mustSync("pg")
		// Their member 0 wins; member 2 could not take n-c and is placed
		// on the next sync.
		if got := f.memberNodes("pg"); !equality.Semantic.DeepEqual(got, map[int32]string{0: "n-c", 1: "n-b"}) {
			t.Fatalf("members = %v", got)
		}
		if p := f.pod("pg-0"); p == nil || PinnedNode(p) != "n-c" {
			t.Fatalf("pg-0 = %+v", p)
		}
		f.settle("pg")
		if got := f.memberNodes("pg"); !equality.Semantic.DeepEqual(got, map[int32]string{0: "n-c", 1: "n-b", 2: "n-a"}) {
			t.Fatalf("members = %v", got)
		}
	})

	t.Run("placement not recorded, no pod", func(t *testing.T) {
		f := newFixture(t, "n-a")
		f.flockClient.PrependReactor("update", "flocks", func(action clienttesting.Action) (bool, runtime.Object, error) {
			if action.GetSubresource() == "status" {
				return true, nil, apierrors.NewConflict(flockResource, "pg", errors.New("stale"))
			}
			return false, nil, nil
		})
		f.createFlock(newFlock("pg", 1))
		if err := f.sync("pg"); err == nil || !apierrors.IsConflict(err) {
			t.Fatalf("sync error = %v, want a conflict", err)
		}
		if got := f.podNames(); len(got) != 0 {
			t.Fatalf("pods %v created without a recorded member", got)
		}
		if !hasEvent(f.events(), "Warning FailedPlacement") {
			t.Error("no FailedPlacement event")
		}
	})
}

// TestFlockDeletedDuringItsSync: a Flock deleted between the cache's view
// and the sync's write of its placement ends the sync without an error
// (no retries, no error log) and without a FailedPlacement event; its
// delete event ends its syncs.
func TestFlockDeletedDuringItsSync(t *testing.T) {
	f := newFixture(t, "n-a", "n-b")
	f.flockClient.PrependReactor("update", "flocks", func(action clienttesting.Action) (bool, runtime.Object, error) {
		if action.GetSubresource() == "status" {
			return true, nil, apierrors.NewNotFound(flockResource, "pg")
		}
		return false, nil, nil
	})
	f.createFlock(newFlock("pg", 2))
	f.syncQuietly("pg", "Warning FailedPlacement", "the Flock was deleted meanwhile")

	other := newFlock("other", 1)
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"its 404", fmt.Errorf("recording member nodes: %w", apierrors.NewNotFound(flockResource, "other")), true},
		{"another Flock's 404", apierrors.NewNotFound(flockResource, "pg"), false},
		{"a pod's 404", apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, "other"), false},
		{"its 404 among others", errors.Join(apierrors.NewNotFound(flockResource, "other"), errors.New("boom")), false},
		{"nil", nil, false},
	} {
		if got := flockGone(tc.err, other); got != tc.want {
			t.Errorf("%s: flockGone(%v) = %v, want %v", tc.name, tc.err, got, tc.want)
		}
	}
}

// TestRefusedPodBlocksItsMember: when kube-apiserver refuses a member's pod
// for good (quota, Pod Security, an admission policy: 403, 422, 400),
// MembersBlocked says which member and why, as a ReplicaSet's
// ReplicaFailure condition does, until a retry creates the pod. A failure
// that a retry may get past (503) blocks nothing.
func TestRefusedPodBlocksItsMember(t *testing.T) {
	for _, tc := range []struct {
		name  string
		err   error
		block string
	}{
		{"quota", apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "pg-1", errors.New("exceeded quota: q, requested: pods=1, used: pods=2, limited: pods=2")),
			`member 1 cannot start: creating pod pg-1 on node n-b was refused: pods "pg-1" is forbidden: exceeded quota: q, requested: pods=1, used: pods=2, limited: pods=2`},
		{"invalid", apierrors.NewInvalid(schema.GroupKind{Kind: "Pod"}, "pg-1", field.ErrorList{field.Forbidden(field.NewPath("spec"), "by policy")}),
			`member 1 cannot start: creating pod pg-1 on node n-b was refused: Pod "pg-1" is invalid: spec: Forbidden: by policy`},
		{"unavailable", apierrors.NewServiceUnavailable("busy"), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, "n-a", "n-b")
			f.createFlock(newFlock("pg", 2))
			f.settle("pg")
			f.deletePod("pg-1")
			f.members.failNext("CreatePod", 1, tc.err)
			if err := f.sync("pg"); err == nil {
				t.Fatal("no error from a failing create")
			}
			c := f.condition("pg", v1alpha1.FlockMembersBlocked)
			if tc.block == "" {
				if c.Status != metav1.ConditionFalse {
					t.Errorf("MembersBlocked = %+v after a failure a retry may get past", c)
				}
			} else if c.Status != metav1.ConditionTrue || c.Reason != ReasonFailedCreate || c.Message != tc.block {
				t.Errorf("MembersBlocked = %+v, want reason %s and message %q", c, ReasonFailedCreate, tc.block)
			}
			f.settle("pg")
			if f.pod("pg-1") == nil {
				t.Fatal("pg-1 not created on retry")
			}
			if c := f.condition("pg", v1alpha1.FlockMembersBlocked); c.Status != metav1.ConditionFalse {
				t.Errorf("MembersBlocked = %+v once the pod was created", c)
			}
		})
	}
}

// TestRefusedClaimBlocksItsMember: a member claim that the cluster refuses
// (a quota on claims or storage) blocks its member with the cluster's
// message, until a retry creates it.
func TestRefusedClaimBlocksItsMember(t *testing.T) {
	f := newFixture(t, "n-a")
	f.createFlock(newFlock("pg", 1))
	f.data.failCreateClaim = apierrors.NewForbidden(schema.GroupResource{Resource: "persistentvolumeclaims"}, "data-pg-0",
		errors.New("exceeded quota: q, requested: persistentvolumeclaims=1, used: persistentvolumeclaims=0, limited: persistentvolumeclaims=0"))
	if err := f.sync("pg"); err == nil {
		t.Fatal("no error from a refused claim")
	}
	want := `member 0 cannot start: creating claim data-pg-0 was refused: persistentvolumeclaims "data-pg-0" is forbidden: exceeded quota: q, ` +
		`requested: persistentvolumeclaims=1, used: persistentvolumeclaims=0, limited: persistentvolumeclaims=0`
	if c := f.condition("pg", v1alpha1.FlockMembersBlocked); c.Status != metav1.ConditionTrue || c.Reason != ReasonFailedCreate || c.Message != want {
		t.Errorf("MembersBlocked = %+v, want reason %s and message %q", c, ReasonFailedCreate, want)
	}
	f.settle("pg")
	if p := f.pod("pg-0"); p == nil || !isRunningAndReady(p) {
		t.Fatalf("pg-0 after the retry: %+v", p)
	}
	if c := f.condition("pg", v1alpha1.FlockMembersBlocked); c.Status != metav1.ConditionFalse {
		t.Errorf("MembersBlocked = %+v once the claim was made", c)
	}
}

func TestInjectedErrors(t *testing.T) {
	f := newFixture(t, "n-a", "n-b", "n-c")
	f.createFlock(newFlock("pg", 3))

	// A failing pod create: an error, an event, nothing created, a retry.
	f.members.failNext("CreatePod", 1, apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "pg-0", errors.New("quota")))
	if err := f.sync("pg"); err == nil {
		t.Fatal("no error from a failing create")
	}
	if got := f.podNames(); len(got) != 0 {
		t.Fatalf("pods = %v", got)
	}
	if !hasEvent(f.events(), "Warning FailedCreate", "pg-0", "quota") {
		t.Error("no FailedCreate event")
	}
	f.mustSync("pg")
	if f.pod("pg-0") == nil {
		t.Fatal("pg-0 not created on retry")
	}

	// A failing final status write is reported, and the next sync fixes it.
	f.runPods()
	errs := 1
	f.flockClient.PrependReactor("update", "flocks", func(action clienttesting.Action) (bool, runtime.Object, error) {
		if action.GetSubresource() == "status" && errs > 0 {
			errs--
			return true, nil, apierrors.NewServiceUnavailable("etcd is sad")
		}
		return false, nil, nil
	})
	if err := f.sync("pg"); err == nil || !strings.Contains(err.Error(), "etcd is sad") {
		t.Fatalf("sync error = %v", err)
	}
	f.settle("pg")
	if st := f.getFlock("pg").Status; st.ReadyReplicas != 3 {
		t.Fatalf("status = %+v", st)
	}

	// A failing label fix on an adopted pod is an error and is retried.
	f.updatePod("pg-1", func(p *corev1.Pod) { delete(p.Labels, v1alpha1.LabelPodName) })
	f.members.failNext("PatchPod", 1, apierrors.NewConflict(podResource, "pg-1", errors.New("stale")))
	if err := f.sync("pg"); err == nil {
		t.Fatal("no error from a failing pod update")
	}
	f.mustSync("pg")
	if got := f.pod("pg-1").Labels[v1alpha1.LabelPodName]; got != "pg-1" {
		t.Fatalf("label not fixed: %q", got)
	}

	// A failing adoption patch is an error; the orphan is adopted later.
	f.updatePod("pg-2", func(p *corev1.Pod) { p.OwnerReferences = nil })
	f.members.failNext("PatchPod", 1, apierrors.NewServiceUnavailable("later"))
	if err := f.sync("pg"); err == nil {
		t.Fatal("no error from a failing adoption")
	}
	f.mustSync("pg")
	if !isControlledBy(f.pod("pg-2"), f.getFlock("pg")) {
		t.Fatal("pg-2 not adopted on retry")
	}
}

func TestService(t *testing.T) {
	t.Run("created", func(t *testing.T) {
		f := newFixture(t, "n-a")
		fl := newFlock("pg", 1)
		fl.Spec.Selector.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpDoesNotExist}}
		f.createFlock(fl)
		f.mustSync("pg")
		svc, err := f.members.getService(testNamespace, "pg")
		if err != nil {
			t.Fatal(err)
		}
		if svc.Spec.ClusterIP != corev1.ClusterIPNone || !svc.Spec.PublishNotReadyAddresses ||
			!equality.Semantic.DeepEqual(svc.Spec.Selector, map[string]string{"app": "pg", v1alpha1.LabelFlockName: "pg"}) ||
			len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 5432 || svc.Spec.Ports[0].Name != "pg" ||
			!isControlledBy(svc, fl) {
			t.Fatalf("service = %+v", svc)
		}
		if c := f.condition("pg", v1alpha1.FlockServiceReady); c.Status != metav1.ConditionTrue {
			t.Fatalf("ServiceReady = %+v", c)
		}
		// A template change to the ports reaches the Service.
		f.updateFlock("pg", func(fl *v1alpha1.Flock) {
			fl.Spec.Template.Spec.Containers[0].Ports = append(fl.Spec.Template.Spec.Containers[0].Ports, corev1.ContainerPort{ContainerPort: 8008})
		})
		f.mustSync("pg")
		svc, _ = f.members.getService(testNamespace, "pg")
		if len(svc.Spec.Ports) != 2 || svc.Spec.Ports[1].Name != "tcp-8008" {
			t.Fatalf("ports = %+v", svc.Spec.Ports)
		}
	})

	t.Run("not owned", func(t *testing.T) {
		f := newFixture(t, "n-a")
		theirs := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: "pg", Namespace: testNamespace, UID: "theirs"},
			Spec:       corev1.ServiceSpec{ClusterIP: "10.0.0.7", Selector: map[string]string{"app": "legacy"}},
		}
		if err := f.services.Add(theirs.DeepCopy()); err != nil {
			t.Fatal(err)
		}
		f.createFlock(newFlock("pg", 1))
		f.mustSync("pg")
		f.mustSync("pg")
		svc, _ := f.members.getService(testNamespace, "pg")
		if !equality.Semantic.DeepEqual(svc, theirs) {
			t.Fatalf("their Service was modified: %+v", svc)
		}
		c := f.condition("pg", v1alpha1.FlockServiceReady)
		if c.Status != metav1.ConditionFalse || c.Reason != ReasonServiceNotOwned {
			t.Fatalf("ServiceReady = %+v", c)
		}
		events := f.events()
		n := 0
		for _, e := range events {
			if strings.HasPrefix(e, "Warning ServiceConflict") {
				n++
			}
		}
		if n != 1 {
			t.Errorf("%d ServiceConflict events over two syncs, want 1: %v", n, events)
		}
		// The members are still created.
		if f.pod("pg-0") == nil {
			t.Error("pg-0 not created")
		}
		if f.members.calls["UpdateService"]+f.members.calls["PatchService"]+f.members.calls["CreateService"] != 0 {
			t.Errorf("service writes: %v", f.members.calls)
		}
	})

	t.Run("owned but not headless", func(t *testing.T) {
		f := newFixture(t, "n-a")
		fl := newFlock("pg", 1)
		svc := NewService(fl)
		svc.Spec.ClusterIP = "10.0.0.9"
		svc.UID = "svc"
		if err := f.services.Add(svc); err != nil {
			t.Fatal(err)
		}
		f.createFlock(fl)
		f.mustSync("pg")
		if c := f.condition("pg", v1alpha1.FlockServiceReady); c.Reason != ReasonServiceNotHeadless {
			t.Fatalf("ServiceReady = %+v", c)
		}
		if got, _ := f.members.getService(testNamespace, "pg"); got.Spec.ClusterIP != "10.0.0.9" {
			t.Fatalf("service changed: %+v", got.Spec)
		}
	})

	t.Run("orphan of this Flock adopted", func(t *testing.T) {
		f := newFixture(t, "n-a")
		fl := newFlock("pg", 1)
		svc := NewService(fl)
		svc.OwnerReferences, svc.UID = nil, "svc"
		if err := f.services.Add(svc); err != nil {
			t.Fatal(err)
		}
		f.createFlock(fl)
		f.mustSync("pg")
		got, _ := f.members.getService(testNamespace, "pg")
		if !isControlledBy(got, fl) {
			t.Fatalf("orphaned Service not adopted: %+v", got.OwnerReferences)
		}
		if c := f.condition("pg", v1alpha1.FlockServiceReady); c.Status != metav1.ConditionTrue {
			t.Fatalf("ServiceReady = %+v", c)
		}
	})

	t.Run("create fails", func(t *testing.T) {
		f := newFixture(t, "n-a")
		f.members.failNext("CreateService", 1, apierrors.NewServiceUnavailable("later"))
		f.createFlock(newFlock("pg", 1))
		if err := f.sync("pg"); err == nil {
			t.Fatal("no error")
		}
		if c := f.condition("pg", v1alpha1.FlockServiceReady); c.Status != metav1.ConditionFalse {
			t.Fatalf("ServiceReady = %+v", c)
		}
		f.mustSync("pg")
		if c := f.condition("pg", v1alpha1.FlockServiceReady); c.Status != metav1.ConditionTrue {
			t.Fatalf("ServiceReady = %+v", c)
		}
	})
}

func TestMinReadySeconds(t *testing.T) {
	f := newFixture(t, "n-a", "n-b")
	fl := newFlock("pg", 2)
	fl.Spec.MinReadySeconds = 30
	f.createFlock(fl)
	f.mustSync("pg")
	f.runPods()
	f.mustSync("pg")
	// pg-0 is Ready but not yet available: OrderedReady waits.
	if got := f.podNames(); !slices.Equal(got, []string{"pg-0"}) {
		t.Fatalf("pods = %v", got)
	}
	if st := f.getFlock("pg").Status; st.ReadyReplicas != 1 || st.AvailableReplicas != 0 {
		t.Fatalf("status = %+v", st)
	}
	res, err := f.controller.control.Sync(f.ctx, f.getFlock("pg"), f.allPods(), f.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	if res.RequeueAfter != 30*time.Second {
		t.Fatalf("RequeueAfter = %v, want 30s", res.RequeueAfter)
	}
	f.clock.Step(30 * time.Second)
	f.mustSync("pg")
	if got := f.podNames(); !slices.Equal(got, []string{"pg-0", "pg-1"}) {
		t.Fatalf("pods = %v", got)
	}
	if st := f.getFlock("pg").Status; st.AvailableReplicas != 1 {
		t.Fatalf("status = %+v", st)
	}
}

func TestConditionTransitionTimesAreKept(t *testing.T) {
	f := newFixture(t, "n-a")
	f.createFlock(newFlock("pg", 1))
	f.settle("pg")
	before := f.condition("pg", v1alpha1.FlockAvailable)
	rv := f.getFlock("pg").ResourceVersion
	f.clock.Step(time.Hour)
	f.mustSync("pg")
	if after := f.condition("pg", v1alpha1.FlockAvailable); !after.LastTransitionTime.Equal(&before.LastTransitionTime) {
		t.Fatalf("transition time moved from %v to %v", before.LastTransitionTime, after.LastTransitionTime)
	}
	if got := f.getFlock("pg").ResourceVersion; got != rv {
		t.Fatalf("a sync with nothing to change wrote the status (rv %s -> %s)", rv, got)
	}
}

func TestInvalidSelectorIsReportedNotRetried(t *testing.T) {
	f := newFixture(t, "n-a")
	fl := newFlock("pg", 1)
	fl.Spec.Selector = &metav1.LabelSelector{}
	f.createFlock(fl)
	if err := f.sync("pg"); err != nil {
		t.Fatalf("sync = %v, want no retry", err)
	}
	if got := f.podNames(); len(got) != 0 {
		t.Fatalf("pods = %v", got)
	}
	if !hasEvent(f.events(), "Warning InvalidSelector") {
		t.Error("no InvalidSelector event")
	}
}

func TestOwnedPodWithWrongIdentityIsReplaced(t *testing.T) {
	f := newFixture(t, "n-a")
	f.createFlock(newFlock("pg", 1))
	f.settle("pg")
	old := f.pod("pg-0")
	// Hostname and subdomain cannot change on a pod; one without the
	// member's DNS identity (made by an older controller, say) is replaced.
	f.updatePod("pg-0", func(p *corev1.Pod) { p.Spec.Subdomain = "elsewhere" })
	f.events()
	f.mustSync("pg")
	if f.pod("pg-0") != nil {
		t.Fatal("pod with the wrong subdomain not deleted")
	}
	if !hasEvent(f.events(), "Warning RecreatingPod", "pg-0", "subdomain") {
		t.Error("no RecreatingPod event")
	}
	f.settle("pg")
	if p := f.pod("pg-0"); p == nil || p.UID == old.UID || p.Spec.Subdomain != "pg" {
		t.Fatalf("pg-0 = %+v", p)
	}
}

func TestScaleUpAvoidsNodesOfMembersBeingRemoved(t *testing.T) {
	f := newFixture(t, "n-a", "n-b", "n-c", "n-d")
	f.members.graceful = true
	other := newFlock("other", 0)
	other.Status.Members = []v1alpha1.FlockMember{{Ordinal: 0, Node: "n-b"}, {Ordinal: 1, Node: "n-d"}}
	f.createFlock(other)
	fl := newFlock("pg", 3)
	fl.Spec.PodManagementPolicy = v1alpha1.ParallelPodManagement
	fl.Spec.Placement.Nodes = []string{"n-a", "n-b", "n-c"}
	f.createFlock(fl)
	f.settle("pg")
	f.updateFlock("pg", func(fl *v1alpha1.Flock) { fl.Spec.Placement.Nodes = nil; fl.Spec.Replicas = new(int32(1)) })
	f.mustSync("pg") // pg-1 and pg-2 terminate
	f.deletePod("pg-1")
	f.mustSync("pg") // member 1 leaves; member 2 still holds n-c
	if got := f.memberNodes("pg"); !equality.Semantic.DeepEqual(got, map[int32]string{0: "n-a", 2: "n-c"}) {
		t.Fatalf("members = %v", got)
	}
	// n-c is the least used node, but member 2 is still on it.
	f.scale("pg", 2)
	f.mustSync("pg")
	if got := f.memberNodes("pg"); !equality.Semantic.DeepEqual(got, map[int32]string{0: "n-a", 1: "n-b", 2: "n-c"}) {
		t.Fatalf("members = %v", got)
	}
}

// A member that follows its volume (claim template) is recorded where the
// scheduler put its pod, and its recreated pod is not pinned to any node:
// it prefers the node it ran on.
func TestClaimTemplateMemberFollowsItsPod(t *testing.T) {
	f := newFixture(t, "n-a", "n-b", "n-c")
	f.createFlock(withClaimTemplate(newFlock("pg", 2)))
	f.settle("pg")
	before := f.memberNodes("pg")
	free := ""
	for _, n := range []string{"n-a", "n-b", "n-c"} {
		if n != before[0] && n != before[1] {
			free = n
		}
	}
	p := f.pod("pg-0")
	if PinnedNode(p) != before[0] {
		t.Fatalf("pg-0 runs on %q, recorded on %s", PinnedNode(p), before[0])
	}

	// The pod is recreated and the scheduler puts it on the free node
	// (where, say, its volume is).
	f.deletePod("pg-0")
	f.mustSync("pg")
	p = f.pod("pg-0")
	if p == nil || p.Spec.NodeName != "" || PinnedNode(p) != "" {
		t.Fatalf("recreated pg-0 = %+v, want one pinned to no node", p)
	}
	f.updatePod("pg-0", func(p *corev1.Pod) { p.Spec.NodeName = free })
	f.settle("pg")
	after := f.memberNodes("pg")
	if after[0] != free || after[1] != before[1] {
		t.Errorf("member nodes %v -> %v, want member 0 on %s and member 1 kept", before, after, free)
	}
	if f.pod("pg-0").Spec.NodeName != free {
		t.Errorf("pg-0 moved again: %s", f.pod("pg-0").Spec.NodeName)
	}
	want := fmt.Sprintf("Normal MemberFollowed member 0 (pod pg-0) runs on node %s, where its volume is used (was recorded on node %s)", free, before[0])
	if !slices.Contains(f.events(), want) {
		t.Errorf("events %q lack %q", f.events(), want)
	}
	if c := f.condition("pg", v1alpha1.FlockAvailable); c.Status != metav1.ConditionTrue {
		t.Errorf("Available = %+v", c)
	}
}

func TestPlacedMessageNamesAtMostTenMembers(t *testing.T) {
	nodes := map[int32]string{}
	var added []int32
	for ord := range int32(12) {
		added = append(added, ord)
		nodes[ord] = fmt.Sprintf("n-%d", ord)
	}
	msg := placedMessage("big", added, nodes)
	if !strings.HasPrefix(msg, "member 0 (pod big-0) placed on node n-0; member 1 (pod big-1) placed on node n-1; ") ||
		!strings.HasSuffix(msg, "member 9 (pod big-9) placed on node n-9; 2 more (status.members lists every member)") {
		t.Errorf("message %q", msg)
	}
	if got := placedMessage("one", []int32{4}, map[int32]string{4: "n-x"}); got != "member 4 (pod one-4) placed on node n-x" {
		t.Errorf("message %q", got)
	}
}

// TestNamespaceBeingDeletedGetsNothingNew: once the namespace cache shows a
// Flock's namespace being deleted, the teardown's deletes of its pods,
// claims, Service and revision bring syncs that make none of them again
// (each create would be refused, and tried again at the teardown's next
// event) and that still write the status. With the namespace active, or
// not in the cache, the same syncs make them all again.
func TestNamespaceBeingDeletedGetsNothingNew(t *testing.T) {
	for _, tc := range []struct {
		name        string
		namespace   *corev1.Namespace
		makesAnyway bool
	}{
		{name: "terminating", namespace: &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: testNamespace},
			Status: corev1.NamespaceStatus{Phase: corev1.NamespaceTerminating}}},
		{name: "deleted, phase not yet written", namespace: &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: testNamespace,
			DeletionTimestamp: &metav1.Time{Time: decisionNow}}, Status: corev1.NamespaceStatus{Phase: corev1.NamespaceActive}}},
		{name: "active", namespace: &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: testNamespace},
			Status: corev1.NamespaceStatus{Phase: corev1.NamespaceActive}}, makesAnyway: true},
		{name: "not in the cache", makesAnyway: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newParallelFixture(t)
			f.settle("pg")
			if got := f.getFlock("pg").Status.ReadyReplicas; got != 3 {
				t.Fatalf("readyReplicas = %d before the teardown, want 3", got)
			}
			if tc.namespace != nil {
				if err := f.namespaces.Add(tc.namespace); err != nil {
					t.Fatal(err)
				}
			}
			// The namespace controller's teardown, as the caches show it.
			for _, name := range f.podNames() {
				f.deletePod(name)
			}
			for _, obj := range f.services.List() {
				if err := f.services.Delete(obj); err != nil {
					t.Fatal(err)
				}
			}
			for _, obj := range f.revisions.List() {
				if err := f.revisions.Delete(obj); err != nil {
					t.Fatal(err)
				}
			}
			f.data.mu.Lock()
			clear(f.data.claims)
			dataWrites := len(f.data.ops)
			f.data.mu.Unlock()
			f.events()

			f.settle("pg")

			made := map[string]int{"pods": len(f.podNames()), "services": len(f.services.List()),
				"revisions": len(f.revisions.List()), "claims": len(f.data.claims)}
			for kind, n := range made {
				// The new claims wait for volumes still bound to the
				// old ones, and the pods for the claims.
				if tc.makesAnyway && n == 0 && kind != "pods" {
					t.Errorf("%s: none made again, want them made", kind)
				}
				if !tc.makesAnyway && n != 0 {
					t.Errorf("%s: %d made again in a namespace being deleted, want none", kind, n)
				}
			}
			if !tc.makesAnyway {
				if ops := f.data.ops[dataWrites:]; len(ops) != 0 {
					t.Errorf("data writes in a namespace being deleted: %v, want none", ops)
				}
				if events := f.events(); hasEvent(events, "Normal SuccessfulCreate") || hasEvent(events, "Warning FailedCreate") {
					t.Errorf("create events in a namespace being deleted: %v", events)
				}
				if got := f.getFlock("pg").Status.ReadyReplicas; got != 0 {
					t.Errorf("readyReplicas = %d after the teardown, want 0 (the status is still written)", got)
				}
			}
		})
	}
}
