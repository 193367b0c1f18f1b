// Package fuzzer fills flock.dev objects with random values for round-trip
// tests. The objects it makes are in defaulted form (defaulting on decode
// leaves them unchanged), with enums drawn from their valid values and
// fields that go together kept consistent.
package fuzzer

import (
	runtimeserializer "k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/randfill"

	"flock.dev/flock/pkg/apis/flock"
	"flock.dev/flock/pkg/apis/flock/v1alpha1"
	"flock.dev/flock/pkg/apis/flock/validation"
)

// Funcs returns the fuzzer functions of the flock.dev group.
var Funcs = func(codecs runtimeserializer.CodecFactory) []interface{} {
	return []interface{}{
		fuzzFlock,
		fuzzFlockSpec,
	}
}

func fuzzFlock(f *flock.Flock, c randfill.Continue) {
	c.FillNoCustom(f)
	if f.Spec == nil { // never nil once decoded (v1alpha1 holds it inline)
		f.Spec = &flock.FlockSpec{}
		c.Fill(f.Spec)
	}
	// serviceName defaults to the Flock's name.
	f.Spec.ServiceName = v1alpha1.ServiceNameOr(f.Spec.ServiceName, f.Name)
}

func fuzzFlockSpec(s *flock.FlockSpec, c randfill.Continue) {
	c.FillNoCustom(s)

	s.Replicas = ptr.To(c.Int31n(validation.MaxReplicas + 1))
	if s.Storage.VolumeName == "" {
		s.Storage.VolumeName = v1alpha1.DefaultVolumeName
	}
	if s.Storage.ClaimTemplate == nil {
		if s.Storage.Capacity == "" {
			s.Storage.Capacity = v1alpha1.DefaultStorageSize
		}
		if s.Storage.Mode == nil {
			s.Storage.Mode = ptr.To(v1alpha1.DefaultStorageMode)
		}
	}
	s.Storage.Retention.WhenDeleted = oneOf(c, flock.RetainRetentionPolicy, flock.DeleteRetentionPolicy)
	s.Storage.Retention.WhenScaled = oneOf(c, flock.RetainRetentionPolicy, flock.DeleteRetentionPolicy)
	s.PodManagementPolicy = oneOf(c, flock.OrderedReadyPodManagement, flock.ParallelPodManagement)

	s.UpdateStrategy.Type = oneOf(c, flock.RollingUpdateFlockStrategyType, flock.OnDeleteFlockStrategyType)
	if s.UpdateStrategy.Type == flock.RollingUpdateFlockStrategyType {
		if s.UpdateStrategy.RollingUpdate == nil {
			s.UpdateStrategy.RollingUpdate = &flock.RollingUpdateFlockStrategy{}
		}
		ru := s.UpdateStrategy.RollingUpdate
		ru.Partition = ptr.To(c.Int31n(*s.Replicas + 1))
		var v intstr.IntOrString
		if c.Bool() {
			v = intstr.FromInt32(1 + c.Int31n(10))
		} else {
			v = intstr.FromString(oneOf(c, "1%", "25%", "50%", "100%"))
		}
		ru.MaxUnavailable = &v
	} else {
		s.UpdateStrategy.RollingUpdate = nil
	}

	s.MemberRecovery.Policy = oneOf(c, flock.WaitMemberRecovery, flock.ReassignMemberRecovery)
	if s.MemberRecovery.Policy == flock.ReassignMemberRecovery {
		s.MemberRecovery.AfterSeconds = ptr.To(1 + c.Int31n(3600))
	} else {
		s.MemberRecovery.AfterSeconds = nil
	}

	s.DisruptionBudget.Policy = oneOf(c, flock.ManagedDisruptionBudget, flock.NoDisruptionBudget)
	if s.DisruptionBudget.Policy == flock.ManagedDisruptionBudget {
		v := intstr.FromInt32(1 + c.Int31n(5))
		s.DisruptionBudget.MaxUnavailable = &v
	} else {
		s.DisruptionBudget.MaxUnavailable = nil
	}

	s.RevisionHistoryLimit = ptr.To(c.Int31n(100))

	defaultTemplate(s)
}

// defaultTemplate applies the registered defaults of the core/v1 types in
// the pod template (container port protocols, probe and volume source
// fields...). Those defaults belong to k8s.io/api and grow with it, so they
// are applied by the generated defaulter rather than listed here.
func defaultTemplate(s *flock.FlockSpec) {
	tmp := &v1alpha1.Flock{Spec: v1alpha1.FlockSpec{Template: s.Template}}
	v1alpha1.SetObjectDefaults_Flock(tmp)
	s.Template = tmp.Spec.Template
}

func oneOf[T any](c randfill.Continue, values ...T) T {
	return values[c.Intn(len(values))]
}
