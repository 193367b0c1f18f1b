package validation

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"flock.dev/flock/pkg/apis/flock"
)

func TestValidateFlockMove(t *testing.T) {
	tests := []struct {
		name string
		move flock.FlockMove
		want string // substring of the error; "" means valid
	}{
		{name: "valid", move: flock.FlockMove{Ordinal: 1, Node: "node-4"}},
		{name: "valid with the Flock's name", move: flock.FlockMove{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Ordinal: 0, Node: "node-4"}},
		{name: "other name", move: flock.FlockMove{ObjectMeta: metav1.ObjectMeta{Name: "db"}, Node: "n"}, want: `metadata.name: Invalid value: "db": must be empty or the Flock's name "web"`},
		{name: "negative ordinal", move: flock.FlockMove{Ordinal: -1, Node: "n"}, want: "ordinal: Invalid value: -1: must be greater than or equal to 0"},
		{name: "ordinal too large", move: flock.FlockMove{Ordinal: MaxReplicas, Node: "n"}, want: "ordinal: Invalid value: 500: must be less than 500"},
		{name: "no node", move: flock.FlockMove{Ordinal: 1}, want: "node: Required value"},
		{name: "bad node", move: flock.FlockMove{Ordinal: 1, Node: "Node_4"}, want: `node: Invalid value: "Node_4"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkErrs(t, ValidateFlockMove(&tt.move, "web").ToAggregate(), tt.want)
		})
	}
}

func TestValidateFlockMoveAgainst(t *testing.T) {
	stored := func(mut func(f *flock.Flock)) *flock.Flock {
		replicas := int32(3)
		f := &flock.Flock{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: &flock.FlockSpec{}}
		f.Spec.Replicas = &replicas
		f.Status.Members = []flock.FlockMember{{Ordinal: 0, Node: "node-0"}, {Ordinal: 1, Node: "node-1"}, {Ordinal: 2, Node: "node-2"}}
		if mut != nil {
			mut(f)
		}
		return f
	}
	tests := []struct {
		name string
		f    *flock.Flock
		move flock.FlockMove
		want string
	}{
		{name: "free node", f: stored(nil), move: flock.FlockMove{Ordinal: 1, Node: "node-4"}},
		{name: "occupied node", f: stored(nil), move: flock.FlockMove{Ordinal: 1, Node: "node-2"},
			want: `node: Invalid value: "node-2": node node-2 holds member 2 of this Flock; two members never share a node`},
		{name: "own node", f: stored(nil), move: flock.FlockMove{Ordinal: 1, Node: "node-1"}, want: "member 1 is already on node node-1"},
		{name: "another member's target", f: stored(func(f *flock.Flock) { f.Status.Members[0].Move = &flock.FlockMemberMove{Node: "node-4"} }),
			move: flock.FlockMove{Ordinal: 1, Node: "node-4"}, want: "member 0 of this Flock is moving to node node-4"},
		{name: "a new move of the same member replaces its own", f: stored(func(f *flock.Flock) { f.Status.Members[1].Move = &flock.FlockMemberMove{Node: "node-4"} }),
			move: flock.FlockMove{Ordinal: 1, Node: "node-5"}},
		{name: "beyond replicas", f: stored(nil), move: flock.FlockMove{Ordinal: 3, Node: "node-4"}, want: "ordinal: Invalid value: 3: must be less than spec.replicas (3)"},
		{name: "not placed", f: stored(func(f *flock.Flock) { f.Status.Members = f.Status.Members[:1] }),
			move: flock.FlockMove{Ordinal: 2, Node: "node-4"}, want: "member 2 has no node yet"},
		{name: "pinned", f: stored(func(f *flock.Flock) { f.Spec.Placement.Nodes = []string{"node-0", "node-1", "node-2"} }),
			move: flock.FlockMove{Ordinal: 1, Node: "node-4"}, want: "ordinal: Forbidden: spec.placement.nodes[1] pins member 1 to node node-1"},
		{name: "claim template", f: stored(func(f *flock.Flock) { f.Spec.Storage.ClaimTemplate = &corev1.PersistentVolumeClaimTemplate{} }),
			move: flock.FlockMove{Ordinal: 1, Node: "node-4"}, want: "ordinal: Forbidden: the Flock's members have spec.storage.claimTemplate"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkErrs(t, ValidateFlockMoveAgainst(&tt.move, tt.f).ToAggregate(), tt.want)
		})
	}
}

func TestValidateFlockStatusMemberMove(t *testing.T) {
	f := &flock.Flock{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: &flock.FlockSpec{}}
	f.Status.Members = []flock.FlockMember{{Ordinal: 0, Node: "node-0", Move: &flock.FlockMemberMove{}}}
	checkErrs(t, validateFlockStatus(f, nil).ToAggregate(), "members[0].move.node: Required value")
	f.Status.Members[0].Move.Node = "node-4"
	checkErrs(t, validateFlockStatus(f, nil).ToAggregate(), "")
}

// checkErrs requires err to contain want, or to be nil when want is "".
func checkErrs(t *testing.T, err error, want string) {
	t.Helper()
	switch {
	case want == "" && err != nil:
		t.Fatalf("unexpected errors: %v", err)
	case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
		t.Fatalf("got %v, want an error containing %q", err, want)
	}
}
