// Package placement holds the one rule of Flock placement, as pure functions:
// which nodes are eligible for a Flock, and which node each member gets. The
// admission plugin and the controller both call it, so what admission accepts
// is exactly what the controller can place.
package placement

import (
	corev1 "k8s.io/api/core/v1"
)

// Requirement is what a Flock asks of the cluster's nodes.
type Requirement struct {
	// Replicas is the number of members.
	Replicas int32
	// NodeSelector is spec.placement.nodeSelector (empty: every node).
	NodeSelector map[string]string
	// Nodes is spec.placement.nodes, the optional explicit ordinal -> node map.
	Nodes []string
	// Tolerations are spec.template.spec.tolerations.
	Tolerations []corev1.Toleration
}

// Exclusion says why one node is not eligible.
type Exclusion struct {
	Node   string
	Reason Reason
	// Detail is human-readable, e.g. the taint that is not tolerated.
	Detail string
}

// Reason classifies an Exclusion.
type Reason string

// Reasons a node is not eligible.
const (
	ReasonSelector  Reason = "NodeSelector"
	ReasonCordoned  Reason = "Cordoned"
	ReasonTaint     Reason = "Taint"
	ReasonNotReady  Reason = "NotReady" // only used for warnings: NotReady alone does not exclude
	ReasonMissing   Reason = "Missing"  // an explicit node that does not exist
	ReasonDuplicate Reason = "Duplicate"
)

// Report is the outcome of evaluating a Requirement against a set of nodes.
type Report struct {
	// Total is the number of nodes considered.
	Total int
	// Eligible are the names of eligible nodes, sorted.
	Eligible []string
	// Excluded explains every node that is not eligible.
	Excluded []Exclusion
	// NotReady are eligible nodes whose Ready condition is not True (for warnings).
	NotReady []string
}

// Eligible evaluates which nodes can hold members of a Flock with requirement r.
func Eligible(nodes []*corev1.Node, r Requirement) Report {
	panic("not implemented")
}

// IsEligible reports whether one node is eligible for requirement r (selector,
// cordon and taints; it ignores Replicas and Nodes).
func IsEligible(node *corev1.Node, r Requirement) (bool, Exclusion) {
	panic("not implemented")
}

// Check returns nil when the cluster can hold r, or an error whose message
// names the asked number, the eligible number and why other nodes were
// excluded, e.g. "only 3 of 5 nodes are eligible (nodeSelector disk=local
// excludes 1; 1 cordoned)". With explicit Nodes it also checks that the first
// Replicas entries are distinct, exist and are eligible.
func Check(nodes []*corev1.Node, r Requirement) *CheckError {
	panic("not implemented")
}

// CheckError is a refusal from Check.
type CheckError struct {
	// Field is the path the refusal is about, e.g. "spec.replicas" or "spec.placement.nodes[2]".
	Field string
	// Value is the offending value (replicas, or the node name).
	Value interface{}
	// Message explains the refusal.
	Message string
}

func (e *CheckError) Error() string { return e.Field + ": " + e.Message }

// Assign returns the node of every ordinal in [0, r.Replicas): existing
// assignments (ordinal -> node) are kept as they are, even when the node is no
// longer eligible; new ordinals get, in ordinal order, r.Nodes[i] when given,
// else the eligible node not already used by this Flock with the lowest usage
// (usage: node -> number of members of all Flocks on it), ties broken by node
// name. Ordinals that cannot be placed are returned in unplaced.
func Assign(nodes []*corev1.Node, r Requirement, existing map[int32]string, usage map[string]int) (assigned map[int32]string, unplaced []int32) {
	panic("not implemented")
}
