package flock

// Sync-level tests of planned member moves (status.members[].move, as the
// flocks/move subresource records them).

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"flock.dev/flock/pkg/apis/flock/v1alpha1"
)

// requestMove records a planned move of member ord of Flock name to node,
// as the move subresource does.
func (f *fixture) requestMove(name string, ord int32, node string, force bool) {
	f.t.Helper()
	fl := f.getFlock(name)
	i := slices.IndexFunc(fl.Status.Members, func(m v1alpha1.FlockMember) bool { return m.Ordinal == ord })
	if i < 0 {
		f.t.Fatalf("flock %s has no member %d", name, ord)
	}
	fl.Status.Members[i].Move = &v1alpha1.FlockMemberMove{Node: node, Force: force, RequestedAt: metav1.NewTime(f.clock.Now())}
	if _, err := f.flockClient.FlockV1alpha1().Flocks(fl.Namespace).UpdateStatus(f.ctx, fl, metav1.UpdateOptions{}); err != nil {
		f.t.Fatal(err)
	}
	if f.asked[fl.UID] == nil {
		f.asked[fl.UID] = map[int32]map[string]bool{}
	}
	if f.asked[fl.UID][ord] == nil {
		f.asked[fl.UID][ord] = map[string]bool{}
	}
	f.asked[fl.UID][ord][node] = true
	f.refreshFlocks()
}

func TestPlannedMove(t *testing.T) {
	for _, policy := range []v1alpha1.RetentionPolicyType{v1alpha1.RetainRetentionPolicy, v1alpha1.DeleteRetentionPolicy} {
		t.Run(string(policy), func(t *testing.T) {
			f := newFixture(t, "n-a", "n-b", "n-c", "n-d")
			f.members.graceful = true
			fl := newFlock("pg", 3)
			fl.Spec.Storage.Retention.WhenScaled = policy
			f.createFlock(fl)
			for range 3 {
				f.settle("pg")
			}
			if got := f.memberNodes("pg"); got[1] != "n-b" || got[2] != "n-c" {
				t.Fatalf("members = %v", got)
			}
			uids := map[string]types.UID{}
			for _, name := range []string{"pg-0", "pg-2"} {
				uids[name] = f.pod(name).UID
			}
			f.events()
			f.members.ops = nil

			f.requestMove("pg", 1, "n-d", false)
			f.mustSync("pg")
			m := f.getFlock("pg").Status.Members[1]
			if m.Node != "n-d" || m.Move != nil {
				t.Fatalf("member 1 = %+v, want on n-d with the move done", m)
			}
			// The old pod goes gracefully, in the sync that moves the member.
			if !slices.Contains(f.members.ops, "delete pg-1") || slices.Contains(f.members.ops, "force-delete pg-1") {
				t.Fatalf("ops = %v, want a graceful delete of pg-1", f.members.ops)
			}
			events := f.events()
			want := "the old one on node n-b is kept there"
			if policy == v1alpha1.DeleteRetentionPolicy {
				want = "the old one on node n-b is removed"
			}
			if !hasEvent(events, "Normal MemberMoved", "member 1 (pod pg-1) moved from node n-b to node n-d (planned move)", want) {
				t.Errorf("no MemberMoved event in %v", events)
			}

			f.finishTerminating()
			for range 3 {
				f.settle("pg")
			}
			p := f.pod("pg-1")
			if p == nil || p.Spec.NodeName != "n-d" || !isRunningAndReady(p) {
				t.Fatalf("pg-1 = %+v; ops %v", p, f.members.ops)
			}
			// Members 0 and 2 were never touched.
			for name, uid := range uids {
				if got := f.pod(name); got == nil || got.UID != uid || got.DeletionTimestamp != nil {
					t.Errorf("%s was replaced or deleted: %+v", name, got)
				}
			}
			// A fresh volume on the new node, for the same names; no other
			// volume or claim of member 1 is left.
			if pv := f.data.volumes[PersistentVolumeName("flock-pg", 1)]; pv == nil || !volumeOnNode(pv, "n-d") || pv.Annotations[AnnotationRemoved] == "true" {
				t.Errorf("member 1's volume = %+v", pv)
			}
			if len(f.data.volumes) != 3 {
				t.Errorf("volumes = %d, want 3", len(f.data.volumes))
			}
			var cleanups []string
			for _, op := range f.members.ops {
				if strings.HasPrefix(op, "create "+HelperPodName(HelperCleanup, "flock-pg", 1)) {
					cleanups = append(cleanups, op)
				}
			}
			if policy == v1alpha1.DeleteRetentionPolicy && len(cleanups) != 1 {
				t.Errorf("cleanup helpers created: %v, want one (on n-b)", cleanups)
			}
			if policy == v1alpha1.RetainRetentionPolicy && len(cleanups) != 0 {
				t.Errorf("cleanup helpers created under Retain: %v", cleanups)
			}
		})
	}
}

func TestPlannedMoveWaitsForOtherMembers(t *testing.T) {
	f := newFixture(t, "n-a", "n-b", "n-c", "n-d")
	f.members.graceful = true
	f.createFlock(newFlock("pg", 3))
	for range 3 {
		f.settle("pg")
	}
	// Member 2 is down (its pod terminating).
	f.updatePod("pg-2", func(p *corev1.Pod) { p.DeletionTimestamp = &metav1.Time{Time: f.clock.Now()} })
	f.requestMove("pg", 1, "n-d", false)
	f.events()
	res := f.syncResult("pg")
	if m := f.getFlock("pg").Status.Members[1]; m.Node != "n-b" || m.Move == nil {
		t.Fatalf("member 1 = %+v, want it on n-b, its move waiting", m)
	}
	if res.RequeueAfter == 0 || res.RequeueAfter > moveRequeue {
		t.Errorf("RequeueAfter = %v", res.RequeueAfter)
	}
	if events := f.events(); !hasEvent(events, "Normal MoveWaiting", "member 1 waits to move from node n-b to node n-d: member 2 is unavailable") {
		t.Errorf("no MoveWaiting event in %v", events)
	}
	// Forced, it moves.
	f.requestMove("pg", 1, "n-d", true)
	f.mustSync("pg")
	if m := f.getFlock("pg").Status.Members[1]; m.Node != "n-d" || m.Move != nil {
		t.Fatalf("member 1 = %+v, want the forced move done", m)
	}
}

func TestPlannedMoveCanceled(t *testing.T) {
	f := newFixture(t, "n-a", "n-b", "n-c", "n-d")
	f.createFlock(newFlock("pg", 3))
	for range 3 {
		f.settle("pg")
	}
	f.requestMove("pg", 1, "n-d", false)
	f.updateNode("n-d", func(n *corev1.Node) { n.Spec.Unschedulable = true })
	f.events()
	f.mustSync("pg")
	if m := f.getFlock("pg").Status.Members[1]; m.Node != "n-b" || m.Move != nil {
		t.Fatalf("member 1 = %+v, want it on n-b, its move cleared", m)
	}
	if events := f.events(); !hasEvent(events, "Warning MoveCanceled", "the move of member 1 to node n-d is canceled: node n-d is not eligible any more: cordoned") {
		t.Errorf("no MoveCanceled event in %v", events)
	}
}
