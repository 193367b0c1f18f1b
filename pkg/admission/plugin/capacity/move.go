// File move.go: the FlockCapacity check of a planned member move (a
// FlockMove POSTed to flocks/NAME/move): the target node must exist and be
// eligible for the Flock by the one placement rule (pkg/placement), the one
// that admits Flocks and places members.

package capacity

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/klog/v2"

	"flock.dev/flock/pkg/apis/flock"
	"flock.dev/flock/pkg/placement"
)

// validateMove refuses (422, field node) a move to a node that does not
// exist or is not eligible for the Flock: not matching its nodeSelector,
// cordoned, or with a taint its template does not tolerate. Whether the
// node holds another member is checked by the registry, against the stored
// Flock, in the write that records the move.
func (p *Plugin) validateMove(ctx context.Context, a admission.Attributes) error {
	mv, ok := a.GetObject().(*flock.FlockMove)
	if !ok {
		return apierrors.NewBadRequest(fmt.Sprintf("%s: unexpected object of type %T for flocks/move", PluginName, a.GetObject()))
	}
	if err := p.ready(placement.Requirement{Replicas: 1}); err != nil {
		return err
	}
	f, err := p.cachedFlock(ctx, a)
	if err != nil {
		return err
	}
	var why string
	switch n := p.nodes.Get(mv.Node); {
	case n == nil:
		why = fmt.Sprintf("node %s does not exist", mv.Node)
	default:
		eligible, ex := placement.IsEligible(n, placement.RequirementFromFlock(f))
		if eligible {
			return nil
		}
		why = fmt.Sprintf("node %s is not eligible for this Flock: %s", mv.Node, ex.Detail)
	}
	klog.FromContext(ctx).V(2).Info("Refused member move", "flock", klog.KRef(a.GetNamespace(), a.GetName()), "ordinal", mv.Ordinal, "node", mv.Node, "reason", why)
	return apierrors.NewInvalid(flock.Kind("FlockMove"), a.GetName(), field.ErrorList{field.Invalid(field.NewPath("node"), mv.Node, why)})
}
