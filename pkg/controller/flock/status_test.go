package flock

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"flock.dev/flock/pkg/apis/flock/v1alpha1"
)

func TestRecordMembersNeverOverridesRecordedOnes(t *testing.T) {
	st := &v1alpha1.FlockStatus{Members: []v1alpha1.FlockMember{{Ordinal: 2, Node: "n-c"}, {Ordinal: 0, Node: "n-a"}}}
	newMember := func(ord int32, node string) v1alpha1.FlockMember {
		return v1alpha1.FlockMember{Ordinal: ord, Node: node, Pod: "p"}
	}
	added := recordMembers(st, map[int32]string{
		0: "n-x", // ordinal taken
		1: "n-c", // node taken
		3: "n-d",
		4: "n-e",
	}, newMember)
	if want := []int32{3, 4}; !equality.Semantic.DeepEqual(added, want) {
		t.Errorf("added = %v, want %v", added, want)
	}
	want := []v1alpha1.FlockMember{{Ordinal: 0, Node: "n-a"}, {Ordinal: 2, Node: "n-c"}, {Ordinal: 3, Node: "n-d", Pod: "p"}, {Ordinal: 4, Node: "n-e", Pod: "p"}}
	if !equality.Semantic.DeepEqual(st.Members, want) {
		t.Errorf("members = %+v, want %+v", st.Members, want)
	}
}

func TestMergeStatusKeepsOthersMembers(t *testing.T) {
	current := &v1alpha1.FlockStatus{
		Members: []v1alpha1.FlockMember{
			{Ordinal: 0, Node: "n-a"},
			{Ordinal: 1, Node: "n-z"}, // moved by someone else since desired was computed
			{Ordinal: 2, Node: "n-c"},
			{Ordinal: 3, Node: "n-d"},
		},
		Conditions: []metav1.Condition{{Type: "Available", Status: metav1.ConditionTrue, LastTransitionTime: metav1.Unix(100, 0)}},
	}
	desired := v1alpha1.FlockStatus{
		Replicas: 2, ObservedGeneration: 7,
		Members: []v1alpha1.FlockMember{
			{Ordinal: 0, Node: "n-a", Ready: true},
			{Ordinal: 1, Node: "n-b", Ready: true},
		},
		Conditions: []metav1.Condition{{Type: "Available", Status: metav1.ConditionTrue, Reason: "R", LastTransitionTime: metav1.Unix(200, 0)}},
	}
	mergeStatus(current, desired, map[int32]string{2: "n-c", 3: "n-other"})
	want := []v1alpha1.FlockMember{
		{Ordinal: 0, Node: "n-a", Ready: true}, // updated
		{Ordinal: 1, Node: "n-z"},              // not ours to update
		{Ordinal: 3, Node: "n-d"},              // removal was for another node
	}
	if !equality.Semantic.DeepEqual(current.Members, want) {
		t.Errorf("members = %+v, want %+v", current.Members, want)
	}
	if current.Replicas != 2 || current.ObservedGeneration != 7 {
		t.Errorf("counters = %+v", current)
	}
	c := meta.FindStatusCondition(current.Conditions, "Available")
	if c.Reason != "R" || !c.LastTransitionTime.Equal(&metav1.Time{Time: time.Unix(100, 0)}) {
		t.Errorf("condition = %+v, want reason R and the old transition time", c)
	}
}

// readyPod is a Running, Ready pod of member ord on node n-a, n-b, ... (by ord).
func readyPod(name string, ord int32, rev string, readySince time.Time) *corev1.Pod {
	p := &corev1.Pod{}
	p.Name = name
	p.Labels = map[string]string{v1alpha1.LabelRevision: rev}
	p.Spec.NodeName = "n-" + string(rune('a'+ord))
	p.Status.Phase = corev1.PodRunning
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(readySince)}}
	return p
}

func TestComputeStatus(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	fl := newFlock("pg", 2)
	fl.Generation = 4
	fl.Spec.MinReadySeconds = 10
	fl.Status.CurrentRevision = "old"
	members := map[int32]v1alpha1.FlockMember{0: {Ordinal: 0, Node: "n-a"}, 1: {Ordinal: 1, Node: "n-b"}, 2: {Ordinal: 2, Node: "n-c"}}
	pods := map[int32]*corev1.Pod{
		0: readyPod("pg-0", 0, "new", now.Add(-time.Minute)),
		1: readyPod("pg-1", 1, "old", now.Add(-5*time.Second)), // ready, not yet available
		2: readyPod("pg-2", 2, "old", now.Add(-time.Hour)),     // condemned
	}
	st, states := computeStatus(statusInput{
		Flock: fl, Members: members, Pods: pods, UpdateRevision: "new", ClusterDomain: "example.org", Now: now,
		Blocked: map[int32]blockage{},
	})
	if st.ObservedGeneration != 4 || st.Replicas != 3 || st.ReadyReplicas != 3 || st.AvailableReplicas != 2 ||
		st.CurrentRevision != "old" || st.UpdateRevision != "new" || st.CurrentReplicas != 2 || st.UpdatedReplicas != 1 ||
		st.Selector != "app=pg" {
		t.Errorf("status = %+v", st)
	}
	if len(st.Members) != 3 || st.Members[1].Hostname != "pg-1.pg.db.svc.example.org" || !st.Members[1].Ready || st.Members[2].Message == "" {
		t.Errorf("members = %+v", st.Members)
	}
	if states[MemberReady] != 2 || states[MemberNotReady] != 0 {
		t.Errorf("states = %v (the condemned member must not count)", states)
	}
	// One of two members available (pg-2 is beyond replicas and does not
	// count), and scaling down.
	if c := meta.FindStatusCondition(st.Conditions, v1alpha1.FlockAvailable); c.Status != metav1.ConditionFalse || c.Message != "1 of 2 members available" {
		t.Errorf("Available = %+v", c)
	}
	if c := meta.FindStatusCondition(st.Conditions, v1alpha1.FlockProgressing); c.Status != metav1.ConditionTrue || c.Reason != ReasonScalingDown {
		t.Errorf("Progressing = %+v", c)
	}
	for _, c := range st.Conditions {
		if c.ObservedGeneration != 4 {
			t.Errorf("condition %s observedGeneration = %d", c.Type, c.ObservedGeneration)
		}
	}

	// Once every member's pod is at the update revision and nothing is
	// condemned, the current revision catches up.
	pods[1] = readyPod("pg-1", 1, "new", now.Add(-time.Minute))
	delete(pods, 2)
	st, _ = computeStatus(statusInput{
		Flock: fl, Members: members, Pods: pods, UpdateRevision: "new", Remove: map[int32]string{2: "n-c"}, Now: now,
	})
	if st.CurrentRevision != "new" || st.CurrentReplicas != 2 || len(st.Members) != 2 {
		t.Errorf("status = %+v", st)
	}
	if c := meta.FindStatusCondition(st.Conditions, v1alpha1.FlockAvailable); c.Status != metav1.ConditionTrue {
		t.Errorf("Available = %+v", c)
	}
}
