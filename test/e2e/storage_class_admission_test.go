package e2e

// The FlockStorageClass admission plugin against the real cluster's
// StorageClasses: a claim template without a class is refused with 422 while
// the cluster has no default StorageClass, and accepted once it has one; a
// claim template naming a class that does not exist is accepted with a
// warning.

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"flock.dev/flock/pkg/admission/plugin/storageclass"
)

// scaClaimManifest is a one-member Flock of name in ns whose claim template
// has classLine under its spec (e.g. "storageClassName: x", or "").
func scaClaimManifest(name, ns, classLine string) string {
	m := flockManifest(name, ns, 1) + fmt.Sprintf(`  placement:
    nodeSelector: {%s: %s}
  storage:
    claimTemplate:
      spec:
        accessModes: [ReadWriteOnce]
        resources: {requests: {storage: 1Gi}}
`, lcPoolLabel, ns)
	if classLine != "" {
		m += "        " + classLine + "\n"
	}
	return m
}

func TestStorageClassAdmission(t *testing.T) {
	ns := newNamespace(t)
	lcNodes(t, ns, 1)
	classes, err := env.Kube.StorageV1().StorageClasses().List(ctxFor(t), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range classes.Items {
		if storageclass.IsDefault(&classes.Items[i]) {
			t.Fatalf("the test cluster has a default StorageClass %s; this test needs none", classes.Items[i].Name)
		}
	}
	const field = "spec.storage.claimTemplate.spec.storageClassName"

	// No class named, no default class: refused, by the clientset and kubectl.
	f := lcFlock("noclass", ns, 1)
	f.Spec.Storage.ClaimTemplate = &corev1.PersistentVolumeClaimTemplate{Spec: corev1.PersistentVolumeClaimSpec{
		AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
		Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
	}}
	_, err = env.Flock.FlockV1alpha1().Flocks(ns).Create(ctxFor(t), f, metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), field) || !strings.Contains(err.Error(), "no default StorageClass") {
		t.Fatalf("create without a class: %v, want 422 on %s saying there is no default StorageClass", err, field)
	}
	res := kubectlFails(t, env.KubectlBuilt(), scaClaimManifest("noclass", ns, ""), "apply", "-f", "-")
	for _, w := range []string{field, "no default StorageClass", "is invalid"} {
		if !strings.Contains(res.Stderr, w) {
			t.Errorf("kubectl apply: %q does not say %q", res.Stderr, w)
		}
	}

	// A class that does not exist: accepted, with a warning naming it.
	missing := "e2e-missing-" + ns
	ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
	defer cancel()
	out, err := env.KubectlInput(ctx, env.KubectlBuilt(), scaClaimManifest("missing", ns, "storageClassName: "+missing), "create", "-f", "-")
	if err != nil {
		t.Fatalf("create with a missing class: %v", err)
	}
	want := fmt.Sprintf("Warning: %s: StorageClass %q does not exist", field, missing)
	if !strings.Contains(out.Stderr, want) {
		t.Errorf("kubectl create printed %q, want a warning %q", out.Stderr, want)
	}

	// With a default class the same Flock is accepted (once the admission
	// cache has seen the class).
	def := "e2e-default-" + ns
	if _, err := env.Kube.StorageV1().StorageClasses().Create(ctxFor(t), &storagev1.StorageClass{
		ObjectMeta:  metav1.ObjectMeta{Name: def, Annotations: map[string]string{"storageclass.kubernetes.io/is-default-class": "true"}},
		Provisioner: stProvisionerName,
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		defer cancel()
		if err := env.Kube.StorageV1().StorageClasses().Delete(ctx, def, metav1.DeleteOptions{}); err != nil {
			t.Errorf("delete StorageClass %s: %v", def, err)
		}
	})
	eventually(t, lcTimeout, "a claim template without a class accepted with a default class", func(ctx context.Context) error {
		_, err := env.Flock.FlockV1alpha1().Flocks(ns).Create(ctx, f.DeepCopy(), metav1.CreateOptions{})
		return err
	})
}
