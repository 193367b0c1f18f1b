// File authorization.go: flock-apiserver's delegated authorization asks
// first whether a user may act on every object of a kind, so that one cached
// answer serves requests for many names (issue 17).

package apiserver

import (
	"context"

	"k8s.io/apiserver/pkg/authorization/authorizer"
)

// AllNamesFirst wraps the server's authorizer. A request for a named object
// (a get, update, patch or delete of one Flock, or of its status or scale)
// is first asked as the same request for all names: in a
// SubjectAccessReview an empty name means every name, so where the user may
// do it to every Flock of the namespace the answer is yes for this one.
// Otherwise the request is asked as it is, with its name, and that answer
// decides: a role that lists resourceNames still allows exactly its names.
//
// Why: k8s.io/apiserver's delegated authorizer caches kube-apiserver's
// answers (10 s) keyed by the whole request, name included. A user who is
// not in system:masters (whose requests skip the review) and reads many
// Flocks one by one, as controllers and dashboards do, made one
// SubjectAccessReview round trip to kube-apiserver per Flock; asked for all
// names, one cached answer per user, verb and namespace serves them all.
func AllNamesFirst(a authorizer.Authorizer) authorizer.Authorizer {
	if a == nil {
		return nil
	}
	return allNamesFirst{a}
}

type allNamesFirst struct{ authorizer.Authorizer }

func (z allNamesFirst) Authorize(ctx context.Context, attrs authorizer.Attributes) (authorizer.Decision, string, error) {
	if attrs.IsResourceRequest() && attrs.GetName() != "" {
		if d, reason, err := z.Authorizer.Authorize(ctx, anyName{attrs}); err == nil && d == authorizer.DecisionAllow {
			return d, reason, nil
		}
	}
	return z.Authorizer.Authorize(ctx, attrs)
}

// ConditionsAwareAuthorize is Authorize for callers that take conditional
// decisions: only an unconditional yes for all names decides for the named
// request.
func (z allNamesFirst) ConditionsAwareAuthorize(ctx context.Context, attrs authorizer.Attributes) authorizer.ConditionsAwareDecision {
	if attrs.IsResourceRequest() && attrs.GetName() != "" {
		if d := z.Authorizer.ConditionsAwareAuthorize(ctx, anyName{attrs}); d.IsAllow() {
			return d
		}
	}
	return z.Authorizer.ConditionsAwareAuthorize(ctx, attrs)
}

// anyName is a request's attributes with its name left out: the same
// request for every object of its kind in its namespace.
type anyName struct{ authorizer.Attributes }

func (anyName) GetName() string { return "" }
