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
	"slices"
	"strconv"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"

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

// NodeAgentComponent is the deploy component the harness runs the agent
// from: its files, as shipped, with the DaemonSet adapted to this machine.
const NodeAgentComponent = "artifacts/deploy/components/node-agent"

// NodeAgentObjects returns the objects of NodeAgentComponent, read from the
// files in repoRoot, with its DaemonSet passed through daemonSet, or left
// out when daemonSet is nil.
func NodeAgentObjects(repoRoot string, daemonSet func(*appsv1.DaemonSet)) ([]*unstructured.Unstructured, error) {
	files, err := filepath.Glob(filepath.Join(repoRoot, NodeAgentComponent, "*.yaml"))
	if err != nil {
		return nil, err
	}
	var out []*unstructured.Unstructured
	for _, f := range files {
		if filepath.Base(f) == "kustomization.yaml" {
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		objs, err := decodeManifests(data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		for _, o := range objs {
			if o.GetKind() != "DaemonSet" {
				out = append(out, o)
				continue
			}
			if daemonSet == nil {
				continue
			}
			var ds appsv1.DaemonSet
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &ds); err != nil {
				return nil, fmt.Errorf("%s: %w", f, err)
			}
			daemonSet(&ds)
			m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&ds)
			if err != nil {
				return nil, err
			}
			out = append(out, &unstructured.Unstructured{Object: m})
		}
	}
	return out, nil
}

// ApplyNodeAgent applies NodeAgentComponent's objects (server-side), the
// DaemonSet adapted by daemonSet (nil: without it).
func (c *Cluster) ApplyNodeAgent(ctx context.Context, daemonSet func(*appsv1.DaemonSet)) error {
	objs, err := NodeAgentObjects(c.opts.RepoRoot, daemonSet)
	if err != nil {
		return err
	}
	return c.applyObjects(ctx, objs, NodeAgentComponent)
}

// ensureNodeAgents applies the node agent's component, its DaemonSet on
// the real nodes (realNodeAgent), and waits (at most a minute) until an
// agent pod is Ready on each of nodes. Without a data root of their own
// (Options.DataRoot) the real nodes share the machine's, and no agent runs:
// helper pods prepare the directories.
func (c *Cluster) ensureNodeAgents(ctx context.Context, nodes []*RealNode) error {
	if c.opts.DataRoot == "" || len(nodes) == 0 {
		return nil
	}
	if _, err := c.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: FlockNamespace}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("namespace %s: %w", FlockNamespace, err)
	}
	if err := c.ApplyNodeAgent(ctx, c.realNodeAgent); err != nil {
		return err
	}
	return c.waitNodeAgents(ctx, nodes)
}

// realNodeAgent adapts the component's DaemonSet to the real nodes of this
// harness: the offline image, the cluster's data root, the real nodes only
// (it tolerates their NoSchedule taint; the NoExecute taint of a node's
// teardown drains it). Pods here cannot reach a Service IP (no
// kube-proxy), so the agent uses the node's network and kube-apiserver's
// loopback address.
func (c *Cluster) realNodeAgent(ds *appsv1.DaemonSet) {
	spec := &ds.Spec.Template.Spec
	spec.NodeSelector = map[string]string{RealNodeLabel: "true"}
	spec.Tolerations = []corev1.Toleration{{Key: RealNodeTaint, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
	spec.HostNetwork, spec.DNSPolicy = true, corev1.DNSDefault
	for i := range spec.Volumes {
		if hp := spec.Volumes[i].HostPath; hp != nil {
			hp.Path = c.opts.DataRoot
		}
	}
	ctr := &spec.Containers[0]
	ctr.Image, ctr.ImagePullPolicy = NodeAgentImage, corev1.PullNever
	ctr.Args = []string{"--data-root=" + c.opts.DataRoot, "--v=2"}
	for i := range ctr.VolumeMounts {
		ctr.VolumeMounts[i].MountPath = c.opts.DataRoot
	}
	ctr.Env = append(ctr.Env,
		corev1.EnvVar{Name: "KUBERNETES_SERVICE_HOST", Value: "127.0.0.1"},
		corev1.EnvVar{Name: "KUBERNETES_SERVICE_PORT", Value: strconv.Itoa(c.Ports.KubeAPIServer)})
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
	// The component's DaemonSet on the kwok nodes, under a name of its own;
	// kwok never runs its image.
	objs, err := NodeAgentObjects(c.opts.RepoRoot, func(ds *appsv1.DaemonSet) {
		ds.Name = KwokNodeAgentName
		spec := &ds.Spec.Template.Spec
		spec.NodeSelector = map[string]string{"type": "kwok"}
		spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
		spec.ServiceAccountName = ""
	})
	if err != nil {
		return err
	}
	objs = slices.DeleteFunc(objs, func(o *unstructured.Unstructured) bool { return o.GetKind() != "DaemonSet" })
	if _, err := c.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: FlockNamespace}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("namespace %s: %w", FlockNamespace, err)
	}
	if err := c.applyObjects(ctx, objs, "the kwok nodes' agents"); err != nil {
		return err
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
			return fmt.Errorf("the kwok nodes' agents not all Ready within 3 minutes (%s)", c.kwokAgentsReport(ds, err))
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// kwokAgentsReport says, for the error of WaitKwokNodeAgents, what the
// last read of the agents' DaemonSet found, how many kwok nodes there are,
// and which agent pods are not Ready.
func (c *Cluster) kwokAgentsReport(ds *appsv1.DaemonSet, dsErr error) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	last := fmt.Sprintf("last: %v", dsErr)
	if dsErr == nil {
		last = fmt.Sprintf("last: generation %d observed %d, %d kwok nodes, %d scheduled, %d Ready", ds.Generation, ds.Status.ObservedGeneration,
			c.kwokNodeCount(ctx), ds.Status.DesiredNumberScheduled, ds.Status.NumberReady)
	}
	pods, err := c.Kube.CoreV1().Pods(FlockNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return last + "; listing the agent pods: " + err.Error()
	}
	var out []string
	for _, p := range pods.Items {
		if ref := metav1.GetControllerOf(&p); ref == nil || ref.Kind != "DaemonSet" || ref.Name != KwokNodeAgentName {
			continue
		}
		ready := false
		for _, cond := range p.Status.Conditions {
			ready = ready || (cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue)
		}
		if !ready {
			out = append(out, fmt.Sprintf("%s on %q (%s)", p.Name, p.Spec.NodeName, p.Status.Phase))
		}
	}
	if len(out) == 0 {
		return last + "; every agent pod is Ready"
	}
	return fmt.Sprintf("%s; %d agent pods not Ready: %s", last, len(out), strings.Join(out[:min(len(out), 10)], ", "))
}

// kwokNodeCount is the number of kwok nodes (-1 when unknown).
func (c *Cluster) kwokNodeCount(ctx context.Context) int {
	l, err := c.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: "type=kwok"})
	if err != nil {
		return -1
	}
	return len(l.Items)
}
