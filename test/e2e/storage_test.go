package e2e

// Issue 13 end to end: member data as hostPath PersistentVolumes pre-bound
// to claims, so that a Flock namespace can enforce Pod Security
// "restricted"; retention on PersistentVolumes; helpers in the server's
// namespace; claims from a StorageClass. kwok nodes mount nothing: these
// tests prove the objects, their bindings (by the real PersistentVolume
// controller) and placement (by the real scheduler); real mounts are the
// real-node tests' business.

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	flockv1alpha1 "flock.dev/flock/pkg/apis/flock/v1alpha1"
	flockcontroller "flock.dev/flock/pkg/controller/flock"
	"flock.dev/flock/test/cluster"
)

// stHelperNamespace is where the harness's flock-apiserver runs its helpers.
const stHelperNamespace = cluster.FlockNamespace

// stRestrictedNamespace is newNamespace labelled to enforce Pod Security
// "restricted".
func stRestrictedNamespace(t *testing.T) string {
	t.Helper()
	ns := newNamespace(t)
	nsObj, err := env.Kube.CoreV1().Namespaces().Get(ctxFor(t), ns, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if nsObj.Labels == nil {
		nsObj.Labels = map[string]string{}
	}
	nsObj.Labels["pod-security.kubernetes.io/enforce"] = "restricted"
	nsObj.Labels["pod-security.kubernetes.io/enforce-version"] = "latest"
	if _, err := env.Kube.CoreV1().Namespaces().Update(ctxFor(t), nsObj, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	return ns
}

// stRestrictedFlock is a Flock on the test's node pool whose template
// passes Pod Security "restricted": non-root, RuntimeDefault seccomp, no
// privilege escalation, every capability dropped.
func stRestrictedFlock(name, ns string, replicas int32) *flockv1alpha1.Flock {
	f := lcFlock(name, ns, replicas)
	uid := int64(1000)
	yes, no := true, false
	f.Spec.Template.Spec.SecurityContext = &corev1.PodSecurityContext{
		RunAsNonRoot:   &yes,
		RunAsUser:      &uid,
		FSGroup:        &uid,
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
	c := &f.Spec.Template.Spec.Containers[0]
	c.SecurityContext = &corev1.SecurityContext{
		AllowPrivilegeEscalation: &no,
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
	}
	c.VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
	return f
}

// stCreateFlock creates a Flock on freshly added nodes: while the node
// lifecycle controller has not yet lifted the not-ready taint of a node that
// is already Ready, the capacity check refuses it, so that refusal is
// retried (bounded by lcTimeout).
func stCreateFlock(t *testing.T, f *flockv1alpha1.Flock) {
	t.Helper()
	eventually(t, lcTimeout, "create Flock "+f.Namespace+"/"+f.Name, func(ctx context.Context) error {
		_, err := env.Flock.FlockV1alpha1().Flocks(f.Namespace).Create(ctx, f, metav1.CreateOptions{})
		if err != nil && !strings.Contains(err.Error(), "node.kubernetes.io/not-ready") {
			t.Fatalf("create Flock %s/%s: %v", f.Namespace, f.Name, err)
		}
		return err
	})
}

// stRecreatePod deletes a member pod and waits until the controller has
// made it again and it is scheduled; it returns the deleted pod.
func stRecreatePod(t *testing.T, old *corev1.Pod) *corev1.Pod {
	t.Helper()
	if err := env.Kube.CoreV1().Pods(old.Namespace).Delete(ctxFor(t), old.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, lcTimeout, "pod "+old.Name+" recreated", func(ctx context.Context) error {
		p, err := env.Kube.CoreV1().Pods(old.Namespace).Get(ctx, old.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if p.UID == old.UID || p.Spec.NodeName == "" {
			return fmt.Errorf("pod %s uid %s node %q", p.Name, p.UID, p.Spec.NodeName)
		}
		return nil
	})
	return old
}

// stStart creates a Flock, waits until it is Available and checks its
// members' data (stCheckMemberData); it returns the Flock and its volumes.
func stStart(t *testing.T, f *flockv1alpha1.Flock) (*flockv1alpha1.Flock, map[int32]*corev1.PersistentVolume) {
	t.Helper()
	stCreateFlock(t, f)
	got := waitFlockAvailable(t, f.Namespace, f.Name)
	return got, stCheckMemberData(t, got)
}

// stWaitNoClaims waits until namespace ns holds no claim (a deleted
// Flock's, collected by the garbage collector).
func stWaitNoClaims(t *testing.T, ns string) {
	t.Helper()
	eventually(t, lcTimeout, "the claims of "+ns+" collected", func(ctx context.Context) error {
		list, err := env.Kube.CoreV1().PersistentVolumeClaims(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		if len(list.Items) != 0 {
			return fmt.Errorf("%d claims left", len(list.Items))
		}
		return nil
	})
}

// stVolume reads a PersistentVolume.
func stVolume(ctx context.Context, name string) (*corev1.PersistentVolume, error) {
	return env.Kube.CoreV1().PersistentVolumes().Get(ctx, name, metav1.GetOptions{})
}

// stClaim reads a claim.
func stClaim(ctx context.Context, ns, name string) (*corev1.PersistentVolumeClaim, error) {
	return env.Kube.CoreV1().PersistentVolumeClaims(ns).Get(ctx, name, metav1.GetOptions{})
}

// stVolumeHost returns the single kubernetes.io/hostname a volume's
// required node affinity allows, or "" when it allows anything else.
func stVolumeHost(pv *corev1.PersistentVolume) string {
	if pv.Spec.NodeAffinity == nil || pv.Spec.NodeAffinity.Required == nil {
		return ""
	}
	terms := pv.Spec.NodeAffinity.Required.NodeSelectorTerms
	if len(terms) != 1 || len(terms[0].MatchFields) != 0 || len(terms[0].MatchExpressions) != 1 {
		return ""
	}
	r := terms[0].MatchExpressions[0]
	if r.Key != corev1.LabelHostname || r.Operator != corev1.NodeSelectorOpIn || len(r.Values) != 1 {
		return ""
	}
	return r.Values[0]
}

// stNodeHostname is the kubernetes.io/hostname label of a node.
func stNodeHostname(t *testing.T, node string) string {
	t.Helper()
	n, err := env.Kube.CoreV1().Nodes().Get(ctxFor(t), node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return n.Labels[corev1.LabelHostname]
}

// stCheckMemberData checks every member of f: status names its volume
// flock-<uid>-<i> and claim data-<flock>-<i>; the volume is a hostPath
// under the data root keyed by the Flock's UID, pinned to exactly the
// member's recorded node, retained, in flock-local; the claim is owned by
// the Flock and Bound to it; the pod mounts the claim and no hostPath. It
// returns the volumes by ordinal.
func stCheckMemberData(t *testing.T, f *flockv1alpha1.Flock) map[int32]*corev1.PersistentVolume {
	t.Helper()
	out := map[int32]*corev1.PersistentVolume{}
	pods := ctlMemberPods(t, f.Namespace, f.Name)
	for _, m := range f.Status.Members {
		wantPV := flockcontroller.PersistentVolumeName(f.UID, m.Ordinal)
		wantClaim := fmt.Sprintf("data-%s-%d", f.Name, m.Ordinal)
		if m.PersistentVolume != wantPV || m.Claim != wantClaim {
			t.Errorf("member %d records volume %q and claim %q, want %q and %q", m.Ordinal, m.PersistentVolume, m.Claim, wantPV, wantClaim)
		}
		var pv *corev1.PersistentVolume
		var claim *corev1.PersistentVolumeClaim
		eventually(t, lcTimeout, fmt.Sprintf("claim %s Bound to %s", wantClaim, wantPV), func(ctx context.Context) error {
			var err error
			if pv, err = stVolume(ctx, wantPV); err != nil {
				return err
			}
			if claim, err = stClaim(ctx, f.Namespace, wantClaim); err != nil {
				return err
			}
			if claim.Status.Phase != corev1.ClaimBound || claim.Spec.VolumeName != wantPV || pv.Status.Phase != corev1.VolumeBound ||
				pv.Spec.ClaimRef == nil || pv.Spec.ClaimRef.UID != claim.UID {
				return fmt.Errorf("claim %s (volume %q), volume %s (claimRef %+v)", claim.Status.Phase, claim.Spec.VolumeName, pv.Status.Phase, pv.Spec.ClaimRef)
			}
			return nil
		})
		out[m.Ordinal] = pv
		stCheckBindWrite(t, claim)
		if host, want := stVolumeHost(pv), stNodeHostname(t, m.Node); host == "" || host != want {
			t.Errorf("volume %s node affinity %+v, want exactly kubernetes.io/hostname=%s (node %s)", pv.Name, pv.Spec.NodeAffinity, want, m.Node)
		}
		wantDir := filepath.Join(env.DataRoot(), f.Namespace, f.Name+"-"+string(f.UID)[:8])
		if pv.Spec.HostPath == nil || pv.Spec.HostPath.Path != wantDir || pv.Spec.HostPath.Type == nil ||
			*pv.Spec.HostPath.Type != corev1.HostPathDirectoryOrCreate {
			t.Errorf("volume %s source %+v, want hostPath %s DirectoryOrCreate", pv.Name, pv.Spec.PersistentVolumeSource, wantDir)
		}
		if pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimRetain || pv.Spec.StorageClassName != flockcontroller.LocalStorageClassName ||
			pv.Labels[flockv1alpha1.LabelFlockName] != f.Name {
			t.Errorf("volume %s: reclaim %s, class %q, labels %v", pv.Name, pv.Spec.PersistentVolumeReclaimPolicy, pv.Spec.StorageClassName, pv.Labels)
		}
		ctlCheckControllerRef(t, "claim "+wantClaim, claim.OwnerReferences, f)
		if int(m.Ordinal) >= len(pods) {
			t.Errorf("no pod for member %d", m.Ordinal)
			continue
		}
		pod := pods[m.Ordinal]
		for _, v := range pod.Spec.Volumes {
			if v.HostPath != nil {
				t.Errorf("pod %s has a hostPath volume %s", pod.Name, v.Name)
			}
		}
		if !slices.ContainsFunc(pod.Spec.Volumes, func(v corev1.Volume) bool {
			return v.Name == "data" && v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == wantClaim
		}) {
			t.Errorf("pod %s volumes %+v, want claim %s as volume data", pod.Name, pod.Spec.Volumes, wantClaim)
		}
		if pod.Spec.NodeName != m.Node {
			t.Errorf("pod %s on node %q, member on %s", pod.Name, pod.Spec.NodeName, m.Node)
		}
	}
	// kubectl get pv -l flock.dev/name=<flock> shows where each member's data is.
	list, err := env.Kube.CoreV1().PersistentVolumes().List(ctxFor(t), metav1.ListOptions{LabelSelector: flockv1alpha1.LabelFlockName + "=" + f.Name + "," + flockcontroller.LabelFlockUID + "=" + string(f.UID)})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != len(f.Status.Members) {
		t.Errorf("%d volumes labelled for Flock %s, want %d", len(list.Items), f.Name, len(f.Status.Members))
	}
	return out
}

// stCheckBindWrite checks that a claim whose binding the Flock controller
// completed got its bind-completed annotation in the same write as its
// phase (through the status subresource, which keeps metadata changes for
// claims), not in a write of its own. A claim the PersistentVolume
// controller bound first is not the Flock controller's to check.
func stCheckBindWrite(t *testing.T, claim *corev1.PersistentVolumeClaim) {
	t.Helper()
	for _, mf := range claim.ManagedFields {
		if mf.Manager != flockcontroller.FieldManager || mf.FieldsV1 == nil ||
			!strings.Contains(string(mf.FieldsV1.Raw), `"f:pv.kubernetes.io/bind-completed"`) {
			continue
		}
		if mf.Subresource != "status" || !strings.Contains(string(mf.FieldsV1.Raw), `"f:phase"`) {
			t.Errorf("claim %s: the Flock controller wrote bind-completed apart from the phase (subresource %q): %s", claim.Name, mf.Subresource, mf.FieldsV1.Raw)
		}
	}
}

// A 3-member Flock in a namespace that enforces Pod Security "restricted"
// gets all members Ready on PersistentVolumes pinned to their nodes; the
// same Flock with a privileged container never gets a pod there; a deleted
// member pod comes back on its node with the same claim and volume.
func TestStorageRestrictedNamespace(t *testing.T) {
	ns := stRestrictedNamespace(t)
	lcNodes(t, ns, 3)
	const name = "pg"
	f, volumes := stStart(t, stRestrictedFlock(name, ns, 3))
	lcWaitEvent(t, ns, name, "DataPrepared", "owner 1000:1000, mode 770")

	// The same Flock, privileged, in that namespace: Pod Security refuses
	// its pods (or, with admission's dry-run, the Flock itself).
	priv := stRestrictedFlock("priv", ns, 1)
	yes := true
	priv.Spec.Template.Spec.Containers[0].SecurityContext.Privileged = &yes
	priv.Spec.Template.Spec.Containers[0].SecurityContext.AllowPrivilegeEscalation = &yes
	priv.Spec.Template.Spec.Containers[0].SecurityContext.Capabilities.Add = []corev1.Capability{"SYS_ADMIN"}
	if _, err := env.Flock.FlockV1alpha1().Flocks(ns).Create(ctxFor(t), priv, metav1.CreateOptions{}); err != nil {
		if !strings.Contains(err.Error(), "PodSecurity") && !strings.Contains(err.Error(), "privileged") {
			t.Errorf("creating the privileged Flock failed, but not for Pod Security: %v", err)
		}
	} else {
		lcWaitEvent(t, ns, "priv", "FailedCreate", "priv-0", "violates PodSecurity")
		if pods := ctlMemberPods(t, ns, "priv"); len(pods) != 0 {
			t.Errorf("the privileged Flock got pods %v", ctlPodNames(pods))
		}
	}

	// A deleted member pod comes back on its node with its claim and volume.
	old := stRecreatePod(t, ctlMemberPods(t, ns, name)[1])
	f = waitFlockAvailable(t, ns, name)
	after := stCheckMemberData(t, f)
	if after[1].UID != volumes[1].UID || f.Status.Members[1].Node != old.Spec.NodeName {
		t.Errorf("member 1 came back on %s with volume uid %s, was on %s with %s", f.Status.Members[1].Node, after[1].UID, old.Spec.NodeName, volumes[1].UID)
	}
}

// Scale 3 -> 2 with whenScaled Retain keeps member 2's claim and volume,
// and member 2 comes back to them on its old node (a fourth, free node
// notwithstanding); with Delete a helper in the server's namespace removes
// the directory, then the claim and the volume go.
func TestStorageScaleRetainThenDelete(t *testing.T) {
	ns := newNamespace(t)
	lcNodes(t, ns, 4)
	const name = "x"
	f, before := stStart(t, lcFlock(name, ns, 3))
	node2 := f.Status.Members[2].Node
	claim2, err := stClaim(ctxFor(t), ns, "data-x-2")
	if err != nil {
		t.Fatal(err)
	}

	lcUpdate(t, ns, name, func(f *flockv1alpha1.Flock) { f.Spec.Replicas = ptrTo(int32(2)) })
	f = waitFlockAvailable(t, ns, name)
	eventually(t, lcTimeout, "pod x-2 gone", func(ctx context.Context) error {
		if _, err := env.Kube.CoreV1().Pods(ns).Get(ctx, "x-2", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("pod x-2: %v", err)
		}
		return nil
	})
	if pv, err := stVolume(ctxFor(t), before[2].Name); err != nil || pv.UID != before[2].UID {
		t.Errorf("volume of member 2 after scale down: %v", err)
	}
	if c, err := stClaim(ctxFor(t), ns, "data-x-2"); err != nil || c.UID != claim2.UID {
		t.Errorf("claim of member 2 after scale down: %v", err)
	}

	lcUpdate(t, ns, name, func(f *flockv1alpha1.Flock) { f.Spec.Replicas = ptrTo(int32(3)) })
	f = waitFlockAvailable(t, ns, name)
	after := stCheckMemberData(t, f)
	if f.Status.Members[2].Node != node2 || after[2].UID != before[2].UID {
		t.Errorf("member 2 back on %s with volume %s, want node %s and volume %s", f.Status.Members[2].Node, after[2].UID, node2, before[2].UID)
	}
	if c, err := stClaim(ctxFor(t), ns, "data-x-2"); err != nil || c.UID != claim2.UID {
		t.Errorf("claim of member 2 after scale up: %v (want the same claim)", err)
	}

	// Delete.
	rec := watchPods(t, stHelperNamespace, flockcontroller.LabelFlockUID+"="+string(f.UID))
	lcUpdate(t, ns, name, func(f *flockv1alpha1.Flock) {
		f.Spec.Storage.Retention.WhenScaled = flockv1alpha1.DeleteRetentionPolicy
		f.Spec.Replicas = ptrTo(int32(2))
	})
	eventually(t, lcTimeout, "member 2's claim and volume deleted", func(ctx context.Context) error {
		if _, err := stClaim(ctx, ns, "data-x-2"); !apierrors.IsNotFound(err) {
			return fmt.Errorf("claim data-x-2: %v", err)
		}
		if _, err := stVolume(ctx, before[2].Name); !apierrors.IsNotFound(err) {
			return fmt.Errorf("volume %s: %v", before[2].Name, err)
		}
		f, err := lcGet(ctx, ns, name)
		if err != nil {
			return err
		}
		if len(f.Status.Members) != 2 {
			return fmt.Errorf("members %+v", f.Status.Members)
		}
		return nil
	})
	helper := flockcontroller.HelperPodName(flockcontroller.HelperCleanup, f.UID, 2)
	var added, succeeded bool
	for _, e := range rec.events(t) {
		p := e.Pod
		if p.Name != helper {
			continue
		}
		if e.Type == watch.Added {
			added = true
			if p.Spec.NodeName != node2 || len(p.Spec.Volumes) != 1 || p.Spec.Volumes[0].HostPath == nil ||
				p.Spec.Volumes[0].HostPath.Path != filepath.Join(env.DataRoot(), ns) || p.Spec.SecurityContext == nil || p.Spec.SecurityContext.SeccompProfile == nil {
				t.Errorf("cleanup helper on %s (want %s), volumes %+v, security %+v", p.Spec.NodeName, node2, p.Spec.Volumes, p.Spec.SecurityContext)
			}
		}
		if p.Status.Phase == corev1.PodSucceeded {
			succeeded = true
		}
	}
	if !added || !succeeded {
		t.Errorf("cleanup helper %s/%s added %v, succeeded %v; events:\n%s", stHelperNamespace, helper, added, succeeded, rec)
	}
	lcWaitEvent(t, ns, name, "DataCleanupDone", "member 2", node2)
	if pods, err := env.Kube.CoreV1().Pods(ns).List(ctxFor(t), metav1.ListOptions{}); err == nil {
		for _, p := range pods.Items {
			if p.Labels[flockcontroller.LabelHelper] != "" {
				t.Errorf("helper pod %s in the Flock's namespace", p.Name)
			}
		}
	}
}

// A Flock deleted (whenDeleted Retain) and made again with the same name
// gets new volumes and directories: nothing of the old one is mounted.
func TestStorageRecreatedFlockGetsNewData(t *testing.T) {
	ns := newNamespace(t)
	lcNodes(t, ns, 2)
	const name = "x"
	first, old := stStart(t, lcFlock(name, ns, 2))
	ctlDeleteFlock(t, ns, name, true)
	stWaitNoClaims(t, ns)

	stCreateFlock(t, lcFlock(name, ns, 2))
	second := waitFlockAvailable(t, ns, name)
	if second.UID == first.UID {
		t.Fatal("same UID")
	}
	now := stCheckMemberData(t, second)
	for ord, pv := range now {
		o := old[ord]
		if pv.Name == o.Name || pv.Spec.HostPath.Path == o.Spec.HostPath.Path {
			t.Errorf("member %d: volume %s at %s, the old one was %s at %s", ord, pv.Name, pv.Spec.HostPath.Path, o.Name, o.Spec.HostPath.Path)
		}
		// The old volume is retained, released, and bound to nothing new.
		kept, err := stVolume(ctxFor(t), o.Name)
		if err != nil {
			t.Errorf("retained volume %s: %v", o.Name, err)
			continue
		}
		if kept.Status.Phase == corev1.VolumeBound {
			t.Errorf("old volume %s is bound again (claimRef %+v)", kept.Name, kept.Spec.ClaimRef)
		}
	}
}

// Deleting the namespace of a whenDeleted: Delete Flock removes its data:
// the helpers run in the server's namespace, not the dying one.
func TestStorageNamespaceDeletionRemovesData(t *testing.T) {
	ns := newNamespace(t)
	lcNodes(t, ns, 2)
	const name = "x"
	f := lcFlock(name, ns, 2)
	f.Spec.Storage.Retention.WhenDeleted = flockv1alpha1.DeleteRetentionPolicy
	f, volumes := stStart(t, f)
	rec := watchPods(t, stHelperNamespace, flockcontroller.LabelFlockUID+"="+string(f.UID))
	if err := env.Kube.CoreV1().Namespaces().Delete(ctxFor(t), ns, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, lcTimeout, "the Flock's volumes deleted with its namespace", func(ctx context.Context) error {
		for _, pv := range volumes {
			if _, err := stVolume(ctx, pv.Name); !apierrors.IsNotFound(err) {
				return fmt.Errorf("volume %s: %v", pv.Name, err)
			}
		}
		return nil
	})
	// Every directory was removed by a helper on its member's node, none
	// skipped.
	for _, m := range f.Status.Members {
		helper := flockcontroller.HelperPodName(flockcontroller.HelperCleanup, f.UID, m.Ordinal)
		if !slices.ContainsFunc(rec.events(t), func(e podEvent) bool {
			return e.Pod.Name == helper && e.Pod.Spec.NodeName == m.Node && e.Pod.Status.Phase == corev1.PodSucceeded
		}) {
			t.Errorf("no cleanup helper %s succeeded on node %s; events:\n%s", helper, m.Node, rec)
		}
	}
}

func ptrTo[T any](v T) *T { return &v }

// stProvisionerName is the provisioner of the StorageClass that
// stRunProvisioner serves.
const stProvisionerName = "e2e.flock.dev/test-provisioner"

// stStorageClass creates StorageClass name, WaitForFirstConsumer, whose
// volumes stRunProvisioner makes, and deletes it when the test ends.
func stStorageClass(t *testing.T, name string) string {
	t.Helper()
	wait := storagev1.VolumeBindingWaitForFirstConsumer
	if _, err := env.Kube.StorageV1().StorageClasses().Create(ctxFor(t), &storagev1.StorageClass{
		ObjectMeta: metav1.ObjectMeta{Name: name}, Provisioner: stProvisionerName, VolumeBindingMode: &wait,
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		defer cancel()
		_ = env.Kube.StorageV1().StorageClasses().Delete(ctx, name, metav1.DeleteOptions{})
	})
	return name
}

// stRunProvisioner is a tiny dynamic provisioner for the test: every 250ms
// it gives each claim of class sc in ns that the scheduler has given a node
// (annotation volume.kubernetes.io/selected-node) a hostPath
// PersistentVolume pinned to that node and reserved for the claim (by UID),
// as a local-disk provisioner would; the claims named in network get a
// volume usable on any node instead, as a network disk would be. It stops,
// and deletes what it made, when the test ends.
func stRunProvisioner(t *testing.T, ns, sc string, network ...string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	made := map[string]bool{}
	var mu sync.Mutex
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			claims, err := env.Kube.CoreV1().PersistentVolumeClaims(ns).List(ctx, metav1.ListOptions{})
			if err == nil {
				for _, c := range claims.Items {
					node := c.Annotations["volume.kubernetes.io/selected-node"]
					if c.Spec.StorageClassName == nil || *c.Spec.StorageClassName != sc || c.Spec.VolumeName != "" || node == "" {
						continue
					}
					n, err := env.Kube.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
					if err != nil {
						continue
					}
					pv := &corev1.PersistentVolume{
						ObjectMeta: metav1.ObjectMeta{Name: "e2e-prov-" + string(c.UID),
							Annotations: map[string]string{"pv.kubernetes.io/provisioned-by": stProvisionerName}},
						Spec: corev1.PersistentVolumeSpec{
							Capacity:                      corev1.ResourceList{corev1.ResourceStorage: c.Spec.Resources.Requests[corev1.ResourceStorage]},
							AccessModes:                   c.Spec.AccessModes,
							PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimDelete,
							StorageClassName:              sc,
							PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{
								Path: "/var/lib/e2e-provisioner/" + string(c.UID)}},
							ClaimRef: &corev1.ObjectReference{APIVersion: "v1", Kind: "PersistentVolumeClaim",
								Namespace: c.Namespace, Name: c.Name, UID: c.UID},
							NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
								MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn,
									Values: []string{n.Labels[corev1.LabelHostname]}}},
							}}}},
						},
					}
					if slices.Contains(network, c.Name) {
						pv.Spec.NodeAffinity = nil
					}
					if _, err := env.Kube.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err == nil {
						mu.Lock()
						made[pv.Name] = true
						mu.Unlock()
					}
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(250 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		defer cancel()
		mu.Lock()
		defer mu.Unlock()
		for name := range made {
			if err := env.Kube.CoreV1().PersistentVolumes().Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("delete provisioned volume %s: %v", name, err)
			}
		}
	})
}

// With spec.storage.claimTemplate, members get claims of the template's
// StorageClass (provisioned here by a tiny test provisioner), Bound, on
// distinct nodes; a deleted member pod comes back with the same claim on
// the node of its volume.
func TestStorageClaimTemplate(t *testing.T) {
	ns := newNamespace(t)
	lcNodes(t, ns, 3)
	sc := stStorageClass(t, "e2e-fast-"+ns)
	stRunProvisioner(t, ns, sc)

	const name = "c"
	f := lcFlock(name, ns, 3)
	f.Spec.Storage.ClaimTemplate = &corev1.PersistentVolumeClaimTemplate{Spec: corev1.PersistentVolumeClaimSpec{
		AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
		StorageClassName: &sc,
		Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("2Gi")}},
	}}
	f.Spec.Template.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
	stCreateFlock(t, f)
	f = waitFlockAvailable(t, ns, name)

	check := func(f *flockv1alpha1.Flock) map[int32]*corev1.PersistentVolumeClaim {
		t.Helper()
		claims := map[int32]*corev1.PersistentVolumeClaim{}
		seen := map[string]bool{}
		pods := ctlMemberPods(t, ns, name)
		for _, m := range f.Status.Members {
			claimName := fmt.Sprintf("data-%s-%d", name, m.Ordinal)
			c, err := stClaim(ctxFor(t), ns, claimName)
			if err != nil {
				t.Fatalf("claim %s: %v", claimName, err)
			}
			claims[m.Ordinal] = c
			if c.Status.Phase != corev1.ClaimBound || c.Spec.VolumeName == "" || *c.Spec.StorageClassName != sc {
				t.Errorf("claim %s: phase %s, volume %q, class %q", claimName, c.Status.Phase, c.Spec.VolumeName, *c.Spec.StorageClassName)
			}
			ctlCheckControllerRef(t, "claim "+claimName, c.OwnerReferences, f)
			if m.Claim != claimName || m.PersistentVolume != c.Spec.VolumeName {
				t.Errorf("member %d records claim %q volume %q, want %q and %q", m.Ordinal, m.Claim, m.PersistentVolume, claimName, c.Spec.VolumeName)
			}
			pv, err := stVolume(ctxFor(t), c.Spec.VolumeName)
			if err != nil {
				t.Fatal(err)
			}
			if host := stVolumeHost(pv); host != stNodeHostname(t, m.Node) {
				t.Errorf("member %d on node %s, its volume on host %s", m.Ordinal, m.Node, host)
			}
			if seen[m.Node] {
				t.Errorf("two members on node %s", m.Node)
			}
			seen[m.Node] = true
			pod := pods[m.Ordinal]
			if pod.Spec.NodeName != m.Node {
				t.Errorf("pod %s on %q, member on %s", pod.Name, pod.Spec.NodeName, m.Node)
			}
			aa := pod.Spec.Affinity
			if aa == nil || aa.PodAntiAffinity == nil || len(aa.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) == 0 ||
				aa.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution[0].TopologyKey != corev1.LabelHostname {
				t.Errorf("pod %s has no required anti-affinity on %s: %+v", pod.Name, corev1.LabelHostname, aa)
			}
		}
		return claims
	}
	before := check(f)

	old := stRecreatePod(t, ctlMemberPods(t, ns, name)[0])
	f = waitFlockAvailable(t, ns, name)
	after := check(f)
	if after[0].UID != before[0].UID || f.Status.Members[0].Node != old.Spec.NodeName {
		t.Errorf("member 0 came back with claim %s on %s, was %s on %s", after[0].UID, f.Status.Members[0].Node, before[0].UID, old.Spec.NodeName)
	}
}

// With a claim template a member follows its volume, not a recorded node:
// its pod is pinned to no node; a member whose volume can be used anywhere
// moves to another node when its own is cordoned, and status.members[].node
// follows it; a member whose volume is on one node waits for that node,
// though another is free, and comes back there.
func TestStorageClaimTemplateFollowsVolume(t *testing.T) {
	ns := newNamespace(t)
	nodes := lcNodes(t, ns, 3)
	sc := stStorageClass(t, "e2e-follow-"+ns)
	const name = "v"
	// Member 0's volume is a "network disk"; member 1's is on its node.
	stRunProvisioner(t, ns, sc, "data-v-0")
	f := lcFlock(name, ns, 2)
	f.Spec.Storage.ClaimTemplate = &corev1.PersistentVolumeClaimTemplate{Spec: corev1.PersistentVolumeClaimSpec{
		AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
		StorageClassName: &sc,
		Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
	}}
	stCreateFlock(t, f)
	f = waitFlockAvailable(t, ns, name)
	memberNode := func(f *flockv1alpha1.Flock, ord int32) string {
		for _, m := range f.Status.Members {
			if m.Ordinal == ord {
				return m.Node
			}
		}
		return ""
	}
	setCordon := func(node string, on bool) {
		capRestoreNode(t, node, func(n *corev1.Node) { n.Spec.Unschedulable = on })
	}
	x0, x1 := memberNode(f, 0), memberNode(f, 1)
	free := ""
	for _, n := range nodes {
		if n != x0 && n != x1 {
			free = n
		}
	}
	pods := ctlMemberPods(t, ns, name)
	for _, pod := range pods {
		if a := pod.Spec.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
			for _, term := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
				if len(term.MatchFields) > 0 {
					t.Errorf("pod %s is pinned: %+v", pod.Name, term.MatchFields)
				}
			}
		}
	}
	claim0, err := stClaim(ctxFor(t), ns, "data-v-0")
	if err != nil {
		t.Fatal(err)
	}

	// Member 0: its node cordoned and its pod deleted, it comes back on the
	// only free node of the pool, with the same claim, and its recorded
	// node follows.
	setCordon(x0, true)
	if err := env.Kube.CoreV1().Pods(ns).Delete(ctxFor(t), pods[0].Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, lcTimeout, "member 0 recorded on "+free, func(ctx context.Context) error {
		f, err := lcGet(ctx, ns, name)
		if err != nil {
			return err
		}
		p, err := env.Kube.CoreV1().Pods(ns).Get(ctx, pods[0].Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if p.UID == pods[0].UID || p.Spec.NodeName != free || memberNode(f, 0) != free {
			return fmt.Errorf("pod %s (uid %s) on %q, member 0 recorded on %s", p.Name, p.UID, p.Spec.NodeName, memberNode(f, 0))
		}
		return nil
	})
	lcWaitEvent(t, ns, name, "MemberFollowed", "member 0 (pod v-0) runs on node "+free, "was recorded on node "+x0)
	f = waitFlockAvailable(t, ns, name)
	if c, err := stClaim(ctxFor(t), ns, "data-v-0"); err != nil || c.UID != claim0.UID || c.Spec.VolumeName != claim0.Spec.VolumeName {
		t.Errorf("member 0's claim changed: %+v, %v", c, err)
	}
	if memberNode(f, 1) != x1 {
		t.Errorf("member 1 moved from %s to %s", x1, memberNode(f, 1))
	}
	setCordon(x0, false)

	// Member 1: its volume is on its node. With that node cordoned and x0
	// free, the recreated pod waits for its volume's node (the scheduler
	// says why) and goes back there once it is uncordoned.
	setCordon(x1, true)
	if err := env.Kube.CoreV1().Pods(ns).Delete(ctxFor(t), pods[1].Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, lcTimeout, "member 1 blocked by its volume's node", func(ctx context.Context) error {
		f, err := lcGet(ctx, ns, name)
		if err != nil {
			return err
		}
		c := meta.FindStatusCondition(f.Status.Conditions, flockv1alpha1.FlockMembersBlocked)
		if c == nil || c.Status != metav1.ConditionTrue || c.Reason != flockcontroller.ReasonUnschedulable ||
			!strings.Contains(c.Message, "member 1 cannot be scheduled: ") || !strings.Contains(c.Message, "didn't match PersistentVolume's node affinity") {
			return fmt.Errorf("MembersBlocked %+v", c)
		}
		if memberNode(f, 1) != x1 {
			return fmt.Errorf("member 1 recorded on %s, want %s", memberNode(f, 1), x1)
		}
		return nil
	})
	if p, err := env.Kube.CoreV1().Pods(ns).Get(ctxFor(t), pods[1].Name, metav1.GetOptions{}); err != nil || p.Spec.NodeName != "" {
		t.Fatalf("pod %s: %v, node %q, want pending", pods[1].Name, err, p.Spec.NodeName)
	}
	setCordon(x1, false)
	f = waitFlockAvailable(t, ns, name)
	if memberNode(f, 1) != x1 {
		t.Errorf("member 1 came back on %s, want %s", memberNode(f, 1), x1)
	}
	if p, err := env.Kube.CoreV1().Pods(ns).Get(ctxFor(t), pods[1].Name, metav1.GetOptions{}); err != nil || p.Spec.NodeName != x1 || p.UID == pods[1].UID {
		t.Errorf("pod %s after uncordon: %v", pods[1].Name, err)
	}
}

// Bad storage input is refused with 422 naming the field: a size that is not
// a quantity, a mode beyond 0777, both modes at once, a claim template
// without access modes or size. The server's clientset and kubectl both.
func TestStorageBadInput(t *testing.T) {
	ns := newNamespace(t)
	claim := &corev1.PersistentVolumeClaimTemplate{Spec: corev1.PersistentVolumeClaimSpec{
		AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
		Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
	}}
	for _, tc := range []struct {
		name   string
		mutate func(*flockv1alpha1.Flock)
		want   []string
	}{
		{"size not a quantity", func(f *flockv1alpha1.Flock) { f.Spec.Storage.Capacity = "lots" },
			[]string{"spec.storage.size", "must be a quantity"}},
		{"mode beyond 0777", func(f *flockv1alpha1.Flock) { f.Spec.Storage.Mode = ptrTo(int32(0o4777)) },
			[]string{"spec.storage.mode", "from 0 to 0777"}},
		{"both modes at once", func(f *flockv1alpha1.Flock) {
			f.Spec.Storage.Capacity = "1Gi"
			f.Spec.Storage.ClaimTemplate = claim.DeepCopy()
		}, []string{"spec.storage.size", "may not be set with spec.storage.claimTemplate"}},
		{"claim template without access modes or size", func(f *flockv1alpha1.Flock) {
			f.Spec.Storage.ClaimTemplate = &corev1.PersistentVolumeClaimTemplate{}
		}, []string{"spec.storage.claimTemplate.spec.accessModes", "spec.storage.claimTemplate.spec.resources.requests[storage]"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFlock("bad", ns, 1)
			tc.mutate(f)
			_, err := env.Flock.FlockV1alpha1().Flocks(ns).Create(ctxFor(t), f, metav1.CreateOptions{})
			if !apierrors.IsInvalid(err) {
				t.Fatalf("create: %v, want 422 Invalid", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
	// kubectl shows the same, from YAML (where a mode is written in octal).
	manifest := flockManifest("bad", ns, 1) + "  storage:\n    size: lots\n    mode: 04777\n"
	res := kubectlFails(t, env.KubectlBuilt(), manifest, "apply", "-f", "-")
	for _, w := range []string{"spec.storage.size", "spec.storage.mode", "is invalid"} {
		if !strings.Contains(res.Stderr, w) {
			t.Errorf("kubectl apply: %q does not say %q", res.Stderr, w)
		}
	}
}

// A PersistentVolume or claim of a member's name that belongs to something
// else blocks that member, with a condition and an event naming the
// object; it is left exactly as it was.
func TestStorageForeignObjectsBlock(t *testing.T) {
	ns := newNamespace(t)
	lcNodes(t, ns, 1)
	const name = "x"
	// A claim of member 0's name, made by someone else, before the Flock.
	foreign := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "data-x-0", Namespace: ns, Labels: map[string]string{"owner": "someone"}},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
			StorageClassName: ptrTo("none"),
		},
	}
	made, err := env.Kube.CoreV1().PersistentVolumeClaims(ns).Create(ctxFor(t), foreign, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	stCreateFlock(t, lcFlock(name, ns, 1))
	want := "PersistentVolumeClaim " + ns + "/data-x-0 exists and is not controlled by this Flock"
	eventually(t, lcTimeout, "member 0 blocked by the foreign claim", func(ctx context.Context) error {
		f, err := lcGet(ctx, ns, name)
		if err != nil {
			return err
		}
		c := meta.FindStatusCondition(f.Status.Conditions, flockv1alpha1.FlockMembersBlocked)
		if c == nil || c.Reason != flockcontroller.ReasonDataConflict || !strings.Contains(c.Message, want) {
			return fmt.Errorf("MembersBlocked %+v", c)
		}
		return nil
	})
	lcWaitEvent(t, ns, name, "MembersBlocked", want)
	if pods := ctlMemberPods(t, ns, name); len(pods) != 0 {
		t.Errorf("member pods %v despite the conflict", ctlPodNames(pods))
	}
	got, err := stClaim(ctxFor(t), ns, "data-x-0")
	if err != nil || got.UID != made.UID || len(got.OwnerReferences) != 0 || got.Labels["owner"] != "someone" || got.Spec.VolumeName != "" {
		t.Errorf("the foreign claim was touched: %+v, %v", got, err)
	}

	// Once it is gone, the member gets its own claim and starts.
	if err := env.Kube.CoreV1().PersistentVolumeClaims(ns).Delete(ctxFor(t), "data-x-0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	f := waitFlockAvailable(t, ns, name)
	stCheckMemberData(t, f)
}
