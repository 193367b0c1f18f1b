package install

import (
	"math/rand"
	"testing"

	apitestingfuzzer "k8s.io/apimachinery/pkg/api/apitesting/fuzzer"
	"k8s.io/apimachinery/pkg/api/apitesting/roundtrip"
	metafuzzer "k8s.io/apimachinery/pkg/apis/meta/fuzzer"
	"k8s.io/apimachinery/pkg/runtime"
	runtimeserializer "k8s.io/apimachinery/pkg/runtime/serializer"
	"sigs.k8s.io/randfill"

	"flock.dev/flock/pkg/apis/flock"
	flockfuzzer "flock.dev/flock/pkg/apis/flock/fuzzer"
	"flock.dev/flock/pkg/apis/flock/v1alpha1"
)

// fuzzIters is the number of round trips per kind. The library's default
// (20, or 5 with -race) is too few for a group this small to be worth it.
const fuzzIters = 250

// setFuzzIters raises the round-trip library's iteration count for one test.
func setFuzzIters(t *testing.T) {
	old := *roundtrip.FuzzIters
	*roundtrip.FuzzIters = fuzzIters
	t.Cleanup(func() { *roundtrip.FuzzIters = old })
}

// counter counts how many objects of each kind the fuzzer filled at the top
// level. FlockList and FlockStatus have no fuzz function of their own, so
// counting them does not change what is generated.
type counter struct {
	lists, listItems, statuses int
}

func (n *counter) funcs(runtimeserializer.CodecFactory) []interface{} {
	return []interface{}{
		func(l *flock.FlockList, c randfill.Continue) {
			c.FillNoCustom(l)
			n.lists++
			n.listItems += len(l.Items)
		},
		func(s *flock.FlockStatus, c randfill.Continue) {
			c.FillNoCustom(s)
			n.statuses++
		},
	}
}

// flocks is the number of top-level Flocks filled: every Flock has one
// status, and list items are Flocks too.
func (n *counter) flocks() int { return n.statuses - n.listItems }

// TestRoundTrip converts fuzzed internal Flocks and FlockLists to v1alpha1,
// encodes (as JSON and as protobuf), decodes (with defaulting) and converts
// back, and requires the result to equal the original.
func TestRoundTrip(t *testing.T) {
	setFuzzIters(t)
	n := &counter{}
	roundtrip.RoundTripProtobufTestForAPIGroup(t, Install, apitestingfuzzer.MergeFuzzerFuncs(flockfuzzer.Funcs, n.funcs))
	if t.Failed() {
		return // the library stops at the first failing iteration
	}
	if n.flocks() < fuzzIters || n.lists < fuzzIters {
		t.Errorf("round-tripped %d Flocks and %d FlockLists, want at least %d of each", n.flocks(), n.lists, fuzzIters)
	}
	t.Logf("round-tripped %d Flocks and %d FlockLists", n.flocks(), n.lists)
}

// TestRoundTripExternal encodes and decodes fuzzed v1alpha1 objects, so every
// field of the served version survives JSON and protobuf.
func TestRoundTripExternal(t *testing.T) {
	setFuzzIters(t)
	scheme := runtime.NewScheme()
	Install(scheme)
	codecs := runtimeserializer.NewCodecFactory(scheme)
	seed := rand.Int63()
	t.Logf("seed %d", seed)
	f := apitestingfuzzer.FuzzerFor(metafuzzer.Funcs, rand.NewSource(seed), codecs)
	for _, kind := range []string{"Flock", "FlockList"} {
		gvk := v1alpha1.SchemeGroupVersion.WithKind(kind)
		t.Run(kind, func(t *testing.T) {
			roundtrip.RoundTripSpecificKind(t, gvk, scheme, codecs, f, nil)
		})
	}
}
