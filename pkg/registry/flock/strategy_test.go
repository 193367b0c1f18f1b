package flock

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"flock.dev/flock/pkg/apis/flock"
	"flock.dev/flock/pkg/apis/flock/install"
	"flock.dev/flock/pkg/apis/flock/v1alpha1"
	"flock.dev/flock/pkg/apis/flock/validation"
)

func testScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	install.Install(s)
	return s
}

func validFlock() *flock.Flock {
	one := intstr.FromInt32(1)
	return &flock.Flock{
		ObjectMeta: metav1.ObjectMeta{Name: "pg", Namespace: "db", ResourceVersion: "1", Generation: 1},
		Spec: &flock.FlockSpec{
			Replicas:    ptr.To(int32(3)),
			Selector:    &metav1.LabelSelector{MatchLabels: map[string]string{"app": "pg"}},
			ServiceName: "pg",
			Storage: flock.FlockStorage{VolumeName: "data", Capacity: "1Gi", Retention: flock.RetentionPolicy{
				WhenDeleted: flock.RetainRetentionPolicy, WhenScaled: flock.RetainRetentionPolicy}},
			PodManagementPolicy: flock.OrderedReadyPodManagement,
			UpdateStrategy: flock.FlockUpdateStrategy{Type: flock.RollingUpdateFlockStrategyType,
				RollingUpdate: &flock.RollingUpdateFlockStrategy{Partition: ptr.To(int32(0)), MaxUnavailable: &one}},
			MemberRecovery:       flock.MemberRecovery{Policy: flock.WaitMemberRecovery},
			DisruptionBudget:     flock.FlockDisruptionBudget{Policy: flock.ManagedDisruptionBudget, MaxUnavailable: ptr.To(intstr.FromInt32(1))},
			RevisionHistoryLimit: ptr.To(int32(10)),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "pg"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "pg", Image: "postgres:16",
					TerminationMessagePolicy: corev1.TerminationMessageReadFile, ImagePullPolicy: corev1.PullIfNotPresent}}},
			},
		},
	}
}

func TestPrepareForCreate(t *testing.T) {
	s := NewStrategy(testScheme(), validation.Options{})
	f := validFlock()
	f.Generation = 7
	f.Spec.ServiceName = ""
	f.Status = flock.FlockStatus{ReadyReplicas: 3, Members: []flock.FlockMember{{Ordinal: 0, Node: "n"}}}
	s.PrepareForCreate(context.Background(), f)
	if f.Generation != 1 {
		t.Errorf("generation %d, want 1", f.Generation)
	}
	if f.Status.ReadyReplicas != 0 || len(f.Status.Members) != 0 {
		t.Errorf("status not reset on create: %+v", f.Status)
	}
	if f.Spec.ServiceName != "pg" {
		t.Errorf("serviceName %q, want the Flock's name", f.Spec.ServiceName)
	}
	if slices.Contains(f.Finalizers, v1alpha1.FinalizerDataCleanup) {
		t.Errorf("a Retain Flock got the cleanup finalizer")
	}
	if errs := s.Validate(context.Background(), f); len(errs) != 0 {
		t.Errorf("valid Flock refused: %v", errs)
	}

	del := validFlock()
	del.Spec.Storage.Retention.WhenDeleted = flock.DeleteRetentionPolicy
	s.PrepareForCreate(context.Background(), del)
	s.PrepareForCreate(context.Background(), del)
	if n := strings.Count(strings.Join(del.Finalizers, ","), v1alpha1.FinalizerDataCleanup); n != 1 {
		t.Errorf("whenDeleted: Delete: finalizer present %d times, want once: %v", n, del.Finalizers)
	}
}

func TestGeneratedNameGetsServiceName(t *testing.T) {
	s := NewStrategy(testScheme(), validation.Options{})
	f := validFlock()
	// The store generates the name before PrepareForCreate.
	f.Name, f.GenerateName, f.Spec.ServiceName = "pg-x7k2q", "pg-", ""
	s.PrepareForCreate(context.Background(), f)
	if errs := s.Validate(context.Background(), f); len(errs) != 0 {
		t.Fatalf("generated name: %v", errs)
	}
	if f.Spec.ServiceName != "pg-x7k2q" {
		t.Errorf("serviceName %q, want the generated name", f.Spec.ServiceName)
	}
}

func TestPrepareForUpdate(t *testing.T) {
	s := NewStrategy(testScheme(), validation.Options{})
	tests := []struct {
		name       string
		mutate     func(*flock.Flock)
		generation int64
	}{
		{"no change", func(*flock.Flock) {}, 1},
		{"labels only", func(f *flock.Flock) { f.Labels = map[string]string{"tier": "db"} }, 1},
		{"annotations only", func(f *flock.Flock) { f.Annotations = map[string]string{"a": "b"} }, 1},
		{"status only (ignored)", func(f *flock.Flock) { f.Status.ReadyReplicas = 2 }, 1},
		{"replicas", func(f *flock.Flock) { f.Spec.Replicas = ptr.To(int32(2)) }, 2},
		{"template", func(f *flock.Flock) { f.Spec.Template.Spec.Containers[0].Image = "postgres:17" }, 2},
		{"partition", func(f *flock.Flock) { f.Spec.UpdateStrategy.RollingUpdate.Partition = ptr.To(int32(1)) }, 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			old := validFlock()
			old.Status = flock.FlockStatus{ObservedGeneration: 1, Replicas: 3, ReadyReplicas: 3}
			f := old.DeepCopy()
			tc.mutate(f)
			s.PrepareForUpdate(context.Background(), f, old)
			if f.Generation != tc.generation {
				t.Errorf("generation %d, want %d", f.Generation, tc.generation)
			}
			if f.Status.ReadyReplicas != 3 || f.Status.ObservedGeneration != 1 {
				t.Errorf("main-resource write changed status: %+v", f.Status)
			}
		})
	}
}

func TestValidateUpdateImmutable(t *testing.T) {
	s := NewStrategy(testScheme(), validation.Options{})
	tests := []struct {
		name   string
		mutate func(*flock.Flock)
		field  string
	}{
		{"selector", func(f *flock.Flock) {
			f.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "pg", "x": "y"}}
			f.Spec.Template.Labels["x"] = "y"
		}, "spec.selector"},
		{"serviceName", func(f *flock.Flock) { f.Spec.ServiceName = "other" }, "spec.serviceName"},
		{"volumeName", func(f *flock.Flock) { f.Spec.Storage.VolumeName = "other" }, "spec.storage.volumeName"},
		{"podManagementPolicy", func(f *flock.Flock) { f.Spec.PodManagementPolicy = flock.ParallelPodManagement }, "spec.podManagementPolicy"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			old := validFlock()
			f := old.DeepCopy()
			tc.mutate(f)
			s.PrepareForUpdate(context.Background(), f, old)
			errs := s.ValidateUpdate(context.Background(), f, old)
			if len(errs) == 0 {
				t.Fatalf("changing %s was accepted", tc.field)
			}
			found := false
			for _, e := range errs {
				if e.Field == tc.field && strings.Contains(e.Error(), "immutable") {
					found = true
				}
			}
			if !found {
				t.Errorf("no immutable error on %s: %v", tc.field, errs)
			}
		})
	}
	// Mutable fields pass.
	old := validFlock()
	f := old.DeepCopy()
	f.Spec.Replicas = ptr.To(int32(5))
	f.Spec.Template.Spec.Containers[0].Image = "postgres:17"
	f.Spec.MinReadySeconds = 10
	if errs := s.ValidateUpdate(context.Background(), f, old); len(errs) != 0 {
		t.Errorf("mutable changes refused: %v", errs)
	}
}

func TestStatusStrategy(t *testing.T) {
	s := NewStatusStrategy(NewStrategy(testScheme(), validation.Options{}))
	old := validFlock()
	old.Labels = map[string]string{"tier": "db"}
	f := old.DeepCopy()
	f.Spec.Replicas = ptr.To(int32(9))
	f.Labels = map[string]string{"tier": "other"}
	f.Status = flock.FlockStatus{ObservedGeneration: 1, Replicas: 2, ReadyReplicas: 1,
		Members: []flock.FlockMember{{Ordinal: 0, Node: "n-a", Pod: "pg-0"}}}
	s.PrepareForUpdate(context.Background(), f, old)
	if *f.Spec.Replicas != 3 {
		t.Errorf("status write changed spec.replicas to %d", *f.Spec.Replicas)
	}
	if f.Labels["tier"] != "db" {
		t.Errorf("status write changed labels: %v", f.Labels)
	}
	if f.Generation != 1 {
		t.Errorf("status write bumped generation to %d", f.Generation)
	}
	if f.Status.ReadyReplicas != 1 || len(f.Status.Members) != 1 {
		t.Errorf("status write lost status: %+v", f.Status)
	}
	if errs := s.ValidateUpdate(context.Background(), f, old); len(errs) != 0 {
		t.Errorf("valid status refused: %v", errs)
	}
	bad := f.DeepCopy()
	bad.Status.ReadyReplicas = -1
	if errs := s.ValidateUpdate(context.Background(), bad, old); len(errs) == 0 || errs[0].Field != "status.readyReplicas" {
		t.Errorf("negative readyReplicas: %v", errs)
	}
}

func TestResetFields(t *testing.T) {
	main := NewStrategy(testScheme(), validation.Options{})
	status := NewStatusStrategy(main)
	if !main.GetResetFields()["flock.dev/v1alpha1"].Has(fieldpath.MakePathOrDie("status")) {
		t.Error("main resource must reset status")
	}
	if !status.GetResetFields()["flock.dev/v1alpha1"].Has(fieldpath.MakePathOrDie("spec")) {
		t.Error("status subresource must reset spec")
	}
}

func TestSelectableFields(t *testing.T) {
	f := validFlock()
	fields := SelectableFields(f)
	if fields["metadata.name"] != "pg" || fields["metadata.namespace"] != "db" || len(fields) != 2 {
		t.Errorf("selectable fields: %v", fields)
	}
	// Another version of the same Flock shares the set; another Flock,
	// or the same name in another namespace, has its own.
	next := validFlock()
	next.Status.Replicas = 3
	if again := SelectableFields(next); !samePointer(again, fields) {
		t.Error("two versions of one Flock got two field sets")
	}
	other := validFlock()
	other.Name = "pg2"
	elsewhere := validFlock()
	elsewhere.Namespace = "db2"
	for _, f := range []*flock.Flock{other, elsewhere} {
		set := SelectableFields(f)
		if samePointer(set, fields) || set["metadata.name"] != f.Name || set["metadata.namespace"] != f.Namespace {
			t.Errorf("Flock %s/%s got field set %v (shared with pg: %v)", f.Namespace, f.Name, set, samePointer(set, fields))
		}
	}
}

func TestSelectableFieldSetsAreBounded(t *testing.T) {
	table := &fieldSetTable{sets: map[string]fields.Set{}}
	for i := range maxSelectableFieldSets + 10 {
		set := table.get("ns", fmt.Sprint("f", i))
		if set["metadata.name"] != fmt.Sprint("f", i) {
			t.Fatalf("set %d: %v", i, set)
		}
	}
	if n := len(table.sets); n > maxSelectableFieldSets {
		t.Fatalf("the table holds %d sets, over its bound of %d", n, maxSelectableFieldSets)
	}
}

func TestScaleFromFlock(t *testing.T) {
	f := validFlock()
	f.Status.Replicas = 2
	sc := scaleFromFlock(f)
	if sc.Spec.Replicas != 3 || sc.Status.Replicas != 2 || sc.Status.Selector != "app=pg" || sc.Name != "pg" || sc.ResourceVersion != "1" {
		t.Errorf("scale: %+v", sc)
	}
}

func TestTable(t *testing.T) {
	f := validFlock()
	f.Status.ReadyReplicas = 2
	f.Status.Members = []flock.FlockMember{{Ordinal: 0, Node: "n-a"}, {Ordinal: 1, Node: "n-b"}}
	table, err := tableConvertor{}.ConvertToTable(context.Background(), &flock.FlockList{Items: []flock.Flock{*f}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range table.ColumnDefinitions {
		names = append(names, c.Name)
		if c.Priority == 1 && c.Name != "Service" && c.Name != "Nodes" {
			t.Errorf("column %s should not be wide-only", c.Name)
		}
	}
	if strings.Join(names, ",") != "Name,Ready,Age,Service,Nodes" {
		t.Errorf("columns %v", names)
	}
	cells := table.Rows[0].Cells
	if cells[0] != "pg" || cells[1] != "2/3" || cells[3] != "pg" || cells[4] != "n-a,n-b" {
		t.Errorf("cells %v", cells)
	}
}
