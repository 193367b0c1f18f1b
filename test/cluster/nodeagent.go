package cluster

// The Flock node agent on real nodes (pkg/nodeagent, cmd/flock-node-agent):
// a DaemonSet in the server's namespace, running the static agent packed
// offline as NodeAgentImage, that prepares members' data directories on its
// node instead of a prepare helper pod per member. kwok nodes get none (no
// container runs there): on them, helper pods still do the work.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"flock.dev/flock/internal/ociimage"
	"flock.dev/flock/pkg/nodeagent"
)

const (
	// NodeAgentImage runs flock-node-agent (`make build` builds it).
	NodeAgentImage = "localhost/flock-node-agent:e2e"
	// NodeAgentName names the agent's DaemonSet, ServiceAccount,
	// ClusterRole and ClusterRoleBinding.
	NodeAgentName = "flock-node-agent"
	// nodeAgentBinary is where the program sits in its image.
	nodeAgentBinary = "/flock-node-agent"
)

// WriteNodeAgentImage packs the static agent at binary into NodeAgentImage
// and writes it to a tarball that `ctr images import` reads.
func WriteNodeAgentImage(binary, tarball string) error {
	data, err := os.ReadFile(binary)
	if err != nil {
		return fmt.Errorf("the node agent (`make build` builds it): %w", err)
	}
	img, err := ociimage.Build(ociimage.Spec{
		Entries:    []ociimage.Entry{{Path: nodeAgentBinary, Mode: 0o755, Data: data}, {Path: "/tmp", Dir: true, Mode: 0o1777}},
		Entrypoint: []string{nodeAgentBinary},
		Labels:     map[string]string{"org.opencontainers.image.source": "flock.dev/flock/cmd/flock-node-agent"},
	})
	if err != nil {
		return err
	}
	return ociimage.WriteTarball(tarball, map[string]v1.Image{NodeAgentImage: img})
}

// NodeAgentRules are what the agent may do: read member volumes and mark
// them prepared, and record events on them.
var NodeAgentRules = []rbacv1.PolicyRule{
	{APIGroups: []string{""}, Resources: []string{"persistentvolumes"}, Verbs: []string{"get", "list", "watch", "patch"}},
	{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create", "patch", "update"}},
	{APIGroups: []string{"events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"create", "patch", "update"}},
}

// ensureNodeAgents creates, unless they exist, the agent's ServiceAccount,
// ClusterRole and binding, and its DaemonSet on the real nodes, and waits
// (at most a minute) until an agent pod is Ready on each of nodes. Without
// a data root of their own (Options.DataRoot) the real nodes share the
// machine's, and no agent runs: helper pods prepare the directories.
func (c *Cluster) ensureNodeAgents(ctx context.Context, nodes []*RealNode) error {
	if c.opts.DataRoot == "" || len(nodes) == 0 {
		return nil
	}
	kube := c.Kube
	create := func(err error) error {
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return err
	}
	_, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: FlockNamespace}}, metav1.CreateOptions{})
	if err := create(err); err != nil {
		return fmt.Errorf("namespace %s: %w", FlockNamespace, err)
	}
	_, err = kube.CoreV1().ServiceAccounts(FlockNamespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: NodeAgentName}}, metav1.CreateOptions{})
	if err := create(err); err != nil {
		return fmt.Errorf("node agent ServiceAccount: %w", err)
	}
	_, err = kube.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: NodeAgentName}, Rules: NodeAgentRules}, metav1.CreateOptions{})
	if err := create(err); err != nil {
		return fmt.Errorf("node agent ClusterRole: %w", err)
	}
	_, err = kube.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: NodeAgentName},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: NodeAgentName},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: FlockNamespace, Name: NodeAgentName}},
	}, metav1.CreateOptions{})
	if err := create(err); err != nil {
		return fmt.Errorf("node agent ClusterRoleBinding: %w", err)
	}
	if err := c.CreateNodeAgentPolicy(ctx); err != nil {
		return err
	}
	_, err = kube.AppsV1().DaemonSets(FlockNamespace).Create(ctx, c.nodeAgentDaemonSet(), metav1.CreateOptions{})
	if err := create(err); err != nil {
		return fmt.Errorf("node agent DaemonSet: %w", err)
	}
	return c.waitNodeAgents(ctx, nodes)
}

// NodeAgentPolicyFile holds the ValidatingAdmissionPolicy (and its
// binding) that holds the agent's writes to marking Flock member volumes
// prepared, as the deploy component ships it.
const NodeAgentPolicyFile = "artifacts/deploy/components/node-agent/validatingadmissionpolicy.yaml"

// CreateNodeAgentPolicy creates, unless they exist, the objects of
// NodeAgentPolicyFile, read from the repository.
func (c *Cluster) CreateNodeAgentPolicy(ctx context.Context) error {
	data, err := os.ReadFile(filepath.Join(c.opts.RepoRoot, NodeAgentPolicyFile))
	if err != nil {
		return err
	}
	objs, err := decodeManifests(data)
	if err != nil {
		return fmt.Errorf("%s: %w", NodeAgentPolicyFile, err)
	}
	admission := c.Kube.AdmissionregistrationV1()
	for _, o := range objs {
		switch o.GetKind() {
		case "ValidatingAdmissionPolicy":
			var p admissionv1.ValidatingAdmissionPolicy
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &p); err != nil {
				return err
			}
			_, err = admission.ValidatingAdmissionPolicies().Create(ctx, &p, metav1.CreateOptions{})
		case "ValidatingAdmissionPolicyBinding":
			var b admissionv1.ValidatingAdmissionPolicyBinding
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &b); err != nil {
				return err
			}
			_, err = admission.ValidatingAdmissionPolicyBindings().Create(ctx, &b, metav1.CreateOptions{})
		default:
			return fmt.Errorf("%s: unexpected %s", NodeAgentPolicyFile, o.GetKind())
		}
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("%s %s: %w", o.GetKind(), o.GetName(), err)
		}
	}
	return nil
}

// nodeAgentDaemonSet is the agent's DaemonSet on the real nodes. In this
// harness pods cannot reach a Service IP (no kube-proxy), so the agent uses
// the node's network and kube-apiserver's loopback address; on a cluster it
// needs neither (artifacts/deploy/node-agent). It tolerates the real nodes'
// NoSchedule taint only: the NoExecute taint of a node's teardown drains it.
func (c *Cluster) nodeAgentDaemonSet() *appsv1.DaemonSet {
	podLabels := map[string]string{nodeagent.LabelComponent: nodeagent.ComponentNodeAgent}
	dirType := corev1.HostPathDirectoryOrCreate
	return &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: NodeAgentName, Namespace: FlockNamespace},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: podLabels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: podLabels},
				Spec: corev1.PodSpec{
					ServiceAccountName: NodeAgentName,
					NodeSelector:       map[string]string{RealNodeLabel: "true"},
					Tolerations:        []corev1.Toleration{{Key: RealNodeTaint, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
					HostNetwork:        true,
					DNSPolicy:          corev1.DNSDefault,
					EnableServiceLinks: ptr.To(false),
					Containers: []corev1.Container{{
						Name:            "agent",
						Image:           NodeAgentImage,
						ImagePullPolicy: corev1.PullNever,
						Args:            []string{"--data-root=" + c.opts.DataRoot, "--v=2"},
						Env: []corev1.EnvVar{
							{Name: "NODE_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}},
							{Name: "KUBERNETES_SERVICE_HOST", Value: "127.0.0.1"},
							{Name: "KUBERNETES_SERVICE_PORT", Value: strconv.Itoa(c.Ports.KubeAPIServer)},
						},
						VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: c.opts.DataRoot}},
						Resources: corev1.ResourceRequirements{
							Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("32Mi")},
							Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("128Mi")},
						},
						SecurityContext: &corev1.SecurityContext{
							RunAsUser:                ptr.To(int64(0)),
							AllowPrivilegeEscalation: ptr.To(false),
							ReadOnlyRootFilesystem:   ptr.To(true),
							Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}, Add: []corev1.Capability{"CHOWN", "FOWNER"}},
							SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
						},
					}},
					Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{
						Path: c.opts.DataRoot, Type: &dirType,
					}}}},
				},
			},
		},
	}
}

// waitNodeAgents waits (at most a minute) until an agent pod is Ready on
// each of nodes.
func (c *Cluster) waitNodeAgents(ctx context.Context, nodes []*RealNode) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	sel := labels.SelectorFromSet(labels.Set{nodeagent.LabelComponent: nodeagent.ComponentNodeAgent}).String()
	for {
		pods, err := c.Kube.CoreV1().Pods(FlockNamespace).List(ctx, metav1.ListOptions{LabelSelector: sel})
		ready := map[string]bool{}
		if err == nil {
			for _, p := range pods.Items {
				for _, cond := range p.Status.Conditions {
					if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue && p.DeletionTimestamp == nil {
						ready[p.Spec.NodeName] = true
					}
				}
			}
		}
		missing := ""
		for _, rn := range nodes {
			if !ready[rn.Name] {
				missing = rn.Name
			}
		}
		if missing == "" {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("no node agent Ready on %s within a minute (last error: %v); see its pod in %s", missing, err, FlockNamespace)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// importNodeAgentImage imports NodeAgentImage into rn's containerd.
func (c *Cluster) importNodeAgentImage(ctx context.Context, rn *RealNode) error {
	tarball := filepath.Join(rn.Dir, "node-agent-image.tar")
	if err := WriteNodeAgentImage(filepath.Join(c.opts.BinDir, "flock-node-agent"), tarball); err != nil {
		return err
	}
	if out, err := rn.ctr(ctx, c.opts.BinDir, "-n", "k8s.io", "images", "import", tarball); err != nil {
		return fmt.Errorf("import the node agent image: %w: %s", err, out)
	}
	return nil
}

// KwokNodeAgentName names the DaemonSet of the kwok nodes' simulated agents.
const KwokNodeAgentName = "flock-node-agent-kwok"

// StartKwokNodeAgents simulates the node agents of the kwok nodes: a
// DaemonSet on them, whose pods kwok reports Ready (so the controller
// relies on them as on real agents), and one flock-node-agent process on
// this machine doing their work for all of them (--simulate-any-node): it
// makes each member directory under Options.DataRoot on this machine,
// where a kwok node's would be, and marks its volume prepared. It waits
// until an agent pod is Ready on every kwok node.
func (c *Cluster) StartKwokNodeAgents(ctx context.Context) error {
	if c.opts.DataRoot == "" {
		return fmt.Errorf("kwok node agents need Options.DataRoot (the simulated nodes' directories are made there)")
	}
	if err := os.MkdirAll(c.opts.DataRoot, 0o755); err != nil {
		return err
	}
	if _, err := c.start(ctx, "flock-node-agent-kwok", "flock-node-agent", []string{
		"--simulate-any-node", "--node-name=kwok-nodes", "--data-root=" + c.opts.DataRoot, "--kubeconfig=" + c.KubeconfigPath,
		"--kube-api-qps=200", "--kube-api-burst=400", "--v=2",
	}, nil); err != nil {
		return err
	}
	ds := c.nodeAgentDaemonSet()
	ds.Name = KwokNodeAgentName
	spec := &ds.Spec.Template.Spec
	spec.NodeSelector = map[string]string{"type": "kwok"}
	spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
	spec.ServiceAccountName = ""
	if _, err := c.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: FlockNamespace}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("namespace %s: %w", FlockNamespace, err)
	}
	if _, err := c.Kube.AppsV1().DaemonSets(FlockNamespace).Create(ctx, ds, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("kwok node agent DaemonSet: %w", err)
	}
	return c.WaitKwokNodeAgents(ctx)
}

// WaitKwokNodeAgents waits (at most 3 minutes) until the kwok nodes'
// agent DaemonSet has a Ready pod on every node it selects (after nodes
// were added).
func (c *Cluster) WaitKwokNodeAgents(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	for {
		ds, err := c.Kube.AppsV1().DaemonSets(FlockNamespace).Get(ctx, KwokNodeAgentName, metav1.GetOptions{})
		if err == nil && ds.Status.ObservedGeneration == ds.Generation && ds.Status.DesiredNumberScheduled > 0 &&
			ds.Status.NumberReady == ds.Status.DesiredNumberScheduled && ds.Status.DesiredNumberScheduled == int32(c.kwokNodeCount(ctx)) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the kwok nodes' agents not all Ready within 3 minutes (last: %v)", err)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// kwokNodeCount is the number of kwok nodes (-1 when unknown).
func (c *Cluster) kwokNodeCount(ctx context.Context) int {
	l, err := c.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: "type=kwok"})
	if err != nil {
		return -1
	}
	return len(l.Items)
}
