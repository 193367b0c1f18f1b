// Go native fuzzing of Flock validation. FuzzValidateFlock varies a valid
// Flock field by field (so that many inputs are still valid and the valid
// path is explored, not only the first error) and fills arbitrary Flocks
// from the same input (for the update and status entry points). Its seed
// corpus is checked in under testdata/fuzz/FuzzValidateFlock and runs with
// every `go test`; `go test -fuzz FuzzValidateFlock` explores further.
package validation

import (
	"strconv"
	"strings"
	"testing"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/randfill"

	"flock.dev/flock/pkg/apis/flock"
	"flock.dev/flock/pkg/apis/flock/install"
	"flock.dev/flock/pkg/apis/flock/v1alpha1"
)

// testScheme and testCodecs know the flock.dev types, internal and v1alpha1.
var (
	testScheme = func() *runtime.Scheme { s := runtime.NewScheme(); install.Install(s); return s }()
	testCodecs = serializer.NewCodecFactory(testScheme)
)

// fuzzedFlock is validFlock changed by the fuzz arguments, then defaulted as
// the server defaults what it decodes (through v1alpha1).
func fuzzedFlock(t *testing.T, name string, replicas, partition int32, maxUnavailable, nodes, label, recovery string,
	afterSeconds int32, container, image string, hostNetwork bool) *flock.Flock {
	f := validFlock()
	f.Name, f.Spec.ServiceName = name, name
	f.Spec.Replicas = &replicas
	f.Spec.UpdateStrategy.RollingUpdate.Partition = &partition
	mu := intstr.FromString(maxUnavailable)
	if n, err := strconv.Atoi(maxUnavailable); err == nil {
		mu = intstr.FromInt(n)
	}
	f.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable = &mu
	if nodes != "" {
		f.Spec.Placement.Nodes = strings.Split(nodes, ",")
	}
	f.Spec.Selector.MatchLabels["app"] = label
	f.Spec.Template.Labels["app"] = label
	f.Spec.MemberRecovery.Policy = flock.MemberRecoveryPolicyType(recovery)
	if afterSeconds != 0 {
		f.Spec.MemberRecovery.AfterSeconds = &afterSeconds
	}
	f.Spec.Template.Spec.Containers[0].Name = container
	f.Spec.Template.Spec.Containers[0].Image = image
	f.Spec.Template.Spec.HostNetwork = hostNetwork

	ext := &v1alpha1.Flock{}
	if err := testScheme.Convert(f, ext, nil); err != nil {
		t.Fatalf("to v1alpha1: %v", err)
	}
	testScheme.Default(ext)
	out := &flock.Flock{}
	if err := testScheme.Convert(ext, out, nil); err != nil {
		t.Fatalf("from v1alpha1: %v", err)
	}
	return out
}

// checkPaths fails the test for an error without a field path or a type.
func checkPaths(t *testing.T, what string, errs field.ErrorList) {
	t.Helper()
	for _, e := range errs {
		if e.Field == "" || e.Type == "" {
			t.Errorf("%s: an error without a field path or type: %#v", what, e)
		}
	}
}

func FuzzValidateFlock(f *testing.F) {
	// One seed in code; the rest are in testdata/fuzz/FuzzValidateFlock.
	f.Add([]byte("flock"), "pg", int32(3), int32(0), "1", "", "pg", "Wait", int32(0), "pg", "postgres:17", false)
	f.Fuzz(func(t *testing.T, data []byte, name string, replicas, partition int32, maxUnavailable, nodes, label, recovery string,
		afterSeconds int32, container, image string, hostNetwork bool) {
		fl := fuzzedFlock(t, name, replicas, partition, maxUnavailable, nodes, label, recovery, afterSeconds, container, image, hostNetwork)

		// Arbitrary Flocks from the same input: the old side of updates.
		filler := randfill.NewFromGoFuzz(data).NilChance(.3).NumElements(0, 3)
		old, other := &flock.Flock{}, &flock.Flock{}
		filler.Fill(old)
		filler.Fill(other)

		// Never a panic (it would be a 500), every error names its field.
		errs := ValidateFlock(fl, Options{})
		checkPaths(t, "create", errs)
		hostErrs := ValidateFlock(fl, Options{AllowHostAccess: true})
		checkPaths(t, "create with host access", hostErrs)
		for _, opts := range []Options{{}, {AllowHostAccess: true}} {
			checkPaths(t, "update from an arbitrary Flock", ValidateFlockUpdate(fl, old, opts))
			checkPaths(t, "update of an arbitrary Flock", ValidateFlockUpdate(old, fl, opts))
			checkPaths(t, "arbitrary create", ValidateFlock(old, opts))
			checkPaths(t, "arbitrary update", ValidateFlockUpdate(other, old, opts))
		}
		checkPaths(t, "status update", ValidateFlockStatusUpdate(fl, old))
		checkPaths(t, "arbitrary status update", ValidateFlockStatusUpdate(other, old))

		if len(errs) > 0 {
			return
		}
		// A valid Flock: allowing host access refuses nothing more, an
		// unchanged update is valid, and it round-trips through v1alpha1
		// JSON (with defaulting on decode) unchanged and still valid.
		if len(hostErrs) > 0 {
			t.Errorf("valid without host access, invalid with it: %v", hostErrs)
		}
		stored := fl.DeepCopy()
		stored.ResourceVersion = "1"
		if errs := ValidateFlockUpdate(stored, stored, Options{}); len(errs) > 0 {
			t.Errorf("an unchanged update of a valid Flock is refused: %v", errs)
		}
		codec := testCodecs.LegacyCodec(v1alpha1.SchemeGroupVersion)
		data, err := runtime.Encode(codec, fl)
		if err != nil {
			t.Fatalf("encoding a valid Flock: %v", err)
		}
		back := &flock.Flock{}
		if err := runtime.DecodeInto(testCodecs.UniversalDecoder(flock.SchemeGroupVersion), data, back); err != nil {
			t.Fatalf("decoding a valid Flock: %v\n%s", err, data)
		}
		if !apiequality.Semantic.DeepEqual(fl, back) {
			t.Errorf("a valid Flock changed in a round trip through v1alpha1:\nbefore %#v\nafter  %#v", fl, back)
		}
		if errs := ValidateFlock(back, Options{}); len(errs) > 0 {
			t.Errorf("a valid Flock is invalid after a round trip: %v", errs)
		}
	})
}
