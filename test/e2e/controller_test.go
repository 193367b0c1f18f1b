package e2e

// Issue 5 end to end: the embedded controller turns a Flock into member pods
// pinned to their nodes, a headless Service and a truthful status, on the
// local control plane (real scheduler, garbage collector and kwok nodes).

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	flockv1alpha1 "flock.dev/flock/pkg/apis/flock/v1alpha1"
	"flock.dev/flock/test/cluster"
)

// ctlMemberTimeout bounds the wait for the controller and kwok to bring a
// small Flock's members up (or down).
const ctlMemberTimeout = 90 * time.Second

// A 3-replica OrderedReady Flock on 3 nodes: pods, Service, status, kubectl
// wait and describe, a deleted pod coming back on its node, scale down and
// up, and deletion through the garbage collector.
func TestControllerMembers(t *testing.T) {
	ns := newNamespace(t)
	const name, service, volume = "x", "x-peers", "store"
	f := newFlock(name, ns, 3)
	f.Spec.ServiceName = service
	f.Spec.Storage.VolumeName = volume
	// Each pod turns Ready 1s after it is scheduled, so the order is visible.
	f.Spec.Template.Annotations = map[string]string{cluster.StartDelayAnnotation: "1s"}
	c := &f.Spec.Template.Spec.Containers[0]
	c.Ports = []corev1.ContainerPort{{Name: "peer", ContainerPort: 7000}}
	c.VolumeMounts = []corev1.VolumeMount{{Name: volume, MountPath: "/data"}}
	// The template's own required node affinity: the pin is AND-ed into it.
	f.Spec.Template.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelOSStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"linux"}}},
		}}},
	}}

	rec := watchPods(t, ns, "")
	created := createFlock(t, f)

	t.Run("wait", func(t *testing.T) {
		forEachKubectl(t, func(t *testing.T, k cluster.Kubectl) {
			out := kubectl(t, k, "wait", "--for=condition=Available", "fl/"+name, "-n", ns, "--timeout=90s")
			if strings.TrimSpace(out) != "flock.flock.dev/x condition met" {
				t.Errorf("kubectl wait printed %q", out)
			}
		})
	})
	got := waitFlockAvailable(t, ns, name)

	// OrderedReady: each pod is created only once the one before it is
	// Running and Ready.
	events := rec.events(t)
	for i := 1; i < 3; i++ {
		prev, cur := ctlMemberPodName(name, i-1), ctlMemberPodName(name, i)
		added := slices.IndexFunc(events, func(e podEvent) bool { return e.Type == watch.Added && e.Pod.Name == cur })
		ready := slices.IndexFunc(events, func(e podEvent) bool { return e.Pod.Name == prev && podReady(e.Pod) })
		if added < 0 || ready < 0 || added < ready {
			t.Errorf("OrderedReady: %s added at event %d, %s first Ready at event %d; want the second first; events:\n%s", cur, added, prev, ready, rec)
		}
	}

	// Pods: one per member, Running on its recorded node, with the
	// member's identity.
	pods := ctlMemberPods(t, ns, name)
	if len(pods) != 3 {
		t.Fatalf("%d pods, want 3: %v", len(pods), ctlPodNames(pods))
	}
	nodes := map[string]bool{}
	for i, m := range got.Status.Members {
		pod := pods[i]
		podName := ctlMemberPodName(name, i)
		if m.Ordinal != int32(i) || m.Pod != podName || pod.Name != podName {
			t.Errorf("member %d: %+v, pod %s; want ordinal %d and pod %s", i, m, pod.Name, i, podName)
		}
		if want := fmt.Sprintf("%s.%s.%s.svc.cluster.local", podName, service, ns); m.Hostname != want || !m.Ready {
			t.Errorf("member %d: hostname %q ready %v, want %q and ready", i, m.Hostname, m.Ready, want)
		}
		if pod.Spec.NodeName != m.Node || pod.Status.Phase != corev1.PodRunning || !podReady(pod) {
			t.Errorf("pod %s: node %q phase %s ready %v; want Running and Ready on the member's node %q", pod.Name, pod.Spec.NodeName, pod.Status.Phase, podReady(pod), m.Node)
		}
		nodes[pod.Spec.NodeName] = true
		ctlCheckMemberPod(t, pod, created, i, m.Node, service, volume)
	}
	if len(nodes) != 3 {
		t.Errorf("pods share nodes: %v", memberNodes(got))
	}

	// The headless Service.
	svc, err := env.Kube.CoreV1().Services(ns).Get(ctxFor(t), service, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("headless Service: %v", err)
	}
	if svc.Spec.ClusterIP != corev1.ClusterIPNone || !svc.Spec.PublishNotReadyAddresses {
		t.Errorf("Service %s: clusterIP %q publishNotReadyAddresses %v, want None and true", service, svc.Spec.ClusterIP, svc.Spec.PublishNotReadyAddresses)
	}
	if want := map[string]string{"app": name, flockv1alpha1.LabelFlockName: name}; !ctlMapsEqual(svc.Spec.Selector, want) {
		t.Errorf("Service selector %v, want %v", svc.Spec.Selector, want)
	}
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 7000 || svc.Spec.Ports[0].Name != "peer" || svc.Spec.Ports[0].Protocol != corev1.ProtocolTCP {
		t.Errorf("Service ports %+v, want peer 7000/TCP from the template", svc.Spec.Ports)
	}
	ctlCheckControllerRef(t, "Service "+service, svc.OwnerReferences, created)

	// kubectl describe: members, conditions and events.
	t.Run("describe", func(t *testing.T) {
		forEachKubectl(t, func(t *testing.T, k cluster.Kubectl) {
			out := kubectl(t, k, "describe", "flock", name, "-n", ns)
			want := []string{"Members:", "Conditions:", "MembersAvailable", "Events:"}
			for i, m := range got.Status.Members {
				want = append(want,
					fmt.Sprintf("created Pod %s for member %d on node %s", m.Pod, i, m.Node),
					fmt.Sprintf("member %d (pod %s) placed on node %s", i, m.Pod, m.Node))
			}
			want = append(want, "created headless Service "+service)
			for _, w := range want {
				if !strings.Contains(out, w) {
					t.Errorf("describe lacks %q:\n%s", w, out)
				}
			}
			for _, m := range got.Status.Members {
				re := regexp.MustCompile(`(?m)^\s+Hostname:\s+` + regexp.QuoteMeta(m.Hostname) + `\n\s+Node:\s+` + m.Node + `\n\s+Ordinal:\s+` + strconv.Itoa(int(m.Ordinal)) + `\n`)
				if !re.MatchString(out) {
					t.Errorf("describe lacks member %d (%s on %s):\n%s", m.Ordinal, m.Hostname, m.Node, out)
				}
			}
			for _, typ := range []string{"Available", "Progressing", "MembersBlocked", "ServiceReady"} {
				if !regexp.MustCompile(`(?m)^\s+Type:\s+` + typ + `$`).MatchString(out) {
					t.Errorf("describe lacks condition %s:\n%s", typ, out)
				}
			}
		})
	})

	k := env.KubectlBuilt()
	// A deleted pod comes back under its name on its node.
	old := pods[1]
	if out := kubectl(t, k, "delete", "pod", old.Name, "-n", ns, "--wait=false"); !strings.Contains(out, `pod "x-1" deleted`) {
		t.Errorf("delete pod printed %q", out)
	}
	eventually(t, ctlMemberTimeout, "x-1 recreated on "+old.Spec.NodeName, func(ctx context.Context) error {
		p, err := env.Kube.CoreV1().Pods(ns).Get(ctx, old.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if p.UID == old.UID || p.Spec.NodeName != old.Spec.NodeName || !podReady(p) {
			return fmt.Errorf("uid %s (old %s) node %q ready %v", p.UID, old.UID, p.Spec.NodeName, podReady(p))
		}
		return nil
	})
	got = waitFlockAvailable(t, ns, name)
	if nodes := memberNodes(got); !slices.Equal(nodes, ctlPodNodes(pods)) {
		t.Errorf("members moved after a pod was recreated: %v, were %v", nodes, ctlPodNodes(pods))
	}

	// Scale 3 -> 2 removes x-2; 2 -> 3 brings it back on its old node.
	kubectl(t, k, "scale", "fl/"+name, "-n", ns, "--replicas=2")
	eventually(t, ctlMemberTimeout, "x-2 removed", func(ctx context.Context) error {
		f, err := env.Flock.FlockV1alpha1().Flocks(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if _, err := env.Kube.CoreV1().Pods(ns).Get(ctx, "x-2", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("pod x-2 still there (%v)", err)
		}
		if len(f.Status.Members) != 2 || f.Status.ObservedGeneration != f.Generation {
			return fmt.Errorf("members %v, observedGeneration %d of %d", memberNodes(f), f.Status.ObservedGeneration, f.Generation)
		}
		return nil
	})
	after := ctlMemberPods(t, ns, name)
	if len(after) != 2 || after[0].UID != pods[0].UID || after[1].Spec.NodeName != pods[1].Spec.NodeName {
		t.Errorf("after scaling down to 2: pods %v, want x-0 (unchanged) and x-1", ctlPodNames(after))
	}
	kubectl(t, k, "scale", "fl/"+name, "-n", ns, "--replicas=3")
	got = waitFlockAvailable(t, ns, name)
	back := ctlMemberPods(t, ns, name)
	if len(back) != 3 || back[2].Spec.NodeName != pods[2].Spec.NodeName || back[2].UID == pods[2].UID {
		t.Errorf("after scaling up to 3: pods %v on %v, want a new x-2 on its old node %s", ctlPodNames(back), ctlPodNodes(back), pods[2].Spec.NodeName)
	}
	if nodes := memberNodes(got); !slices.Equal(nodes, ctlPodNodes(pods)) {
		t.Errorf("members after scaling down and up: %v, want %v", nodes, ctlPodNodes(pods))
	}

	// Deleting the Flock: the garbage collector removes pods and Service.
	if out := kubectl(t, k, "delete", "fl", name, "-n", ns); !strings.Contains(out, `flock.flock.dev "x" deleted`) {
		t.Errorf("delete printed %q", out)
	}
	eventually(t, ctlMemberTimeout, "pods and Service garbage collected", func(ctx context.Context) error {
		left, err := env.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		if len(left.Items) > 0 {
			return fmt.Errorf("pods left: %d", len(left.Items))
		}
		if _, err := env.Kube.CoreV1().Services(ns).Get(ctx, service, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("Service %s still there (%v)", service, err)
		}
		return nil
	})
}

// Parallel creates every member at once; `kubectl delete --cascade=orphan`
// removes the Flock and leaves its pods, Service and PodDisruptionBudget,
// released; a new Flock of the same name adopts the Service and the budget,
// not the pods, which run on the old Flock's data.
func TestControllerParallelAndOrphan(t *testing.T) {
	ns := newNamespace(t)
	const name = "p"
	f := newFlock(name, ns, 3)
	f.Spec.PodManagementPolicy = flockv1alpha1.ParallelPodManagement
	f.Spec.Template.Annotations = map[string]string{cluster.StartDelayAnnotation: "3s"}
	rec := watchPods(t, ns, "")
	createFlock(t, f)
	waitFlockAvailable(t, ns, name)

	events := rec.events(t)
	firstReady := slices.IndexFunc(events, func(e podEvent) bool { return podReady(e.Pod) })
	for i := range 3 {
		pod := ctlMemberPodName(name, i)
		added := slices.IndexFunc(events, func(e podEvent) bool { return e.Type == watch.Added && e.Pod.Name == pod })
		if added < 0 || firstReady < 0 || added > firstReady {
			t.Errorf("Parallel: %s added at event %d, the first pod Ready at event %d; want every pod created before any is Ready; events:\n%s", pod, added, firstReady, rec)
		}
	}

	pods := ctlMemberPods(t, ns, name)
	if len(pods) != 3 {
		t.Fatalf("%d pods, want 3", len(pods))
	}
	// The garbage collector orphans the dependents (pods, Service and
	// ControllerRevisions) and then removes the orphan finalizer.
	out := kubectl(t, env.KubectlBuilt(), "delete", "fl", name, "-n", ns, "--cascade=orphan", "--wait=false")
	if !strings.Contains(out, `flock.flock.dev "p" deleted`) {
		t.Errorf("delete --cascade=orphan printed %q", out)
	}
	eventually(t, ctlMemberTimeout, "Flock gone after an orphaning delete", func(ctx context.Context) error {
		f, err := env.Flock.FlockV1alpha1().Flocks(ns).Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return nil
		case err != nil:
			return err
		}
		return fmt.Errorf("still there with finalizers %v (see the garbage collector in %s/kube-controller-manager.log)", f.Finalizers, env.LogDir())
	})
	// The orphan finalizer released them before the Flock went; give the
	// garbage collector time to (wrongly) act on them anyway.
	consistently(t, 3*time.Second, "the orphaned pods are kept and released", func(ctx context.Context) error {
		kept := ctlMemberPods(t, ns, name)
		if len(kept) != 3 {
			return fmt.Errorf("after an orphaning delete: pods %v, want all 3 kept", ctlPodNames(kept))
		}
		for i, p := range kept {
			if p.UID != pods[i].UID || p.DeletionTimestamp != nil || len(p.OwnerReferences) != 0 {
				return fmt.Errorf("pod %s: uid %s (was %s), deleting %v, ownerReferences %v; want the same pod, kept and released",
					p.Name, p.UID, pods[i].UID, p.DeletionTimestamp != nil, p.OwnerReferences)
			}
		}
		return nil
	})
	svc, err := env.Kube.CoreV1().Services(ns).Get(ctxFor(t), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("Service after an orphaning delete: %v", err)
	}
	if svc.DeletionTimestamp != nil || len(svc.OwnerReferences) != 0 {
		t.Errorf("Service: deleting %v, ownerReferences %v; want kept and released", svc.DeletionTimestamp != nil, svc.OwnerReferences)
	}
	pdb, err := env.Kube.PolicyV1().PodDisruptionBudgets(ns).Get(ctxFor(t), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("PodDisruptionBudget after an orphaning delete: %v", err)
	}
	if pdb.DeletionTimestamp != nil || len(pdb.OwnerReferences) != 0 {
		t.Errorf("PodDisruptionBudget: deleting %v, ownerReferences %v; want kept and released", pdb.DeletionTimestamp != nil, pdb.OwnerReferences)
	}

	// A new Flock of the same name adopts the Service and the budget. It
	// does not adopt the old pods: they run on the old Flock's claims
	// (member data is keyed by the Flock's UID), so the first restart
	// would have blocked the member. They are left alone, running, and
	// the members say why they cannot start.
	again := newFlock(name, ns, 3)
	again.Spec.PodManagementPolicy = flockv1alpha1.ParallelPodManagement
	createFlock(t, again)
	uid := getFlock(t, ns, name).UID
	owned := func(kind, name string, refs []metav1.OwnerReference) error {
		if len(refs) != 1 || refs[0].UID != uid || refs[0].Controller == nil || !*refs[0].Controller {
			return fmt.Errorf("%s %s: ownerReferences %v, want the new Flock (uid %s) as controller", kind, name, refs, uid)
		}
		return nil
	}
	eventually(t, ctlMemberTimeout, "Service and budget adopted, the old pods not", func(ctx context.Context) error {
		svc, err := env.Kube.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if err := owned("Service", name, svc.OwnerReferences); err != nil {
			return err
		}
		budget, err := env.Kube.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if budget.UID != pdb.UID {
			return fmt.Errorf("PodDisruptionBudget: uid %s, want the orphan's %s", budget.UID, pdb.UID)
		}
		if err := owned("PodDisruptionBudget", name, budget.OwnerReferences); err != nil {
			return err
		}
		c := meta.FindStatusCondition(getFlock(t, ns, name).Status.Conditions, flockv1alpha1.FlockMembersBlocked)
		for i := range 3 {
			want := fmt.Sprintf("pod %s exists and is not a pod of this Flock: it uses data that is not this member's "+
				"(PersistentVolumeClaim %s/data-%s exists and is not controlled by this Flock)", ctlMemberPodName(name, i), ns, ctlMemberPodName(name, i))
			if c == nil || c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, want) {
				return fmt.Errorf("MembersBlocked %+v, want it to say %q", c, want)
			}
		}
		return nil
	})
	kept := ctlMemberPods(t, ns, name)
	if len(kept) != 3 {
		t.Fatalf("pods %v, want the 3 orphans kept", ctlPodNames(kept))
	}
	for i, p := range kept {
		if p.UID != pods[i].UID || p.DeletionTimestamp != nil || len(p.OwnerReferences) != 0 {
			t.Errorf("pod %s: uid %s (was %s), deleting %v, ownerReferences %v; want the orphan, left alone",
				p.Name, p.UID, pods[i].UID, p.DeletionTimestamp != nil, p.OwnerReferences)
		}
	}

	// Once the old pods and claims are gone, the members start on data of
	// the new Flock's own.
	ctx := ctxFor(t)
	if err := env.Kube.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := env.Kube.CoreV1().PersistentVolumeClaims(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFlockAvailable(t, ns, name)
	for i, p := range ctlMemberPods(t, ns, name) {
		claim, err := env.Kube.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "data-"+p.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("claim of %s: %v", p.Name, err)
		}
		if err := owned("pod", p.Name, p.OwnerReferences); err != nil {
			t.Error(err)
		}
		if err := owned("PersistentVolumeClaim", claim.Name, claim.OwnerReferences); err != nil {
			t.Error(err)
		}
		if want := fmt.Sprintf("flock-%s-%d", uid, i); claim.Spec.VolumeName != want {
			t.Errorf("claim %s: volume %s, want the new Flock's %s", claim.Name, claim.Spec.VolumeName, want)
		}
	}
}

// ctlCheckMemberPod checks what makes pod member ordinal of f on node: labels,
// hostname and subdomain, the required node affinity, the data volume (the
// member's claim <volume>-<pod>) and the controller ownerReference.
func ctlCheckMemberPod(t *testing.T, pod *corev1.Pod, f *flockv1alpha1.Flock, ordinal int, node, service, volume string) {
	t.Helper()
	want := map[string]string{
		"app":                        f.Name,
		flockv1alpha1.LabelFlockName: f.Name,
		flockv1alpha1.LabelOrdinal:   strconv.Itoa(ordinal),
		flockv1alpha1.LabelPodName:   pod.Name,
	}
	for k, v := range want {
		if pod.Labels[k] != v {
			t.Errorf("pod %s: label %s=%q, want %q", pod.Name, k, pod.Labels[k], v)
		}
	}
	if pod.Labels[flockv1alpha1.LabelRevision] == "" {
		t.Errorf("pod %s: no %s label", pod.Name, flockv1alpha1.LabelRevision)
	}
	if pod.Spec.Hostname != pod.Name || pod.Spec.Subdomain != service {
		t.Errorf("pod %s: hostname %q subdomain %q, want %q and %q", pod.Name, pod.Spec.Hostname, pod.Spec.Subdomain, pod.Name, service)
	}
	// One term: the template's expression AND the pin to the node.
	wantTerms := []corev1.NodeSelectorTerm{{
		MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelOSStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"linux"}}},
		MatchFields:      []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{node}}},
	}}
	a := pod.Spec.Affinity
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil ||
		fmt.Sprint(a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms) != fmt.Sprint(wantTerms) {
		t.Errorf("pod %s: affinity %+v, want required terms %+v", pod.Name, a, wantTerms)
	}
	var data *corev1.Volume
	for i := range pod.Spec.Volumes {
		if pod.Spec.Volumes[i].Name == volume {
			data = &pod.Spec.Volumes[i]
		}
	}
	wantClaim := volume + "-" + pod.Name
	switch {
	case data == nil:
		t.Errorf("pod %s: no volume %q among %+v", pod.Name, volume, pod.Spec.Volumes)
	case data.HostPath != nil || data.PersistentVolumeClaim == nil || data.PersistentVolumeClaim.ClaimName != wantClaim:
		t.Errorf("pod %s: volume %s is %+v, want claim %s", pod.Name, volume, data.VolumeSource, wantClaim)
	}
	ctlCheckControllerRef(t, "pod "+pod.Name, pod.OwnerReferences, f)
}

// ctlCheckControllerRef checks that refs are exactly one controller reference
// to Flock f.
func ctlCheckControllerRef(t *testing.T, what string, refs []metav1.OwnerReference, f *flockv1alpha1.Flock) {
	t.Helper()
	if len(refs) != 1 {
		t.Errorf("%s: ownerReferences %+v, want one to Flock %s", what, refs, f.Name)
		return
	}
	r := refs[0]
	if r.APIVersion != "flock.dev/v1alpha1" || r.Kind != "Flock" || r.Name != f.Name || r.UID != f.UID ||
		r.Controller == nil || !*r.Controller || r.BlockOwnerDeletion == nil || !*r.BlockOwnerDeletion {
		t.Errorf("%s: ownerReference %+v, want controller (blocking deletion) Flock %s uid %s", what, r, f.Name, f.UID)
	}
}

// ctlMemberPods returns the pods named <name>-<ordinal> in ns, by ordinal.
func ctlMemberPods(t *testing.T, ns, name string) []*corev1.Pod {
	t.Helper()
	list, err := env.Kube.CoreV1().Pods(ns).List(ctxFor(t), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var pods []*corev1.Pod
	for i := range list.Items {
		if strings.HasPrefix(list.Items[i].Name, name+"-") {
			pods = append(pods, &list.Items[i])
		}
	}
	slices.SortFunc(pods, func(a, b *corev1.Pod) int { return ctlOrdinalOf(a.Name) - ctlOrdinalOf(b.Name) })
	return pods
}

// ctlMemberPodName is <flock>-<ordinal>.
func ctlMemberPodName(flock string, ordinal int) string { return flock + "-" + strconv.Itoa(ordinal) }

func ctlOrdinalOf(pod string) int {
	n, _ := strconv.Atoi(pod[strings.LastIndexByte(pod, '-')+1:])
	return n
}

func ctlPodNames(pods []*corev1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Name)
	}
	return out
}

func ctlPodNodes(pods []*corev1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Spec.NodeName)
	}
	return out
}

func ctlMapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if bv, ok := b[k]; !ok || bv != v {
			return false
		}
	}
	return true
}

// ctlDeleteFlock deletes Flock ns/name (background propagation) and waits
// until it is gone, so that it holds no node, and with waitPods until the
// garbage collector has removed its pods too. (The collector notices a new
// API group only at its next discovery, up to 30s after the cluster came
// up, so the first wait for pods in a run can take that long.)
func ctlDeleteFlock(t *testing.T, ns, name string, waitPods bool) {
	t.Helper()
	bg := metav1.DeletePropagationBackground
	if err := env.Flock.FlockV1alpha1().Flocks(ns).Delete(ctxFor(t), name, metav1.DeleteOptions{PropagationPolicy: &bg}); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	eventually(t, ctlMemberTimeout, fmt.Sprintf("Flock %s/%s gone (and its pods: %v)", ns, name, waitPods), func(ctx context.Context) error {
		if _, err := env.Flock.FlockV1alpha1().Flocks(ns).Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("Flock still there (%v)", err)
		}
		if !waitPods {
			return nil
		}
		pods, err := env.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: flockv1alpha1.LabelFlockName + "=" + name})
		if err != nil {
			return err
		}
		if len(pods.Items) > 0 {
			return fmt.Errorf("%d pods left", len(pods.Items))
		}
		return nil
	})
}

// TestControllerIgnoresPodsOutsideItsOrdinals: bare pods named like members
// of a Flock but beyond its ordinals (web-3 and web-10000 next to Flock web
// with 2 replicas), with labels its selector matches, are no candidates:
// never recorded, adopted or deleted; the Flock stays Available.
func TestControllerIgnoresPodsOutsideItsOrdinals(t *testing.T) {
	ns := newNamespace(t)
	const name = "web"
	var bare []*corev1.Pod
	for i, podName := range []string{"web-3", "web-10000"} {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: podName, Namespace: ns, Labels: map[string]string{"app": name}},
			Spec: corev1.PodSpec{
				NodeName:   env.NodeNames[i%len(env.NodeNames)],
				Containers: []corev1.Container{{Name: "app", Image: "busybox:1.36", Command: []string{"sleep", "infinity"}}},
			},
		}
		created, err := env.Kube.CoreV1().Pods(ns).Create(ctxFor(t), pod, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		bare = append(bare, created)
	}
	createFlock(t, newFlock(name, ns, 2))
	waitFlockAvailable(t, ns, name)
	consistently(t, 5*time.Second, "Flock web Available, the bare pods untouched", func(ctx context.Context) error {
		f, err := env.Flock.FlockV1alpha1().Flocks(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if err := flockAvailableErr(f); err != nil {
			return err
		}
		for _, b := range bare {
			p, err := env.Kube.CoreV1().Pods(ns).Get(ctx, b.Name, metav1.GetOptions{})
			if err != nil {
				return fmt.Errorf("bare pod %s: %w", b.Name, err)
			}
			if p.UID != b.UID || p.DeletionTimestamp != nil || len(p.OwnerReferences) != 0 {
				return fmt.Errorf("bare pod %s: uid %s (was %s), deleting %v, ownerReferences %v", p.Name, p.UID, b.UID, p.DeletionTimestamp != nil, p.OwnerReferences)
			}
		}
		return nil
	})
}
