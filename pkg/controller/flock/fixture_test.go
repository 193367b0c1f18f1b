package flock

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	testingclock "k8s.io/utils/clock/testing"

	"flock.dev/flock/pkg/apis/flock/v1alpha1"
	flockfake "flock.dev/flock/pkg/generated/clientset/versioned/fake"
	flockinformers "flock.dev/flock/pkg/generated/informers/externalversions"
	"flock.dev/flock/pkg/nodeagent"
	"flock.dev/flock/pkg/placement"
)

const testNamespace = "db"

// testHaltAfter is Options.RolloutHaltAfter in the fixture.
const testHaltAfter = 30 * time.Second

// neverReady is the annotation that keeps a pod from becoming Ready in
// runPods (as hack/kwok's stages do).
const neverReady = "flock.dev/e2e-never-ready"

var (
	podResource      = schema.GroupResource{Resource: "pods"}
	serviceResource  = schema.GroupResource{Resource: "services"}
	revisionResource = schema.GroupResource{Group: "apps", Resource: "controllerrevisions"}
)

// injector makes the next `times` calls of one operation fail with err.
type injector struct {
	err   error
	times int
}

// fakeMemberControl is a MemberControl over the informers' indexers: writes
// land in the caches at once, as if the informers were instantaneous. Any
// operation can be made to fail. Deletion is graceful when graceful is
// set: the pod gets a deletionTimestamp and stays until finishTerminating.
type fakeMemberControl struct {
	pods, services cache.Indexer
	clock          *testingclock.FakeClock
	graceful       bool
	// instantPrepare makes a data-prepare helper pod succeed as it is
	// created, so that a member's pod follows in the same sync.
	instantPrepare bool
	failures       map[string]*injector
	calls          map[string]int
	// uncachedPods are in the API server but not in the cache: only
	// ListPodsLive sees them.
	uncachedPods []*corev1.Pod
	// cacheLag puts the member pods CreatePod makes in uncachedPods,
	// until deliverCreated: the cache is behind the controller's creates.
	cacheLag bool
	nextUID  int
	// ops logs the successful pod writes: "create <pod> <revision>",
	// "delete <pod>", "force-delete <pod>"; and creates refused as
	// "already-exists <pod>".
	ops []string
	// mu makes the fake safe for a sync's members written at once.
	mu sync.Mutex
	// beforeWrite, when set, runs at the start of CreatePod, DeletePod
	// and ForceDeletePod, outside mu.
	beforeWrite func(pod *corev1.Pod)
}

func newFakeMemberControl(pods, services cache.Indexer, clk *testingclock.FakeClock) *fakeMemberControl {
	return &fakeMemberControl{pods: pods, services: services, clock: clk, failures: map[string]*injector{}, calls: map[string]int{}}
}

// failNext makes the next `times` calls of op (e.g. "CreatePod") fail.
func (c *fakeMemberControl) failNext(op string, times int, err error) {
	c.failures[op] = &injector{err: err, times: times}
}

func (c *fakeMemberControl) fail(op string) error {
	c.calls[op]++
	if inj := c.failures[op]; inj != nil && inj.times > 0 {
		inj.times--
		return inj.err
	}
	return nil
}

func (c *fakeMemberControl) uid() types.UID {
	c.nextUID++
	return types.UID("uid-" + strconv.Itoa(c.nextUID))
}

func (c *fakeMemberControl) getPod(namespace, name string) (*corev1.Pod, error) {
	obj, ok, err := c.pods.GetByKey(namespace + "/" + name)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, apierrors.NewNotFound(podResource, name)
	}
	return obj.(*corev1.Pod), nil
}

func (c *fakeMemberControl) GetPod(namespace, name string) (*corev1.Pod, error) {
	return c.getPod(namespace, name)
}

func (c *fakeMemberControl) ListPods(namespace string, selector labels.Selector) ([]*corev1.Pod, error) {
	return listMatching[*corev1.Pod](c.pods, namespace, selector), nil
}

func (c *fakeMemberControl) ListHelperPods(namespace string, flockUID types.UID) ([]*corev1.Pod, error) {
	return c.ListPods(namespace, labels.SelectorFromSet(labels.Set{LabelFlockUID: string(flockUID)}))
}

func (c *fakeMemberControl) ListNodeAgentPods(namespace, node string) ([]*corev1.Pod, error) {
	agents, err := c.ListPods(namespace, labels.SelectorFromSet(labels.Set{nodeagent.LabelComponent: nodeagent.ComponentNodeAgent}))
	var out []*corev1.Pod
	for _, p := range agents {
		if p.Spec.NodeName == node {
			out = append(out, p)
		}
	}
	return out, err
}

// GetPodLive is GetPod, or the pod in uncachedPods (in the API server, not
// yet in the cache).
func (c *fakeMemberControl) GetPodLive(_ context.Context, namespace, name string) (*corev1.Pod, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.fail("GetPodLive"); err != nil {
		return nil, err
	}
	for _, p := range c.uncachedPods {
		if p.Namespace == namespace && p.Name == name {
			return p, nil
		}
	}
	return c.getPod(namespace, name)
}

// ListPodsLive is ListPods plus the pods in uncachedPods (in the API
// server, not yet in the cache).
func (c *fakeMemberControl) ListPodsLive(_ context.Context, namespace string, selector labels.Selector) ([]*corev1.Pod, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.fail("ListPodsLive"); err != nil {
		return nil, err
	}
	out := listMatching[*corev1.Pod](c.pods, namespace, selector)
	for _, p := range c.uncachedPods {
		if p.Namespace == namespace && selector.Matches(labels.Set(p.Labels)) {
			out = append(out, p)
		}
	}
	return out, nil
}

// deleteUncached deletes pod from uncachedPods (logging op), reporting
// whether it was there.
func (c *fakeMemberControl) deleteUncached(pod *corev1.Pod, op string) bool {
	for i, p := range c.uncachedPods {
		if p.Namespace == pod.Namespace && p.Name == pod.Name && p.UID == pod.UID {
			c.uncachedPods = slices.Delete(c.uncachedPods, i, i+1)
			c.ops = append(c.ops, op+pod.Name)
			return true
		}
	}
	return false
}

func (c *fakeMemberControl) CreatePod(_ context.Context, pod *corev1.Pod) error {
	if c.beforeWrite != nil {
		c.beforeWrite(pod)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.fail("CreatePod"); err != nil {
		return err
	}
	if _, err := c.getPod(pod.Namespace, pod.Name); err == nil || slices.ContainsFunc(c.uncachedPods, func(p *corev1.Pod) bool {
		return p.Namespace == pod.Namespace && p.Name == pod.Name
	}) {
		c.ops = append(c.ops, "already-exists "+pod.Name)
		return apierrors.NewAlreadyExists(podResource, pod.Name)
	}
	pod = pod.DeepCopy()
	pod.UID = c.uid()
	pod.ResourceVersion = "1"
	pod.CreationTimestamp = metav1.NewTime(c.clock.Now())
	pod.Status.Phase = corev1.PodPending
	if c.instantPrepare && pod.Labels[LabelHelper] == HelperPrepare {
		pod.Status.Phase = corev1.PodSucceeded
	}
	c.ops = append(c.ops, "create "+pod.Name+" "+podRevision(pod))
	if c.cacheLag && pod.Labels[LabelHelper] == "" {
		c.uncachedPods = append(c.uncachedPods, pod)
		return nil
	}
	return c.pods.Add(pod)
}

// deliverCreated moves the pods CreatePod made while cacheLag into the
// cache, as the informer would.
func (c *fakeMemberControl) deliverCreated() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range c.uncachedPods {
		if err := c.pods.Add(p); err != nil {
			return err
		}
	}
	c.uncachedPods = nil
	return nil
}

func (c *fakeMemberControl) DeletePod(_ context.Context, pod *corev1.Pod) error {
	if c.beforeWrite != nil {
		c.beforeWrite(pod)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.fail("DeletePod"); err != nil {
		return err
	}
	if c.deleteUncached(pod, "delete ") {
		return nil
	}
	old, err := c.getPod(pod.Namespace, pod.Name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if old.UID != pod.UID {
		return apierrors.NewConflict(podResource, pod.Name, fmt.Errorf("precondition failed: uid %s", pod.UID))
	}
	if old.DeletionTimestamp == nil {
		c.ops = append(c.ops, "delete "+pod.Name)
	}
	if !c.graceful {
		return c.pods.Delete(old)
	}
	if old.DeletionTimestamp != nil {
		return nil
	}
	upd := old.DeepCopy()
	now := metav1.NewTime(c.clock.Now())
	upd.DeletionTimestamp = &now
	return c.pods.Update(upd)
}

func (c *fakeMemberControl) ForceDeletePod(_ context.Context, pod *corev1.Pod) error {
	if c.beforeWrite != nil {
		c.beforeWrite(pod)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.fail("ForceDeletePod"); err != nil {
		return err
	}
	if c.deleteUncached(pod, "force-delete ") {
		return nil
	}
	old, err := c.getPod(pod.Namespace, pod.Name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if old.UID != pod.UID {
		return apierrors.NewConflict(podResource, pod.Name, fmt.Errorf("precondition failed: uid %s", pod.UID))
	}
	c.ops = append(c.ops, "force-delete "+pod.Name)
	return c.pods.Delete(old)
}

// fakeRevisionControl is a RevisionControl over the ControllerRevision
// informer's indexer, with error injection.
type fakeRevisionControl struct {
	revisions cache.Indexer
	failures  map[string]*injector
	nextUID   int
	// beforeCreate, when set, runs at the start of CreateRevision.
	beforeCreate func(cr *appsv1.ControllerRevision)
	// writes counts the writes asked for (every op here is one).
	writes int
}

func (c *fakeRevisionControl) fail(op string) error {
	c.writes++
	if inj := c.failures[op]; inj != nil && inj.times > 0 {
		inj.times--
		return inj.err
	}
	return nil
}

func (c *fakeRevisionControl) get(namespace, name string) (*appsv1.ControllerRevision, bool) {
	obj, ok, _ := c.revisions.GetByKey(namespace + "/" + name)
	if !ok {
		return nil, false
	}
	return obj.(*appsv1.ControllerRevision), true
}

func (c *fakeRevisionControl) ListRevisions(namespace, flockName string) ([]*appsv1.ControllerRevision, error) {
	return listMatching[*appsv1.ControllerRevision](c.revisions, namespace, labels.SelectorFromSet(labels.Set{v1alpha1.LabelFlockName: flockName})), nil
}

func (c *fakeRevisionControl) CreateRevision(_ context.Context, cr *appsv1.ControllerRevision) error {
	if c.beforeCreate != nil {
		c.beforeCreate(cr)
	}
	if err := c.fail("CreateRevision"); err != nil {
		return err
	}
	if _, ok := c.get(cr.Namespace, cr.Name); ok {
		return apierrors.NewAlreadyExists(revisionResource, cr.Name)
	}
	cr = cr.DeepCopy()
	c.nextUID++
	cr.UID = types.UID("cr-uid-" + strconv.Itoa(c.nextUID))
	return c.revisions.Add(cr)
}

func (c *fakeRevisionControl) UpdateRevision(_ context.Context, cr *appsv1.ControllerRevision) error {
	if err := c.fail("UpdateRevision"); err != nil {
		return err
	}
	if _, ok := c.get(cr.Namespace, cr.Name); !ok {
		return apierrors.NewNotFound(revisionResource, cr.Name)
	}
	return c.revisions.Update(cr.DeepCopy())
}

func (c *fakeRevisionControl) DeleteRevision(_ context.Context, cr *appsv1.ControllerRevision) error {
	if err := c.fail("DeleteRevision"); err != nil {
		return err
	}
	old, ok := c.get(cr.Namespace, cr.Name)
	if !ok {
		return nil
	}
	if old.UID != cr.UID {
		return apierrors.NewConflict(revisionResource, cr.Name, fmt.Errorf("precondition failed: uid %s", cr.UID))
	}
	return c.revisions.Delete(old)
}

func (c *fakeRevisionControl) PatchRevision(_ context.Context, namespace, name string, patch []byte) error {
	if err := c.fail("PatchRevision"); err != nil {
		return err
	}
	old, ok := c.get(namespace, name)
	if !ok {
		return apierrors.NewNotFound(revisionResource, name)
	}
	upd, err := strategicPatch(old, old.UID, patch)
	if err != nil {
		return err
	}
	return c.revisions.Update(upd)
}

// strategicPatch applies a strategic merge patch the way the API server
// does for these tests: metadata.uid cannot change.
func strategicPatch[T any](obj *T, uid types.UID, patch []byte) (*T, error) {
	orig, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	var zero T
	patched, err := strategicpatch.StrategicMergePatch(orig, patch, zero)
	if err != nil {
		return nil, err
	}
	out := new(T)
	if err := json.Unmarshal(patched, out); err != nil {
		return nil, err
	}
	var meta struct {
		Metadata struct {
			UID types.UID `json:"uid"`
		} `json:"metadata"`
	}
	_ = json.Unmarshal(patched, &meta)
	if meta.Metadata.UID != uid {
		return nil, apierrors.NewInvalid(schema.GroupKind{Kind: "Object"}, "", nil)
	}
	return out, nil
}

func (c *fakeMemberControl) PatchPod(_ context.Context, namespace, name string, patch []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.fail("PatchPod"); err != nil {
		return err
	}
	old, err := c.getPod(namespace, name)
	if err != nil {
		return err
	}
	upd, err := strategicPatch(old, old.UID, patch)
	if err != nil {
		return err
	}
	return c.pods.Update(upd)
}

func (c *fakeMemberControl) getService(namespace, name string) (*corev1.Service, error) {
	obj, ok, err := c.services.GetByKey(namespace + "/" + name)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, apierrors.NewNotFound(serviceResource, name)
	}
	return obj.(*corev1.Service), nil
}

func (c *fakeMemberControl) GetService(namespace, name string) (*corev1.Service, error) {
	return c.getService(namespace, name)
}

func (c *fakeMemberControl) CreateService(_ context.Context, svc *corev1.Service) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.fail("CreateService"); err != nil {
		return err
	}
	if _, err := c.getService(svc.Namespace, svc.Name); err == nil {
		return apierrors.NewAlreadyExists(serviceResource, svc.Name)
	}
	svc = svc.DeepCopy()
	svc.UID = c.uid()
	return c.services.Add(svc)
}

func (c *fakeMemberControl) UpdateService(_ context.Context, svc *corev1.Service) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.fail("UpdateService"); err != nil {
		return err
	}
	if _, err := c.getService(svc.Namespace, svc.Name); err != nil {
		return err
	}
	return c.services.Update(svc.DeepCopy())
}

func (c *fakeMemberControl) PatchService(_ context.Context, namespace, name string, patch []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.fail("PatchService"); err != nil {
		return err
	}
	old, err := c.getService(namespace, name)
	if err != nil {
		return err
	}
	upd, err := strategicPatch(old, old.UID, patch)
	if err != nil {
		return err
	}
	return c.services.Update(upd)
}

// fixture is a controller over fake clientsets and informer caches that are
// never started: objects are loaded straight into the indexers. Each step
// (a sync, or a change to the world) is followed by an invariant check.
type fixture struct {
	t           *testing.T
	ctx         context.Context
	clock       *testingclock.FakeClock
	flockClient *flockfake.Clientset
	flocks      cache.Indexer
	pods        cache.Indexer
	services    cache.Indexer
	nodes       cache.Indexer
	namespaces  cache.Indexer
	revisions   cache.Indexer
	members     *fakeMemberControl
	history     *fakeRevisionControl
	data        *fakeDataControl
	recorder    *record.FakeRecorder
	controller  *Controller
	// assigned remembers, per Flock UID, the node each recorded member had
	// at the last check: a recorded assignment may never change (but by
	// Reassign).
	assigned map[types.UID]map[int32]string
	// former remembers, per Flock UID and ordinal, the nodes a member was
	// reassigned away from.
	former map[types.UID]map[int32]map[string]bool
	// asked remembers, per Flock UID and ordinal, the nodes a planned move
	// (requestMove) asked for: a member may move there.
	asked map[types.UID]map[int32]map[string]bool
}

func newFixture(t *testing.T, nodeNames ...string) *fixture {
	t.Helper()
	return newFixtureWithLogVerbosity(t, 4, nodeNames...)
}

// newFixtureWithLogVerbosity is newFixture with the controller logging at
// the given verbosity (shown for failed tests only).
func newFixtureWithLogVerbosity(t *testing.T, verbosity int, nodeNames ...string) *fixture {
	t.Helper()
	return newFixtureWithConfig(t, fixtureConfig{verbosity: verbosity, memberParallelism: 1}, nodeNames...)
}

// fixtureConfig shapes a fixture.
type fixtureConfig struct {
	// verbosity of the controller's log (shown for failed tests only).
	verbosity int
	// memberParallelism is Options.MemberParallelism. newFixture's is 1:
	// most tests inject failures into "the next" write and read the
	// order of writes, which members written at once would make random.
	memberParallelism int
	// statusSpacing keeps the production spacing of big Flocks' status
	// writes (status_spacing.go). Off by default: the fake clock stands
	// still between a test's syncs, so every second write would wait.
	statusSpacing bool
}

// newFixtureWithConfig is newFixture shaped by cfg.
func newFixtureWithConfig(t *testing.T, cfg fixtureConfig, nodeNames ...string) *fixture {
	t.Helper()
	verbosity := cfg.verbosity
	logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.Verbosity(verbosity)))
	ctx := klog.NewContext(context.Background(), logger)
	ctx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)

	clk := testingclock.NewFakeClock(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	flockClient := flockfake.NewSimpleClientset()
	kubeClient := k8sfake.NewClientset()
	kubeFactory := informers.NewSharedInformerFactory(kubeClient, 0)
	flockFactory := flockinformers.NewSharedInformerFactory(flockClient, 0)
	flockInformer := flockFactory.Flock().V1alpha1().Flocks()
	podInformer := kubeFactory.Core().V1().Pods()
	nodeInformer := kubeFactory.Core().V1().Nodes()
	serviceInformer := kubeFactory.Core().V1().Services()
	revisionInformer := kubeFactory.Apps().V1().ControllerRevisions()
	namespaceInformer := kubeFactory.Core().V1().Namespaces()

	pods := &podStore{Indexer: podInformer.Informer().GetIndexer(), seen: func(any) {}}
	f := &fixture{
		t: t, ctx: ctx, clock: clk, flockClient: flockClient,
		flocks:     flockInformer.Informer().GetIndexer(),
		pods:       pods,
		services:   serviceInformer.Informer().GetIndexer(),
		nodes:      nodeInformer.Informer().GetIndexer(),
		namespaces: namespaceInformer.Informer().GetIndexer(),
		revisions:  revisionInformer.Informer().GetIndexer(),
		recorder:   record.NewFakeRecorder(10000),
		assigned:   map[types.UID]map[int32]string{},
		former:     map[types.UID]map[int32]map[string]bool{},
		asked:      map[types.UID]map[int32]map[string]bool{},
	}
	f.versionFlocks()
	f.members = newFakeMemberControl(f.pods, f.services, clk)
	f.members.instantPrepare = true
	f.history = &fakeRevisionControl{revisions: f.revisions, failures: map[string]*injector{}}
	opts, err := Options{RolloutHaltAfter: testHaltAfter, MemberParallelism: cfg.memberParallelism}.Complete()
	if err != nil {
		t.Fatal(err)
	}
	// Conflicts are retried as in production, without the pauses.
	status := &realStatusUpdater{client: flockClient, backoff: wait.Backoff{Steps: retry.DefaultRetry.Steps}}
	f.data = newFakeDataControl()
	control := NewDefaultFlockControl(f.members, f.members, f.data, f.history, status, flockClient,
		flockInformer.Lister(), nodeInformer.Lister(), namespaceInformer.Lister(), f.recorder, opts)
	pods.seen = control.(podObserver).podSeen
	paced := control.(*defaultFlockControl).paced
	paced.clock = clk
	if !cfg.statusSpacing {
		paced.spacing = nil
	}
	f.controller, err = newController(ctx, control, flockInformer, podInformer, nodeInformer, serviceInformer, revisionInformer,
		kubeFactory.Core().V1().PersistentVolumes(), kubeFactory.Core().V1().PersistentVolumeClaims(), opts, clk)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.controller.workQueue().ShutDown)
	for _, n := range nodeNames {
		f.addNode(newNode(n))
	}
	return f
}

// podStore is the pod informer's store as the fixture writes it: like the
// informer's handlers, it tells the control of each pod added or deleted.
type podStore struct {
	cache.Indexer
	seen func(any)
}

func (s *podStore) Add(obj any) error {
	if err := s.Indexer.Add(obj); err != nil {
		return err
	}
	s.seen(obj)
	return nil
}

func (s *podStore) Delete(obj any) error {
	if err := s.Indexer.Delete(obj); err != nil {
		return err
	}
	s.seen(obj)
	return nil
}

func newNode(name string) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("node-" + name), Labels: map[string]string{"kubernetes.io/hostname": name}},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{
			Type: corev1.NodeReady, Status: corev1.ConditionTrue,
		}}},
	}
}

// newFlock returns a defaulted Flock with a one-container template.
func newFlock(name string, replicas int32) *v1alpha1.Flock {
	f := &v1alpha1.Flock{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNamespace, UID: types.UID("flock-" + name), Generation: 1},
		Spec: v1alpha1.FlockSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "db", Image: "postgres:17",
					Ports:        []corev1.ContainerPort{{Name: "pg", ContainerPort: 5432}},
					VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/var/lib/postgresql"}},
				}}},
			},
		},
	}
	v1alpha1.SetDefaults_Flock(f)
	v1alpha1.SetDefaults_FlockSpec(&f.Spec)
	return f
}

func (f *fixture) addNode(n *corev1.Node) {
	f.t.Helper()
	if err := f.nodes.Add(n); err != nil {
		f.t.Fatal(err)
	}
}

// updateNode changes a node in the cache.
func (f *fixture) updateNode(name string, mutate func(*corev1.Node)) {
	f.t.Helper()
	obj, ok, _ := f.nodes.GetByKey(name)
	if !ok {
		f.t.Fatalf("no node %s", name)
	}
	n := obj.(*corev1.Node).DeepCopy()
	mutate(n)
	if err := f.nodes.Update(n); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) deleteNode(name string) {
	f.t.Helper()
	if err := f.nodes.Delete(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
		f.t.Fatal(err)
	}
	f.check()
}

func setNodeReady(ready bool) func(*corev1.Node) {
	return func(n *corev1.Node) {
		s := corev1.ConditionFalse
		if ready {
			s = corev1.ConditionTrue
		}
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: s}}
	}
}

// createFlock stores a Flock in the clientset and the cache.
func (f *fixture) createFlock(fl *v1alpha1.Flock) {
	f.t.Helper()
	if _, err := f.flockClient.FlockV1alpha1().Flocks(fl.Namespace).Create(f.ctx, fl, metav1.CreateOptions{}); err != nil {
		f.t.Fatal(err)
	}
	f.refreshFlocks()
	f.check()
}

// updateFlock changes a Flock's spec (bumping its generation) or metadata,
// as a user would.
func (f *fixture) updateFlock(name string, mutate func(*v1alpha1.Flock)) {
	f.t.Helper()
	fl := f.getFlock(name).DeepCopy()
	mutate(fl)
	fl.Generation++
	if _, err := f.flockClient.FlockV1alpha1().Flocks(fl.Namespace).Update(f.ctx, fl, metav1.UpdateOptions{}); err != nil {
		f.t.Fatal(err)
	}
	f.refreshFlocks()
	f.check()
}

func (f *fixture) scale(name string, replicas int32) {
	f.t.Logf("scale %s to %d", name, replicas)
	f.updateFlock(name, func(fl *v1alpha1.Flock) { fl.Spec.Replicas = &replicas })
}

// getFlock returns a Flock from the clientset (the source of truth).
func (f *fixture) getFlock(name string) *v1alpha1.Flock {
	f.t.Helper()
	fl, err := f.flockClient.FlockV1alpha1().Flocks(testNamespace).Get(f.ctx, name, metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	return fl
}

// refreshFlocks copies every Flock from the clientset into the cache, as
// the informer would.
func (f *fixture) refreshFlocks() {
	f.t.Helper()
	list, err := f.flockClient.FlockV1alpha1().Flocks("").List(f.ctx, metav1.ListOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	for _, obj := range f.flocks.List() {
		_ = f.flocks.Delete(obj)
	}
	for i := range list.Items {
		if err := f.flocks.Add(&list.Items[i]); err != nil {
			f.t.Fatal(err)
		}
	}
}

// versionFlocks makes the fake API server keep Flocks' resourceVersions
// as kube-apiserver does: each create and update gives the Flock a new one,
// and an update (of the Flock or its status) whose resourceVersion is not
// the stored one is refused with a conflict.
func (f *fixture) versionFlocks() {
	gvr := v1alpha1.SchemeGroupVersion.WithResource("flocks")
	next := 100 // the fake clientset runs its reactors one at a time
	f.flockClient.PrependReactor("*", "flocks", func(action clienttesting.Action) (bool, runtime.Object, error) {
		a, ok := action.(interface{ GetObject() runtime.Object })
		if !ok || (action.GetVerb() != "create" && action.GetVerb() != "update") {
			return false, nil, nil
		}
		fl, ok := a.GetObject().(*v1alpha1.Flock)
		if !ok {
			return false, nil, nil
		}
		if action.GetVerb() == "update" {
			stored, err := f.flockClient.Tracker().Get(gvr, fl.Namespace, fl.Name)
			if err != nil {
				return true, nil, err
			}
			if rv := stored.(*v1alpha1.Flock).ResourceVersion; rv != fl.ResourceVersion {
				return true, nil, apierrors.NewConflict(flockResource, fl.Name,
					fmt.Errorf("the object has been modified (resourceVersion %q, stored %q)", fl.ResourceVersion, rv))
			}
		}
		next++
		fl.ResourceVersion = strconv.Itoa(next) // the tracker stores the action's object
		return false, nil, nil
	})
}

// sync runs one sync of a Flock, refreshes the Flock cache and checks the
// invariants. It returns the sync's error.
func (f *fixture) sync(name string) error {
	f.t.Helper()
	err := f.controller.sync(f.ctx, testNamespace+"/"+name)
	f.reapFlocks()
	f.refreshFlocks()
	f.check()
	return err
}

// reapFlocks removes, as the API server does, Flocks that are being
// deleted and have no finalizers left.
func (f *fixture) reapFlocks() {
	f.t.Helper()
	list, err := f.flockClient.FlockV1alpha1().Flocks("").List(f.ctx, metav1.ListOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	for _, fl := range list.Items {
		if fl.DeletionTimestamp != nil && len(fl.Finalizers) == 0 {
			if err := f.flockClient.FlockV1alpha1().Flocks(fl.Namespace).Delete(f.ctx, fl.Name, metav1.DeleteOptions{}); err != nil {
				f.t.Fatal(err)
			}
		}
	}
}

// deleteFlock marks a Flock deleted as the API server does when it has
// finalizers (and removes it when it has none).
func (f *fixture) deleteFlock(name string, finalizers ...string) {
	f.t.Helper()
	fl := f.getFlock(name).DeepCopy()
	now := metav1.NewTime(f.clock.Now())
	fl.DeletionTimestamp = &now
	fl.Finalizers = append(fl.Finalizers, finalizers...)
	if _, err := f.flockClient.FlockV1alpha1().Flocks(fl.Namespace).Update(f.ctx, fl, metav1.UpdateOptions{}); err != nil {
		f.t.Fatal(err)
	}
	f.reapFlocks()
	f.refreshFlocks()
	f.check()
}

// syncResult runs one sync through the FlockControl, as the loop does, and
// returns its Result.
func (f *fixture) syncResult(name string) Result {
	f.t.Helper()
	fl, err := f.controller.flockLister.Flocks(testNamespace).Get(name)
	if err != nil {
		f.t.Fatal(err)
	}
	pods, err := f.controller.candidatePods(fl)
	if err != nil {
		f.t.Fatal(err)
	}
	res, err := f.controller.control.Sync(f.ctx, fl, pods, f.clock.Now())
	if err != nil {
		f.t.Fatalf("sync %s: %v", name, err)
	}
	f.reapFlocks()
	f.refreshFlocks()
	f.check()
	return res
}

// mustSync is sync that fails the test on an error.
func (f *fixture) mustSync(name string) {
	f.t.Helper()
	if err := f.sync(name); err != nil {
		f.t.Fatalf("sync %s: %v", name, err)
	}
}

// settle syncs and lets pods run until nothing changes, at most 50 rounds.
func (f *fixture) settle(name string) {
	f.t.Helper()
	for range 50 {
		before := f.snapshot()
		f.mustSync(name)
		f.runPods()
		if f.snapshot() == before {
			return
		}
	}
	f.t.Fatalf("flock %s did not settle in 50 rounds", name)
}

// writes counts, by kind, the writes the controller has asked for so far,
// failed ones too: pods and Services, revisions, member data (volumes and
// claims) and Flocks (their status). snapshot does not see a write that
// changes nothing; this does.
func (f *fixture) writes() map[string]int {
	w := map[string]int{"revisions": f.history.writes, "data": len(f.data.ops)}
	for op, n := range f.members.calls {
		if !strings.HasPrefix(op, "Get") && !strings.HasPrefix(op, "List") {
			w[op] += n
		}
	}
	for _, a := range f.flockClient.Actions() {
		switch a.GetVerb() {
		case "get", "list", "watch":
		default:
			w["flocks "+a.GetVerb()+" "+a.GetSubresource()]++
		}
	}
	return w
}

// snapshot is a string that changes when any pod, Service or Flock status
// changes.
func (f *fixture) snapshot() string {
	var b strings.Builder
	for _, p := range f.allPods() {
		fmt.Fprintf(&b, "%s %s %s %v|", p.Name, p.UID, p.Status.Phase, p.DeletionTimestamp != nil)
	}
	for _, obj := range f.services.List() {
		s := obj.(*corev1.Service)
		fmt.Fprintf(&b, "%s %v|", s.Name, s.OwnerReferences)
	}
	fmt.Fprintf(&b, "data writes %d|", len(f.data.ops))
	list, _ := f.flockClient.FlockV1alpha1().Flocks("").List(f.ctx, metav1.ListOptions{})
	for _, fl := range list.Items {
		st := fl.Status.DeepCopy()
		for i := range st.Conditions {
			st.Conditions[i].LastTransitionTime = metav1.Time{}
		}
		data, _ := json.Marshal(st)
		b.Write(data)
	}
	return b.String()
}

func (f *fixture) allPods() []*corev1.Pod {
	var pods []*corev1.Pod
	for _, obj := range f.pods.List() {
		pods = append(pods, obj.(*corev1.Pod))
	}
	slices.SortFunc(pods, func(a, b *corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	return pods
}

// apiPods returns every pod the API server has: the cache's and those
// the cache does not show yet (cacheLag).
func (f *fixture) apiPods() []*corev1.Pod {
	pods := f.allPods()
	f.members.mu.Lock()
	pods = append(pods, f.members.uncachedPods...)
	f.members.mu.Unlock()
	return pods
}

func (f *fixture) pod(name string) *corev1.Pod {
	f.t.Helper()
	p, err := f.members.getPod(testNamespace, name)
	if err != nil {
		return nil
	}
	return p
}

// podNames returns the names of the pods in the cache, sorted, but for
// data helpers (in the server's namespace; see helpers).
func (f *fixture) podNames() []string {
	var names []string
	for _, p := range f.allPods() {
		if p.Namespace != DefaultHelperNamespace {
			names = append(names, p.Name)
		}
	}
	return names
}

// addPod puts a pod straight into the cache (a pod made by someone else).
func (f *fixture) addPod(p *corev1.Pod) {
	f.t.Helper()
	if err := f.pods.Add(p); err != nil {
		f.t.Fatal(err)
	}
	f.check()
}

func (f *fixture) updatePod(name string, mutate func(*corev1.Pod)) {
	f.t.Helper()
	p := f.pod(name)
	if p == nil {
		f.t.Fatalf("no pod %s", name)
	}
	p = p.DeepCopy()
	mutate(p)
	if err := f.pods.Update(p); err != nil {
		f.t.Fatal(err)
	}
	f.check()
}

// deletePod removes a pod at once, as a user's forced delete would.
func (f *fixture) deletePod(name string) {
	f.t.Helper()
	p := f.pod(name)
	if p == nil {
		f.t.Fatalf("no pod %s", name)
	}
	if err := f.pods.Delete(p); err != nil {
		f.t.Fatal(err)
	}
	f.check()
}

// runPods plays scheduler and kubelet: a pending pod pinned to a node that
// exists, is Ready, is not cordoned gets bound to it and becomes Running
// and Ready, unless it is marked never-ready (then it runs, not Ready); a
// running pod with restartPolicy Never succeeds; pods on a node that is not
// Ready lose readiness.
func (f *fixture) runPods() {
	f.t.Helper()
	for _, p := range f.allPods() {
		if p.DeletionTimestamp != nil || isTerminal(p) {
			continue
		}
		node := PinnedNode(p)
		if node == "" {
			// A pod free to go anywhere (a member that follows its
			// volume) goes where it prefers, as the scheduler would.
			node = preferredNode(p)
		}
		obj, ok, _ := f.nodes.GetByKey(node)
		if !ok {
			continue
		}
		n := obj.(*corev1.Node)
		upd := p.DeepCopy()
		if p.Spec.RestartPolicy == corev1.RestartPolicyNever && p.Status.Phase == corev1.PodRunning && placement.IsReady(n) {
			// A one-shot pod (a cleanup helper) completes, as kwok's
			// pod-complete stage does.
			upd.Status.Phase = corev1.PodSucceeded
			upd.Status.Conditions = nil
			if err := f.pods.Update(upd); err != nil {
				f.t.Fatal(err)
			}
			continue
		}
		if !placement.IsReady(n) {
			upd.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}}
		} else if p.Spec.NodeName != "" || !n.Spec.Unschedulable {
			upd.Spec.NodeName = node
			upd.Status.Phase = corev1.PodRunning
			if p.Annotations[neverReady] == "true" {
				upd.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse,
					Reason: "ContainersNotReady", Message: "readiness probe failed"}}
			} else if !isRunningAndReady(p) {
				upd.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(f.clock.Now())}}
			}
		}
		if err := f.pods.Update(upd); err != nil {
			f.t.Fatal(err)
		}
	}
	f.check()
}

// preferredNode returns the node of pod's first preferred node affinity
// term that names one by metadata.name, or "".
func preferredNode(pod *corev1.Pod) string {
	a := pod.Spec.Affinity
	if a == nil || a.NodeAffinity == nil {
		return ""
	}
	for _, term := range a.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution {
		for _, r := range term.Preference.MatchFields {
			if r.Key == nodeNameField && r.Operator == corev1.NodeSelectorOpIn && len(r.Values) == 1 {
				return r.Values[0]
			}
		}
	}
	return ""
}

// finishTerminating removes every pod that has a deletionTimestamp.
func (f *fixture) finishTerminating() {
	f.t.Helper()
	for _, p := range f.allPods() {
		if p.DeletionTimestamp != nil {
			if err := f.pods.Delete(p); err != nil {
				f.t.Fatal(err)
			}
		}
	}
	f.check()
}

// events returns and forgets the events recorded so far.
func (f *fixture) events() []string {
	var out []string
	for {
		select {
		case e := <-f.recorder.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

// hasEvent reports whether one of events starts with prefix and contains
// every one of parts.
func hasEvent(events []string, prefix string, parts ...string) bool {
	for _, e := range events {
		if !strings.HasPrefix(e, prefix) {
			continue
		}
		ok := true
		for _, p := range parts {
			ok = ok && strings.Contains(e, p)
		}
		if ok {
			return true
		}
	}
	return false
}

// check verifies the controller's invariants over every Flock and pod:
//   - members have distinct ordinals and distinct nodes (no two members of
//     one Flock on one node);
//   - a recorded member's node never changes;
//   - every pod the Flock controls, in the cache or only in the API server
//     (the cache behind), has a well-formed name, at most one pod per
//     ordinal, a recorded member (no pod without a member), and is pinned
//     to (and, once bound, on) its member's node;
//   - no two pods of one Flock, terminating ones included, are on one node.
func (f *fixture) check() {
	f.t.Helper()
	list, err := f.flockClient.FlockV1alpha1().Flocks("").List(f.ctx, metav1.ListOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	for i := range list.Items {
		fl := &list.Items[i]
		members := map[int32]v1alpha1.FlockMember{}
		nodes := map[string]int32{}
		for _, m := range fl.Status.Members {
			if _, dup := members[m.Ordinal]; dup {
				f.t.Fatalf("flock %s: ordinal %d recorded twice: %+v", fl.Name, m.Ordinal, fl.Status.Members)
			}
			if other, dup := nodes[m.Node]; dup {
				f.t.Fatalf("flock %s: members %d and %d share node %s", fl.Name, other, m.Ordinal, m.Node)
			}
			if m.Node == "" {
				f.t.Fatalf("flock %s: member %d has no node", fl.Name, m.Ordinal)
			}
			members[m.Ordinal] = m
			nodes[m.Node] = m.Ordinal
		}
		prev := f.assigned[fl.UID]
		next := map[int32]string{}
		reassign := fl.Spec.MemberRecovery.Policy == v1alpha1.ReassignMemberRecovery
		for ord, m := range members {
			if old, ok := prev[ord]; ok && old != m.Node && !followsVolume(fl, ord) {
				// Only a planned move to the node it asked for, or
				// Reassign, only off a lost node and only to a Ready one,
				// moves a member.
				planned := f.asked[fl.UID][ord][m.Node]
				if !planned && (!reassign || !f.nodeLost(old) || f.nodeLost(m.Node)) {
					f.t.Fatalf("flock %s: member %d moved from node %s (lost %v) to %s (lost %v), policy %s",
						fl.Name, ord, old, f.nodeLost(old), m.Node, f.nodeLost(m.Node), fl.Spec.MemberRecovery.Policy)
				}
				if f.former[fl.UID] == nil {
					f.former[fl.UID] = map[int32]map[string]bool{}
				}
				if f.former[fl.UID][ord] == nil {
					f.former[fl.UID][ord] = map[string]bool{}
				}
				f.former[fl.UID][ord][old] = true
			}
			next[ord] = m.Node
		}
		f.assigned[fl.UID] = next

		perOrdinal := map[string]string{}
		perNode := map[string]string{}
		for _, p := range f.apiPods() {
			if !isControlledBy(p, fl) {
				continue
			}
			ord, ok := ParseOrdinal(fl.Name, p.Name)
			if !ok {
				f.t.Fatalf("flock %s controls pod %s, which has no ordinal", fl.Name, p.Name)
			}
			if node := PinnedNode(p); node != "" {
				if other, dup := perNode[node]; dup && other != p.Name {
					f.t.Fatalf("flock %s: pods %s and %s are both on node %s", fl.Name, other, p.Name, node)
				}
				perNode[node] = p.Name
			}
			if label := p.Labels[v1alpha1.LabelOrdinal]; label != "" {
				if other, dup := perOrdinal[label]; dup {
					f.t.Fatalf("flock %s: pods %s and %s both have ordinal %s", fl.Name, other, p.Name, label)
				}
				perOrdinal[label] = p.Name
			}
			m, ok := members[ord]
			if !ok {
				f.t.Fatalf("flock %s: pod %s has no member in status (members %+v)", fl.Name, p.Name, fl.Status.Members)
			}
			// (PinnedNode is spec.nodeName once bound.) The one exception:
			// the pod a reassigned member left on a former node, until it is
			// deleted (which the sync that moves the member does, unless the
			// delete fails).
			// A member that follows its volume is recorded where its pod
			// runs only after the next sync.
			if node := PinnedNode(p); node != m.Node && !f.former[fl.UID][ord][node] && !followsVolume(fl, ord) {
				f.t.Fatalf("flock %s: pod %s is pinned to %q, member %d is recorded on %s", fl.Name, p.Name, node, ord, m.Node)
			}
		}

		// A cleanup helper never runs while a pod of the Flock mounts the
		// member's claim: the pod's data would be removed under it.
		for _, h := range f.allPods() {
			ord, ok := helperOrdinal(fl.UID, h)
			if !ok || h.Labels[LabelHelper] != HelperCleanup || isTerminal(h) {
				continue
			}
			if h.Namespace != DefaultHelperNamespace || h.Spec.NodeName == "" || len(h.Spec.Volumes) != 1 || h.Spec.Volumes[0].HostPath == nil {
				f.t.Fatalf("flock %s: cleanup pod %s/%s on %q mounts %+v", fl.Name, h.Namespace, h.Name, h.Spec.NodeName, h.Spec.Volumes)
			}
			claim := ClaimName(fl, ord)
			for _, p := range f.allPods() {
				if p.Namespace == fl.Namespace && !isTerminal(p) && slices.ContainsFunc(p.Spec.Volumes, func(v corev1.Volume) bool {
					return v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == claim
				}) {
					f.t.Fatalf("flock %s: cleanup pod %s runs while pod %s uses claim %s", fl.Name, h.Name, p.Name, claim)
				}
			}
		}
	}
}

// nodeLost reports whether a node is gone or not Ready in the cache.
func (f *fixture) nodeLost(name string) bool {
	obj, ok, _ := f.nodes.GetByKey(name)
	return !ok || !placement.IsReady(obj.(*corev1.Node))
}

// memberNodes returns a Flock's recorded ordinal -> node map.
func (f *fixture) memberNodes(name string) map[int32]string {
	out := map[int32]string{}
	for _, m := range f.getFlock(name).Status.Members {
		out[m.Ordinal] = m.Node
	}
	return out
}

// condition returns a condition of a Flock, failing when it is absent.
func (f *fixture) condition(name, typ string) metav1.Condition {
	f.t.Helper()
	for _, c := range f.getFlock(name).Status.Conditions {
		if c.Type == typ {
			return c
		}
	}
	f.t.Fatalf("flock %s has no condition %s", name, typ)
	return metav1.Condition{}
}

// listMatching returns the objects of store in namespace whose labels match
// selector, as a lister would.
func listMatching[T metav1.Object](store cache.Store, namespace string, selector labels.Selector) []T {
	var out []T
	for _, obj := range store.List() {
		o := obj.(T)
		if o.GetNamespace() == namespace && selector.Matches(labels.Set(o.GetLabels())) {
			out = append(out, o)
		}
	}
	return out
}
