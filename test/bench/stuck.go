// File stuck.go: when a readiness run times out, what its members were
// waiting for, read from the cluster before the run's namespace is deleted.
// The count of the run's watches says how many pods were Ready; a LIST says
// it again (a watch that ended unseen would show as a difference), and the
// members that were not Ready are named with their pods' state, their
// Flock's word for them and the namespace's warnings.

package main

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// stuckShown is how many members and warnings a report names.
const stuckShown = 8

// stuckReport describes the members of ns that were not Ready: lines for
// the bench's log and its JSON.
func (k kindClients) stuckReport(ctx context.Context, kind, ns string, want int32) []string {
	pods, err := k.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return []string{"listing the pods: " + err.Error()}
	}
	var ready int32
	var waiting []string
	for i := range pods.Items {
		p := &pods.Items[i]
		if isReady(p) {
			ready++
			continue
		}
		waiting = append(waiting, podState(p))
	}
	slices.Sort(waiting)
	lines := []string{fmt.Sprintf("a LIST: %d member pods, %d Ready, %d members have no pod", len(pods.Items), ready, want-int32(len(pods.Items)))}
	lines = append(lines, firstOf(waiting, "pod ")...)
	if kind == tFlock {
		flocks, err := k.flock.FlockV1alpha1().Flocks(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return append(lines, "listing the Flocks: "+err.Error())
		}
		var members []string
		for _, f := range flocks.Items {
			for _, m := range f.Status.Members {
				if !m.Ready {
					members = append(members, fmt.Sprintf("%s/%d on %s: %s", f.Name, m.Ordinal, m.Node, m.Message))
				}
			}
		}
		slices.Sort(members)
		lines = append(lines, fmt.Sprintf("Flock status: %d members not Ready", len(members)))
		lines = append(lines, firstOf(members, "member ")...)
	}
	events, err := k.kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "type=Warning"})
	if err != nil {
		return append(lines, "listing the events: "+err.Error())
	}
	var warnings []string
	for _, e := range events.Items {
		if e.Type != corev1.EventTypeWarning {
			continue
		}
		warnings = append(warnings, fmt.Sprintf("%s %s/%s x%d: %s", e.Reason, e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Count, e.Message))
	}
	slices.Sort(warnings)
	lines = append(lines, fmt.Sprintf("%d warning events", len(warnings)))
	return append(lines, firstOf(warnings, "warning ")...)
}

// podState is a pod's name, node, phase and the conditions that are not
// true, with their reasons.
func podState(p *corev1.Pod) string {
	var conds []string
	for _, c := range p.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			conds = append(conds, strings.TrimSpace(fmt.Sprintf("%s=%s %s %s", c.Type, c.Status, c.Reason, c.Message)))
		}
	}
	node := p.Spec.NodeName
	if node == "" {
		node = "(no node)"
	}
	return fmt.Sprintf("%s on %s, %s; %s", p.Name, node, p.Status.Phase, strings.Join(conds, "; "))
}

// firstOf prefixes the first stuckShown of xs and says how many more there were.
func firstOf(xs []string, prefix string) []string {
	var out []string
	for i, x := range xs {
		if i == stuckShown {
			out = append(out, fmt.Sprintf("... and %d more", len(xs)-stuckShown))
			break
		}
		out = append(out, prefix+x)
	}
	return out
}
