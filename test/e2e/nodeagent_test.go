// File nodeagent_test.go: what kube-apiserver lets the node agent's
// service account change (the deploy component's ValidatingAdmissionPolicy);
// the agent itself runs in the real-node lane (realnode_test.go).

package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"flock.dev/flock/pkg/nodeagent"
	"flock.dev/flock/test/cluster"
)

// The node agent's role lets it patch PersistentVolumes; the policy holds
// it to setting flock.dev/prepared on a Flock member volume: its own patch
// passes, and a rebinding (spec.claimRef), another annotation, a label or a
// volume that is not a member's are refused. Other users are not affected.
func TestNodeAgentPolicy(t *testing.T) {
	ctx := ctxFor(t)
	kube := env.Kube
	// The component as shipped, without its DaemonSet: an agent on the
	// kwok nodes would do nothing, and members would wait for it.
	if err := env.ApplyNodeAgent(ctx, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for _, err := range []error{
			kube.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Delete(ctx, cluster.NodeAgentName, metav1.DeleteOptions{}),
			kube.AdmissionregistrationV1().ValidatingAdmissionPolicies().Delete(ctx, cluster.NodeAgentName, metav1.DeleteOptions{}),
			kube.RbacV1().ClusterRoleBindings().Delete(ctx, cluster.NodeAgentName, metav1.DeleteOptions{}),
			kube.RbacV1().ClusterRoles().Delete(ctx, cluster.NodeAgentName, metav1.DeleteOptions{}),
			kube.CoreV1().ServiceAccounts(cluster.FlockNamespace).Delete(ctx, cluster.NodeAgentName, metav1.DeleteOptions{}),
		} {
			if err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("cleanup: %v", err)
			}
		}
	})

	suffix := fmt.Sprintf("%04x", rand.IntN(1<<16))
	volume := func(name string, member bool) string {
		t.Helper()
		pv := &corev1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Name: name + "-" + suffix},
			Spec: corev1.PersistentVolumeSpec{
				Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
				AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
				StorageClassName:              "e2e-never-bound",
				PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/nonexistent/e2e/" + name}},
			},
		}
		if member {
			pv.Labels = map[string]string{nodeagent.LabelFlockUID: "e2e-" + suffix}
			nodeagent.SetRequest(pv, "some-node", 1000, 1000, 0o770)
		}
		if _, err := kube.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = kube.CoreV1().PersistentVolumes().Delete(context.Background(), pv.Name, metav1.DeleteOptions{})
		})
		return pv.Name
	}
	member, other := volume("agent-policy-member", true), volume("agent-policy-other", false)

	cfg := rest.CopyConfig(env.RESTConfig)
	cfg.Impersonate = rest.ImpersonationConfig{
		UserName: "system:serviceaccount:" + cluster.FlockNamespace + ":" + cluster.NodeAgentName,
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + cluster.FlockNamespace, "system:authenticated"},
	}
	agent, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	patch := func(c kubernetes.Interface, name, body string) error {
		_, err := c.CoreV1().PersistentVolumes().Patch(ctxFor(t), name, types.MergePatchType, []byte(body), metav1.PatchOptions{})
		return err
	}
	rebind := `{"spec":{"claimRef":{"namespace":"victim","name":"data"}}}`
	// The policy takes effect within seconds of its creation.
	eventually(t, time.Minute, "the agent's rebinding refused", func(context.Context) error {
		err := patch(agent, member, rebind)
		if err == nil {
			// Allowed before the policy took effect: put it back.
			if err := patch(kube, member, `{"spec":{"claimRef":null}}`); err != nil {
				t.Fatal(err)
			}
			return fmt.Errorf("allowed")
		}
		if !strings.Contains(err.Error(), "may not change a PersistentVolume's spec") {
			return fmt.Errorf("refused, but not by the policy: %v", err)
		}
		return nil
	})
	for _, tc := range []struct{ what, name, body, refusal string }{
		{"another annotation", member, `{"metadata":{"annotations":{"flock.dev/owner":"0:0"}}}`, "may only set the annotation"},
		{"prepared, not true", member, `{"metadata":{"annotations":{"flock.dev/prepared":"yes"}}}`, "may only set the annotation"},
		{"a label", member, `{"metadata":{"labels":{"flock.dev/uid":"someone-else"}}}`, "spec, labels, finalizers or owners"},
		{"a volume that is not a member's", other, `{"metadata":{"annotations":{"flock.dev/prepared":"true"}}}`, "only Flock member PersistentVolumes"},
	} {
		if err := patch(agent, tc.name, tc.body); err == nil || !strings.Contains(err.Error(), tc.refusal) {
			t.Errorf("the agent changing %s: %v; want it refused (%q)", tc.what, err, tc.refusal)
		}
	}
	if err := patch(agent, member, `{"metadata":{"annotations":{"flock.dev/prepared":"true"}}}`); err != nil {
		t.Errorf("the agent marking a member volume prepared: %v", err)
	}
	if err := patch(kube, other, `{"metadata":{"annotations":{"e2e":"admin"}}}`); err != nil {
		t.Errorf("the admin's patch of another volume: %v; the policy is for the agent only", err)
	}
}
