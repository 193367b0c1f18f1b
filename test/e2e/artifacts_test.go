package e2e

// Deploy artifacts (issue 7): every kustomize overlay renders with both
// kubectls to the objects it promises, passes `kubectl apply --dry-run=server
// -k` against the local control plane, and hack/gen-serving-cert.sh makes a
// serving certificate that flock-apiserver can serve and the APIService
// trusts.

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/spf13/pflag"

	"flock.dev/flock/pkg/cmd/server"
	"flock.dev/flock/pkg/etcd"
	"flock.dev/flock/pkg/nodeagent"
	"flock.dev/flock/test/cluster"
)

// rendered is the output of `kubectl kustomize`, indexed by "Kind/namespace/name".
type rendered map[string]*unstructured.Unstructured

func renderKustomize(t *testing.T, k cluster.Kubectl, dir string) rendered {
	t.Helper()
	out := kubectl(t, k, "kustomize", dir)
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(out), 4096)
	objs := rendered{}
	for {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			t.Fatalf("decode the rendering of %s: %v", dir, err)
		}
		if len(m) == 0 {
			continue
		}
		u := &unstructured.Unstructured{Object: m}
		key := u.GetKind() + "/" + u.GetNamespace() + "/" + u.GetName()
		if objs[key] != nil {
			t.Errorf("%s renders %s twice", dir, key)
		}
		objs[key] = u
	}
	return objs
}

// into converts the rendered object key into a typed object; it fails the
// test when the object is missing.
func (r rendered) into(t *testing.T, key string, obj any) {
	t.Helper()
	u := r[key]
	if u == nil {
		t.Fatalf("rendering lacks %s; it has %v", key, r.keys())
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u.Object, obj, true); err != nil {
		t.Fatalf("%s: %v", key, err)
	}
}

func (r rendered) keys() []string {
	var keys []string
	for k := range r {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

const (
	deploymentKey = "Deployment/flock-system/flock-apiserver"
	serviceKey    = "Service/flock-system/flock-apiserver"
	apiServiceKey = "APIService//v1alpha1.flock.dev"
	pvcKey        = "PersistentVolumeClaim/flock-system/flock-apiserver-etcd"
)

// The objects every overlay registers: namespace, ServiceAccount, least-
// privilege RBAC, Service and APIService.
func checkRegistration(t *testing.T, r rendered) {
	t.Helper()
	for _, key := range []string{
		"Namespace//flock-system",
		"ServiceAccount/flock-system/flock-apiserver",
		"ServiceAccount/flock-system/flock-controller",
		"ClusterRoleBinding//flock.dev:auth-delegator",
		"RoleBinding/kube-system/flock.dev:extension-apiserver-authentication-reader",
		"Role/flock-system/flock.dev:leader-election",
		serviceKey, apiServiceKey,
	} {
		if r[key] == nil {
			t.Errorf("rendering lacks %s", key)
		}
	}
	var delegator rbacv1.ClusterRoleBinding
	r.into(t, "ClusterRoleBinding//flock.dev:auth-delegator", &delegator)
	if delegator.RoleRef.Name != "system:auth-delegator" || len(delegator.Subjects) != 1 || delegator.Subjects[0].Name != "flock-apiserver" {
		t.Errorf("auth-delegator binding = %+v", delegator)
	}
	var reader rbacv1.RoleBinding
	r.into(t, "RoleBinding/kube-system/flock.dev:extension-apiserver-authentication-reader", &reader)
	if reader.RoleRef.Name != "extension-apiserver-authentication-reader" {
		t.Errorf("authentication reader binding = %+v", reader.RoleRef)
	}
	// The controller's rules: nothing beyond what it needs.
	var ctrl rbacv1.ClusterRole
	r.into(t, "ClusterRole//flock.dev:controller", &ctrl)
	for _, rule := range ctrl.Rules {
		if slices.Contains(rule.Verbs, "*") || slices.Contains(rule.Resources, "*") || slices.Contains(rule.Resources, "secrets") {
			t.Errorf("controller ClusterRole rule too broad: %+v", rule)
		}
	}
	checkLeastPrivilege(t, r)
	if skip, _, _ := unstructured.NestedBool(r[apiServiceKey].Object, "spec", "insecureSkipTLSVerify"); skip {
		t.Error("the APIService sets insecureSkipTLSVerify")
	}
	group, _, _ := unstructured.NestedString(r[apiServiceKey].Object, "spec", "group")
	svcName, _, _ := unstructured.NestedString(r[apiServiceKey].Object, "spec", "service", "name")
	if group != "flock.dev" || svcName != "flock-apiserver" {
		t.Errorf("APIService group %q service %q", group, svcName)
	}
}

// The controller acts under its own ServiceAccount: only it writes to the
// core cluster, never deletes Services, and renews only its own Lease; the
// server's ServiceAccount only reads.
func checkLeastPrivilege(t *testing.T, r rendered) {
	t.Helper()
	var ctrlBinding rbacv1.ClusterRoleBinding
	r.into(t, "ClusterRoleBinding//flock.dev:controller", &ctrlBinding)
	var leBinding rbacv1.RoleBinding
	r.into(t, "RoleBinding/flock-system/flock.dev:leader-election", &leBinding)
	for name, subjects := range map[string][]rbacv1.Subject{"controller": ctrlBinding.Subjects, "leader-election": leBinding.Subjects} {
		if len(subjects) != 1 || subjects[0].Kind != "ServiceAccount" || subjects[0].Name != "flock-controller" {
			t.Errorf("%s binding subjects = %+v, want only ServiceAccount flock-controller", name, subjects)
		}
	}
	var ctrl rbacv1.ClusterRole
	r.into(t, "ClusterRole//flock.dev:controller", &ctrl)
	for _, rule := range ctrl.Rules {
		if slices.Contains(rule.Resources, "services") && slices.Contains(rule.Verbs, "delete") {
			t.Errorf("the controller may delete Services: %+v", rule)
		}
	}
	var le rbacv1.Role
	r.into(t, "Role/flock-system/flock.dev:leader-election", &le)
	for _, rule := range le.Rules {
		named := slices.Equal(rule.ResourceNames, []string{"flock-controller"})
		if !named && !slices.Equal(rule.Verbs, []string{"create"}) {
			t.Errorf("lease rule without resourceNames [flock-controller] beyond create: %+v", rule)
		}
	}
	var server rbacv1.ClusterRole
	r.into(t, "ClusterRole//flock.dev:apiserver", &server)
	for _, rule := range server.Rules {
		// The one write: ResourceQuota admission charges a namespace's
		// quotas for new Flocks in their status.
		if slices.Equal(rule.APIGroups, []string{""}) && slices.Equal(rule.Resources, []string{"resourcequotas/status"}) &&
			slices.Equal(rule.Verbs, []string{"update"}) && len(rule.ResourceNames) == 0 {
			continue
		}
		for _, v := range rule.Verbs {
			if v != "get" && v != "list" && v != "watch" {
				t.Errorf("the server's ClusterRole writes: %+v", rule)
			}
		}
	}
}

// The hardening every flock-apiserver pod has.
func checkHardenedPod(t *testing.T, spec corev1.PodSpec) {
	t.Helper()
	psc := spec.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser == 0 ||
		psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("pod securityContext = %+v", psc)
	}
	if spec.ServiceAccountName != "flock-apiserver" || spec.HostNetwork {
		t.Errorf("serviceAccountName %q hostNetwork %v", spec.ServiceAccountName, spec.HostNetwork)
	}
	if len(spec.Containers) != 1 {
		t.Fatalf("%d containers", len(spec.Containers))
	}
	c := spec.Containers[0]
	sc := c.SecurityContext
	if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
		sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
		sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) != 0 ||
		(sc.Privileged != nil && *sc.Privileged) {
		t.Errorf("container securityContext = %+v", sc)
	}
	for name, probe := range map[string]*corev1.Probe{"/livez": c.LivenessProbe, "/readyz": c.ReadinessProbe} {
		if probe == nil || probe.HTTPGet == nil || probe.HTTPGet.Path != name || probe.HTTPGet.Scheme != corev1.URISchemeHTTPS || probe.HTTPGet.Port.String() != "https" {
			t.Errorf("probe %s = %+v", name, probe)
		}
	}
	if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() {
		t.Errorf("resource requests = %v", c.Resources.Requests)
	}
	// The API first; the ha overlay adds its etcd member's ports.
	if len(c.Ports) == 0 || c.Ports[0].Name != "https" {
		t.Errorf("ports = %+v", c.Ports)
	}
	port := fmt.Sprintf("--secure-port=%d", c.Ports[0].ContainerPort)
	if !slices.Contains(c.Args, port) {
		t.Errorf("args %v lack %s", c.Args, port)
	}
	// The serving certificate comes from the Secret.
	vols := map[string]corev1.Volume{}
	for _, v := range spec.Volumes {
		vols[v.Name] = v
	}
	mounts := map[string]string{}
	for _, m := range c.VolumeMounts {
		if _, ok := vols[m.Name]; !ok {
			t.Errorf("mount %s has no volume", m.Name)
		}
		mounts[m.Name] = m.MountPath
	}
	if v := vols["serving-cert"]; v.Secret == nil || v.Secret.SecretName != "flock-apiserver-serving-cert" {
		t.Errorf("serving-cert volume = %+v", v)
	}
	if !slices.Contains(c.Args, "--tls-cert-file="+mounts["serving-cert"]+"/tls.crt") || !slices.Contains(c.Args, "--tls-private-key-file="+mounts["serving-cert"]+"/tls.key") {
		t.Errorf("args %v do not serve the mounted certificate (%s)", c.Args, mounts["serving-cert"])
	}
	// The controller runs as its own ServiceAccount, from the token Secret.
	if v := vols["controller-token"]; v.Secret == nil || v.Secret.SecretName != "flock-controller-token" {
		t.Errorf("controller-token volume = %+v", v)
	}
	if v := vols["controller-kubeconfig"]; v.ConfigMap == nil || v.ConfigMap.Name != "flock-controller-kubeconfig" {
		t.Errorf("controller-kubeconfig volume = %+v", v)
	}
	if mounts["controller-token"] != "/var/run/secrets/flock.dev/controller" ||
		!slices.Contains(c.Args, "--controller-kubeconfig="+mounts["controller-kubeconfig"]+"/kubeconfig") {
		t.Errorf("args %v and mounts %v do not run the controller with its own kubeconfig", c.Args, mounts)
	}
}

// checkHAOverlay checks the ha overlay's promises: three replicas of a
// StatefulSet (no Deployment, no claim), one per labelled node, the embedded
// etcd cluster over TLS from a Secret with data on the node, readiness on
// /readyz, and a PodDisruptionBudget that keeps the quorum.
func checkHAOverlay(t *testing.T, r rendered) {
	t.Helper()
	if r[deploymentKey] != nil || r[pvcKey] != nil {
		t.Error("ha renders the base's Deployment or the embedded etcd's claim")
	}
	var sts appsv1.StatefulSet
	r.into(t, "StatefulSet/flock-system/flock-apiserver", &sts)
	spec := sts.Spec.Template.Spec
	checkHardenedPod(t, spec)
	if sts.Spec.Replicas == nil || *sts.Spec.Replicas != 3 || sts.Spec.PodManagementPolicy != appsv1.ParallelPodManagement {
		t.Errorf("replicas %v, pod management %q: want 3, Parallel (members bootstrap together)", sts.Spec.Replicas, sts.Spec.PodManagementPolicy)
	}
	if spec.NodeSelector["flock.dev/apiserver"] != "true" {
		t.Errorf("nodeSelector = %v, want the labelled nodes", spec.NodeSelector)
	}
	aa := spec.Affinity
	if aa == nil || aa.PodAntiAffinity == nil || len(aa.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) != 1 ||
		aa.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution[0].TopologyKey != "kubernetes.io/hostname" {
		t.Errorf("affinity = %+v, want required anti-affinity per node", aa)
	}
	// The members' names are the pods' stable names in the headless Service.
	var etcdSvc corev1.Service
	r.into(t, "Service/flock-system/"+sts.Spec.ServiceName, &etcdSvc)
	if etcdSvc.Spec.ClusterIP != corev1.ClusterIPNone || !etcdSvc.Spec.PublishNotReadyAddresses {
		t.Errorf("Service %s: clusterIP %q publishNotReadyAddresses %v, want headless and published before ready", etcdSvc.Name, etcdSvc.Spec.ClusterIP, etcdSvc.Spec.PublishNotReadyAddresses)
	}
	c := spec.Containers[0]
	o := server.NewOptions()
	fs := pflag.NewFlagSet("flock-apiserver", pflag.ContinueOnError)
	for _, f := range o.Flags().FlagSets {
		fs.AddFlagSet(f)
	}
	var args []string
	for _, a := range c.Args {
		a = strings.ReplaceAll(a, "$(POD_NAME)", sts.Name+"-1")
		args = append(args, strings.ReplaceAll(a, "$(POD_NAMESPACE)", sts.Namespace))
	}
	if err := fs.Parse(args); err != nil {
		t.Fatalf("args of the ha StatefulSet: %v", err)
	}
	if err := o.Complete(); err != nil {
		t.Fatal(err)
	}
	if err := o.Validate(); err != nil {
		t.Errorf("flock-apiserver refuses the ha overlay's args: %v", err)
	}
	members, err := etcd.ParseInitialCluster(o.EmbeddedEtcd.InitialCluster)
	if err != nil || len(members) != 3 {
		t.Errorf("initial cluster %q: %v", o.EmbeddedEtcd.InitialCluster, err)
	}
	for i := range 3 {
		name := fmt.Sprintf("%s-%d", sts.Name, i)
		if want := fmt.Sprintf("https://%s.%s.%s.svc:2380", name, etcdSvc.Name, sts.Namespace); members[name] != want {
			t.Errorf("member %s peer URL %q, want %q (the pod's stable name)", name, members[name], want)
		}
	}
	vols := map[string]corev1.Volume{}
	for _, v := range spec.Volumes {
		vols[v.Name] = v
		if v.PersistentVolumeClaim != nil {
			t.Errorf("ha mounts a claim: %+v", v)
		}
	}
	if v := vols["etcd-tls"]; v.Secret == nil || v.Secret.SecretName != "flock-apiserver-etcd-tls" {
		t.Errorf("etcd-tls volume = %+v, want the Secret flock-apiserver-etcd-tls", v)
	}
	if v := vols["etcd-data"]; v.HostPath == nil || !strings.HasPrefix(o.EmbeddedEtcd.DataDir, v.HostPath.Path) {
		t.Errorf("etcd-data volume = %+v, data dir %s: want the member's data on the node", v, o.EmbeddedEtcd.DataDir)
	}
	var pdb policyv1.PodDisruptionBudget
	r.into(t, "PodDisruptionBudget/flock-system/flock-apiserver", &pdb)
	sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
	if err != nil || !sel.Matches(labels.Set(sts.Spec.Template.Labels)) || pdb.Spec.MinAvailable == nil || pdb.Spec.MinAvailable.IntValue() != 2 {
		t.Errorf("PodDisruptionBudget = %+v, want minAvailable 2 over the replicas (selector err %v)", pdb.Spec, err)
	}
	var pc schedulingv1.PriorityClass
	r.into(t, "PriorityClass//"+spec.PriorityClassName, &pc)
}

// requireBaseDeployment fails the test with the reason when the kustomize base
// does not list the Deployment and its claim (the overlays patch them).
func requireBaseDeployment(t *testing.T) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(env.RepoRoot(), "artifacts/deploy/base/kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"deployment.yaml", "persistentvolumeclaim-etcd.yaml"} {
		if !regexp.MustCompile(`(?m)^- ` + regexp.QuoteMeta(f) + `$`).Match(data) {
			t.Fatalf("artifacts/deploy/base/kustomization.yaml does not list %s: the production overlay patches the base's Deployment", f)
		}
	}
}

// Each overlay (and the base) renders with both kubectls to what it promises.
func TestKustomizeRenders(t *testing.T) {
	requireBaseDeployment(t)
	forEachKubectl(t, func(t *testing.T, k cluster.Kubectl) {
		root := env.RepoRoot()

		t.Run("base", func(t *testing.T) {
			r := renderKustomize(t, k, filepath.Join(root, "artifacts/deploy/base"))
			checkRegistration(t, r)
			var d appsv1.Deployment
			r.into(t, deploymentKey, &d)
			checkHardenedPod(t, d.Spec.Template.Spec)
			// One replica with the embedded etcd on a claim, never two.
			if d.Spec.Replicas == nil || *d.Spec.Replicas != 1 || d.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType {
				t.Errorf("replicas %v strategy %s, want 1 and Recreate", d.Spec.Replicas, d.Spec.Strategy.Type)
			}
			var pvc corev1.PersistentVolumeClaim
			r.into(t, pvcKey, &pvc)
			c := d.Spec.Template.Spec.Containers[0]
			dataMount := ""
			for _, m := range c.VolumeMounts {
				for _, v := range d.Spec.Template.Spec.Volumes {
					if v.Name == m.Name && v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == pvc.Name {
						dataMount = m.MountPath
					}
				}
			}
			if dataMount == "" || !slices.ContainsFunc(c.Args, func(a string) bool {
				return strings.HasPrefix(a, "--embedded-etcd-data-dir="+dataMount+"/")
			}) {
				t.Errorf("the embedded etcd data dir is not on the claim %s (mount %q, args %v)", pvc.Name, dataMount, c.Args)
			}
			var svc corev1.Service
			r.into(t, serviceKey, &svc)
			if svc.Spec.Selector["app.kubernetes.io/name"] != d.Spec.Template.Labels["app.kubernetes.io/name"] || svc.Spec.Ports[0].TargetPort.String() != "https" {
				t.Errorf("Service selector %v targetPort %s does not reach the pods %v", svc.Spec.Selector, svc.Spec.Ports[0].TargetPort.String(), d.Spec.Template.Labels)
			}
		})

		t.Run("dev", func(t *testing.T) {
			r := renderKustomize(t, k, filepath.Join(root, "artifacts/deploy/overlays/dev"))
			checkRegistration(t, r)
			// flock-apiserver runs on the host: no Deployment, no claim.
			for _, key := range []string{deploymentKey, pvcKey} {
				if r[key] != nil {
					t.Errorf("the dev overlay renders %s", key)
				}
			}
			var svc corev1.Service
			r.into(t, serviceKey, &svc)
			if svc.Spec.Type != corev1.ServiceTypeExternalName || svc.Spec.ExternalName != "localhost" || len(svc.Spec.Selector) != 0 {
				t.Errorf("dev Service = %+v, want ExternalName localhost without selector", svc.Spec)
			}
		})

		t.Run("production", func(t *testing.T) {
			r := renderKustomize(t, k, filepath.Join(root, "artifacts/deploy/overlays/production"))
			checkRegistration(t, r)
			var d appsv1.Deployment
			r.into(t, deploymentKey, &d)
			spec := d.Spec.Template.Spec
			checkHardenedPod(t, spec)
			if d.Spec.Replicas == nil || *d.Spec.Replicas != 2 {
				t.Errorf("replicas = %v, want 2", d.Spec.Replicas)
			}
			if r[pvcKey] != nil {
				t.Error("production renders the embedded etcd's claim")
			}
			// External etcd, endpoints from a Secret; no embedded member.
			c := spec.Containers[0]
			var endpoints *corev1.EnvVar
			for i := range c.Env {
				if c.Env[i].Name == "ETCD_SERVERS" {
					endpoints = &c.Env[i]
				}
			}
			if endpoints == nil || endpoints.ValueFrom == nil || endpoints.ValueFrom.SecretKeyRef == nil || endpoints.ValueFrom.SecretKeyRef.Name != "flock-etcd" {
				t.Errorf("ETCD_SERVERS = %+v, want it from Secret flock-etcd", endpoints)
			}
			if !slices.Contains(c.Args, "--etcd-servers=$(ETCD_SERVERS)") || slices.ContainsFunc(c.Args, func(a string) bool { return strings.HasPrefix(a, "--embedded-etcd") }) {
				t.Errorf("args = %v, want --etcd-servers from the Secret and no embedded etcd", c.Args)
			}
			for _, v := range spec.Volumes {
				if v.PersistentVolumeClaim != nil {
					t.Errorf("production mounts a claim: %+v", v)
				}
			}
			// Anti-affinity: never two replicas on one node.
			aa := spec.Affinity
			if aa == nil || aa.PodAntiAffinity == nil || len(aa.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) != 1 ||
				aa.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution[0].TopologyKey != "kubernetes.io/hostname" ||
				aa.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution[0].LabelSelector.MatchLabels["app.kubernetes.io/name"] != "flock-apiserver" {
				t.Errorf("affinity = %+v", aa)
			}
			// A PriorityClass that exists in the rendering.
			var pc schedulingv1.PriorityClass
			r.into(t, "PriorityClass//"+spec.PriorityClassName, &pc)
			if pc.Value < 1000000 || pc.GlobalDefault {
				t.Errorf("PriorityClass %s = value %d globalDefault %v", pc.Name, pc.Value, pc.GlobalDefault)
			}
			// A PodDisruptionBudget selecting the pods that keeps one.
			var pdb policyv1.PodDisruptionBudget
			r.into(t, "PodDisruptionBudget/flock-system/flock-apiserver", &pdb)
			sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
			if err != nil || !sel.Matches(labels.Set(d.Spec.Template.Labels)) || pdb.Spec.MinAvailable == nil || pdb.Spec.MinAvailable.IntValue() != 1 {
				t.Errorf("PodDisruptionBudget = %+v (selector err %v)", pdb.Spec, err)
			}
		})

		t.Run("ha", func(t *testing.T) {
			r := renderKustomize(t, k, filepath.Join(root, "artifacts/deploy/overlays/ha"))
			checkRegistration(t, r)
			checkHAOverlay(t, r)
		})

		// The cert-manager way (rendered only: the local control plane has
		// no cert-manager CRDs).
		t.Run("cert-manager example", func(t *testing.T) {
			r := renderKustomize(t, k, filepath.Join(root, "examples/cert-manager"))
			checkRegistration(t, r)
			var d appsv1.Deployment
			r.into(t, deploymentKey, &d)
			secret := ""
			for _, v := range d.Spec.Template.Spec.Volumes {
				if v.Name == "serving-cert" && v.Secret != nil {
					secret = v.Secret.SecretName
				}
			}
			cert := r["Certificate/flock-system/flock-apiserver-serving-cert"]
			if cert == nil {
				t.Fatalf("no serving Certificate in %v", r.keys())
			}
			certSecret, _, _ := unstructured.NestedString(cert.Object, "spec", "secretName")
			dnsNames, _, _ := unstructured.NestedStringSlice(cert.Object, "spec", "dnsNames")
			issuer, _, _ := unstructured.NestedString(cert.Object, "spec", "issuerRef", "name")
			if certSecret != secret || !slices.Contains(dnsNames, "flock-apiserver.flock-system.svc") || r["Issuer/flock-system/"+issuer] == nil {
				t.Errorf("Certificate secret %q (Deployment mounts %q), dnsNames %v, issuer %q", certSecret, secret, dnsNames, issuer)
			}
			api := r[apiServiceKey]
			if got := api.GetAnnotations()["cert-manager.io/inject-ca-from"]; got != "flock-system/flock-apiserver-serving-cert" {
				t.Errorf("APIService inject-ca-from = %q", got)
			}
			if _, found, _ := unstructured.NestedFieldNoCopy(api.Object, "spec", "caBundle"); found {
				t.Error("the APIService carries a caBundle that re-applying would reset over the injected one")
			}
		})
	})
}

// Every overlay passes `kubectl apply --dry-run=server -k`, and the dry runs
// create nothing:
//   - dev against the shared local control plane, where it is already
//     applied (re-applying it is valid);
//   - every overlay, and production with its generated certificate, against a
//     bare control plane without Flock, as on a first install. (production
//     cannot be dry-run over the dev registration: turning the live
//     ExternalName Service into a ClusterIP one is a delete and create.)
func TestKustomizeDryRunServer(t *testing.T) {
	requireBaseDeployment(t)
	root := env.RepoRoot()
	certDir := filepath.Join(t.TempDir(), "deploy")
	if out, err := runTool(t, time.Minute, root, nil, filepath.Join(root, "hack", "gen-serving-cert.sh"), "--overlay", "production", "--out", certDir); err != nil {
		t.Fatalf("gen-serving-cert.sh: %v\n%s", err, out)
	}

	t.Run("dev on the local control plane", func(t *testing.T) {
		forEachKubectl(t, func(t *testing.T, k cluster.Kubectl) {
			dryRunKustomize(t, env, k, filepath.Join(root, "artifacts/deploy/overlays/dev"))
		})
		if ok, err := env.APIServiceAvailable(ctxFor(t)); !ok {
			t.Errorf("APIService not Available after the dry runs: %v", err)
		}
	})

	t.Run("every overlay on a bare control plane", func(t *testing.T) {
		bare := ownControlPlane(t, "bare", cluster.Options{Nodes: -1, WithoutFlock: true})
		// A dry-run Namespace does not exist for the objects in it: create
		// the namespace for real, as `kubectl create namespace` would.
		if _, err := bare.Kube.CoreV1().Namespaces().Create(ctxFor(t), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: cluster.FlockNamespace}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		devDir, prodDir, haDir := filepath.Join(root, "artifacts/deploy/overlays/dev"), filepath.Join(root, "artifacts/deploy/overlays/production"), filepath.Join(root, "artifacts/deploy/overlays/ha")
		dryRun := func(kind, name string) string { return kind + "/" + name + " created (server dry run)" }
		production := []string{
			dryRun("deployment.apps", "flock-apiserver"),
			dryRun("poddisruptionbudget.policy", "flock-apiserver"),
			dryRun("priorityclass.scheduling.k8s.io", "flock-apiserver-critical"),
			dryRun("apiservice.apiregistration.k8s.io", "v1alpha1.flock.dev"),
		}
		// What each overlay's dry run must show besides every object accepted.
		wants := map[string][]string{
			devDir:  nil,
			prodDir: production,
			certDir: append(slices.Clone(production), dryRun("secret", "flock-apiserver-serving-cert")),
			haDir: {
				dryRun("statefulset.apps", "flock-apiserver"),
				dryRun("service", "flock-apiserver-etcd"),
				dryRun("poddisruptionbudget.policy", "flock-apiserver"),
				dryRun("priorityclass.scheduling.k8s.io", "flock-apiserver-critical"),
				dryRun("apiservice.apiregistration.k8s.io", "v1alpha1.flock.dev"),
			},
		}
		for _, k := range []cluster.Kubectl{bare.KubectlBuilt(), mustSystemKubectl(t, bare)} {
			for _, dir := range []string{devDir, prodDir, certDir, haDir} {
				out := dryRunKustomize(t, bare, k, dir)
				for _, want := range wants[dir] {
					if !strings.Contains(out, want) {
						t.Errorf("%s (%s): dry run lacks %q:\n%s", dir, k.Name, want, out)
					}
				}
			}
		}
		// Nothing was created.
		if _, err := bare.Kube.AppsV1().Deployments(cluster.FlockNamespace).Get(ctxFor(t), "flock-apiserver", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("the dry runs created Deployment flock-apiserver (get: %v)", err)
		}
		if _, err := bare.Kube.AppsV1().StatefulSets(cluster.FlockNamespace).Get(ctxFor(t), "flock-apiserver", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("the dry runs created StatefulSet flock-apiserver (get: %v)", err)
		}
		if _, err := bare.Kube.SchedulingV1().PriorityClasses().Get(ctxFor(t), "flock-apiserver-critical", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("the dry runs created PriorityClass flock-apiserver-critical (get: %v)", err)
		}
		if _, err := bare.Kube.CoreV1().Services(cluster.FlockNamespace).Get(ctxFor(t), "flock-apiserver", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("the dry runs created Service flock-apiserver (get: %v)", err)
		}
	})
}

// dryRunKustomize runs `kubectl apply --dry-run=server -k dir` on c and checks
// that every rendered object was accepted; it returns what kubectl printed.
func dryRunKustomize(t *testing.T, c *cluster.Cluster, k cluster.Kubectl, dir string) string {
	t.Helper()
	r := renderKustomize(t, k, dir)
	ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
	defer cancel()
	res, err := c.Kubectl(ctx, k, "apply", "--dry-run=server", "-k", dir)
	if err != nil {
		t.Fatalf("%s: %v", dir, err)
	}
	lines := strings.Split(strings.TrimSpace(res.Stdout), "\n")
	if len(lines) != len(r) {
		t.Errorf("%s (%s): %d objects rendered, %d applied:\n%s", dir, k.Name, len(r), len(lines), res.Stdout)
	}
	for _, l := range lines {
		if !regexp.MustCompile(`^\S+ (created|configured|unchanged) \(server dry run\)$`).MatchString(l) {
			t.Errorf("%s (%s): unexpected line %q", dir, k.Name, l)
		}
	}
	return res.Stdout
}

func mustSystemKubectl(t *testing.T, c *cluster.Cluster) cluster.Kubectl {
	t.Helper()
	k, err := c.KubectlSystem()
	if err != nil {
		t.Fatalf("the version-skew check needs a second kubectl: %v", err)
	}
	return k
}

// hack/gen-serving-cert.sh: a CA and a serving certificate for
// flock-apiserver.flock-system.svc, in a Secret and the APIService caBundle;
// flock-apiserver serves it and a client trusting the caBundle accepts it.
// Re-running renews the certificate and keeps the CA.
func TestGenServingCert(t *testing.T) {
	requireBaseDeployment(t)
	script := filepath.Join(env.RepoRoot(), "hack", "gen-serving-cert.sh")
	out := filepath.Join(t.TempDir(), "deploy")
	if o, err := runTool(t, time.Minute, t.TempDir(), nil, script, "--overlay", "production", "--out", out); err != nil {
		t.Fatalf("gen-serving-cert.sh: %v\n%s", err, o)
	}
	read := func(name string) []byte {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(out, name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	caPEM, certPEM, keyPEM := read("ca.crt"), read("tls.crt"), read("tls.key")
	if st, err := os.Stat(filepath.Join(out, "ca.key")); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("ca.key: %v mode %v, want 0600", err, st.Mode().Perm())
	}
	const fqdn = "flock-apiserver.flock-system.svc"
	leaf := verifyServing(t, caPEM, certPEM, keyPEM, fqdn)

	// The rendering carries them.
	r := renderKustomize(t, env.KubectlBuilt(), out)
	bundle, _, _ := unstructured.NestedString(r[apiServiceKey].Object, "spec", "caBundle")
	if got, _ := base64.StdEncoding.DecodeString(bundle); string(got) != string(caPEM) {
		t.Errorf("APIService caBundle is not ca.crt")
	}
	var secret corev1.Secret
	r.into(t, "Secret/flock-system/flock-apiserver-serving-cert", &secret)
	if secret.Type != corev1.SecretTypeTLS || string(secret.Data["tls.crt"]) != string(certPEM) || string(secret.Data["tls.key"]) != string(keyPEM) {
		t.Errorf("Secret type %s, tls.crt/tls.key differ from the files", secret.Type)
	}
	if r[deploymentKey] == nil {
		t.Errorf("the generated kustomization lacks the overlay's Deployment")
	}

	// flock-apiserver serves it, for its Service name (SNI; the default
	// certificate stays the harness's, which has the 127.0.0.1 SAN the
	// harness's readiness check needs).
	s, err := env.StartExtraFlockAPIServer(ctxFor(t), "flock-apiserver-gencert", []string{
		"--tls-sni-cert-key=" + filepath.Join(out, "tls.crt") + "," + filepath.Join(out, "tls.key") + ":" + fqdn, "--controllers=-flock",
		"--store-guard=false", // a new store beside the main one
	})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop(cluster.DefaultStopGrace)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", fmt.Sprintf("127.0.0.1:%d", s.Port),
		&tls.Config{RootCAs: pool, ServerName: fqdn, MinVersion: tls.VersionTLS12})
	if err != nil {
		t.Fatalf("TLS to flock-apiserver with the generated certificate, trusting the caBundle: %v", err)
	}
	served := conn.ConnectionState().PeerCertificates[0]
	conn.Close()
	if !served.Equal(leaf) {
		t.Error("flock-apiserver serves another certificate")
	}

	// Again: a new serving certificate from the same CA.
	if o, err := runTool(t, time.Minute, t.TempDir(), nil, script, "--overlay", "production", "--out", out); err != nil || !strings.Contains(o, "reusing the CA") {
		t.Fatalf("second run: %v\n%s", err, o)
	}
	if string(read("ca.crt")) != string(caPEM) {
		t.Error("the second run replaced the CA")
	}
	if string(read("tls.crt")) == string(certPEM) {
		t.Error("the second run did not renew the serving certificate")
	}
	verifyServing(t, caPEM, read("tls.crt"), read("tls.key"), fqdn)

	// A wrong argument is refused with the usage.
	o, err := runTool(t, time.Minute, t.TempDir(), nil, script, "--no-such-flag")
	if err == nil || !strings.Contains(o, "unknown argument: --no-such-flag") || !strings.Contains(o, "--overlay") {
		t.Errorf("unknown flag: %v\n%s", err, o)
	}
}

// verifyServing checks that certPEM (with keyPEM) is a server certificate for
// dnsName signed by caPEM, and returns it.
func verifyServing(t *testing.T, caPEM, certPEM, keyPEM []byte, dnsName string) *x509.Certificate {
	t.Helper()
	if _, err := tls.X509KeyPair(certPEM, keyPEM); err != nil {
		t.Fatalf("tls.crt and tls.key do not match: %v", err)
	}
	block, _ := pem.Decode(certPEM)
	if block == nil {
		t.Fatal("tls.crt is not PEM")
	}
	leaf, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		t.Fatal("ca.crt is not a PEM certificate")
	}
	if _, err := leaf.Verify(x509.VerifyOptions{DNSName: dnsName, Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
		t.Errorf("tls.crt does not verify for %s against ca.crt: %v", dnsName, err)
	}
	if leaf.IsCA {
		t.Error("the serving certificate is a CA")
	}
	return leaf
}

// The node agent's component (artifacts/deploy/components/node-agent): in
// an overlay of the base it renders a DaemonSet whose pods the controller
// recognizes as agents, with the deployment's data root, its node from the
// downward API, and no more than a prepare helper may do (root with only
// CHOWN and FOWNER, no privilege escalation, a read-only root); its RBAC is
// no more than reading volumes, patching them and recording events;
// and the server accepts every object (server dry run).
func TestNodeAgentComponent(t *testing.T) {
	requireBaseDeployment(t)
	root := env.RepoRoot()
	// withAgent is a kustomization of overlay (or the base) with the
	// component.
	withAgent := func(overlay string) string {
		dir := t.TempDir()
		rel := func(p string) string {
			r, err := filepath.Rel(dir, filepath.Join(root, p))
			if err != nil {
				t.Fatal(err)
			}
			return r
		}
		kust := fmt.Sprintf("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- %s\ncomponents:\n- %s\n",
			rel(overlay), rel("artifacts/deploy/components/node-agent"))
		if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(kust), 0o644); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	dir, dev := withAgent("artifacts/deploy/base"), withAgent("artifacts/deploy/overlays/dev")
	forEachKubectl(t, func(t *testing.T, k cluster.Kubectl) {
		r := renderKustomize(t, k, dir)
		var d appsv1.Deployment
		r.into(t, deploymentKey, &d)
		var dataRoot string
		for _, a := range d.Spec.Template.Spec.Containers[0].Args {
			if v, ok := strings.CutPrefix(a, "--data-root="); ok {
				dataRoot = v
			}
		}
		var ds appsv1.DaemonSet
		r.into(t, "DaemonSet/flock-system/flock-node-agent", &ds)
		spec := ds.Spec.Template.Spec
		if ds.Spec.Template.Labels[nodeagent.LabelComponent] != nodeagent.ComponentNodeAgent || spec.ServiceAccountName != cluster.NodeAgentName || spec.HostNetwork {
			t.Errorf("agent pod labels %v, service account %q, hostNetwork %v", ds.Spec.Template.Labels, spec.ServiceAccountName, spec.HostNetwork)
		}
		if len(spec.Containers) != 1 || len(spec.Volumes) != 1 || spec.Volumes[0].HostPath == nil {
			t.Fatalf("containers %d, volumes %+v", len(spec.Containers), spec.Volumes)
		}
		c := spec.Containers[0]
		if dataRoot == "" || !slices.Contains(c.Args, "--data-root="+dataRoot) || spec.Volumes[0].HostPath.Path != dataRoot ||
			len(c.VolumeMounts) != 1 || c.VolumeMounts[0].MountPath != dataRoot {
			t.Errorf("the agent's data root: args %v, hostPath %s, mounts %+v; want the server's %q at the same path", c.Args, spec.Volumes[0].HostPath.Path, c.VolumeMounts, dataRoot)
		}
		if len(c.Env) != 1 || c.Env[0].Name != "NODE_NAME" || c.Env[0].ValueFrom == nil || c.Env[0].ValueFrom.FieldRef == nil || c.Env[0].ValueFrom.FieldRef.FieldPath != "spec.nodeName" {
			t.Errorf("env %+v, want NODE_NAME from spec.nodeName", c.Env)
		}
		sc := c.SecurityContext
		if sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
			sc.Privileged != nil && *sc.Privileged || sc.Capabilities == nil ||
			!slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || !slices.Equal(sc.Capabilities.Add, []corev1.Capability{"CHOWN", "FOWNER"}) {
			t.Errorf("agent securityContext %+v, want root with only CHOWN and FOWNER, no escalation, read-only root", sc)
		}
		var role rbacv1.ClusterRole
		r.into(t, "ClusterRole//flock-node-agent", &role)
		want := []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"persistentvolumes"}, Verbs: []string{"get", "list", "watch", "patch"}},
			{APIGroups: []string{"", "events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"create", "patch", "update"}},
		}
		if !sameRules(role.Rules, want) {
			t.Errorf("ClusterRole rules %+v, want %+v", role.Rules, want)
		}
		var binding rbacv1.ClusterRoleBinding
		r.into(t, "ClusterRoleBinding//flock-node-agent", &binding)
		if binding.RoleRef.Name != role.Name || len(binding.Subjects) != 1 || binding.Subjects[0].Namespace != cluster.FlockNamespace || binding.Subjects[0].Name != cluster.NodeAgentName {
			t.Errorf("binding %+v", binding)
		}
		// On the local control plane, over the overlay it runs (the dev
		// overlay: flock-apiserver on the host).
		dryRunKustomize(t, env, k, dev)
	})
}

// sameRules reports whether a and b allow the same verbs on the same
// resources of the same groups (each rule flattened; order aside).
func sameRules(a, b []rbacv1.PolicyRule) bool {
	flat := func(rules []rbacv1.PolicyRule) []string {
		var out []string
		for _, r := range rules {
			for _, g := range r.APIGroups {
				for _, res := range r.Resources {
					for _, v := range r.Verbs {
						out = append(out, g+"/"+res+"/"+v)
					}
				}
			}
		}
		slices.Sort(out)
		return slices.Compact(out)
	}
	return slices.Equal(flat(a), flat(b))
}
