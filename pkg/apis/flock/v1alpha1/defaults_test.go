package v1alpha1_test

import (
	"encoding/json"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	runtimeserializer "k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"flock.dev/flock/pkg/apis/flock"
	"flock.dev/flock/pkg/apis/flock/install"
	"flock.dev/flock/pkg/apis/flock/v1alpha1"
)

// newScheme is the server's scheme for the group, with the registered
// defaulters.
func newScheme() *runtime.Scheme {
	scheme := runtime.NewScheme()
	install.Install(scheme)
	return scheme
}

// minimal is the smallest Flock a user writes: a name, a selector and a
// template.
func minimal() *v1alpha1.Flock {
	return &v1alpha1.Flock{
		ObjectMeta: metav1.ObjectMeta{Name: "pg", Namespace: "db"},
		Spec: v1alpha1.FlockSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "pg"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "pg"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name:  "pg",
					Image: "postgres:17",
					Ports: []corev1.ContainerPort{{Name: "pg", ContainerPort: 5432, Protocol: corev1.ProtocolTCP}},
				}}},
			},
		},
	}
}

// defaulted is minimal with every default filled in, written out by hand.
func defaulted() *v1alpha1.Flock {
	f := minimal()
	one := intstr.FromInt32(1)
	f.Spec.Replicas = ptr.To(int32(1))
	f.Spec.ServiceName = "pg"
	f.Spec.Storage = v1alpha1.FlockStorage{
		VolumeName: "data",
		Capacity:   v1alpha1.DefaultStorageSize,
		Mode:       ptr.To(v1alpha1.DefaultStorageMode),
		Retention: v1alpha1.RetentionPolicy{
			WhenDeleted: v1alpha1.RetainRetentionPolicy,
			WhenScaled:  v1alpha1.RetainRetentionPolicy,
		},
	}
	f.Spec.PodManagementPolicy = v1alpha1.OrderedReadyPodManagement
	f.Spec.UpdateStrategy = v1alpha1.FlockUpdateStrategy{
		Type: v1alpha1.RollingUpdateFlockStrategyType,
		RollingUpdate: &v1alpha1.RollingUpdateFlockStrategy{
			Partition:      ptr.To(int32(0)),
			MaxUnavailable: &one,
		},
	}
	f.Spec.MemberRecovery = v1alpha1.MemberRecovery{Policy: v1alpha1.WaitMemberRecovery}
	f.Spec.DisruptionBudget = v1alpha1.FlockDisruptionBudget{Policy: v1alpha1.ManagedDisruptionBudget, MaxUnavailable: &one}
	f.Spec.RevisionHistoryLimit = ptr.To(int32(10))
	return f
}

// explicit sets every defaulted field to a value that is not its default.
func explicit() *v1alpha1.Flock {
	f := minimal()
	half := intstr.FromString("50%")
	f.Spec.Replicas = ptr.To(int32(0))
	f.Spec.ServiceName = "pg-headless"
	f.Spec.Storage = v1alpha1.FlockStorage{
		VolumeName: "store",
		Capacity:   "10Gi",
		Mode:       ptr.To(int32(0o700)),
		Retention: v1alpha1.RetentionPolicy{
			WhenDeleted: v1alpha1.DeleteRetentionPolicy,
			WhenScaled:  v1alpha1.DeleteRetentionPolicy,
		},
	}
	f.Spec.PodManagementPolicy = v1alpha1.ParallelPodManagement
	f.Spec.UpdateStrategy = v1alpha1.FlockUpdateStrategy{
		Type: v1alpha1.RollingUpdateFlockStrategyType,
		RollingUpdate: &v1alpha1.RollingUpdateFlockStrategy{
			Partition:      ptr.To(int32(2)),
			MaxUnavailable: &half,
		},
	}
	f.Spec.MinReadySeconds = 30
	f.Spec.MemberRecovery = v1alpha1.MemberRecovery{Policy: v1alpha1.ReassignMemberRecovery, AfterSeconds: ptr.To(int32(300))}
	f.Spec.DisruptionBudget = v1alpha1.FlockDisruptionBudget{Policy: v1alpha1.NoDisruptionBudget}
	f.Spec.RevisionHistoryLimit = ptr.To(int32(0))
	return f
}

func TestDefaults(t *testing.T) {
	scheme := newScheme()
	tests := []struct {
		name string
		in   func() *v1alpha1.Flock
		want func() *v1alpha1.Flock
	}{
		{name: "every default", in: minimal, want: defaulted},
		{name: "explicit values are kept", in: explicit, want: explicit},
		{name: "defaults are idempotent", in: defaulted, want: defaulted},
		{name: "OnDelete gets no rollingUpdate", in: func() *v1alpha1.Flock {
			f := minimal()
			f.Spec.UpdateStrategy.Type = v1alpha1.OnDeleteFlockStrategyType
			return f
		}, want: func() *v1alpha1.Flock {
			f := defaulted()
			f.Spec.UpdateStrategy = v1alpha1.FlockUpdateStrategy{Type: v1alpha1.OnDeleteFlockStrategyType}
			return f
		}},
		{name: "partial rollingUpdate is completed", in: func() *v1alpha1.Flock {
			f := minimal()
			f.Spec.UpdateStrategy.RollingUpdate = &v1alpha1.RollingUpdateFlockStrategy{Partition: ptr.To(int32(2))}
			return f
		}, want: func() *v1alpha1.Flock {
			f := defaulted()
			f.Spec.UpdateStrategy.RollingUpdate.Partition = ptr.To(int32(2))
			return f
		}},
		{name: "partial retention is completed", in: func() *v1alpha1.Flock {
			f := minimal()
			f.Spec.Storage.Retention.WhenScaled = v1alpha1.DeleteRetentionPolicy
			return f
		}, want: func() *v1alpha1.Flock {
			f := defaulted()
			f.Spec.Storage.Retention.WhenScaled = v1alpha1.DeleteRetentionPolicy
			return f
		}},
		{name: "a claim template gets no size or mode", in: func() *v1alpha1.Flock {
			f := minimal()
			f.Spec.Storage.ClaimTemplate = &corev1.PersistentVolumeClaimTemplate{}
			return f
		}, want: func() *v1alpha1.Flock {
			f := defaulted()
			f.Spec.Storage.Capacity, f.Spec.Storage.Mode = "", nil
			f.Spec.Storage.ClaimTemplate = &corev1.PersistentVolumeClaimTemplate{}
			return f
		}},
		{name: "Reassign keeps afterSeconds", in: func() *v1alpha1.Flock {
			f := minimal()
			f.Spec.MemberRecovery = v1alpha1.MemberRecovery{Policy: v1alpha1.ReassignMemberRecovery, AfterSeconds: ptr.To(int32(120))}
			return f
		}, want: func() *v1alpha1.Flock {
			f := defaulted()
			f.Spec.MemberRecovery = v1alpha1.MemberRecovery{Policy: v1alpha1.ReassignMemberRecovery, AfterSeconds: ptr.To(int32(120))}
			return f
		}},
		{name: "generateName leaves serviceName to the registry", in: func() *v1alpha1.Flock {
			f := minimal()
			f.Name, f.GenerateName = "", "pg-"
			return f
		}, want: func() *v1alpha1.Flock {
			f := defaulted()
			f.Name, f.GenerateName, f.Spec.ServiceName = "", "pg-", ""
			return f
		}},
		{name: "core/v1 defaults in the template", in: func() *v1alpha1.Flock {
			f := minimal()
			f.Spec.Template.Spec.Containers[0].Ports[0].Protocol = ""
			return f
		}, want: defaulted},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.in()
			scheme.Default(got)
			if want := tc.want(); !reflect.DeepEqual(got, want) {
				t.Errorf("after defaulting\n got: %s\nwant: %s", toJSON(t, got), toJSON(t, want))
			}
		})
	}
}

// TestDefaultsOnList checks that the registered list defaulter defaults
// every item.
func TestDefaultsOnList(t *testing.T) {
	list := &v1alpha1.FlockList{Items: []v1alpha1.Flock{*minimal(), *explicit()}}
	newScheme().Default(list)
	if !reflect.DeepEqual(&list.Items[0], defaulted()) {
		t.Errorf("item 0 not defaulted: %s", toJSON(t, &list.Items[0]))
	}
	if !reflect.DeepEqual(&list.Items[1], explicit()) {
		t.Errorf("item 1 changed: %s", toJSON(t, &list.Items[1]))
	}
}

// TestDefaultsOnDecode decodes a minimal manifest into the internal version,
// as the API server does with a request body, and finds the defaults there.
func TestDefaultsOnDecode(t *testing.T) {
	codecs := runtimeserializer.NewCodecFactory(newScheme())
	body := []byte(`{
		"apiVersion": "flock.dev/v1alpha1", "kind": "Flock",
		"metadata": {"name": "pg", "namespace": "db"},
		"spec": {
			"replicas": 0,
			"selector": {"matchLabels": {"app": "pg"}},
			"template": {"metadata": {"labels": {"app": "pg"}},
				"spec": {"containers": [{"name": "pg", "image": "postgres:17"}]}}
		}
	}`)
	obj, gvk, err := codecs.UniversalDecoder(flock.SchemeGroupVersion).Decode(body, nil, nil)
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	if gvk.Kind != "Flock" || gvk.GroupVersion() != v1alpha1.SchemeGroupVersion {
		t.Errorf("decoded kind %v, want Flock in %v", gvk, v1alpha1.SchemeGroupVersion)
	}
	f, ok := obj.(*flock.Flock)
	if !ok {
		t.Fatalf("decoded a %T, want *flock.Flock", obj)
	}
	s := f.Spec
	checks := []struct {
		field    string
		got, set interface{}
	}{
		{"replicas (explicit 0 kept)", *s.Replicas, int32(0)},
		{"serviceName", s.ServiceName, "pg"},
		{"storage.volumeName", s.Storage.VolumeName, v1alpha1.DefaultVolumeName},
		{"storage.size", s.Storage.Capacity, v1alpha1.DefaultStorageSize},
		{"storage.mode", derefOrNil(s.Storage.Mode), v1alpha1.DefaultStorageMode},
		{"storage.retention.whenDeleted", s.Storage.Retention.WhenDeleted, flock.RetainRetentionPolicy},
		{"storage.retention.whenScaled", s.Storage.Retention.WhenScaled, flock.RetainRetentionPolicy},
		{"podManagementPolicy", s.PodManagementPolicy, flock.OrderedReadyPodManagement},
		{"updateStrategy.type", s.UpdateStrategy.Type, flock.RollingUpdateFlockStrategyType},
		{"memberRecovery.policy", s.MemberRecovery.Policy, flock.WaitMemberRecovery},
		{"disruptionBudget.policy", s.DisruptionBudget.Policy, flock.ManagedDisruptionBudget},
		{"disruptionBudget.maxUnavailable", s.DisruptionBudget.MaxUnavailable, ptr.To(intstr.FromInt32(1))},
		{"revisionHistoryLimit", derefOrNil(s.RevisionHistoryLimit), v1alpha1.DefaultRevisionHistoryLimit},
	}
	for _, c := range checks {
		if !reflect.DeepEqual(c.got, c.set) {
			t.Errorf("spec.%s = %#v, want %#v", c.field, c.got, c.set)
		}
	}
	ru := s.UpdateStrategy.RollingUpdate
	if ru == nil || ru.Partition == nil || *ru.Partition != 0 || ru.MaxUnavailable == nil || *ru.MaxUnavailable != intstr.FromInt32(1) {
		t.Errorf("spec.updateStrategy.rollingUpdate = %s, want partition 0 and maxUnavailable 1", toJSON(t, ru))
	}
}

func derefOrNil(p *int32) interface{} {
	if p == nil {
		return nil
	}
	return *p
}

func toJSON(t *testing.T, v interface{}) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	return string(b)
}
