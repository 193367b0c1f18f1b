// Go native fuzzing of what flock-apiserver does with a Flock request body
// before it stores it: decode (JSON or YAML) into v1alpha1, default, convert
// to the internal type, the registry's BeforeCreate (metadata checks,
// PrepareForCreate, validation), then this admission plugin. The seed corpus
// (testdata/fuzz/FuzzCreateFlockBody) holds the example Flocks and hostile
// bodies: wrong types, nulls, unknown fields, huge strings and lists,
// invalid UTF-8, random bytes. The e2e test TestHostileFlockBodies sends
// such bodies through kube-apiserver.
package capacity

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/apiserver/pkg/warning"

	"flock.dev/flock/pkg/apis/flock"
	"flock.dev/flock/pkg/apis/flock/install"
	"flock.dev/flock/pkg/apis/flock/v1alpha1"
	"flock.dev/flock/pkg/apis/flock/validation"
	flockregistry "flock.dev/flock/pkg/registry/flock"
)

func FuzzCreateFlockBody(f *testing.F) {
	f.Add([]byte(`{"apiVersion":"flock.dev/v1alpha1","kind":"Flock","metadata":{"name":"web"},` +
		`"spec":{"replicas":3,"selector":{"matchLabels":{"app":"web"}},"template":{"metadata":{"labels":{"app":"web"}},` +
		`"spec":{"containers":[{"name":"web","image":"nginx:1.27"}]}}}}`))
	scheme := runtime.NewScheme()
	install.Install(scheme)
	codecs := serializer.NewCodecFactory(scheme)
	decoder := codecs.UniversalDecoder(flock.SchemeGroupVersion)
	strategy := flockregistry.NewStrategy(scheme, validation.Options{})
	plugin := newTestPlugin(f, []*corev1.Node{
		node("node-1", labeled("disk", "local")), node("node-2", labeled("disk", "local")),
		node("node-3", cordoned), node("node-4", tainted("dedicated", "db")), node("node-5", notReady),
	}, nil)

	f.Fuzz(func(t *testing.T, body []byte) {
		// Decode, with defaulting and conversion: an error here is a 400.
		obj, _, err := decoder.Decode(body, nil, nil)
		if err != nil {
			return
		}
		fl, ok := obj.(*flock.Flock)
		if !ok {
			return // another kind: the handler refuses it (400)
		}
		ctx := genericapirequest.WithNamespace(context.Background(), ns)
		fl.Namespace = ns
		accessor, err := meta.Accessor(fl)
		if err != nil {
			t.Fatal(err)
		}
		if fl.GenerateName != "" && fl.Name == "" {
			fl.Name = strategy.GenerateName(fl.GenerateName) // the store does it before BeforeCreate
		}
		rest.FillObjectMetaSystemFields(accessor)
		// Whole seconds, as the stored form (RFC 3339) keeps it.
		accessor.SetCreationTimestamp(metav1.Unix(accessor.GetCreationTimestamp().Unix(), 0))
		if err := rest.BeforeCreate(strategy, ctx, fl); err != nil {
			requireClientError(t, "BeforeCreate", err)
			return
		}
		ctx = warning.WithWarningRecorder(ctx, &recorder{})
		if err := plugin.Validate(ctx, create(fl).attributes(), nil); err != nil {
			requireClientError(t, "admission", err)
			return
		}

		// Admitted: what would be stored reads back unchanged, and valid.
		data, err := runtime.Encode(codecs.LegacyCodec(v1alpha1.SchemeGroupVersion), fl)
		if err != nil {
			t.Fatalf("encoding an admitted Flock: %v", err)
		}
		back, _, err := decoder.Decode(data, nil, nil)
		if err != nil {
			t.Fatalf("decoding an admitted Flock: %v\n%s", err, data)
		}
		if !apiequality.Semantic.DeepEqual(fl, back) {
			t.Errorf("an admitted Flock changed when read back:\nstored %#v\nread   %#v", fl, back)
		}
		if errs := validation.ValidateFlock(back.(*flock.Flock), validation.Options{}); len(errs) > 0 {
			t.Errorf("an admitted Flock is invalid when read back: %v", errs)
		}
	})
}

// requireClientError fails unless err is an API error with a 4xx code whose
// causes (if any) each name a field.
func requireClientError(t *testing.T, stage string, err error) {
	t.Helper()
	status, ok := err.(apierrors.APIStatus)
	if !ok {
		t.Fatalf("%s: not an API error (would be a 500): %v", stage, err)
	}
	s := status.Status()
	if s.Code < 400 || s.Code >= 500 {
		t.Fatalf("%s: code %d, want 4xx: %v", stage, s.Code, err)
	}
	if s.Details != nil {
		for _, c := range s.Details.Causes {
			if c.Field == "" {
				t.Errorf("%s: a cause without a field: %+v", stage, c)
			}
		}
	}
}
