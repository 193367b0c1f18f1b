package flock

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"flock.dev/flock/pkg/apis/flock/v1alpha1"
)

// uidFlock is newFlock with a realistic UID.
func uidFlock(name string, replicas int32) *v1alpha1.Flock {
	fl := newFlock(name, replicas)
	fl.UID = types.UID("0b4f6a2e-8c1d-4d0e-9f3a-5b6c7d8e9f00")
	return fl
}

func TestMemberDataNames(t *testing.T) {
	fl := uidFlock("pg", 3)
	tests := []struct{ name, got, want string }{
		{"PersistentVolumeName", PersistentVolumeName(fl.UID, 2), "flock-0b4f6a2e-8c1d-4d0e-9f3a-5b6c7d8e9f00-2"},
		{"ClaimName", ClaimName(fl, 2), "data-pg-2"},
		{"MemberDataDir", MemberDataDir("/var/lib/flock", fl), "/var/lib/flock/" + testNamespace + "/pg-0b4f6a2e"},
		{"HelperPodName", HelperPodName(HelperPrepare, fl.UID, 10), "flock-prepare-0b4f6a2e-8c1d-4d0e-9f3a-5b6c7d8e9f00-10"},
	}
	for _, tc := range tests {
		if tc.got != tc.want {
			t.Errorf("%s = %q, want %q", tc.name, tc.got, tc.want)
		}
	}
	other := fl.DeepCopy()
	other.UID = "77777777-0000-0000-0000-000000000000"
	if MemberDataDir("/d", other) == MemberDataDir("/d", fl) || PersistentVolumeName(other.UID, 0) == PersistentVolumeName(fl.UID, 0) {
		t.Error("a Flock re-created with the same name gets the same directory or PersistentVolume")
	}
	other.Spec.Storage.VolumeName = "store"
	if got := ClaimName(other, 0); got != "store-pg-0" {
		t.Errorf("ClaimName with volumeName store = %q", got)
	}
}

func TestNewLocalStorageClass(t *testing.T) {
	sc := NewLocalStorageClass()
	if sc.Name != "flock-local" || sc.Provisioner != "kubernetes.io/no-provisioner" ||
		sc.VolumeBindingMode == nil || *sc.VolumeBindingMode != storagev1.VolumeBindingWaitForFirstConsumer ||
		sc.ReclaimPolicy == nil || *sc.ReclaimPolicy != corev1.PersistentVolumeReclaimRetain {
		t.Errorf("StorageClass = %+v", sc)
	}
}

func TestNewMemberVolume(t *testing.T) {
	for _, tc := range []struct {
		name     string
		size     string
		wantSize string
	}{
		{"default size", "", "1Gi"},
		{"explicit size", "20Gi", "20Gi"},
		{"unparsable size falls back", "lots", "1Gi"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fl := uidFlock("pg", 3)
			fl.Spec.Storage.Capacity = tc.size
			pv := NewMemberVolume(fl, v1alpha1.FlockMember{Ordinal: 1, Node: "n-b"}, "host-b", "/srv/flock", "")
			if pv.Name != PersistentVolumeName(fl.UID, 1) || pv.Namespace != "" {
				t.Errorf("name %q namespace %q", pv.Name, pv.Namespace)
			}
			for k, v := range map[string]string{"flock.dev/name": "pg", "flock.dev/namespace": testNamespace, "flock.dev/ordinal": "1", "flock.dev/uid": string(fl.UID)} {
				if pv.Labels[k] != v {
					t.Errorf("label %s = %q, want %q", k, pv.Labels[k], v)
				}
			}
			hp := pv.Spec.HostPath
			if hp == nil || hp.Path != "/srv/flock/"+testNamespace+"/pg-0b4f6a2e" || hp.Type == nil || *hp.Type != corev1.HostPathDirectoryOrCreate {
				t.Errorf("hostPath = %+v", hp)
			}
			if q := pv.Spec.Capacity[corev1.ResourceStorage]; q.Cmp(resource.MustParse(tc.wantSize)) != 0 {
				t.Errorf("capacity = %s, want %s", q.String(), tc.wantSize)
			}
			if pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimRetain || pv.Spec.StorageClassName != "flock-local" {
				t.Errorf("reclaim %q class %q", pv.Spec.PersistentVolumeReclaimPolicy, pv.Spec.StorageClassName)
			}
			ref := pv.Spec.ClaimRef
			if ref == nil || ref.Kind != "PersistentVolumeClaim" || ref.Namespace != testNamespace || ref.Name != "data-pg-1" || ref.UID != "" {
				t.Errorf("claimRef = %+v", ref)
			}
			terms := pv.Spec.NodeAffinity.Required.NodeSelectorTerms
			if len(terms) != 1 || len(terms[0].MatchExpressions) != 1 || len(terms[0].MatchFields) != 0 {
				t.Fatalf("node affinity = %+v", terms)
			}
			if r := terms[0].MatchExpressions[0]; r.Key != "kubernetes.io/hostname" || r.Operator != corev1.NodeSelectorOpIn ||
				len(r.Values) != 1 || r.Values[0] != "host-b" {
				t.Errorf("node affinity = %+v, want kubernetes.io/hostname In [host-b]", r)
			}
			if volumeConflict(fl, 1, pv) != "" {
				t.Errorf("the volume built conflicts with itself: %s", volumeConflict(fl, 1, pv))
			}
		})
	}
}

func TestNodeHostname(t *testing.T) {
	n := newNode("n-a")
	n.Labels["kubernetes.io/hostname"] = "a.example.com"
	if got := NodeHostname(n); got != "a.example.com" {
		t.Errorf("NodeHostname = %q", got)
	}
	delete(n.Labels, "kubernetes.io/hostname")
	if got := NodeHostname(n); got != "n-a" {
		t.Errorf("NodeHostname without the label = %q", got)
	}
}

func TestNewMemberClaim(t *testing.T) {
	t.Run("node-local", func(t *testing.T) {
		fl := uidFlock("pg", 3)
		fl.Spec.Storage.Capacity = "5Gi"
		c := NewMemberClaim(fl, 0, PersistentVolumeName(fl.UID, 0))
		if c.Name != "data-pg-0" || c.Namespace != testNamespace || !isControlledBy(c, fl) {
			t.Errorf("claim meta = %+v", c.ObjectMeta)
		}
		if c.Spec.VolumeName != PersistentVolumeName(fl.UID, 0) || c.Spec.StorageClassName == nil || *c.Spec.StorageClassName != "flock-local" {
			t.Errorf("claim spec = %+v", c.Spec)
		}
		if q := c.Spec.Resources.Requests[corev1.ResourceStorage]; q.String() != "5Gi" {
			t.Errorf("request = %s", q.String())
		}
		if claimConflict(fl, 0, c) != "" {
			t.Errorf("the claim built conflicts with itself: %s", claimConflict(fl, 0, c))
		}
	})
	t.Run("claim template", func(t *testing.T) {
		fl := uidFlock("pg", 3)
		fl.Spec.Storage.Capacity, fl.Spec.Storage.Mode = "", nil
		fl.Spec.Storage.ClaimTemplate = &corev1.PersistentVolumeClaimTemplate{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"tier": "db", "flock.dev/name": "spoof"}, Annotations: map[string]string{"a": "b"}},
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				StorageClassName: ptr.To("fast"),
				Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("3Gi")}},
			},
		}
		c := NewMemberClaim(fl, 2, "ignored")
		if c.Name != "data-pg-2" || c.Spec.VolumeName != "" || *c.Spec.StorageClassName != "fast" ||
			c.Labels["tier"] != "db" || c.Labels["flock.dev/name"] != "pg" || c.Annotations["a"] != "b" || !isControlledBy(c, fl) {
			t.Errorf("claim = %+v", c)
		}
		c.Labels["tier"] = "changed"
		if fl.Spec.Storage.ClaimTemplate.Labels["tier"] != "db" {
			t.Error("NewMemberClaim shares maps with the template")
		}
		if claimConflict(fl, 2, c) != "" {
			t.Errorf("the claim built conflicts with itself: %s", claimConflict(fl, 2, c))
		}
	})
}

func TestDataConflicts(t *testing.T) {
	fl := uidFlock("pg", 3)
	pv := NewMemberVolume(fl, v1alpha1.FlockMember{Ordinal: 0, Node: "n-a"}, "n-a", "/d", "")
	claim := NewMemberClaim(fl, 0, pv.Name)
	tests := []struct {
		name   string
		pv     func(*corev1.PersistentVolume)
		claim  func(*corev1.PersistentVolumeClaim)
		wantPV string
		wantPC string
	}{
		{name: "ours"},
		{name: "volume of another Flock", pv: func(v *corev1.PersistentVolume) { v.Labels["flock.dev/uid"] = "other" }, wantPV: "is not member 0's of this Flock"},
		{name: "volume without labels", pv: func(v *corev1.PersistentVolume) { v.Labels = nil }, wantPV: "is not member 0's"},
		{name: "volume reserved for another claim", pv: func(v *corev1.PersistentVolume) { v.Spec.ClaimRef.Name = "x" }, wantPV: "is not reserved for claim"},
		{name: "volume reserved for nothing", pv: func(v *corev1.PersistentVolume) { v.Spec.ClaimRef = nil }, wantPV: "is not reserved for claim"},
		{name: "claim of someone else", claim: func(c *corev1.PersistentVolumeClaim) { c.OwnerReferences = nil }, wantPC: "is not controlled by this Flock"},
		{name: "claim of another Flock of that name", claim: func(c *corev1.PersistentVolumeClaim) { c.OwnerReferences[0].UID = "old" }, wantPC: "is not controlled by this Flock"},
		{name: "claim for another volume", claim: func(c *corev1.PersistentVolumeClaim) { c.Spec.VolumeName = "pv-x" }, wantPC: `asks for volume "pv-x"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v, c := pv.DeepCopy(), claim.DeepCopy()
			if tc.pv != nil {
				tc.pv(v)
			}
			if tc.claim != nil {
				tc.claim(c)
			}
			for _, got := range []struct{ got, want string }{{volumeConflict(fl, 0, v), tc.wantPV}, {claimConflict(fl, 0, c), tc.wantPC}} {
				if (got.want == "") != (got.got == "") || !strings.Contains(got.got, got.want) {
					t.Errorf("conflict = %q, want one containing %q", got.got, got.want)
				}
			}
		})
	}
}

func TestNewHelperPod(t *testing.T) {
	tests := []struct {
		name       string
		job        string
		sc         *corev1.PodSecurityContext
		mode       *int32
		wantScript string
		wantPath   string
		wantCaps   []corev1.Capability
	}{
		{name: "prepare for root", job: HelperPrepare,
			wantScript: "chmod 770 /flock-data && chown 0:0 /flock-data", wantPath: "/srv/flock/" + testNamespace + "/pg-0b4f6a2e",
			wantCaps: []corev1.Capability{"CHOWN", "FOWNER"}},
		{name: "prepare with runAsUser and fsGroup", job: HelperPrepare,
			sc:         &corev1.PodSecurityContext{RunAsUser: ptr.To(int64(999)), RunAsGroup: ptr.To(int64(5)), FSGroup: ptr.To(int64(2000))},
			mode:       ptr.To(int32(0o750)),
			wantScript: "chmod 750 /flock-data && chown 999:2000 /flock-data", wantPath: "/srv/flock/" + testNamespace + "/pg-0b4f6a2e",
			wantCaps: []corev1.Capability{"CHOWN", "FOWNER"}},
		{name: "prepare with runAsGroup only", job: HelperPrepare,
			sc:         &corev1.PodSecurityContext{RunAsUser: ptr.To(int64(1000)), RunAsGroup: ptr.To(int64(1000))},
			wantScript: "chmod 770 /flock-data && chown 1000:1000 /flock-data", wantPath: "/srv/flock/" + testNamespace + "/pg-0b4f6a2e",
			wantCaps: []corev1.Capability{"CHOWN", "FOWNER"}},
		{name: "cleanup removes the directory from its parent", job: HelperCleanup,
			wantScript: "rm -rf -- /flock-data/pg-0b4f6a2e", wantPath: "/srv/flock/" + testNamespace,
			wantCaps: []corev1.Capability{"DAC_OVERRIDE", "FOWNER"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fl := uidFlock("pg", 3)
			fl.Spec.Template.Spec.SecurityContext = tc.sc
			fl.Spec.Storage.Mode = tc.mode
			p := NewHelperPod(fl, v1alpha1.FlockMember{Ordinal: 1, Node: "n-b"}, tc.job, "flock-system", "busybox@sha256:abc", "/srv/flock")
			if p.Namespace != "flock-system" || p.Name != HelperPodName(tc.job, fl.UID, 1) || p.Spec.NodeName != "n-b" ||
				p.Spec.RestartPolicy != corev1.RestartPolicyNever || len(p.OwnerReferences) != 0 {
				t.Errorf("pod meta = %+v, nodeName %q", p.ObjectMeta, p.Spec.NodeName)
			}
			if ord, ok := helperOrdinal(fl.UID, p); !ok || ord != 1 {
				t.Errorf("helperOrdinal = %d, %v", ord, ok)
			}
			if _, ok := helperOrdinal("another-uid", p); ok {
				t.Error("a helper is matched to another Flock's UID")
			}
			if p.Labels[LabelHelper] != tc.job || p.Labels[LabelFlockUID] != string(fl.UID) || p.Labels[LabelFlockNamespace] != testNamespace {
				t.Errorf("labels = %v", p.Labels)
			}
			if len(p.Spec.Volumes) != 1 || p.Spec.Volumes[0].HostPath == nil || p.Spec.Volumes[0].HostPath.Path != tc.wantPath {
				t.Errorf("volumes = %+v, want only hostPath %s", p.Spec.Volumes, tc.wantPath)
			}
			if sc := p.Spec.SecurityContext; sc == nil || sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
				t.Errorf("pod security context = %+v, want RuntimeDefault seccomp", sc)
			}
			if p.Spec.AutomountServiceAccountToken == nil || *p.Spec.AutomountServiceAccountToken || p.Spec.HostNetwork || p.Spec.HostPID {
				t.Errorf("spec = %+v", p.Spec)
			}
			c := p.Spec.Containers[0]
			if c.Image != "busybox@sha256:abc" || strings.Join(c.Command, " ") != "sh -c "+tc.wantScript {
				t.Errorf("container %q runs %q, want %q", c.Image, c.Command, tc.wantScript)
			}
			csc := c.SecurityContext
			if csc == nil || csc.AllowPrivilegeEscalation == nil || *csc.AllowPrivilegeEscalation || csc.Privileged != nil ||
				csc.Capabilities == nil || len(csc.Capabilities.Drop) != 1 || csc.Capabilities.Drop[0] != "ALL" ||
				strings.Join(capStrings(csc.Capabilities.Add), ",") != strings.Join(capStrings(tc.wantCaps), ",") {
				t.Errorf("container security context = %+v", csc)
			}
		})
	}
}

func capStrings(caps []corev1.Capability) []string {
	out := make([]string, len(caps))
	for i, c := range caps {
		out[i] = string(c)
	}
	return out
}

func TestMemberDataVolume(t *testing.T) {
	fl := uidFlock("pg", 3)
	v := memberDataVolume(fl, 1)
	if v.Name != "data" || v.PersistentVolumeClaim == nil || v.PersistentVolumeClaim.ClaimName != "data-pg-1" || v.HostPath != nil {
		t.Errorf("volume = %+v", v)
	}
}
