package storageclass

import (
	"context"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/warning"
	kubeinformers "k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"flock.dev/flock/pkg/admission/flockinitializer"
	"flock.dev/flock/pkg/apis/flock"
)

const ns = "db"

var (
	flocksResource = schema.GroupVersionResource{Group: flock.GroupName, Version: "v1alpha1", Resource: "flocks"}
	flockKind      = schema.GroupVersionKind{Group: flock.GroupName, Version: "v1alpha1", Kind: "Flock"}
)

func class(name string, annotations map[string]string) *storagev1.StorageClass {
	return &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: annotations}, Provisioner: "example.com/disk"}
}

var (
	isDefault     = map[string]string{annotationDefaultClass: "true"}
	isBetaDefault = map[string]string{annotationBetaDefaultClass: "true"}
	notDefault    = map[string]string{annotationDefaultClass: "false"}
)

// withClaims returns a Flock whose claim template asks for className (nil:
// the default class); noClaims one in node-local mode.
func withClaims(className *string) *flock.Flock {
	f := &flock.Flock{ObjectMeta: metav1.ObjectMeta{Name: "pg", Namespace: ns}, Spec: &flock.FlockSpec{}}
	f.Spec.Storage.ClaimTemplate = &corev1.PersistentVolumeClaimTemplate{Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: className}}
	return f
}

func noClaims() *flock.Flock {
	return &flock.Flock{ObjectMeta: metav1.ObjectMeta{Name: "pg", Namespace: ns}, Spec: &flock.FlockSpec{}}
}

// newTestPlugin returns a plugin reading classes from an indexer, ready at
// once unless synced says otherwise.
func newTestPlugin(t *testing.T, synced bool, classes ...*storagev1.StorageClass) *Plugin {
	t.Helper()
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for _, c := range classes {
		if err := idx.Add(c); err != nil {
			t.Fatal(err)
		}
	}
	p := New()
	p.classes = storagelisters.NewStorageClassLister(idx)
	p.synced = func() bool { return synced }
	if err := p.ValidateInitialization(); err != nil {
		t.Fatal(err)
	}
	return p
}

type recorder struct{ warnings []string }

func (r *recorder) AddWarning(_, text string) { r.warnings = append(r.warnings, text) }

func validate(p *Plugin, f *flock.Flock, subresource string) ([]string, error) {
	rec := &recorder{}
	ctx := warning.WithWarningRecorder(context.Background(), rec)
	a := admission.NewAttributesRecord(f, nil, flockKind, ns, f.Name, flocksResource, subresource, admission.Create, &metav1.CreateOptions{}, false, nil)
	return rec.warnings, p.Validate(ctx, a, nil)
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name    string
		classes []*storagev1.StorageClass
		flock   *flock.Flock
		// refused: 422 on the class field; warn: a warning containing it.
		refused bool
		warn    string
	}{
		{name: "no class, no default class", classes: []*storagev1.StorageClass{class("fast", nil), class("slow", notDefault)},
			flock: withClaims(nil), refused: true},
		{name: "no class, no class at all", flock: withClaims(nil), refused: true},
		{name: "no class, a default class", classes: []*storagev1.StorageClass{class("fast", nil), class("std", isDefault)},
			flock: withClaims(nil)},
		{name: "no class, a beta default class", classes: []*storagev1.StorageClass{class("std", isBetaDefault)},
			flock: withClaims(nil)},
		{name: "named class exists", classes: []*storagev1.StorageClass{class("fast", nil)}, flock: withClaims(ptr.To("fast"))},
		{name: "named class missing", classes: []*storagev1.StorageClass{class("fast", nil)}, flock: withClaims(ptr.To("gold")),
			warn: `spec.storage.claimTemplate.spec.storageClassName: StorageClass "gold" does not exist; member claims stay Pending`},
		{name: "empty class: no class wanted", flock: withClaims(ptr.To(""))},
		{name: "node-local storage", flock: noClaims()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			warnings, err := validate(newTestPlugin(t, true, tc.classes...), tc.flock, "")
			if tc.refused {
				var se apierrors.APIStatus
				if !apierrors.IsInvalid(err) || !errors.As(err, &se) || se.Status().Details == nil || len(se.Status().Details.Causes) != 1 ||
					se.Status().Details.Causes[0].Field != "spec.storage.claimTemplate.spec.storageClassName" ||
					!strings.Contains(err.Error(), "no default StorageClass") {
					t.Fatalf("got %v, want 422 on spec.storage.claimTemplate.spec.storageClassName saying there is no default StorageClass", err)
				}
			} else if err != nil {
				t.Fatalf("refused: %v", err)
			}
			switch {
			case tc.warn == "" && len(warnings) != 0:
				t.Errorf("warnings %q, want none", warnings)
			case tc.warn != "" && (len(warnings) != 1 || !strings.HasPrefix(warnings[0], tc.warn)):
				t.Errorf("warnings %q, want one starting %q", warnings, tc.warn)
			}
		})
	}
}

// Subresources (status) are not checked: they never create a Flock.
func TestIgnoresSubresources(t *testing.T) {
	if _, err := validate(newTestPlugin(t, true), withClaims(nil), "status"); err != nil {
		t.Errorf("status: %v", err)
	}
}

// While the StorageClass cache has not synced, a claim template that needs
// it gets 503 with Retry-After (after admission's bounded wait, about 10
// s), never a refusal; a Flock that needs no class passes at once.
func TestNotSyncedIsServiceUnavailable(t *testing.T) {
	p := newTestPlugin(t, false)
	if _, err := validate(p, noClaims(), ""); err != nil {
		t.Errorf("node-local storage while not synced: %v", err)
	}
	_, err := validate(p, withClaims(nil), "")
	var se apierrors.APIStatus
	if !apierrors.IsServiceUnavailable(err) || !errors.As(err, &se) || se.Status().Details == nil || se.Status().Details.RetryAfterSeconds <= 0 ||
		!strings.Contains(err.Error(), "StorageClass cache has not synced") {
		t.Errorf("got %#v, want 503 with Retry-After naming the cache", err)
	}
}

// The initializer hands the plugin the core cluster's informers; the plugin
// then reads classes from a started factory, and its readyz check follows
// the same informer.
func TestInitializeFromFactory(t *testing.T) {
	p := New()
	if err := p.ValidateInitialization(); err == nil {
		t.Fatal("uninitialized plugin validated")
	}
	client := kubefake.NewClientset(class("std", isDefault))
	factory := kubeinformers.NewSharedInformerFactory(client, 0)
	flockinitializer.New(factory, nil).Initialize(p)
	if err := p.ValidateInitialization(); err != nil {
		t.Fatal(err)
	}
	check := ReadyzCheck(factory)
	if err := check.Check(nil); err == nil {
		t.Error("readyz passes before the informer started")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	if err := check.Check(nil); err != nil {
		t.Errorf("readyz after sync: %v", err)
	}
	if _, err := validate(p, withClaims(nil), ""); err != nil {
		t.Errorf("default class present: %v", err)
	}
}
