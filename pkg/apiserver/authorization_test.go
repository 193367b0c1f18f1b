package apiserver

import (
	"context"
	"errors"
	"testing"

	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
)

// rbacLike allows a user a verb on all names, or on the names listed, the
// way RBAC reads a rule with and without resourceNames; it records each
// name it was asked about ("" for all names).
type rbacLike struct {
	all   map[string]bool     // user -> may act on every name
	names map[string][]string // user -> the names it may act on
	fail  bool                // answer every review with an error
	asked []string
}

func (r *rbacLike) Authorize(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	r.asked = append(r.asked, a.GetName())
	if r.fail {
		return authorizer.DecisionNoOpinion, "", errors.New("webhook unreachable")
	}
	u := a.GetUser().GetName()
	if r.all[u] {
		return authorizer.DecisionAllow, "all names", nil
	}
	for _, n := range r.names[u] {
		if a.GetName() != "" && a.GetName() == n {
			return authorizer.DecisionAllow, "named", nil
		}
	}
	return authorizer.DecisionNoOpinion, "no rule", nil
}

func (r *rbacLike) ConditionsAwareAuthorize(ctx context.Context, a authorizer.Attributes) authorizer.ConditionsAwareDecision {
	return authorizer.ConditionsAwareDecisionFromParts(r.Authorize(ctx, a))
}

func (r *rbacLike) EvaluateConditions(context.Context, authorizer.ConditionsAwareDecision, authorizer.ConditionsData) (authorizer.Decision, string, error) {
	return authorizer.DecisionDeny, "", authorizer.ErrorConditionEvaluationNotSupported
}

func TestAllNamesFirst(t *testing.T) {
	get := func(who, name string) authorizer.AttributesRecord {
		return authorizer.AttributesRecord{
			User: &user.DefaultInfo{Name: who}, Verb: "get", Namespace: "ns", APIGroup: "flock.dev",
			APIVersion: "v1alpha1", Resource: "flocks", Name: name, ResourceRequest: true,
		}
	}
	for _, tc := range []struct {
		desc      string
		attrs     authorizer.Attributes
		fail      bool
		want      authorizer.Decision
		wantAsked []string
	}{
		{"a user who may get every Flock is answered by the review for all names", get("reader", "a"), false, authorizer.DecisionAllow, []string{""}},
		{"a user limited to named Flocks gets one of its names", get("one", "a"), false, authorizer.DecisionAllow, []string{"", "a"}},
		{"a user limited to named Flocks is refused another", get("one", "b"), false, authorizer.DecisionNoOpinion, []string{"", "b"}},
		{"a stranger is refused", get("stranger", "a"), false, authorizer.DecisionNoOpinion, []string{"", "a"}},
		{"a request for no name is asked once, as it is", get("one", ""), false, authorizer.DecisionNoOpinion, []string{""}},
		{"a failing review for all names falls back to the request as it is", get("reader", "a"), true, authorizer.DecisionNoOpinion, []string{"", "a"}},
		{"a non-resource request is asked as it is", authorizer.AttributesRecord{User: &user.DefaultInfo{Name: "reader"}, Verb: "get", Path: "/metrics"}, false, authorizer.DecisionAllow, []string{""}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			inner := &rbacLike{all: map[string]bool{"reader": true}, names: map[string][]string{"one": {"a"}}, fail: tc.fail}
			d, _, err := AllNamesFirst(inner).Authorize(t.Context(), tc.attrs)
			if d != tc.want {
				t.Errorf("decision = %v, want %v", d, tc.want)
			}
			asked := inner.asked
			inner.asked = nil
			if cd := AllNamesFirst(inner).ConditionsAwareAuthorize(t.Context(), tc.attrs); cd.IsAllow() != (tc.want == authorizer.DecisionAllow) {
				t.Errorf("conditions-aware decision allows = %v, want %v", cd.IsAllow(), tc.want == authorizer.DecisionAllow)
			}
			if len(inner.asked) != len(asked) {
				t.Errorf("conditions-aware: asked for names %q, the other way %q", inner.asked, asked)
			}
			inner.asked = asked
			if tc.fail != (err != nil) {
				t.Errorf("err = %v, want an error: %v", err, tc.fail)
			}
			if len(inner.asked) != len(tc.wantAsked) {
				t.Fatalf("asked for names %q, want %q", inner.asked, tc.wantAsked)
			}
			for i := range inner.asked {
				if inner.asked[i] != tc.wantAsked[i] {
					t.Errorf("asked for names %q, want %q", inner.asked, tc.wantAsked)
				}
			}
		})
	}
	if AllNamesFirst(nil) != nil {
		t.Error("no authorizer (standalone) must stay none")
	}
}
