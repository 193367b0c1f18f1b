package apiserver

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apiserver/pkg/endpoints/request"
	"sigs.k8s.io/structured-merge-diff/v6/typed"
)

// faultyConverter refuses an object whose spec has the field "replica".
type faultyConverter struct{ managedfields.TypeConverter }

func (faultyConverter) ObjectToTyped(obj runtime.Object, _ ...typed.ValidationOptions) (*typed.TypedValue, error) {
	u := obj.(*unstructured.Unstructured)
	if _, ok, _ := unstructured.NestedFieldNoCopy(u.Object, "spec", "replica"); ok {
		return nil, typed.ValidationErrors{{Path: ".spec.replica", ErrorMessage: "field not declared in schema"}}
	}
	return nil, nil
}

// TestApplySchemaCheck: an apply of a Flock that does not fit the schema
// is refused with 422 and a cause per field, without reaching the handler;
// a fitting apply, other patches and other resources reach it with their
// whole body.
func TestApplySchemaCheck(t *testing.T) {
	const bad = "apiVersion: flock.dev/v1alpha1\nkind: Flock\nmetadata: {name: pg}\nspec: {replica: 2}\n"
	const good = "apiVersion: flock.dev/v1alpha1\nkind: Flock\nmetadata: {name: pg}\nspec: {replicas: 2}\n"
	tests := []struct {
		name, contentType, resource, body string
		wantRefused                       bool
	}{
		{"apply that does not fit", "application/apply-patch+yaml", "flocks", bad, true},
		{"apply that fits", "application/apply-patch+yaml", "flocks", good, false},
		{"merge patch", "application/merge-patch+json", "flocks", bad, false},
		{"apply of another resource", "application/apply-patch+yaml", "other", bad, false},
	}
	check := &applySchemaCheck{maxBody: 1 << 20}
	check.set(faultyConverter{})
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got string
			reached := false
			h := check.wrap(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
				reached = true
				b, _ := io.ReadAll(r.Body)
				got = string(b)
			}))
			r := httptest.NewRequest(http.MethodPatch, "/apis/flock.dev/v1alpha1/namespaces/db/"+tc.resource+"/pg", strings.NewReader(tc.body))
			r.Header.Set("Content-Type", tc.contentType)
			r = r.WithContext(request.WithRequestInfo(r.Context(), &request.RequestInfo{
				IsResourceRequest: true, Verb: "patch", APIGroup: "flock.dev", APIVersion: "v1alpha1", Namespace: "db", Resource: tc.resource, Name: "pg",
			}))
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if !tc.wantRefused {
				if !reached || got != tc.body {
					t.Fatalf("handler reached %v with body %q, want the whole body %q", reached, got, tc.body)
				}
				return
			}
			if reached || w.Code != http.StatusUnprocessableEntity {
				t.Fatalf("code %d, handler reached %v; want 422 before the handler", w.Code, reached)
			}
			var st metav1.Status
			if err := json.Unmarshal(w.Body.Bytes(), &st); err != nil {
				t.Fatal(err)
			}
			if st.Reason != metav1.StatusReasonInvalid || st.Details == nil || len(st.Details.Causes) != 1 ||
				st.Details.Causes[0].Field != "spec.replica" || !strings.Contains(st.Details.Causes[0].Message, "field not declared in schema") {
				t.Errorf("status %+v, want Invalid with the cause spec.replica", st)
			}
		})
	}
}
