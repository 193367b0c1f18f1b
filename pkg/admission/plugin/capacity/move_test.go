package capacity

import (
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/admission"

	"flock.dev/flock/pkg/apis/flock"
	"flock.dev/flock/pkg/apis/flock/v1alpha1"
)

// moveTo is a POST of a FlockMove of member ordinal of Flock name to node.
func moveTo(name string, ordinal int32, node string) request {
	return request{op: admission.Create, subresource: "move",
		obj: &flock.FlockMove{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Ordinal: ordinal, Node: node}}
}

func TestValidateMove(t *testing.T) {
	nodes := mixedPool()
	flocks := []*v1alpha1.Flock{
		storedFlock("pg", spec{replicas: 2, nodeSelector: local}),
		storedFlock("tol", spec{replicas: 2, nodeSelector: local, tolerations: tolerateDB}),
	}
	tests := []struct {
		name    string
		req     request
		wantErr string // "" means admitted
	}{
		{name: "eligible node", req: moveTo("pg", 1, "n-b")},
		{name: "node missing", req: moveTo("pg", 1, "n-z"), wantErr: `node: Invalid value: "n-z": node n-z does not exist`},
		{name: "selector", req: moveTo("pg", 1, "n-c"), wantErr: `node: Invalid value: "n-c": node n-c is not eligible for this Flock: does not match nodeSelector disk=local`},
		{name: "cordoned", req: moveTo("pg", 1, "n-d"), wantErr: `node n-d is not eligible for this Flock: cordoned`},
		{name: "taint", req: moveTo("pg", 1, "n-e"), wantErr: `node n-e is not eligible for this Flock: untolerated taint dedicated=db:NoSchedule`},
		{name: "taint tolerated", req: moveTo("tol", 1, "n-e")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newTestPlugin(t, nodes, flocks)
			_, err := validate(p, tt.req)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("got %v, want an error containing %q", err, tt.wantErr)
			}
			if !apierrors.IsInvalid(err) {
				t.Errorf("got %v, want 422 Invalid", err)
			}
		})
	}
}
