package validation

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	"flock.dev/flock/pkg/apis/flock"
	"flock.dev/flock/pkg/apis/flock/v1alpha1"
)

// validFlock is a defaulted, valid Flock: the baseline every table row
// changes in one way.
func validFlock() *flock.Flock {
	maxUnavailable := intstr.FromInt32(1)
	return &flock.Flock{
		ObjectMeta: metav1.ObjectMeta{Name: "pg", Namespace: "db"},
		Spec: &flock.FlockSpec{
			Replicas:    ptr.To(int32(3)),
			Selector:    &metav1.LabelSelector{MatchLabels: map[string]string{"app": "pg"}},
			ServiceName: "pg",
			Placement:   flock.FlockPlacement{NodeSelector: map[string]string{"disk": "local"}},
			Storage: flock.FlockStorage{
				VolumeName: "data",
				Capacity:   "1Gi",
				Mode:       ptr.To(int32(0o770)),
				Retention: flock.RetentionPolicy{
					WhenDeleted: flock.RetainRetentionPolicy,
					WhenScaled:  flock.RetainRetentionPolicy,
				},
			},
			PodManagementPolicy: flock.OrderedReadyPodManagement,
			UpdateStrategy: flock.FlockUpdateStrategy{
				Type: flock.RollingUpdateFlockStrategyType,
				RollingUpdate: &flock.RollingUpdateFlockStrategy{
					Partition:      ptr.To(int32(0)),
					MaxUnavailable: &maxUnavailable,
				},
			},
			MemberRecovery:       flock.MemberRecovery{Policy: flock.WaitMemberRecovery},
			DisruptionBudget:     flock.FlockDisruptionBudget{Policy: flock.ManagedDisruptionBudget, MaxUnavailable: ptr.To(intstr.FromInt32(1))},
			RevisionHistoryLimit: ptr.To(int32(10)),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{
					Labels:      map[string]string{"app": "pg"},
					Annotations: map[string]string{"example.com/owner": "team-db"},
				},
				Spec: corev1.PodSpec{
					InitContainers: []corev1.Container{{
						Name:         "init",
						Image:        "busybox:1.37",
						VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}},
					}},
					Containers: []corev1.Container{{
						Name:  "pg",
						Image: "postgres:17",
						Ports: []corev1.ContainerPort{{Name: "pg", ContainerPort: 5432, Protocol: corev1.ProtocolTCP}},
						VolumeMounts: []corev1.VolumeMount{
							{Name: "data", MountPath: "/var/lib/postgresql/data"},
							{Name: "config", MountPath: "/etc/postgresql"},
						},
					}},
					Volumes: []corev1.Volume{{
						Name: "config",
						VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
							LocalObjectReference: corev1.LocalObjectReference{Name: "pg-config"},
						}},
					}},
				},
			},
		},
	}
}

// wantErr is one expected error: its type, exact path, and a substring of
// its full message.
type wantErr struct {
	typ  field.ErrorType
	path string
	msg  string
}

// checkErrors requires errs to be exactly want, in any order.
func checkErrors(t *testing.T, errs field.ErrorList, want []wantErr) {
	t.Helper()
	used := make([]bool, len(errs))
	for _, w := range want {
		found := false
		for i, e := range errs {
			if used[i] || e.Type != w.typ || e.Field != w.path || !strings.Contains(e.Error(), w.msg) {
				continue
			}
			used[i], found = true, true
			break
		}
		if !found {
			t.Errorf("missing error %s at %s containing %q", w.typ, w.path, w.msg)
		}
	}
	for i, e := range errs {
		if !used[i] {
			t.Errorf("unexpected error: %v (type %s, path %s)", e, e.Type, e.Field)
		}
	}
}

// useClaimTemplate switches f to claims from a StorageClass.
func useClaimTemplate(f *flock.Flock) {
	f.Spec.Storage.Capacity, f.Spec.Storage.Mode = "", nil
	f.Spec.Storage.ClaimTemplate = &corev1.PersistentVolumeClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"tier": "db"}},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: ptr.To("fast"),
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceStorage: resource.MustParse("5Gi"),
			}},
		},
	}
}

func TestValidateFlockName(t *testing.T) {
	tests := []struct {
		name   string
		value  string
		prefix bool
		want   []string // substrings, one per expected message
	}{
		{name: "short name", value: "pg"},
		{name: "58 characters", value: strings.Repeat("a", 58)},
		{name: "59 characters", value: strings.Repeat("a", 59), want: []string{"must be no more than 58 characters"}},
		{name: "64 characters gives one length message", value: strings.Repeat("a", 64), want: []string{"must be no more than 58 characters"}},
		{name: "upper case", value: "Pg", want: []string{"RFC 1123 label"}},
		{name: "dot", value: "pg.main", want: []string{"must not contain dots"}},
		{name: "trailing dash", value: "pg-", want: []string{"RFC 1123 label"}},
		{name: "prefix with trailing dash", value: "pg-", prefix: true},
		{name: "prefix of 53 characters", value: strings.Repeat("a", 52) + "-", prefix: true},
		{name: "prefix of 54 characters", value: strings.Repeat("a", 53) + "-", prefix: true, want: []string{"must be no more than 53 characters"}},
		{name: "too long and invalid", value: strings.Repeat("A", 60), want: []string{"must be no more than 58 characters", "RFC 1123 label"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := ValidateFlockName(tc.value, tc.prefix)
			if len(got) != len(tc.want) {
				t.Fatalf("got %d messages %q, want %d %q", len(got), got, len(tc.want), tc.want)
			}
			for i, w := range tc.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("message %d is %q, want it to contain %q", i, got[i], w)
				}
			}
		})
	}
}

func TestValidateFlock(t *testing.T) {
	hostAccess := Options{AllowHostAccess: true}
	tests := []struct {
		name   string
		mutate func(f *flock.Flock)
		opts   Options
		want   []wantErr
	}{
		{name: "valid baseline", mutate: func(f *flock.Flock) {}},

		// metadata
		{name: "name missing", mutate: func(f *flock.Flock) { f.Name = "" },
			want: []wantErr{{field.ErrorTypeRequired, "metadata.name", "name or generateName is required"}}},
		{name: "namespace missing", mutate: func(f *flock.Flock) { f.Namespace = "" },
			want: []wantErr{{field.ErrorTypeRequired, "metadata.namespace", "Required value"}}},
		{name: "name not a DNS label", mutate: func(f *flock.Flock) { f.Name, f.Spec.ServiceName = "pg.main", "pg" },
			want: []wantErr{{field.ErrorTypeInvalid, "metadata.name", "must not contain dots"}}},
		{name: "name of 59 characters", mutate: func(f *flock.Flock) { f.Name = strings.Repeat("a", 59) },
			want: []wantErr{{field.ErrorTypeInvalid, "metadata.name", "must be no more than 58 characters"}}},
		{name: "name of 58 characters", mutate: func(f *flock.Flock) { f.Name = strings.Repeat("a", 58) }},
		{name: "generateName too long", mutate: func(f *flock.Flock) { f.GenerateName = strings.Repeat("a", 53) + "-" },
			want: []wantErr{{field.ErrorTypeInvalid, "metadata.generateName", "must be no more than 53 characters"}}},
		{name: "generateName and generated name", mutate: func(f *flock.Flock) {
			f.GenerateName, f.Name, f.Spec.ServiceName = "pg-", "pg-x7k2q", ""
		}},

		// replicas
		{name: "replicas missing", mutate: func(f *flock.Flock) { f.Spec.Replicas = nil },
			want: []wantErr{{field.ErrorTypeRequired, "spec.replicas", "Required value"}}},
		{name: "replicas negative", mutate: func(f *flock.Flock) { f.Spec.Replicas = ptr.To(int32(-1)) },
			want: []wantErr{{field.ErrorTypeInvalid, "spec.replicas", "must be greater than or equal to 0"}}},
		{name: "replicas above 500", mutate: func(f *flock.Flock) { f.Spec.Replicas = ptr.To(int32(501)) },
			want: []wantErr{{field.ErrorTypeInvalid, "spec.replicas", "must be no more than 500: the status records every member, and a larger Flock's status could pass etcd's 1.5 MiB object limit"}}},
		{name: "replicas 500", mutate: func(f *flock.Flock) { f.Spec.Replicas = ptr.To(int32(500)) }},
		{name: "replicas 0", mutate: func(f *flock.Flock) { f.Spec.Replicas = ptr.To(int32(0)) }},

		// selector
		{name: "selector missing", mutate: func(f *flock.Flock) { f.Spec.Selector = nil },
			want: []wantErr{{field.ErrorTypeRequired, "spec.selector", "Required value"}}},
		{name: "selector empty", mutate: func(f *flock.Flock) { f.Spec.Selector = &metav1.LabelSelector{} },
			want: []wantErr{{field.ErrorTypeInvalid, "spec.selector", "empty selector is invalid for a Flock"}}},
		{name: "selector label key invalid", mutate: func(f *flock.Flock) {
			f.Spec.Selector.MatchLabels = map[string]string{"a b": "pg"}
		}, want: []wantErr{{field.ErrorTypeInvalid, "spec.selector.matchLabels", "name part must consist of alphanumeric characters"}}},
		{name: "selector operator invalid", mutate: func(f *flock.Flock) {
			f.Spec.Selector.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: "app", Operator: "Like", Values: []string{"pg"}}}
		}, want: []wantErr{{field.ErrorTypeInvalid, "spec.selector.matchExpressions[0].operator", "not a valid selector operator"}}},
		{name: "selector does not match template labels", mutate: func(f *flock.Flock) {
			f.Spec.Template.Labels = map[string]string{"app": "mysql"}
		}, want: []wantErr{{field.ErrorTypeInvalid, "spec.template.metadata.labels", "`selector` does not match template `labels`"}}},
		{name: "selector with expressions matching the template", mutate: func(f *flock.Flock) {
			f.Spec.Selector.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: "app", Operator: metav1.LabelSelectorOpIn, Values: []string{"pg", "pg2"}}}
		}},

		// serviceName
		{name: "serviceName empty with a name", mutate: func(f *flock.Flock) { f.Spec.ServiceName = "" },
			want: []wantErr{{field.ErrorTypeRequired, "spec.serviceName", "headless Service"}}},
		{name: "serviceName not a DNS label", mutate: func(f *flock.Flock) { f.Spec.ServiceName = "pg.svc" },
			want: []wantErr{{field.ErrorTypeInvalid, "spec.serviceName", "must not contain dots"}}},
		{name: "serviceName upper case", mutate: func(f *flock.Flock) { f.Spec.ServiceName = "PG" },
			want: []wantErr{{field.ErrorTypeInvalid, "spec.serviceName", "RFC 1123 label"}}},
		{name: "serviceName starting with a digit", mutate: func(f *flock.Flock) { f.Spec.ServiceName = "1pg" }},

		// placement
		{name: "nodeSelector key invalid", mutate: func(f *flock.Flock) {
			f.Spec.Placement.NodeSelector = map[string]string{"disk/type/x": "ssd"}
		}, want: []wantErr{{field.ErrorTypeInvalid, "spec.placement.nodeSelector", "a valid label key must consist"}}},
		{name: "nodeSelector value invalid", mutate: func(f *flock.Flock) {
			f.Spec.Placement.NodeSelector = map[string]string{"disk": "local ssd"}
		}, want: []wantErr{{field.ErrorTypeInvalid, "spec.placement.nodeSelector", "valid label"}}},
		{name: "nodes listed twice", mutate: func(f *flock.Flock) { f.Spec.Placement.Nodes = []string{"n-a", "n-b", "n-a"} },
			want: []wantErr{{field.ErrorTypeDuplicate, "spec.placement.nodes[2]", "already listed as nodes[0]"}}},
		{name: "node name invalid", mutate: func(f *flock.Flock) { f.Spec.Placement.Nodes = []string{"n-a", "N_B", "n-c"} },
			want: []wantErr{{field.ErrorTypeInvalid, "spec.placement.nodes[1]", "RFC 1123 subdomain"}}},
		{name: "node name empty", mutate: func(f *flock.Flock) { f.Spec.Placement.Nodes = []string{"", "n-b", "n-c"} },
			want: []wantErr{{field.ErrorTypeRequired, "spec.placement.nodes[0]", "a node name"}}},
		{name: "fewer nodes than replicas", mutate: func(f *flock.Flock) { f.Spec.Placement.Nodes = []string{"n-a", "n-b"} },
			want: []wantErr{{field.ErrorTypeInvalid, "spec.placement.nodes", "must list at least spec.replicas nodes (3), but lists 2"}}},
		{name: "exactly replicas nodes, with dots", mutate: func(f *flock.Flock) {
			f.Spec.Placement.Nodes = []string{"n-a.example.com", "n-b.example.com", "n-c.example.com"}
		}},
		{name: "more nodes than replicas", mutate: func(f *flock.Flock) { f.Spec.Placement.Nodes = []string{"n-a", "n-b", "n-c", "n-d"} }},

		// storage
		{name: "volumeName empty", mutate: func(f *flock.Flock) {
			f.Spec.Storage.VolumeName = ""
			f.Spec.Template.Spec.Containers[0].VolumeMounts = f.Spec.Template.Spec.Containers[0].VolumeMounts[1:]
			f.Spec.Template.Spec.InitContainers[0].VolumeMounts = nil
		}, want: []wantErr{{field.ErrorTypeRequired, "spec.storage.volumeName", "Required value"}}},
		{name: "volumeName not a DNS label", mutate: func(f *flock.Flock) {
			f.Spec.Storage.VolumeName = "Data"
			f.Spec.Template.Spec.Containers[0].VolumeMounts[0].Name = "Data"
			f.Spec.Template.Spec.InitContainers[0].VolumeMounts[0].Name = "Data"
		}, want: []wantErr{{field.ErrorTypeInvalid, "spec.storage.volumeName", "RFC 1123 label"}}},
		{name: "size not a quantity", mutate: func(f *flock.Flock) { f.Spec.Storage.Capacity = "lots" },
			want: []wantErr{{field.ErrorTypeInvalid, "spec.storage.size", "must be a quantity such as 1Gi"}}},
		{name: "size zero", mutate: func(f *flock.Flock) { f.Spec.Storage.Capacity = "0" },
			want: []wantErr{{field.ErrorTypeInvalid, "spec.storage.size", "must be greater than zero"}}},
		{name: "size missing in node mode", mutate: func(f *flock.Flock) { f.Spec.Storage.Capacity = "" },
			want: []wantErr{{field.ErrorTypeRequired, "spec.storage.size", "capacity of each member's PersistentVolume"}}},
		{name: "mode unset is fine", mutate: func(f *flock.Flock) { f.Spec.Storage.Mode = nil }},
		{name: "mode 0700", mutate: func(f *flock.Flock) { f.Spec.Storage.Mode = ptr.To(int32(0o700)) }},
		{name: "mode with setuid bit", mutate: func(f *flock.Flock) { f.Spec.Storage.Mode = ptr.To(int32(0o4770)) },
			want: []wantErr{{field.ErrorTypeInvalid, "spec.storage.mode", "from 0 to 0777"}}},
		{name: "mode negative", mutate: func(f *flock.Flock) { f.Spec.Storage.Mode = ptr.To(int32(-1)) },
			want: []wantErr{{field.ErrorTypeInvalid, "spec.storage.mode", "from 0 to 0777"}}},
		{name: "claim template", mutate: func(f *flock.Flock) { useClaimTemplate(f) }},
		{name: "claim template with the default class", mutate: func(f *flock.Flock) {
			useClaimTemplate(f)
			f.Spec.Storage.ClaimTemplate.Spec.StorageClassName = nil
		}},
		{name: "both modes at once", mutate: func(f *flock.Flock) {
			useClaimTemplate(f)
			f.Spec.Storage.Capacity, f.Spec.Storage.Mode = "1Gi", ptr.To(int32(0o770))
		}, want: []wantErr{
			{field.ErrorTypeForbidden, "spec.storage.size", "may not be set with spec.storage.claimTemplate"},
			{field.ErrorTypeForbidden, "spec.storage.mode", "may not be set with spec.storage.claimTemplate"},
		}},
		{name: "claim template without size or access modes", mutate: func(f *flock.Flock) {
			useClaimTemplate(f)
			f.Spec.Storage.ClaimTemplate.Spec.AccessModes = nil
			f.Spec.Storage.ClaimTemplate.Spec.Resources.Requests = nil
		}, want: []wantErr{
			{field.ErrorTypeRequired, "spec.storage.claimTemplate.spec.accessModes", "at least one access mode"},
			{field.ErrorTypeRequired, "spec.storage.claimTemplate.spec.resources.requests[storage]", "size of each member's volume"},
		}},
		{name: "claim template with empty class, a volume and a name", mutate: func(f *flock.Flock) {
			useClaimTemplate(f)
			f.Spec.Storage.ClaimTemplate.Name = "data"
			f.Spec.Storage.ClaimTemplate.Spec.StorageClassName = ptr.To("")
			f.Spec.Storage.ClaimTemplate.Spec.VolumeName = "pv-1"
		}, want: []wantErr{
			{field.ErrorTypeForbidden, "spec.storage.claimTemplate.metadata.name", "<spec.storage.volumeName>-<flock>-<ordinal>"},
			{field.ErrorTypeForbidden, "spec.storage.claimTemplate.spec.volumeName", "cannot name one"},
			{field.ErrorTypeInvalid, "spec.storage.claimTemplate.spec.storageClassName", "must name a StorageClass"},
		}},
		{name: "retention whenDeleted unknown", mutate: func(f *flock.Flock) { f.Spec.Storage.Retention.WhenDeleted = "Keep" },
			want: []wantErr{{field.ErrorTypeNotSupported, "spec.storage.retention.whenDeleted", `supported values: "Retain", "Delete"`}}},
		{name: "retention whenScaled unknown", mutate: func(f *flock.Flock) { f.Spec.Storage.Retention.WhenScaled = "retain" },
			want: []wantErr{{field.ErrorTypeNotSupported, "spec.storage.retention.whenScaled", `supported values: "Retain", "Delete"`}}},
		{name: "retention whenScaled empty", mutate: func(f *flock.Flock) { f.Spec.Storage.Retention.WhenScaled = "" },
			want: []wantErr{{field.ErrorTypeRequired, "spec.storage.retention.whenScaled", "Required value"}}},
		{name: "retention Delete", mutate: func(f *flock.Flock) {
			f.Spec.Storage.Retention = flock.RetentionPolicy{WhenDeleted: flock.DeleteRetentionPolicy, WhenScaled: flock.DeleteRetentionPolicy}
		}},

		// podManagementPolicy
		{name: "podManagementPolicy unknown", mutate: func(f *flock.Flock) { f.Spec.PodManagementPolicy = "Serial" },
			want: []wantErr{{field.ErrorTypeNotSupported, "spec.podManagementPolicy", `supported values: "OrderedReady", "Parallel"`}}},
		{name: "podManagementPolicy Parallel", mutate: func(f *flock.Flock) { f.Spec.PodManagementPolicy = flock.ParallelPodManagement }},

		// updateStrategy
		{name: "updateStrategy type unknown", mutate: func(f *flock.Flock) { f.Spec.UpdateStrategy.Type = "Recreate" },
			want: []wantErr{{field.ErrorTypeNotSupported, "spec.updateStrategy.type", `supported values: "RollingUpdate", "OnDelete"`}}},
		{name: "rollingUpdate with OnDelete", mutate: func(f *flock.Flock) { f.Spec.UpdateStrategy.Type = flock.OnDeleteFlockStrategyType },
			want: []wantErr{{field.ErrorTypeForbidden, "spec.updateStrategy.rollingUpdate", "may only be set when updateStrategy.type is 'RollingUpdate'"}}},
		{name: "OnDelete alone", mutate: func(f *flock.Flock) {
			f.Spec.UpdateStrategy = flock.FlockUpdateStrategy{Type: flock.OnDeleteFlockStrategyType}
		}},
		{name: "partition negative", mutate: func(f *flock.Flock) { f.Spec.UpdateStrategy.RollingUpdate.Partition = ptr.To(int32(-1)) },
			want: []wantErr{{field.ErrorTypeInvalid, "spec.updateStrategy.rollingUpdate.partition", "must be greater than or equal to 0"}}},
		{name: "partition above replicas (no member is updated, as for StatefulSets)", mutate: func(f *flock.Flock) { f.Spec.UpdateStrategy.RollingUpdate.Partition = ptr.To(int32(4)) }},
		{name: "partition equal to replicas", mutate: func(f *flock.Flock) { f.Spec.UpdateStrategy.RollingUpdate.Partition = ptr.To(int32(3)) }},
		{name: "maxUnavailable 0", mutate: func(f *flock.Flock) { f.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable = ptr.To(intstr.FromInt32(0)) },
			want: []wantErr{{field.ErrorTypeInvalid, "spec.updateStrategy.rollingUpdate.maxUnavailable", "must be at least 1"}}},
		{name: "maxUnavailable 0%", mutate: func(f *flock.Flock) {
			f.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable = ptr.To(intstr.FromString("0%"))
		},
			want: []wantErr{{field.ErrorTypeInvalid, "spec.updateStrategy.rollingUpdate.maxUnavailable", "must be a percentage from 1% to 100%"}}},
		{name: "maxUnavailable 101%", mutate: func(f *flock.Flock) {
			f.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable = ptr.To(intstr.FromString("101%"))
		},
			want: []wantErr{{field.ErrorTypeInvalid, "spec.updateStrategy.rollingUpdate.maxUnavailable", "must be a percentage from 1% to 100%"}}},
		{name: "maxUnavailable number as string", mutate: func(f *flock.Flock) {
			f.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable = ptr.To(intstr.FromString("2"))
		},
			want: []wantErr{{field.ErrorTypeInvalid, "spec.updateStrategy.rollingUpdate.maxUnavailable", "must be an integer or a percentage"}}},
		{name: "maxUnavailable word", mutate: func(f *flock.Flock) {
			f.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable = ptr.To(intstr.FromString("half"))
		},
			want: []wantErr{{field.ErrorTypeInvalid, "spec.updateStrategy.rollingUpdate.maxUnavailable", "must be an integer or a percentage"}}},
		{name: "maxUnavailable 100%", mutate: func(f *flock.Flock) {
			f.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable = ptr.To(intstr.FromString("100%"))
		}},
		{name: "maxUnavailable 1%", mutate: func(f *flock.Flock) {
			f.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable = ptr.To(intstr.FromString("1%"))
		}},
		{name: "maxUnavailable 5", mutate: func(f *flock.Flock) { f.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable = ptr.To(intstr.FromInt32(5)) }},

		// minReadySeconds, revisionHistoryLimit
		{name: "minReadySeconds negative", mutate: func(f *flock.Flock) { f.Spec.MinReadySeconds = -1 },
			want: []wantErr{{field.ErrorTypeInvalid, "spec.minReadySeconds", "must be greater than or equal to 0"}}},
		{name: "revisionHistoryLimit negative", mutate: func(f *flock.Flock) { f.Spec.RevisionHistoryLimit = ptr.To(int32(-1)) },
			want: []wantErr{{field.ErrorTypeInvalid, "spec.revisionHistoryLimit", "must be greater than or equal to 0"}}},
		{name: "revisionHistoryLimit 0", mutate: func(f *flock.Flock) { f.Spec.RevisionHistoryLimit = ptr.To(int32(0)) }},

		// disruptionBudget
		{name: "disruptionBudget policy unknown", mutate: func(f *flock.Flock) { f.Spec.DisruptionBudget.Policy = "Sometimes" },
			want: []wantErr{{field.ErrorTypeNotSupported, "spec.disruptionBudget.policy", `supported values: "Managed", "None"`}}},
		{name: "disruptionBudget maxUnavailable 0", mutate: func(f *flock.Flock) { f.Spec.DisruptionBudget.MaxUnavailable = ptr.To(intstr.FromInt32(0)) },
			want: []wantErr{{field.ErrorTypeInvalid, "spec.disruptionBudget.maxUnavailable", "must be at least 1"}}},
		{name: "disruptionBudget maxUnavailable 200%", mutate: func(f *flock.Flock) { f.Spec.DisruptionBudget.MaxUnavailable = ptr.To(intstr.FromString("200%")) },
			want: []wantErr{{field.ErrorTypeInvalid, "spec.disruptionBudget.maxUnavailable", "must be a percentage from 1% to 100%"}}},
		{name: "disruptionBudget None with maxUnavailable", mutate: func(f *flock.Flock) { f.Spec.DisruptionBudget.Policy = flock.NoDisruptionBudget },
			want: []wantErr{{field.ErrorTypeForbidden, "spec.disruptionBudget.maxUnavailable", "may only be set when policy is 'Managed'"}}},
		{name: "disruptionBudget None", mutate: func(f *flock.Flock) {
			f.Spec.DisruptionBudget = flock.FlockDisruptionBudget{Policy: flock.NoDisruptionBudget}
		}},
		{name: "disruptionBudget 50%", mutate: func(f *flock.Flock) { f.Spec.DisruptionBudget.MaxUnavailable = ptr.To(intstr.FromString("50%")) }},

		// memberRecovery
		{name: "memberRecovery policy unknown", mutate: func(f *flock.Flock) { f.Spec.MemberRecovery.Policy = "Move" },
			want: []wantErr{{field.ErrorTypeNotSupported, "spec.memberRecovery.policy", `supported values: "Wait", "Reassign"`}}},
		{name: "Reassign without afterSeconds", mutate: func(f *flock.Flock) { f.Spec.MemberRecovery.Policy = flock.ReassignMemberRecovery },
			want: []wantErr{{field.ErrorTypeRequired, "spec.memberRecovery.afterSeconds", "required when policy is 'Reassign'"}}},
		{name: "Reassign with afterSeconds 0", mutate: func(f *flock.Flock) {
			f.Spec.MemberRecovery = flock.MemberRecovery{Policy: flock.ReassignMemberRecovery, AfterSeconds: ptr.To(int32(0))}
		}, want: []wantErr{{field.ErrorTypeInvalid, "spec.memberRecovery.afterSeconds", "must be greater than 0"}}},
		{name: "Wait with afterSeconds", mutate: func(f *flock.Flock) { f.Spec.MemberRecovery.AfterSeconds = ptr.To(int32(60)) },
			want: []wantErr{{field.ErrorTypeForbidden, "spec.memberRecovery.afterSeconds", "may only be set when policy is 'Reassign'"}}},
		{name: "Reassign after 300 seconds", mutate: func(f *flock.Flock) {
			f.Spec.MemberRecovery = flock.MemberRecovery{Policy: flock.ReassignMemberRecovery, AfterSeconds: ptr.To(int32(300))}
		}},

		// template metadata
		{name: "template annotation key invalid", mutate: func(f *flock.Flock) { f.Spec.Template.Annotations = map[string]string{"a b": "x"} },
			want: []wantErr{{field.ErrorTypeInvalid, "spec.template.metadata.annotations", "name part must consist"}}},
		{name: "template label value invalid", mutate: func(f *flock.Flock) { f.Spec.Template.Labels["tier"] = "a b" },
			want: []wantErr{{field.ErrorTypeInvalid, "spec.template.metadata.labels", "valid label"}}},

		// containers
		{name: "no containers", mutate: func(f *flock.Flock) { f.Spec.Template.Spec.Containers = nil },
			want: []wantErr{{field.ErrorTypeRequired, "spec.template.spec.containers", "at least one container is required"}}},
		{name: "container name empty", mutate: func(f *flock.Flock) { f.Spec.Template.Spec.Containers[0].Name = "" },
			want: []wantErr{{field.ErrorTypeRequired, "spec.template.spec.containers[0].name", "Required value"}}},
		{name: "container name not a DNS label", mutate: func(f *flock.Flock) { f.Spec.Template.Spec.Containers[0].Name = "Postgres" },
			want: []wantErr{{field.ErrorTypeInvalid, "spec.template.spec.containers[0].name", "RFC 1123 label"}}},
		{name: "container names not unique", mutate: func(f *flock.Flock) {
			c := f.Spec.Template.Spec.Containers[0]
			c.VolumeMounts = nil
			f.Spec.Template.Spec.Containers = append(f.Spec.Template.Spec.Containers, c)
		}, want: []wantErr{{field.ErrorTypeDuplicate, "spec.template.spec.containers[1].name", "already the name of spec.template.spec.containers[0].name"}}},
		{name: "container named like an init container", mutate: func(f *flock.Flock) { f.Spec.Template.Spec.Containers[0].Name = "init" },
			want: []wantErr{{field.ErrorTypeDuplicate, "spec.template.spec.containers[0].name", "already the name of spec.template.spec.initContainers[0].name"}}},
		{name: "init container name invalid", mutate: func(f *flock.Flock) { f.Spec.Template.Spec.InitContainers[0].Name = "init_1" },
			want: []wantErr{{field.ErrorTypeInvalid, "spec.template.spec.initContainers[0].name", "RFC 1123 label"}}},
		{name: "image missing", mutate: func(f *flock.Flock) { f.Spec.Template.Spec.Containers[0].Image = "" },
			want: []wantErr{{field.ErrorTypeRequired, "spec.template.spec.containers[0].image", "Required value"}}},
		{name: "init container image missing", mutate: func(f *flock.Flock) { f.Spec.Template.Spec.InitContainers[0].Image = "" },
			want: []wantErr{{field.ErrorTypeRequired, "spec.template.spec.initContainers[0].image", "Required value"}}},
		{name: "image with spaces", mutate: func(f *flock.Flock) { f.Spec.Template.Spec.Containers[0].Image = " postgres:17" },
			want: []wantErr{{field.ErrorTypeInvalid, "spec.template.spec.containers[0].image", "must not have leading or trailing whitespace"}}},
		{name: "ephemeral containers", mutate: func(f *flock.Flock) {
			f.Spec.Template.Spec.EphemeralContainers = []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "debug", Image: "busybox"}}}
		}, want: []wantErr{{field.ErrorTypeForbidden, "spec.template.spec.ephemeralContainers", "cannot be set in a pod template"}}},

		// pod spec
		{name: "nodeName set", mutate: func(f *flock.Flock) { f.Spec.Template.Spec.NodeName = "n-a" },
			want: []wantErr{{field.ErrorTypeForbidden, "spec.template.spec.nodeName", "use spec.placement"}}},
		{name: "restartPolicy OnFailure", mutate: func(f *flock.Flock) { f.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyOnFailure },
			want: []wantErr{{field.ErrorTypeNotSupported, "spec.template.spec.restartPolicy", `supported values: "Always"`}}},
		{name: "restartPolicy Always", mutate: func(f *flock.Flock) { f.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyAlways }},
		{name: "activeDeadlineSeconds set", mutate: func(f *flock.Flock) { f.Spec.Template.Spec.ActiveDeadlineSeconds = ptr.To(int64(60)) },
			want: []wantErr{{field.ErrorTypeForbidden, "spec.template.spec.activeDeadlineSeconds", "members run until they are removed"}}},

		// security
		{name: "hostNetwork", mutate: func(f *flock.Flock) { f.Spec.Template.Spec.HostNetwork = true },
			want: []wantErr{{field.ErrorTypeForbidden, "spec.template.spec.hostNetwork", "members use the pod network"}}},
		{name: "hostPID", mutate: func(f *flock.Flock) { f.Spec.Template.Spec.HostPID = true },
			want: []wantErr{{field.ErrorTypeForbidden, "spec.template.spec.hostPID", "host access allowed"}}},
		{name: "hostIPC", mutate: func(f *flock.Flock) { f.Spec.Template.Spec.HostIPC = true },
			want: []wantErr{{field.ErrorTypeForbidden, "spec.template.spec.hostIPC", "host access allowed"}}},
		{name: "hostPath volume", mutate: func(f *flock.Flock) {
			f.Spec.Template.Spec.Volumes = append(f.Spec.Template.Spec.Volumes, hostPathVolume("logs", "/var/log"))
		},
			want: []wantErr{{field.ErrorTypeForbidden, "spec.template.spec.volumes[1].hostPath", "hostPath volumes are not allowed"}}},
		{name: "hostPort", mutate: func(f *flock.Flock) { f.Spec.Template.Spec.Containers[0].Ports[0].HostPort = 5432 },
			want: []wantErr{{field.ErrorTypeForbidden, "spec.template.spec.containers[0].ports[0].hostPort", "host ports are not allowed"}}},
		{name: "init container hostPort", mutate: func(f *flock.Flock) {
			f.Spec.Template.Spec.InitContainers[0].Ports = []corev1.ContainerPort{{ContainerPort: 80, HostPort: 80, Protocol: corev1.ProtocolTCP}}
		}, want: []wantErr{{field.ErrorTypeForbidden, "spec.template.spec.initContainers[0].ports[0].hostPort", "host ports are not allowed"}}},
		{name: "host access allowed by the server", opts: hostAccess, mutate: func(f *flock.Flock) {
			ps := &f.Spec.Template.Spec
			ps.HostNetwork, ps.HostPID, ps.HostIPC = true, true, true
			ps.Volumes = append(ps.Volumes, hostPathVolume("logs", "/var/log"))
			ps.Containers[0].Ports[0].HostPort = 5432
		}},

		// volumes and mounts
		{name: "volume named like the data volume", mutate: func(f *flock.Flock) {
			f.Spec.Template.Spec.Volumes = append(f.Spec.Template.Spec.Volumes, corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
		}, want: []wantErr{{field.ErrorTypeInvalid, "spec.template.spec.volumes[1].name", "must not be spec.storage.volumeName"}}},
		{name: "hostPath volume named like the data volume, host access allowed", opts: hostAccess, mutate: func(f *flock.Flock) {
			f.Spec.Template.Spec.Volumes = append(f.Spec.Template.Spec.Volumes, hostPathVolume("data", "/srv/pg"))
		}, want: []wantErr{{field.ErrorTypeInvalid, "spec.template.spec.volumes[1].name", "must not be spec.storage.volumeName"}}},
		{name: "volume names not unique", mutate: func(f *flock.Flock) {
			f.Spec.Template.Spec.Volumes = append(f.Spec.Template.Spec.Volumes, corev1.Volume{Name: "config", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
		}, want: []wantErr{{field.ErrorTypeDuplicate, "spec.template.spec.volumes[1].name", "already the name of volumes[0]"}}},
		{name: "volume name invalid", mutate: func(f *flock.Flock) {
			f.Spec.Template.Spec.Volumes = append(f.Spec.Template.Spec.Volumes, corev1.Volume{Name: "Cache", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
		}, want: []wantErr{{field.ErrorTypeInvalid, "spec.template.spec.volumes[1].name", "RFC 1123 label"}}},
		{name: "volume name empty", mutate: func(f *flock.Flock) {
			f.Spec.Template.Spec.Volumes = append(f.Spec.Template.Spec.Volumes, corev1.Volume{VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
		}, want: []wantErr{{field.ErrorTypeRequired, "spec.template.spec.volumes[1].name", "Required value"}}},
		{name: "mount of an unknown volume", mutate: func(f *flock.Flock) {
			c := &f.Spec.Template.Spec.Containers[0]
			c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "cache", MountPath: "/cache"})
		}, want: []wantErr{{field.ErrorTypeNotFound, "spec.template.spec.containers[0].volumeMounts[2].name",
			"must be the name of a volume in spec.template.spec.volumes or spec.storage.volumeName"}}},
		{name: "init container mount of an unknown volume", mutate: func(f *flock.Flock) {
			f.Spec.Template.Spec.InitContainers[0].VolumeMounts[0].Name = "scratch"
		}, want: []wantErr{{field.ErrorTypeNotFound, "spec.template.spec.initContainers[0].volumeMounts[0].name", `Not found: "scratch"`}}},
		{name: "mount of the data volume under another volumeName", mutate: func(f *flock.Flock) {
			f.Spec.Storage.VolumeName = "store"
		}, want: []wantErr{
			{field.ErrorTypeNotFound, "spec.template.spec.initContainers[0].volumeMounts[0].name", `Not found: "data"`},
			{field.ErrorTypeNotFound, "spec.template.spec.containers[0].volumeMounts[0].name", `Not found: "data"`},
		}},

		// reserved label keys and template metadata
		{name: "reserved keys in selector and template labels, one error per key", mutate: func(f *flock.Flock) {
			for _, k := range []string{"flock.dev/name", "controller-revision-hash"} {
				f.Spec.Selector.MatchLabels[k] = "other"
				f.Spec.Template.Labels[k] = "other"
			}
			f.Spec.Selector.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: "flock.dev/ordinal", Operator: metav1.LabelSelectorOpDoesNotExist}}
			f.Spec.Template.Labels["flock.dev/anything"] = "x"
		}, want: []wantErr{
			{field.ErrorTypeInvalid, "spec.selector.matchLabels[flock.dev/name]", "reserved"},
			{field.ErrorTypeInvalid, "spec.selector.matchLabels[controller-revision-hash]", "reserved"},
			{field.ErrorTypeInvalid, "spec.selector.matchExpressions[0].key", "reserved"},
			{field.ErrorTypeInvalid, "spec.template.metadata.labels[flock.dev/name]", "reserved"},
			{field.ErrorTypeInvalid, "spec.template.metadata.labels[controller-revision-hash]", "reserved"},
			{field.ErrorTypeInvalid, "spec.template.metadata.labels[flock.dev/anything]", "reserved"},
		}},
		{name: "a key merely containing flock.dev is not reserved", mutate: func(f *flock.Flock) {
			f.Spec.Template.Labels["example.com/flock.dev"] = "x"
			f.Spec.Template.Labels["sub.flock.dev/x"] = "x"
		}},
		{name: "template metadata beyond labels and annotations", mutate: func(f *flock.Flock) {
			m := &f.Spec.Template.ObjectMeta
			m.Name, m.GenerateName, m.Namespace = "x", "x-", "other"
			m.Finalizers = []string{"example.com/keep"}
			m.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "c", UID: "u"}}
		}, want: []wantErr{
			{field.ErrorTypeForbidden, "spec.template.metadata.name", "only labels and annotations"},
			{field.ErrorTypeForbidden, "spec.template.metadata.generateName", "only labels and annotations"},
			{field.ErrorTypeForbidden, "spec.template.metadata.namespace", "only labels and annotations"},
			{field.ErrorTypeForbidden, "spec.template.metadata.finalizers", "only labels and annotations"},
			{field.ErrorTypeForbidden, "spec.template.metadata.ownerReferences", "only labels and annotations"},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := validFlock()
			tc.mutate(f)
			checkErrors(t, ValidateFlock(f, tc.opts), tc.want)
		})
	}
}

func hostPathVolume(name, path string) corev1.Volume {
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: path}}}
}

// TestDefaultedFlockIsValid checks that the smallest v1alpha1 Flock a user can
// write becomes, through the scheme's defaulting and conversion, an internal
// Flock that passes validation: the defaults and the rules agree.
func TestDefaultedFlockIsValid(t *testing.T) {
	minimal := func(name, generateName string) *v1alpha1.Flock {
		return &v1alpha1.Flock{
			ObjectMeta: metav1.ObjectMeta{Name: name, GenerateName: generateName, Namespace: "db"},
			Spec: v1alpha1.FlockSpec{
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "pg"}},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "pg"}},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{
						Name:         "pg",
						Image:        "postgres:17",
						VolumeMounts: []corev1.VolumeMount{{Name: v1alpha1.DefaultVolumeName, MountPath: "/data"}},
					}}},
				},
			},
		}
	}
	for _, tc := range []struct {
		name            string
		in              *v1alpha1.Flock
		wantServiceName string
	}{
		{name: "named", in: minimal("pg", ""), wantServiceName: "pg"},
		// The registry fills serviceName once the name is generated.
		{name: "generated name", in: minimal("pg-x7k2q", "pg-"), wantServiceName: "pg-x7k2q"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			testScheme.Default(tc.in)
			out := &flock.Flock{}
			if err := testScheme.Convert(tc.in, out, nil); err != nil {
				t.Fatalf("convert: %v", err)
			}
			if out.Spec.ServiceName != tc.wantServiceName {
				t.Errorf("serviceName = %q, want %q", out.Spec.ServiceName, tc.wantServiceName)
			}
			checkErrors(t, ValidateFlock(out, Options{}), nil)
		})
	}
}

func TestValidateFlockUpdate(t *testing.T) {
	withOld := func(mutate func(f *flock.Flock)) func(f *flock.Flock) { return mutate }
	tests := []struct {
		name      string
		mutateOld func(f *flock.Flock)
		mutate    func(f *flock.Flock)
		opts      Options
		want      []wantErr
	}{
		{name: "no change", mutate: func(f *flock.Flock) {}},
		{name: "mutable fields change", mutate: func(f *flock.Flock) {
			f.Labels = map[string]string{"team": "db"}
			f.Spec.Replicas = ptr.To(int32(5))
			f.Spec.Placement = flock.FlockPlacement{Nodes: []string{"n-a", "n-b", "n-c", "n-d", "n-e"}}
			f.Spec.Storage.Retention.WhenScaled = flock.DeleteRetentionPolicy
			f.Spec.UpdateStrategy = flock.FlockUpdateStrategy{Type: flock.OnDeleteFlockStrategyType}
			f.Spec.MinReadySeconds = 10
			f.Spec.MemberRecovery = flock.MemberRecovery{Policy: flock.ReassignMemberRecovery, AfterSeconds: ptr.To(int32(600))}
			f.Spec.RevisionHistoryLimit = ptr.To(int32(3))
			f.Spec.Template.Spec.Containers[0].Image = "postgres:18"
		}},
		{name: "selector changes", mutate: func(f *flock.Flock) {
			f.Spec.Selector.MatchLabels["tier"] = "db"
			f.Spec.Template.Labels["tier"] = "db"
		}, want: []wantErr{{field.ErrorTypeInvalid, "spec.selector", "field is immutable"}}},
		{name: "serviceName changes", mutate: func(f *flock.Flock) { f.Spec.ServiceName = "pg-headless" },
			want: []wantErr{{field.ErrorTypeInvalid, "spec.serviceName", "field is immutable"}}},
		{name: "volumeName changes", mutate: func(f *flock.Flock) {
			f.Spec.Storage.VolumeName = "store"
			f.Spec.Template.Spec.Containers[0].VolumeMounts[0].Name = "store"
			f.Spec.Template.Spec.InitContainers[0].VolumeMounts[0].Name = "store"
		}, want: []wantErr{{field.ErrorTypeInvalid, "spec.storage.volumeName", "field is immutable"}}},
		{name: "size changes", mutate: func(f *flock.Flock) { f.Spec.Storage.Capacity = "2Gi" },
			want: []wantErr{{field.ErrorTypeInvalid, "spec.storage.size", "field is immutable"}}},
		{name: "mode changes", mutate: func(f *flock.Flock) { f.Spec.Storage.Mode = ptr.To(int32(0o750)) }},
		{name: "claimTemplate added", mutate: func(f *flock.Flock) { useClaimTemplate(f) }, want: []wantErr{
			{field.ErrorTypeInvalid, "spec.storage.size", "field is immutable"},
			{field.ErrorTypeInvalid, "spec.storage.claimTemplate", "field is immutable"},
		}},
		{name: "podManagementPolicy changes", mutate: func(f *flock.Flock) { f.Spec.PodManagementPolicy = flock.ParallelPodManagement },
			want: []wantErr{{field.ErrorTypeInvalid, "spec.podManagementPolicy", "field is immutable"}}},
		{name: "name changes", mutate: func(f *flock.Flock) { f.Name = "pg2" },
			want: []wantErr{{field.ErrorTypeInvalid, "metadata.name", "field is immutable"}}},
		{name: "resourceVersion missing", mutate: func(f *flock.Flock) { f.ResourceVersion = "" },
			want: []wantErr{{field.ErrorTypeInvalid, "metadata.resourceVersion", "must be specified for an update"}}},
		{name: "new spec is validated", mutate: func(f *flock.Flock) { f.Spec.Replicas = ptr.To(int32(-1)) },
			want: []wantErr{{field.ErrorTypeInvalid, "spec.replicas", "must be greater than or equal to 0"}}},
		{name: "name is not validated again", mutateOld: withOld(func(f *flock.Flock) { f.Name = strings.Repeat("a", 60) }),
			mutate: func(f *flock.Flock) { f.Spec.Replicas = ptr.To(int32(2)) }},

		// host access: kept if the old template had it, never added
		{name: "hostNetwork added", mutate: func(f *flock.Flock) { f.Spec.Template.Spec.HostNetwork = true },
			want: []wantErr{{field.ErrorTypeForbidden, "spec.template.spec.hostNetwork", "not allowed"}}},
		{name: "hostNetwork kept", mutateOld: func(f *flock.Flock) { f.Spec.Template.Spec.HostNetwork = true },
			mutate: func(f *flock.Flock) { f.Spec.Replicas = ptr.To(int32(1)) }},
		{name: "hostNetwork kept, hostPID added", mutateOld: func(f *flock.Flock) { f.Spec.Template.Spec.HostNetwork = true },
			mutate: func(f *flock.Flock) { f.Spec.Template.Spec.HostPID = true },
			want:   []wantErr{{field.ErrorTypeForbidden, "spec.template.spec.hostPID", "not allowed"}}},
		{name: "hostPath volume kept", mutateOld: func(f *flock.Flock) {
			f.Spec.Template.Spec.Volumes = append(f.Spec.Template.Spec.Volumes, hostPathVolume("logs", "/var/log"))
		}, mutate: func(f *flock.Flock) { f.Spec.Template.Spec.Containers[0].Image = "postgres:18" }},
		{name: "hostPath volume path changed", mutateOld: func(f *flock.Flock) {
			f.Spec.Template.Spec.Volumes = append(f.Spec.Template.Spec.Volumes, hostPathVolume("logs", "/var/log"))
		}, mutate: func(f *flock.Flock) { f.Spec.Template.Spec.Volumes[1].HostPath.Path = "/" },
			want: []wantErr{{field.ErrorTypeForbidden, "spec.template.spec.volumes[1].hostPath", "hostPath volumes are not allowed"}}},
		{name: "hostPort kept", mutateOld: func(f *flock.Flock) { f.Spec.Template.Spec.Containers[0].Ports[0].HostPort = 5432 },
			mutate: func(f *flock.Flock) { f.Spec.Template.Spec.Containers[0].Image = "postgres:18" }},
		{name: "hostPort changed", mutateOld: func(f *flock.Flock) { f.Spec.Template.Spec.Containers[0].Ports[0].HostPort = 5432 },
			mutate: func(f *flock.Flock) { f.Spec.Template.Spec.Containers[0].Ports[0].HostPort = 22 },
			want:   []wantErr{{field.ErrorTypeForbidden, "spec.template.spec.containers[0].ports[0].hostPort", "host ports are not allowed"}}},
		{name: "hostNetwork added, host access allowed", opts: Options{AllowHostAccess: true},
			mutate: func(f *flock.Flock) { f.Spec.Template.Spec.HostNetwork = true }},

		// reserved keys and template metadata: kept if stored before the rule, never added
		{name: "reserved selector key kept", mutateOld: func(f *flock.Flock) {
			f.Spec.Selector.MatchLabels["flock.dev/name"] = "pg"
			f.Spec.Template.Labels["flock.dev/name"] = "pg"
		}, mutate: func(f *flock.Flock) { f.Spec.Replicas = ptr.To(int32(4)) }},
		{name: "reserved template label added", mutate: func(f *flock.Flock) { f.Spec.Template.Labels["flock.dev/node"] = "n1" },
			want: []wantErr{{field.ErrorTypeInvalid, "spec.template.metadata.labels[flock.dev/node]", "reserved"}}},
		{name: "template finalizers kept", mutateOld: func(f *flock.Flock) { f.Spec.Template.Finalizers = []string{"example.com/keep"} },
			mutate: func(f *flock.Flock) { f.Spec.Replicas = ptr.To(int32(4)) }},
		{name: "template finalizers changed", mutateOld: func(f *flock.Flock) { f.Spec.Template.Finalizers = []string{"example.com/keep"} },
			mutate: func(f *flock.Flock) { f.Spec.Template.Finalizers = []string{"example.com/other"} },
			want:   []wantErr{{field.ErrorTypeForbidden, "spec.template.metadata.finalizers", "only labels and annotations"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			old := validFlock()
			old.ResourceVersion = "7"
			if tc.mutateOld != nil {
				tc.mutateOld(old)
			}
			f := old.DeepCopy()
			tc.mutate(f)
			checkErrors(t, ValidateFlockUpdate(f, old, tc.opts), tc.want)
		})
	}
}

// withStatus is validFlock with a consistent status of three ready members.
func withStatus() *flock.Flock {
	f := validFlock()
	f.ResourceVersion = "7"
	f.Generation = 2
	f.Status = flock.FlockStatus{
		ObservedGeneration: 2,
		Replicas:           3,
		ReadyReplicas:      3,
		AvailableReplicas:  3,
		CurrentReplicas:    3,
		UpdatedReplicas:    3,
		CurrentRevision:    "pg-6d4f",
		UpdateRevision:     "pg-6d4f",
		Selector:           "app=pg",
		Members: []flock.FlockMember{
			{Ordinal: 0, Node: "n-a", Pod: "pg-0", Hostname: "pg-0.pg.db.svc.cluster.local", Ready: true},
			{Ordinal: 1, Node: "n-b", Pod: "pg-1", Hostname: "pg-1.pg.db.svc.cluster.local", Ready: true},
			{Ordinal: 2, Node: "n-c", Pod: "pg-2", Hostname: "pg-2.pg.db.svc.cluster.local", Ready: true},
		},
		Conditions: []metav1.Condition{{
			Type:               flock.FlockAvailable,
			Status:             metav1.ConditionTrue,
			Reason:             "MembersAvailable",
			Message:            "3 of 3 members are available",
			LastTransitionTime: metav1.Unix(1700000000, 0),
			ObservedGeneration: 2,
		}},
	}
	return f
}

func TestValidateFlockStatusUpdate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(f *flock.Flock)
		want   []wantErr
	}{
		{name: "valid status", mutate: func(f *flock.Flock) {}},
		{name: "member without pod yet, not ready", mutate: func(f *flock.Flock) {
			f.Status.Members[2] = flock.FlockMember{Ordinal: 2, Node: "n-c", Message: "waiting for node n-c, which is NotReady"}
			f.Status.ReadyReplicas, f.Status.AvailableReplicas = 2, 2
		}},
		{name: "members in any order", mutate: func(f *flock.Flock) {
			m := f.Status.Members
			m[0], m[2] = m[2], m[0]
		}},
		{name: "replicas negative", mutate: func(f *flock.Flock) {
			f.Status = flock.FlockStatus{Replicas: -1}
		}, want: []wantErr{{field.ErrorTypeInvalid, "status.replicas", "must be greater than or equal to 0"}}},
		{name: "observedGeneration negative", mutate: func(f *flock.Flock) { f.Status.ObservedGeneration = -1 },
			want: []wantErr{{field.ErrorTypeInvalid, "status.observedGeneration", "must be greater than or equal to 0"}}},
		{name: "readyReplicas negative", mutate: func(f *flock.Flock) { f.Status.ReadyReplicas, f.Status.AvailableReplicas = -1, 0 },
			want: []wantErr{{field.ErrorTypeInvalid, "status.readyReplicas", "must be greater than or equal to 0"}}},
		{name: "updatedReplicas negative", mutate: func(f *flock.Flock) { f.Status.UpdatedReplicas = -2 },
			want: []wantErr{{field.ErrorTypeInvalid, "status.updatedReplicas", "must be greater than or equal to 0"}}},
		{name: "readyReplicas above replicas", mutate: func(f *flock.Flock) {
			f.Status.Replicas = 2
			f.Status.CurrentReplicas = 2
			f.Status.UpdatedReplicas = 2
			f.Status.AvailableReplicas = 2
		},
			want: []wantErr{{field.ErrorTypeInvalid, "status.readyReplicas", "must be no more than status.replicas"}}},
		{name: "currentReplicas above replicas", mutate: func(f *flock.Flock) { f.Status.CurrentReplicas = 4 },
			want: []wantErr{{field.ErrorTypeInvalid, "status.currentReplicas", "must be no more than status.replicas"}}},
		{name: "availableReplicas above readyReplicas", mutate: func(f *flock.Flock) { f.Status.ReadyReplicas = 2 },
			want: []wantErr{{field.ErrorTypeInvalid, "status.availableReplicas", "must be no more than status.readyReplicas"}}},
		{name: "selector unparsable", mutate: func(f *flock.Flock) { f.Status.Selector = "app in (pg" },
			want: []wantErr{{field.ErrorTypeInvalid, "status.selector", "app in (pg"}}},
		{name: "ordinal negative", mutate: func(f *flock.Flock) { f.Status.Members[0].Ordinal, f.Status.Members[0].Pod = -1, "" },
			want: []wantErr{{field.ErrorTypeInvalid, "status.members[0].ordinal", "must be greater than or equal to 0"}}},
		{name: "ordinal too large", mutate: func(f *flock.Flock) { f.Status.Members[0].Ordinal, f.Status.Members[0].Pod = 500, "" },
			want: []wantErr{{field.ErrorTypeInvalid, "status.members[0].ordinal", "must be less than 500"}}},
		{name: "ordinal twice", mutate: func(f *flock.Flock) { f.Status.Members[2].Ordinal, f.Status.Members[2].Pod = 1, "pg-1" },
			want: []wantErr{{field.ErrorTypeDuplicate, "status.members[2].ordinal", "already the ordinal of members[1]"}}},
		{name: "node missing", mutate: func(f *flock.Flock) { f.Status.Members[1].Node = "" },
			want: []wantErr{{field.ErrorTypeRequired, "status.members[1].node", "the node this member is assigned to"}}},
		{name: "node name invalid", mutate: func(f *flock.Flock) { f.Status.Members[1].Node = "N_B" },
			want: []wantErr{{field.ErrorTypeInvalid, "status.members[1].node", "RFC 1123 subdomain"}}},
		{name: "two members on one node", mutate: func(f *flock.Flock) { f.Status.Members[2].Node = "n-a" },
			want: []wantErr{{field.ErrorTypeDuplicate, "status.members[2].node", "member 0 is already on this node"}}},
		{name: "pod name not <name>-<ordinal>", mutate: func(f *flock.Flock) { f.Status.Members[1].Pod = "pg-7" },
			want: []wantErr{{field.ErrorTypeInvalid, "status.members[1].pod", `must be "pg-1"`}}},
		{name: "hostname invalid", mutate: func(f *flock.Flock) { f.Status.Members[0].Hostname = "pg-0..pg" },
			want: []wantErr{{field.ErrorTypeInvalid, "status.members[0].hostname", "RFC 1123 subdomain"}}},
		{name: "volume and claim recorded", mutate: func(f *flock.Flock) {
			f.Status.Members[0].PersistentVolume = "flock-0b4f6a2e-8c1d-4d0e-9f3a-5b6c7d8e9f00-0"
			f.Status.Members[0].Claim = "data-pg-0"
		}},
		{name: "claim name invalid", mutate: func(f *flock.Flock) { f.Status.Members[1].Claim = "Data_pg-1" },
			want: []wantErr{{field.ErrorTypeInvalid, "status.members[1].claim", "RFC 1123 subdomain"}}},
		{name: "volume name invalid", mutate: func(f *flock.Flock) { f.Status.Members[1].PersistentVolume = "PV 1" },
			want: []wantErr{{field.ErrorTypeInvalid, "status.members[1].persistentVolume", "RFC 1123 subdomain"}}},
		{name: "condition without reason", mutate: func(f *flock.Flock) { f.Status.Conditions[0].Reason = "" },
			want: []wantErr{{field.ErrorTypeRequired, "status.conditions[0].reason", "Required value"}}},
		{name: "condition status unknown", mutate: func(f *flock.Flock) { f.Status.Conditions[0].Status = "Yes" },
			want: []wantErr{{field.ErrorTypeNotSupported, "status.conditions[0].status", `supported values: "False", "True", "Unknown"`}}},
		{name: "condition type twice", mutate: func(f *flock.Flock) {
			f.Status.Conditions = append(f.Status.Conditions, f.Status.Conditions[0])
		}, want: []wantErr{{field.ErrorTypeDuplicate, "status.conditions[1]", `"Available"`}}},
		{name: "metadata name changes", mutate: func(f *flock.Flock) { f.Name = "pg2"; f.Status.Members = nil },
			want: []wantErr{{field.ErrorTypeInvalid, "metadata.name", "field is immutable"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			old := withStatus()
			f := old.DeepCopy()
			tc.mutate(f)
			checkErrors(t, ValidateFlockStatusUpdate(f, old), tc.want)
		})
	}
}
