package flock

// Table tests of planCleanup and helperNeeded, on hand-built inputs.

import (
	"maps"
	"reflect"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"flock.dev/flock/pkg/apis/flock/v1alpha1"
)

func TestPlanCleanup(t *testing.T) {
	const (
		del    = v1alpha1.DeleteRetentionPolicy
		retain = v1alpha1.RetainRetentionPolicy
	)
	deleted := func(fl *v1alpha1.Flock, finalizers ...string) *v1alpha1.Flock {
		fl.DeletionTimestamp = &metav1.Time{Time: decisionNow}
		fl.Finalizers = finalizers
		return fl
	}
	three := map[int32]v1alpha1.FlockMember{0: {Ordinal: 0, Node: "n-a"}, 1: {Ordinal: 1, Node: "n-b"}, 2: {Ordinal: 2, Node: "n-c"}}
	scaledTo1 := withRetention(newFlock("pg", 1), del, retain)
	running := func(fl *v1alpha1.Flock, ord int32, node string) *corev1.Pod {
		return testMemberPod(fl, ord, node, false)
	}
	terminating := func(fl *v1alpha1.Flock, ord int32, node string) *corev1.Pod {
		return testMemberPod(fl, ord, node, true)
	}
	type deletion struct {
		pod   string
		why   string
		force bool
	}
	dir := "/var/lib/flock/db/pg"
	tests := []struct {
		name     string
		flock    *v1alpha1.Flock
		pods     func(*v1alpha1.Flock) map[int32]*corev1.Pod
		nodes    []string
		users    map[string][]string
		unknown  bool // who uses the claims could not be read
		orphaned bool
		deleted  []deletion
		remove   []int32
		messages map[int32]string
		pending  []int32
	}{
		{name: "retain everything: nothing", flock: withRetention(newFlock("pg", 1), retain, retain), nodes: []string{"n-a"}},
		{name: "deleted without the finalizer: nothing",
			flock: deleted(withRetention(newFlock("pg", 3), del, del)), nodes: []string{"n-a", "n-b", "n-c"}},
		{name: "deleted orphaning dependents: data kept, said once", orphaned: true,
			flock: deleted(withRetention(newFlock("pg", 3), retain, del), v1alpha1.FinalizerDataCleanup, metav1.FinalizerOrphanDependents),
			pods:  func(fl *v1alpha1.Flock) map[int32]*corev1.Pod { return map[int32]*corev1.Pod{0: running(fl, 0, "n-a")} },
			nodes: []string{"n-a", "n-b", "n-c"}},
		{name: "scale down under whenScaled Delete: members above replicas without pods go", flock: scaledTo1,
			nodes: []string{"n-a", "n-b", "n-c"}, remove: []int32{1, 2}, pending: []int32{1, 2}},
		{name: "scale down: a member waits for its own pod", flock: scaledTo1,
			pods: func(fl *v1alpha1.Flock) map[int32]*corev1.Pod {
				return map[int32]*corev1.Pod{2: terminating(fl, 2, "n-c")}
			},
			nodes: []string{"n-a", "n-b", "n-c"}, remove: []int32{1}, pending: []int32{1, 2},
			messages: map[int32]string{2: "data directory " + dir + " on node n-c is removed once pod pg-2 is gone"}},
		{name: "scale down: a member waits for other pods using its claim", flock: scaledTo1,
			users: map[string][]string{"data-pg-1": {"debug", "pg-1-copy"}}, nodes: []string{"n-a", "n-b", "n-c"},
			remove: []int32{2}, pending: []int32{1, 2},
			messages: map[int32]string{1: "data directory " + dir + " on node n-b is removed once pod debug, pg-1-copy, which uses it, is gone"}},
		{name: "scale down: users unknown, nobody goes", flock: scaledTo1, nodes: []string{"n-a", "n-b", "n-c"},
			unknown: true, pending: []int32{1, 2}},
		{name: "deleted under whenDeleted Delete: pods go first, then every member's data",
			flock: deleted(withRetention(newFlock("pg", 3), retain, del), v1alpha1.FinalizerDataCleanup),
			pods: func(fl *v1alpha1.Flock) map[int32]*corev1.Pod {
				return map[int32]*corev1.Pod{0: running(fl, 0, "n-a"), 1: terminating(fl, 1, "n-b"), 2: terminating(fl, 2, "n-gone")}
			},
			nodes:   []string{"n-a", "n-b"},
			deleted: []deletion{{"pg-0", "the Flock is deleted; its data is removed next", false}, {"pg-2", "the Flock is deleted", true}},
			pending: []int32{0, 1, 2},
			messages: map[int32]string{
				0: "data directory " + dir + " on node n-a is removed once pod pg-0 is gone",
				1: "data directory " + dir + " on node n-b is removed once pod pg-1 is gone",
				2: "data directory " + dir + " on node n-c is removed once pod pg-2 is gone",
			}},
		{name: "deleted under whenDeleted Delete, no pods left: all data goes",
			flock: deleted(withRetention(newFlock("pg", 3), retain, del), v1alpha1.FinalizerDataCleanup),
			nodes: []string{"n-a", "n-b", "n-c"}, remove: []int32{0, 1, 2}, pending: []int32{0, 1, 2}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pods := map[int32]*corev1.Pod{}
			if tc.pods != nil {
				pods = tc.pods(tc.flock)
			}
			nodes := map[string]*corev1.Node{}
			for _, n := range testNodes(tc.nodes...) {
				nodes[n.Name] = n
			}
			users := tc.users
			if users == nil && !tc.unknown {
				users = map[string][]string{}
			}
			plan := planCleanup(cleanupInput{flock: tc.flock, members: three, pods: pods, nodes: nodes, claimUsers: users, dataDir: dir})
			if plan.orphaned != tc.orphaned {
				t.Errorf("orphaned = %v, want %v", plan.orphaned, tc.orphaned)
			}
			var gotDeleted []deletion
			for _, d := range plan.deletions {
				gotDeleted = append(gotDeleted, deletion{d.pod.Name, d.why, d.force})
			}
			if !reflect.DeepEqual(gotDeleted, tc.deleted) {
				t.Errorf("deletions = %+v, want %+v", gotDeleted, tc.deleted)
			}
			var gotRemove []int32
			for _, m := range plan.remove {
				gotRemove = append(gotRemove, m.Ordinal)
			}
			if !reflect.DeepEqual(gotRemove, tc.remove) {
				t.Errorf("remove = %v, want %v", gotRemove, tc.remove)
			}
			if got := slices.Sorted(maps.Keys(plan.pending)); !reflect.DeepEqual(got, tc.pending) && len(got)+len(tc.pending) > 0 {
				t.Errorf("pending = %v, want %v", got, tc.pending)
			}
			want := tc.messages
			if want == nil {
				want = map[int32]string{}
			}
			if !reflect.DeepEqual(plan.messages, want) {
				t.Errorf("messages = %q, want %q", plan.messages, want)
			}
		})
	}
}

func TestHelperNeeded(t *testing.T) {
	fl := newFlock("pg", 2)
	pods := map[int32]*corev1.Pod{0: testPod(fl, 0, "n-a", true, nil)}
	pending := map[int32]bool{3: true}
	gone := fl.DeepCopy()
	gone.DeletionTimestamp = &metav1.Time{Time: decisionNow}
	for _, tc := range []struct {
		name  string
		flock *v1alpha1.Flock
		job   string
		ord   int32
		want  bool
	}{
		{"prepare of a starting member", fl, HelperPrepare, 1, true},
		{"prepare of a running member", fl, HelperPrepare, 0, false},
		{"prepare above replicas", fl, HelperPrepare, 3, false},
		{"prepare while deleted", gone, HelperPrepare, 1, false},
		{"cleanup pending", fl, HelperCleanup, 3, true},
		{"cleanup of a member scaled back up", fl, HelperCleanup, 1, true},
		{"cleanup of a running member", fl, HelperCleanup, 0, false},
		{"cleanup above replicas, not pending", fl, HelperCleanup, 2, false},
	} {
		if got := helperNeeded(tc.flock, pods, pending)(tc.job, tc.ord); got != tc.want {
			t.Errorf("%s: helperNeeded(%s, %d) = %v, want %v", tc.name, tc.job, tc.ord, got, tc.want)
		}
	}
}
