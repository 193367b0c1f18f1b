// Package placement holds the one rule of Flock placement, as pure functions:
// which nodes are eligible for a Flock, and which node each member gets. The
// admission plugin and the controller both call it, so what admission accepts
// is exactly what the controller can place.
//
// A node is eligible for a Flock when it
//   - carries every label of spec.placement.nodeSelector,
//   - is not cordoned (spec.unschedulable), and
//   - has no NoSchedule or NoExecute taint that the template's tolerations do
//     not tolerate (PreferNoSchedule taints never exclude a node).
//
// A NotReady node is not excluded for being NotReady: the node lifecycle
// controller puts node.kubernetes.io/not-ready and .../unreachable taints on
// it, and those exclude it unless tolerated. An eligible NotReady node is only
// reported, so callers can warn about it.
package placement

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"flock.dev/flock/pkg/apis/flock/v1alpha1"
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

// RequirementFromFlock returns the Requirement of a versioned Flock. A nil
// spec.replicas counts as the default, 1.
func RequirementFromFlock(f *v1alpha1.Flock) Requirement {
	return Requirement{
		Replicas:     v1alpha1.ReplicasOf(&f.Spec),
		NodeSelector: f.Spec.Placement.NodeSelector,
		Nodes:        f.Spec.Placement.Nodes,
		Tolerations:  f.Spec.Template.Spec.Tolerations,
	}
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
	// ReasonInsufficient is the Reason of a CheckError refusing more replicas
	// than eligible nodes.
	ReasonInsufficient Reason = "Insufficient"
)

// IsEligible reports whether one node is eligible for requirement r (selector,
// cordon and taints; it ignores Replicas and Nodes).
func IsEligible(node *corev1.Node, r Requirement) (bool, Exclusion) {
	m := newMatcher(r)
	reason, taint := m.eval(node)
	if reason == "" {
		return true, Exclusion{}
	}
	return false, m.exclusion(node.Name, reason, taint)
}

// IsReady reports whether a node's Ready condition is True. A node without a
// Ready condition is not ready.
func IsReady(node *corev1.Node) bool {
	for i := range node.Status.Conditions {
		if node.Status.Conditions[i].Type == corev1.NodeReady {
			return node.Status.Conditions[i].Status == corev1.ConditionTrue
		}
	}
	return false
}

// ToleratesTaint reports whether toleration t tolerates taint, with the
// scheduler's rules: an empty effect matches every effect; an empty key
// matches every key (validation only allows it with operator Exists, which
// then tolerates every taint); operator Exists matches any value, Equal (or
// empty) an equal value. The numeric operators Lt and Gt belong to an alpha
// feature that is off by default, so they tolerate nothing here: admission
// must never accept what the scheduler cannot place.
func ToleratesTaint(t *corev1.Toleration, taint *corev1.Taint) bool {
	if t.Effect != "" && t.Effect != taint.Effect {
		return false
	}
	if t.Key != "" && t.Key != taint.Key {
		return false
	}
	switch t.Operator {
	case "", corev1.TolerationOpEqual:
		return t.Value == taint.Value
	case corev1.TolerationOpExists:
		return true
	default:
		return false
	}
}

// UntoleratedTaint returns the first NoSchedule or NoExecute taint of taints
// that no toleration tolerates, or nil.
func UntoleratedTaint(taints []corev1.Taint, tolerations []corev1.Toleration) *corev1.Taint {
	for i := range taints {
		taint := &taints[i]
		if taint.Effect != corev1.TaintEffectNoSchedule && taint.Effect != corev1.TaintEffectNoExecute {
			continue
		}
		tolerated := false
		for j := range tolerations {
			if ToleratesTaint(&tolerations[j], taint) {
				tolerated = true
				break
			}
		}
		if !tolerated {
			return taint
		}
	}
	return nil
}

// Raises reports whether next asks more of the cluster than prev, so that an
// update from prev to next must be checked: more replicas, a nodeSelector
// label that prev did not require, a toleration of prev that next drops, or an
// explicit node for one of next's ordinals that prev did not pin there. An
// update that does not raise the requirement is never refused for capacity,
// so a user can always lower, fix or delete a Flock, even after nodes are gone.
func Raises(prev, next Requirement) bool {
	if next.Replicas > prev.Replicas {
		return true
	}
	for k, v := range next.NodeSelector {
		if pv, ok := prev.NodeSelector[k]; !ok || pv != v {
			return true
		}
	}
	for i := range prev.Tolerations {
		kept := false
		for j := range next.Tolerations {
			if sameToleration(&prev.Tolerations[i], &next.Tolerations[j]) {
				kept = true
				break
			}
		}
		if !kept {
			return true
		}
	}
	prevExplicit := prev.Nodes[:min(len(prev.Nodes), int(max(prev.Replicas, 0)))]
	for i, name := range next.Nodes[:min(len(next.Nodes), int(max(next.Replicas, 0)))] {
		if i >= len(prevExplicit) || prevExplicit[i] != name {
			return true
		}
	}
	return false
}

// sameToleration compares what matters for eligibility: tolerationSeconds
// does not, and an empty operator is Equal.
func sameToleration(a, b *corev1.Toleration) bool {
	op := func(o corev1.TolerationOperator) corev1.TolerationOperator {
		if o == "" {
			return corev1.TolerationOpEqual
		}
		return o
	}
	return a.Key == b.Key && op(a.Operator) == op(b.Operator) && a.Value == b.Value && a.Effect == b.Effect
}

// Verify returns nil when the cluster can hold r, or an error whose message
// names the asked number, the eligible number and why other nodes were
// excluded, e.g. "only 3 of 5 nodes are eligible (nodeSelector disk=local
// excludes 1; 1 cordoned)". With explicit Nodes it also checks that the
// first Replicas entries are distinct, exist and are eligible. When r fits,
// it returns a warning for eligible nodes that may hold a member but are
// NotReady (members placed there wait until the node is Ready). Nodes that
// may hold a member are the first Replicas explicit nodes when they cover
// every ordinal, else every eligible node. Verify makes one pass over nodes
// and allocates nothing per node.
func Verify(nodes []*corev1.Node, r Requirement) (*CheckError, []string) {
	replicas := int(max(r.Replicas, 0))
	m := newMatcher(r)
	explicit, byName, refusal := explicitNodes(r)
	if refusal != nil {
		return refusal, nil
	}
	var found []*corev1.Node
	if len(explicit) > 0 {
		found = make([]*corev1.Node, len(explicit))
	}

	var t tally
	t.total = len(nodes)
	var notReady []string
	for _, n := range nodes {
		reason, taint := m.eval(n)
		t.add(reason, taint)
		counted := reason == "" && replicas > len(explicit)
		if byName != nil {
			if i, ok := byName[n.Name]; ok {
				found[i] = n
				counted = reason == ""
			}
		}
		if counted && !IsReady(n) {
			notReady = append(notReady, n.Name)
		}
	}
	return decide(r, m, explicit, found, &t, notReady)
}

// explicitNodes returns the explicit part of the map, the first Replicas
// entries of r.Nodes, and the ordinal of each; or the refusal of a node named
// twice.
func explicitNodes(r Requirement) ([]string, map[string]int, *CheckError) {
	explicit := r.Nodes[:min(len(r.Nodes), int(max(r.Replicas, 0)))]
	if len(explicit) == 0 {
		return nil, nil, nil
	}
	byName := make(map[string]int, len(explicit))
	for i, name := range explicit {
		if j, dup := byName[name]; dup {
			return nil, nil, &CheckError{
				Field:   nodesPath.Index(i).String(),
				Value:   name,
				Reason:  ReasonDuplicate,
				Message: fmt.Sprintf("node %q is already the node of ordinal %d (spec.placement.nodes[%d])", name, j, j),
				path:    nodesPath.Index(i),
			}
		}
		byName[name] = i
	}
	return explicit, byName, nil
}

// decide is Verify's verdict once the nodes are counted: found[i] is the node
// named explicit[i] (nil when missing), t the tally over all nodes, notReady
// the eligible nodes that would be counted but are not Ready.
func decide(r Requirement, m *matcher, explicit []string, found []*corev1.Node, t *tally, notReady []string) (*CheckError, []string) {
	for i, name := range explicit {
		n := found[i]
		if n == nil {
			return &CheckError{
				Field:   nodesPath.Index(i).String(),
				Value:   name,
				Reason:  ReasonMissing,
				Message: fmt.Sprintf("node %q does not exist", name),
				path:    nodesPath.Index(i),
			}, nil
		}
		if reason, taint := m.eval(n); reason != "" {
			ex := m.exclusion(name, reason, taint)
			return &CheckError{
				Field:   nodesPath.Index(i).String(),
				Value:   name,
				Reason:  reason,
				Message: fmt.Sprintf("node %q is not eligible: %s", name, ex.Detail),
				path:    nodesPath.Index(i),
			}, nil
		}
	}

	if t.eligible < int(max(r.Replicas, 0)) {
		return &CheckError{
			Field:   replicasPath.String(),
			Value:   r.Replicas,
			Reason:  ReasonInsufficient,
			Message: t.message(m),
			path:    replicasPath,
		}, nil
	}
	if len(notReady) == 0 {
		return nil, nil
	}
	slices.Sort(notReady)
	return nil, []string{notReadyWarning(notReady, t.eligible)}
}

var (
	replicasPath = field.NewPath("spec", "replicas")
	nodesPath    = field.NewPath("spec", "placement", "nodes")
)

// CheckError is a refusal from Verify.
type CheckError struct {
	// Field is the path the refusal is about, e.g. "spec.replicas" or "spec.placement.nodes[2]".
	Field string
	// Value is the offending value (replicas, or the node name).
	Value interface{}
	// Message explains the refusal.
	Message string
	// Reason classifies the refusal: ReasonInsufficient on spec.replicas;
	// ReasonDuplicate, ReasonMissing or the node's exclusion reason on an
	// explicit node.
	Reason Reason

	path *field.Path
}

// Error renders the refusal as a field error does, e.g. "spec.replicas:
// Invalid value: 4: only 3 of 5 nodes are eligible".
func (e *CheckError) Error() string { return e.FieldError().Error() }

// FieldError returns the refusal as an Invalid field error, ready for
// apierrors.NewInvalid.
func (e *CheckError) FieldError() *field.Error {
	p := e.path
	if p == nil {
		p = field.NewPath(e.Field)
	}
	return field.Invalid(p, e.Value, e.Message)
}

// Assign returns the node of every ordinal in [0, r.Replicas): existing
// assignments (ordinal -> node) are kept as they are, even when the node is no
// longer eligible; new ordinals get, in ordinal order, r.Nodes[i] when given,
// else an eligible node not already used by this Flock: first one in the zone
// (label topology.kubernetes.io/zone) holding the fewest members of this
// Flock, then the one with the lowest usage (usage: node -> number of members
// of all Flocks on it), ties broken by node name. Nodes without a zone label
// count as one zone, so on a cluster without zones only usage and name
// decide. Ordinals that cannot be placed are returned in unplaced.
//
// Every node in existing counts as used by this Flock, including the nodes of
// ordinals >= r.Replicas (members that are still being removed) and of
// negative ordinals (nodes the caller holds back), so two members never
// share a node. An explicit r.Nodes[i] that is missing,
// ineligible or already used leaves ordinal i unplaced: an explicit ordinal
// never falls back to the pool. New explicit ordinals (0..len(r.Nodes)-1) are
// placed before any pool ordinal, so the pool never takes the node of a new
// explicit ordinal. unplaced is in ascending order.
func Assign(nodes []*corev1.Node, r Requirement, existing map[int32]string, usage map[string]int) (assigned map[int32]string, unplaced []int32) {
	replicas := max(r.Replicas, 0)
	assigned = make(map[int32]string, replicas)
	used := make(map[string]bool, len(existing)+int(replicas))
	for ord, node := range existing {
		used[node] = true
		if ord >= 0 && ord < replicas {
			assigned[ord] = node
		}
	}
	if len(assigned) == int(replicas) {
		return assigned, nil
	}

	m := newMatcher(r)
	eligible := make(map[string]bool)
	var pool []*corev1.Node
	for _, n := range nodes {
		if reason, _ := m.eval(n); reason == "" {
			eligible[n.Name] = true
			pool = append(pool, n)
		}
	}
	// The pool in order of preference: least used first, then by name.
	slices.SortFunc(pool, func(a, b *corev1.Node) int {
		if ua, ub := usage[a.Name], usage[b.Name]; ua != ub {
			return ua - ub
		}
		return strings.Compare(a.Name, b.Name)
	})

	zoneOf := make(map[string]string, len(nodes))
	for _, n := range nodes {
		zoneOf[n.Name] = n.Labels[corev1.LabelTopologyZone]
	}
	// inZone counts this Flock's members per zone, the ones being removed too.
	inZone := map[string]int{}
	for node := range used {
		inZone[zoneOf[node]]++
	}
	for ord := int32(0); ord < replicas; ord++ {
		if _, ok := assigned[ord]; ok {
			continue
		}
		if int(ord) < len(r.Nodes) {
			name := r.Nodes[ord]
			if eligible[name] && !used[name] {
				assigned[ord] = name
				used[name] = true
				inZone[zoneOf[name]]++
			} else {
				unplaced = append(unplaced, ord)
			}
			continue
		}
		best := pickSpread(pool, used, zoneOf, inZone)
		if best == "" {
			unplaced = append(unplaced, ord)
			continue
		}
		assigned[ord] = best
		used[best] = true
		inZone[zoneOf[best]]++
	}
	return assigned, unplaced
}

// Relocate returns the node member ordinal of a Flock moves to when it
// leaves its node: the node Assign would give it as a new member (eligible,
// free of the Flock's other members, zones spread, least used first), never
// the node it leaves. existing maps every recorded member of the Flock, the
// moving one included, to its node. false: no node is free.
func Relocate(nodes []*corev1.Node, r Requirement, existing map[int32]string, ordinal int32, usage map[string]int) (string, bool) {
	from := existing[ordinal]
	others := make(map[int32]string, len(existing))
	top := max(r.Replicas, ordinal+1)
	for ord, node := range existing {
		if ord != ordinal {
			others[ord] = node
			top = max(top, ord+1)
		}
	}
	pool := make([]*corev1.Node, 0, len(nodes))
	for _, n := range nodes {
		if n.Name != from {
			pool = append(pool, n)
		}
	}
	r.Replicas = top
	assigned, _ := Assign(pool, r, others, usage)
	to, ok := assigned[ordinal]
	return to, ok && to != from
}

// pickSpread returns the first unused node of pool (sorted by preference)
// in a zone with the fewest members of the Flock (inZone), or "" when every
// node is used.
func pickSpread(pool []*corev1.Node, used map[string]bool, zoneOf map[string]string, inZone map[string]int) string {
	best, bestCount := "", 0
	for _, n := range pool {
		if used[n.Name] {
			continue
		}
		if c := inZone[zoneOf[n.Name]]; best == "" || c < bestCount {
			best, bestCount = n.Name, c
		}
	}
	return best
}

// matcher is a Requirement prepared for evaluating many nodes.
type matcher struct {
	selector    []labelPair // sorted by key
	tolerations []corev1.Toleration
}

type labelPair struct{ key, value string }

func newMatcher(r Requirement) *matcher {
	m := &matcher{tolerations: r.Tolerations}
	if len(r.NodeSelector) > 0 {
		m.selector = make([]labelPair, 0, len(r.NodeSelector))
		for k, v := range r.NodeSelector {
			m.selector = append(m.selector, labelPair{k, v})
		}
		slices.SortFunc(m.selector, func(a, b labelPair) int { return strings.Compare(a.key, b.key) })
	}
	return m
}

// eval returns "" when n is eligible, else why not; with ReasonTaint, also the
// first taint that is not tolerated. The checks run in a fixed order
// (selector, cordon, taints), so each node has exactly one reason.
func (m *matcher) eval(n *corev1.Node) (Reason, *corev1.Taint) {
	for _, p := range m.selector {
		if v, ok := n.Labels[p.key]; !ok || v != p.value {
			return ReasonSelector, nil
		}
	}
	if n.Spec.Unschedulable {
		return ReasonCordoned, nil
	}
	if taint := UntoleratedTaint(n.Spec.Taints, m.tolerations); taint != nil {
		return ReasonTaint, taint
	}
	return "", nil
}

func (m *matcher) selectorString() string {
	var b strings.Builder
	for i, p := range m.selector {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(p.key)
		b.WriteByte('=')
		b.WriteString(p.value)
	}
	return b.String()
}

func (m *matcher) exclusion(node string, reason Reason, taint *corev1.Taint) Exclusion {
	ex := Exclusion{Node: node, Reason: reason}
	switch reason {
	case ReasonSelector:
		ex.Detail = "does not match nodeSelector " + m.selectorString()
	case ReasonCordoned:
		ex.Detail = "cordoned"
	case ReasonTaint:
		ex.Detail = "untolerated taint " + taint.ToString()
	}
	return ex
}

// maxTaintGroups bounds the distinct untolerated taints a tally tracks; more
// are counted together.
const maxTaintGroups = 8

// maxNamedTaints is how many distinct taints a refusal names.
const maxNamedTaints = 3

type taintGroup struct {
	taint *corev1.Taint
	count int
}

// tally counts nodes by reason without allocating per node.
type tally struct {
	total, eligible, selector, cordoned, tainted int
	groups                                       []taintGroup
	otherTainted                                 int
}

func (t *tally) add(reason Reason, taint *corev1.Taint) {
	switch reason {
	case "":
		t.eligible++
	case ReasonSelector:
		t.selector++
	case ReasonCordoned:
		t.cordoned++
	case ReasonTaint:
		t.tainted++
		for i := range t.groups {
			g := t.groups[i].taint
			if g.Key == taint.Key && g.Value == taint.Value && g.Effect == taint.Effect {
				t.groups[i].count++
				return
			}
		}
		if len(t.groups) < maxTaintGroups {
			if t.groups == nil {
				t.groups = make([]taintGroup, 0, maxTaintGroups)
			}
			t.groups = append(t.groups, taintGroup{taint: taint, count: 1})
			return
		}
		t.otherTainted++
	}
}

// message is the refusal text: "only 3 of 5 nodes are eligible
// (nodeSelector disk=local excludes 1; 1 cordoned; 1 has untolerated taint
// dedicated=db:NoSchedule)".
func (t *tally) message(m *matcher) string {
	var b strings.Builder
	b.WriteString("only ")
	b.WriteString(strconv.Itoa(t.eligible))
	b.WriteString(" of ")
	b.WriteString(strconv.Itoa(t.total))
	if t.total == 1 {
		b.WriteString(" node")
	} else {
		b.WriteString(" nodes")
	}
	if t.eligible == 1 {
		b.WriteString(" is eligible")
	} else {
		b.WriteString(" are eligible")
	}
	var parts []string
	if t.selector > 0 {
		parts = append(parts, fmt.Sprintf("nodeSelector %s excludes %d", m.selectorString(), t.selector))
	}
	if t.cordoned > 0 {
		parts = append(parts, fmt.Sprintf("%d cordoned", t.cordoned))
	}
	if t.tainted > 0 {
		groups := slices.Clone(t.groups)
		slices.SortStableFunc(groups, func(a, b taintGroup) int {
			if a.count != b.count {
				return b.count - a.count
			}
			return strings.Compare(a.taint.ToString(), b.taint.ToString())
		})
		other := t.otherTainted
		for i, g := range groups {
			if i >= maxNamedTaints {
				other += g.count
				continue
			}
			parts = append(parts, fmt.Sprintf("%d %s untolerated taint %s", g.count, hasHave(g.count), g.taint.ToString()))
		}
		if other > 0 {
			parts = append(parts, fmt.Sprintf("%d %s other untolerated taints", other, hasHave(other)))
		}
	}
	if len(parts) > 0 {
		b.WriteString(" (")
		b.WriteString(strings.Join(parts, "; "))
		b.WriteString(")")
	}
	return b.String()
}

func hasHave(n int) string {
	if n == 1 {
		return "has"
	}
	return "have"
}

// maxNamedNodes is how many node names a warning lists.
const maxNamedNodes = 3

func notReadyWarning(notReady []string, eligible int) string {
	names := strings.Join(notReady[:min(len(notReady), maxNamedNodes)], ", ")
	if len(notReady) > maxNamedNodes {
		names += fmt.Sprintf(" and %d more", len(notReady)-maxNamedNodes)
	}
	verb := "are"
	if len(notReady) == 1 {
		verb = "is"
	}
	return fmt.Sprintf("%d of %d eligible nodes %s NotReady (%s): members placed there wait until their node is Ready",
		len(notReady), eligible, verb, names)
}
