// File cache_transform_test.go: the informer transforms drop what the
// controller does not read and keep everything it does.

package flock

import (
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"

	"flock.dev/flock/pkg/apis/flock/v1alpha1"
	"flock.dev/flock/pkg/placement"
)

// cachedPod returns member m's pod as the API server returns it once it
// runs: status, annotations and managedFields included.
func cachedPod(f *v1alpha1.Flock, m v1alpha1.FlockMember, phase corev1.PodPhase, ready corev1.ConditionStatus) *corev1.Pod {
	pod := NewMemberPod(f, m, "rev-1")
	pod.UID = "pod-uid"
	pod.Annotations = map[string]string{"kubectl.kubernetes.io/last-applied-configuration": `{"big":"blob"}`}
	pod.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply}}
	pod.Spec.NodeName = m.Node
	// As the ServiceAccount admission plugin adds it.
	pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: "kube-api-access-x7k2q", VolumeSource: corev1.VolumeSource{
		Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{{
			ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token"}}}}}})
	pod.Status = corev1.PodStatus{
		Phase:      phase,
		Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: ready}},
		PodIP:      "10.0.0.7",
		ContainerStatuses: []corev1.ContainerStatus{{Name: "db", RestartCount: 3, Image: "postgres:17", ImageID: "sha256:0123",
			ContainerID: "containerd://4567", VolumeMounts: []corev1.VolumeMountStatus{{Name: "data", MountPath: "/data"}},
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}}},
	}
	return pod
}

// orphanOf makes pod an orphan that the Flock's selector matches but that
// carries none of the controller's labels (a pod the Flock may adopt).
func orphanOf(pod *corev1.Pod) *corev1.Pod {
	pod.OwnerReferences = nil
	for _, l := range []string{v1alpha1.LabelFlockName, v1alpha1.LabelOrdinal, v1alpha1.LabelPodName} {
		delete(pod.Labels, l)
	}
	return pod
}

// trimmedCopy trims pod as the pod informer does and returns the trimmed
// pod and a copy of the pod as it was.
func trimmedCopy(t *testing.T, pod *corev1.Pod) (got, orig *corev1.Pod) {
	t.Helper()
	orig = pod.DeepCopy()
	out, err := TrimPod(pod)
	if err != nil {
		t.Fatal(err)
	}
	return out.(*corev1.Pod), orig
}

// readCheck is something the controller decides from an object, from the
// trimmed copy (got) and from the object cached in full (want).
type readCheck struct {
	what      string
	got, want any
}

func checkReads(t *testing.T, checks []readCheck) {
	t.Helper()
	for _, c := range checks {
		if !equality.Semantic.DeepEqual(c.got, c.want) {
			t.Errorf("%s: trimmed %v, cached in full %v", c.what, c.got, c.want)
		}
	}
}

// podReads are what the controller reads of any pod, a Flock's or not.
func podReads(f *v1alpha1.Flock, m v1alpha1.FlockMember, selector labels.Selector, got, orig *corev1.Pod) []readCheck {
	return []readCheck{
		{"name/namespace/uid", got.Namespace + "/" + got.Name + "/" + string(got.UID), orig.Namespace + "/" + orig.Name + "/" + string(orig.UID)},
		{"labels", got.Labels, orig.Labels},
		{"selector match", selector.Matches(labels.Set(got.Labels)), selector.Matches(labels.Set(orig.Labels))},
		{"controller", metav1.GetControllerOf(got), metav1.GetControllerOf(orig)},
		{"pinned node", PinnedNode(got), PinnedNode(orig)},
		{"data volume", hasMemberDataVolume(f, m, got), hasMemberDataVolume(f, m, orig)},
		{"terminal", isTerminal(got), isTerminal(orig)},
		{"terminating", isTerminating(got), isTerminating(orig)},
	}
}

func TestTrimPodKeepsWhatTheControllerReads(t *testing.T) {
	f := newFlock("pg", 2)
	f.Spec.MinReadySeconds = 10
	m := v1alpha1.FlockMember{Ordinal: 1, Node: "n-b"}
	selector, err := metav1.LabelSelectorAsSelector(f.Spec.Selector)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	nodes := map[string]*corev1.Node{"n-b": {ObjectMeta: metav1.ObjectMeta{Name: "n-b"}, Spec: corev1.NodeSpec{Taints: []corev1.Taint{
		{Key: corev1.TaintNodeOutOfService, Effect: corev1.TaintEffectNoExecute}}}}}
	helper := NewHelperPod(f, m, HelperPrepare, "flock-system", "flock-helper:test", "/var/lib/flock")
	helper.Spec.NodeName = m.Node
	helper.Status = corev1.PodStatus{Phase: corev1.PodSucceeded, ContainerStatuses: []corev1.ContainerStatus{{Name: "prepare",
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{FinishedAt: metav1.NewTime(now.Add(-time.Minute))}}}}}
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
	}{
		{name: "member pod", pod: cachedPod(f, m, corev1.PodRunning, corev1.ConditionTrue)},
		{name: "member pod crash-looping", pod: cachedPod(f, m, corev1.PodRunning, corev1.ConditionFalse)},
		{name: "member pod evicted", pod: func() *corev1.Pod {
			p := cachedPod(f, m, corev1.PodFailed, corev1.ConditionFalse)
			p.Status.Reason, p.Status.Message = "Evicted", "The node was low on resource: memory."
			return p
		}()},
		{name: "member pod unschedulable", pod: func() *corev1.Pod {
			p := cachedPod(f, m, corev1.PodPending, corev1.ConditionFalse)
			p.Spec.NodeName = ""
			p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
				Reason: corev1.PodReasonUnschedulable, Message: "0/3 nodes are available: 1 node(s) had untolerated taint."})
			return p
		}()},
		{name: "member pod terminating", pod: func() *corev1.Pod {
			p := cachedPod(f, m, corev1.PodRunning, corev1.ConditionTrue)
			p.DeletionTimestamp = &metav1.Time{Time: now}
			return p
		}()},
		{name: "prepare helper done", pod: helper},
		{name: "prepare helper exited, phase not yet Succeeded", pod: func() *corev1.Pod {
			p := helper.DeepCopy()
			p.Status.Phase = corev1.PodRunning
			return p
		}()},
		{name: "adoptable orphan", pod: orphanOf(cachedPod(f, m, corev1.PodRunning, corev1.ConditionFalse))},
		{name: "failed orphan", pod: orphanOf(cachedPod(f, m, corev1.PodFailed, corev1.ConditionFalse))},
		{name: "orphan pinned by affinity", pod: func() *corev1.Pod {
			p := orphanOf(cachedPod(f, m, corev1.PodPending, corev1.ConditionFalse))
			p.Spec.NodeName = ""
			return p
		}()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, orig := trimmedCopy(t, tc.pod)
			if got.ManagedFields != nil || got.Annotations != nil || got.Spec.Containers != nil || got.Status.PodIP != "" {
				t.Errorf("trimmed pod kept managedFields %v, annotations %v, containers %v or pod IP %q",
					got.ManagedFields, got.Annotations, got.Spec.Containers, got.Status.PodIP)
			}
			for _, cs := range append(slices.Clone(got.Status.InitContainerStatuses), got.Status.ContainerStatuses...) {
				if !equality.Semantic.DeepEqual(cs, corev1.ContainerStatus{Name: cs.Name, State: cs.State}) {
					t.Errorf("trimmed pod kept more of container %s's status than its name and state: %+v", cs.Name, cs)
				}
			}
			for _, v := range got.Spec.Volumes {
				if v.PersistentVolumeClaim == nil {
					t.Errorf("trimmed pod kept volume %q, which mounts no claim", v.Name)
				}
			}
			// Everything the controller decides from a pod comes out
			// the same.
			pods := func(p *corev1.Pod) map[int32]*corev1.Pod { return map[int32]*corev1.Pod{m.Ordinal: p} }
			members := map[int32]v1alpha1.FlockMember{m.Ordinal: m}
			checks := append(podReads(f, m, selector, got, orig), []readCheck{
				{"revision", podRevision(got), podRevision(orig)},
				{"labels match", labelsMatch(f, m.Ordinal, got), labelsMatch(f, m.Ordinal, orig)},
				{"off its node", offMemberNode(got, members, m.Ordinal), offMemberNode(orig, members, m.Ordinal)},
				{"must force delete", mustForceDelete(got, nodes), mustForceDelete(orig, nodes)},
				{"identity", identityMismatch(f, m, got), identityMismatch(f, m, orig)},
				{"running and ready", isRunningAndReady(got), isRunningAndReady(orig)},
				{"available", isAvailable(got, f.Spec.MinReadySeconds, now), isAvailable(orig, f.Spec.MinReadySeconds, now)},
				{"failure", podFailure(got), podFailure(orig)},
				{"failure summary", podFailureSummary(got), podFailureSummary(orig)},
				{"helper ordinal", fmt.Sprint(helperOrdinal(f.UID, got)), fmt.Sprint(helperOrdinal(f.UID, orig))},
				{"helper finished", helperFinishedAt(got).String(), helperFinishedAt(orig).String()},
				{"helper succeeded", HelperSucceeded(got), HelperSucceeded(orig)},
				{"blockage", blockageText(memberBlockage(m, got, nil, nil)), blockageText(memberBlockage(m, orig, nil, nil))},
				{"member state", fmt.Sprint(memberState(m, got, nil, 2)), fmt.Sprint(memberState(m, orig, nil, 2))},
			}...)
			if podRevision(orig) != "" {
				f := f.DeepCopy()
				halted := func(p *corev1.Pod) string {
					_, why, recheck := haltedPod(f, pods(p), podRevision(orig), "rev-0", time.Minute, now)
					return fmt.Sprint(why, recheck)
				}
				checks = append(checks, readCheck{"halted rollout", halted(got), halted(orig)})
			}
			checkReads(t, checks)
			if orig.Labels[LabelHelper] == "" && !hasMemberDataVolume(f, m, got) {
				t.Errorf("the trimmed pod is no longer recognised as holding member %d's data", m.Ordinal)
			}
		})
	}
}

// Pods of the cluster that are neither a Flock's members or helpers nor
// mount a claim keep only the phase of their status; what the controller
// reads of them (labels, owner, node, phase) comes out the same.
func TestTrimPodDropsStatusOfUnrelatedPods(t *testing.T) {
	f := newFlock("pg", 2)
	m := v1alpha1.FlockMember{Ordinal: 1, Node: "n-b"}
	selector, err := metav1.LabelSelectorAsSelector(f.Spec.Selector)
	if err != nil {
		t.Fatal(err)
	}
	unrelated := func() *corev1.Pod {
		p := cachedPod(f, m, corev1.PodRunning, corev1.ConditionTrue)
		p.Name, p.Labels = "web-7d9c-x2", map[string]string{"app": "web"}
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-7d9c", UID: "rs", Controller: ptr.To(true)}}
		p.Spec.Volumes = p.Spec.Volumes[len(p.Spec.Volumes)-1:] // its service account token only
		return p
	}
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
	}{
		{"another controller's pod", unrelated()},
		{"a bare pod the Flock's selector matches", func() *corev1.Pod {
			p := unrelated()
			p.OwnerReferences, p.Labels = nil, f.Spec.Template.Labels
			return p
		}()},
		{"a failed pod", func() *corev1.Pod {
			p := unrelated()
			p.Status.Phase = corev1.PodFailed
			return p
		}()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, orig := trimmedCopy(t, tc.pod)
			if want := (corev1.PodStatus{Phase: orig.Status.Phase}); !equality.Semantic.DeepEqual(got.Status, want) {
				t.Errorf("the trimmed pod's status is %+v, want its phase only", got.Status)
			}
			checkReads(t, podReads(f, m, selector, got, orig))
		})
	}
}

func TestTrimNodeAndManagedFields(t *testing.T) {
	since := metav1.NewTime(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
	for _, ready := range []corev1.ConditionStatus{corev1.ConditionTrue, corev1.ConditionFalse} {
		node := newNode("n-a")
		node.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubelet"}}
		node.Annotations = map[string]string{"node.alpha.kubernetes.io/ttl": "0"}
		node.Spec.Taints = []corev1.Taint{{Key: "k", Effect: corev1.TaintEffectNoSchedule}}
		node.Spec.Unschedulable = true
		node.Spec.PodCIDR = "10.244.0.0/24"
		node.Status.Allocatable = corev1.ResourceList{corev1.ResourcePods: resource.MustParse("110")}
		node.Status.Images = []corev1.ContainerImage{{Names: []string{"registry/image:tag"}, SizeBytes: 1 << 20}}
		node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.1"}}
		node.Status.NodeInfo.KubeletVersion = "v1.37.2"
		node.Status.Conditions = []corev1.NodeCondition{
			{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse, Message: "kubelet has sufficient memory available"},
			{Type: corev1.NodeReady, Status: ready, LastTransitionTime: since, Message: "kubelet is posting ready status"},
		}
		orig := node.DeepCopy()
		out, err := CacheTransform(node)
		if err != nil {
			t.Fatal(err)
		}
		got := out.(*corev1.Node)
		if got.ManagedFields != nil || got.Annotations != nil || got.Spec.PodCIDR != "" || got.Status.Allocatable != nil ||
			got.Status.Images != nil || got.Status.Addresses != nil || got.Status.NodeInfo.KubeletVersion != "" || len(got.Status.Conditions) != 1 {
			t.Errorf("the trimmed node kept what nothing reads: %+v", got)
		}
		// Everything Flock decides from a node comes out the same.
		tracker := func(n *corev1.Node) any {
			since, lost := newNodeLossTracker().lostSince(n.Name, n, since.Add(time.Hour))
			return fmt.Sprintf("%s %t", since.Format(time.RFC3339), lost)
		}
		checks := []readCheck{
			{"name/uid/labels", []any{got.Name, got.UID, got.Labels}, []any{orig.Name, orig.UID, orig.Labels}},
			{"hostname", NodeHostname(got), NodeHostname(orig)},
			{"ready", placement.IsReady(got), placement.IsReady(orig)},
			{"cordoned and taints", []any{got.Spec.Unschedulable, got.Spec.Taints}, []any{orig.Spec.Unschedulable, orig.Spec.Taints}},
			{"lost since", tracker(got), tracker(orig)},
		}
		for _, c := range checks {
			if !equality.Semantic.DeepEqual(c.got, c.want) {
				t.Errorf("Ready=%s: %s: trimmed %v, cached in full %v", ready, c.what, c.got, c.want)
			}
		}
	}

	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "pg", Labels: map[string]string{"a": "b"},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: FieldManager}}}, Spec: corev1.ServiceSpec{ClusterIP: "None"}}
	wantSvc := svc.DeepCopy()
	wantSvc.ManagedFields = nil
	out, _ := CacheTransform(svc)
	if got := out.(*corev1.Service); !equality.Semantic.DeepEqual(got, wantSvc) {
		t.Errorf("trimmed Service:\ngot  %+v\nwant %+v", got, wantSvc)
	}
}

// blockageText prints b for a comparison ("" for none).
func blockageText(b *blockage) string {
	if b == nil {
		return ""
	}
	return fmt.Sprintf("%+v", *b)
}

func TestTrimClaimKeepsTheStatusOnlyUntilBound(t *testing.T) {
	f := newFlock("pg", 1)
	f.UID = "f-uid"
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "pv-0"},
		Spec: corev1.PersistentVolumeSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Capacity:    corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
		},
	}
	claim := NewMemberClaim(f, 0, pv.Name)
	claim.UID = "c-uid"
	claim.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kube-controller-manager"}}
	claim.Status = corev1.PersistentVolumeClaimStatus{
		Phase:       corev1.ClaimPending,
		Conditions:  []corev1.PersistentVolumeClaimCondition{{Type: corev1.PersistentVolumeClaimResizing, Status: corev1.ConditionTrue}},
		AccessModes: pv.Spec.AccessModes,
	}

	// Not Bound yet: completeBind writes the status from the cached copy,
	// so all of it stays.
	out, err := CacheTransform(claim.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	pending := out.(*corev1.PersistentVolumeClaim)
	if pending.ManagedFields != nil || !equality.Semantic.DeepEqual(pending.Status, claim.Status) {
		t.Errorf("a Pending claim was cached with managed fields %v, status %+v; want none, and its status whole", pending.ManagedFields, pending.Status)
	}

	bindClaim(claim, pv)
	out, err = CacheTransform(claim.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	bound := out.(*corev1.PersistentVolumeClaim)
	if want := (corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound}); !equality.Semantic.DeepEqual(bound.Status, want) {
		t.Errorf("a Bound claim was cached with status %+v, want its phase only", bound.Status)
	}
	checkReads(t, []readCheck{
		{"metadata and spec", []any{bound.ObjectMeta.Name, bound.UID, bound.Labels, bound.Annotations, bound.OwnerReferences, bound.Spec},
			[]any{claim.ObjectMeta.Name, claim.UID, claim.Labels, claim.Annotations, claim.OwnerReferences, claim.Spec}},
		{"bound to its volume", claimBound(bound, pv.Name), claimBound(claim, pv.Name)},
		{"conflict", claimConflict(f, 0, bound), claimConflict(f, 0, claim)},
	})
}
