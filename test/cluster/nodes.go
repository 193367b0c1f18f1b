package cluster

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
)

// Labels every kwok node gets, besides kubernetes.io/hostname and the zone.
const (
	LabelZone   = "topology.kubernetes.io/zone"
	LabelRegion = "topology.kubernetes.io/region"
	Region      = "local"
)

// NodeAllocatable is what each kwok node offers.
var NodeAllocatable = corev1.ResourceList{
	corev1.ResourceCPU:    resource.MustParse("8"),
	corev1.ResourceMemory: resource.MustParse("32Gi"),
	corev1.ResourcePods:   resource.MustParse("110"),
}

func (c *Cluster) createNodes(ctx context.Context) error {
	for i := 1; i <= c.opts.Nodes; i++ {
		name := fmt.Sprintf("node-%d", i)
		if _, err := c.AddNode(ctx, name, nil, nil); err != nil {
			return err
		}
		c.NodeNames = append(c.NodeNames, name)
	}
	return nil
}

// AddNode creates a kwok node that looks like a real one (hostname, zone,
// region, os/arch labels, allocatable cpu/memory/pods, an InternalIP) plus the
// given labels and taints, and waits until kwok reports it Ready. Zones are
// assigned round-robin in creation order.
func (c *Cluster) AddNode(ctx context.Context, name string, labels map[string]string, taints []corev1.Taint) (*corev1.Node, error) {
	c.mu.Lock()
	seq := c.nodeSeq
	c.nodeSeq++
	c.mu.Unlock()
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: name,
			Labels: map[string]string{
				corev1.LabelHostname:           name,
				LabelZone:                      c.opts.Zones[seq%len(c.opts.Zones)],
				LabelRegion:                    Region,
				corev1.LabelOSStable:           "linux",
				corev1.LabelArchStable:         "amd64",
				corev1.LabelInstanceTypeStable: "kwok.8x32",
				"type":                         "kwok",
			},
			Annotations: map[string]string{
				KwokNodeAnnotation:             "fake",
				"node.alpha.kubernetes.io/ttl": "0",
			},
		},
		Spec: corev1.NodeSpec{Taints: taints},
		Status: corev1.NodeStatus{
			Allocatable: NodeAllocatable.DeepCopy(),
			Capacity:    NodeAllocatable.DeepCopy(),
			Addresses: []corev1.NodeAddress{
				{Type: corev1.NodeInternalIP, Address: fmt.Sprintf("172.18.%d.%d", 1+seq/250, 2+seq%250)},
				{Type: corev1.NodeHostName, Address: name},
			},
		},
	}
	for k, v := range labels {
		node.Labels[k] = v
	}
	created, err := c.Kube.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("create node %s: %w", name, err)
	}
	klog.FromContext(ctx).V(1).Info("Created node", "node", klog.KObj(created))
	if err := c.WaitNodeReady(ctx, name); err != nil {
		return nil, err
	}
	return c.Kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
}

// WaitNodeReady waits until node name has condition Ready=True.
func (c *Cluster) WaitNodeReady(ctx context.Context, name string) error {
	kwok := c.processNamed("kwok")
	return c.waitFor(ctx, kwok, "node "+name+" Ready", func(ctx context.Context) (bool, error) {
		n, err := c.Kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
				return true, nil
			}
		}
		return false, fmt.Errorf("node %s is not Ready yet", name)
	})
}

// processNamed returns the latest process with that name, or nil.
func (c *Cluster) processNamed(name string) *Process {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := len(c.procs) - 1; i >= 0; i-- {
		if c.procs[i].Name == name {
			return c.procs[i]
		}
	}
	return nil
}
