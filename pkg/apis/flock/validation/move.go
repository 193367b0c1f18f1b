// File move.go: the rules of a planned member move: the FlockMove body a
// client POSTs to flocks/NAME/move (checked alone, then against the stored
// Flock), and status.members[].move, where an accepted move is kept.

package validation

import (
	"fmt"
	"slices"

	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"flock.dev/flock/pkg/apis/flock"
)

// ValidateFlockMove checks a FlockMove on its own, for the Flock named
// flockName: a name, when given, is the Flock's; the ordinal is in range; the
// node is a valid node name.
func ValidateFlockMove(m *flock.FlockMove, flockName string) field.ErrorList {
	var allErrs field.ErrorList
	if m.Name != "" && m.Name != flockName {
		allErrs = append(allErrs, field.Invalid(field.NewPath("metadata", "name"), m.Name, fmt.Sprintf("must be empty or the Flock's name %q", flockName)))
	}
	switch ordPath := field.NewPath("ordinal"); {
	case m.Ordinal < 0:
		allErrs = append(allErrs, field.Invalid(ordPath, m.Ordinal, "must be greater than or equal to 0"))
	case m.Ordinal >= MaxReplicas:
		allErrs = append(allErrs, field.Invalid(ordPath, m.Ordinal, fmt.Sprintf("must be less than %d", MaxReplicas)))
	}
	allErrs = append(allErrs, validateNodeName(m.Node, field.NewPath("node"), "the node to move the member to")...)
	return allErrs
}

// ValidateFlockMoveAgainst checks a FlockMove (already valid on its own)
// against the stored Flock f: the member exists, below spec.replicas, is
// not pinned by spec.placement.nodes and has no claim template (its volume
// decides its node); the node is not the member's own and holds no other
// member of f, nor is the target of another member's pending move.
func ValidateFlockMoveAgainst(m *flock.FlockMove, f *flock.Flock) field.ErrorList {
	ordPath, nodePath := field.NewPath("ordinal"), field.NewPath("node")
	spec := specOf(f)
	replicas := int32(1)
	if spec.Replicas != nil {
		replicas = *spec.Replicas
	}
	if m.Ordinal >= replicas {
		return field.ErrorList{field.Invalid(ordPath, m.Ordinal, fmt.Sprintf("must be less than spec.replicas (%d)", replicas))}
	}
	if spec.Storage.ClaimTemplate != nil {
		return field.ErrorList{field.Forbidden(ordPath, "the Flock's members have spec.storage.claimTemplate: a member follows its volume and is not moved")}
	}
	if int(m.Ordinal) < len(spec.Placement.Nodes) {
		return field.ErrorList{field.Forbidden(ordPath, fmt.Sprintf(
			"spec.placement.nodes[%d] pins member %d to node %s: edit spec.placement.nodes to move it", m.Ordinal, m.Ordinal, spec.Placement.Nodes[m.Ordinal]))}
	}
	i := slices.IndexFunc(f.Status.Members, func(x flock.FlockMember) bool { return x.Ordinal == m.Ordinal })
	if i < 0 {
		return field.ErrorList{field.Invalid(ordPath, m.Ordinal, fmt.Sprintf("member %d has no node yet (status.members); it is placed, not moved", m.Ordinal))}
	}
	if f.Status.Members[i].Node == m.Node {
		return field.ErrorList{field.Invalid(nodePath, m.Node, fmt.Sprintf("member %d is already on node %s", m.Ordinal, m.Node))}
	}
	for _, other := range f.Status.Members {
		if other.Ordinal == m.Ordinal {
			continue
		}
		if other.Node == m.Node {
			return field.ErrorList{field.Invalid(nodePath, m.Node, fmt.Sprintf("node %s holds member %d of this Flock; two members never share a node", m.Node, other.Ordinal))}
		}
		if other.Move != nil && other.Move.Node == m.Node {
			return field.ErrorList{field.Invalid(nodePath, m.Node, fmt.Sprintf("member %d of this Flock is moving to node %s", other.Ordinal, m.Node))}
		}
	}
	return nil
}

// validateNodeName requires name, a node name (DNS-1123 subdomain); what
// says what the node is for.
func validateNodeName(name string, fldPath *field.Path, what string) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(fldPath, what)}
	}
	var allErrs field.ErrorList
	for _, msg := range utilvalidation.IsDNS1123Subdomain(name) {
		allErrs = append(allErrs, field.Invalid(fldPath, name, msg))
	}
	return allErrs
}

// validateMemberMove checks status.members[i].move.
func validateMemberMove(mv *flock.FlockMemberMove, fldPath *field.Path) field.ErrorList {
	if mv == nil {
		return nil
	}
	return validateNodeName(mv.Node, fldPath.Child("node"), "the node the member moves to")
}
