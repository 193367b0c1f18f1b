// File nodeagent_test.go: the controller's side of the node agent
// (pkg/nodeagent): a member's directory is left to a Ready agent on its node
// for a grace period, then to a helper pod; without a Ready agent a helper
// runs at once.

package flock

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"flock.dev/flock/pkg/apis/flock/v1alpha1"
	"flock.dev/flock/pkg/nodeagent"
)

// addNodeAgent adds a node agent pod on node to the fixture's cache.
func (d *dataFixture) addNodeAgent(name, node string, ready bool) {
	d.t.Helper()
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "flock-system", UID: types.UID("uid-" + name),
			Labels: map[string]string{nodeagent.LabelComponent: nodeagent.ComponentNodeAgent}},
		Spec: corev1.PodSpec{NodeName: node},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{
			{Type: corev1.PodReady, Status: status},
		}},
	}
	if err := d.pods.pods.Add(pod); err != nil {
		d.t.Fatal(err)
	}
}

// helperCount is the number of helper pods in the fixture's cache.
func (d *dataFixture) helperCount() int {
	d.t.Helper()
	helpers, err := d.pods.ListPods("flock-system", labels.SelectorFromSet(labels.Set{LabelHelper: HelperPrepare}))
	if err != nil {
		d.t.Fatal(err)
	}
	return len(helpers)
}

func agentFlock() (*v1alpha1.Flock, v1alpha1.FlockMember) {
	fl := uidFlock("pg", 3)
	fl.Spec.Template.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsUser: ptr.To(int64(999)), FSGroup: ptr.To(int64(998))}
	fl.Spec.Storage.Mode = ptr.To(int32(0o750))
	return fl, v1alpha1.FlockMember{Ordinal: 1, Node: "n-b"}
}

func TestNodeAgentPreparesTheDirectory(t *testing.T) {
	d := newDataFixture(t)
	d.syncer.agentGrace = 15 * time.Second
	d.addNodeAgent("agent-b", "n-b", true)
	d.addNodeAgent("agent-c", "n-c", true)
	fl, m := agentFlock()
	pvName := PersistentVolumeName(fl.UID, 1)

	st := d.ensure(fl, m)
	if st.ready || st.blocked == nil || st.blocked.Reason != ReasonDataPreparing || !strings.Contains(st.blocked.Message, "to be prepared") {
		t.Fatalf("first sync: %+v", st)
	}
	if st.requeue <= 0 || st.requeue > 15*time.Second {
		t.Errorf("requeue %v, want the rest of the grace (at most 15s)", st.requeue)
	}
	if n := d.helperCount(); n != 0 {
		t.Fatalf("%d helper pods, want none while the node's agent is Ready", n)
	}
	pv := d.data.volumes[pvName]
	req, err := nodeagent.RequestOf(pv, "/srv/flock")
	if err != nil || !nodeagent.Pending(pv, "n-b") || nodeagent.Pending(pv, "n-c") {
		t.Fatalf("volume's request: %+v %v (annotations %v)", req, err, pv.Annotations)
	}
	if req.UID != 999 || req.GID != 998 || req.Mode != 0o750 || req.Dir != MemberDataDir("/srv/flock", fl) {
		t.Errorf("request %+v, want owner 999:998, mode 0750 and the member's directory", req)
	}

	// The agent marks the volume; the next sync finds the member ready,
	// without a helper and without a mark of its own.
	pv = pv.DeepCopy()
	pv.Annotations[AnnotationPrepared] = "true"
	d.data.volumes[pvName] = pv
	if st = d.ensure(fl, m); !st.ready {
		t.Fatalf("after the agent's mark: %+v", st)
	}
	if n := d.helperCount(); n != 0 {
		t.Errorf("%d helper pods after the agent prepared the directory", n)
	}
	for _, op := range d.data.ops {
		if strings.HasPrefix(op, "annotate pv") {
			t.Errorf("the controller wrote %q; the agent's mark is enough", op)
		}
	}
}

// waitingForAgent returns a fixture with a Ready agent on node n-b, grace
// 15 s, and member 1 of agentFlock after its first sync, which leaves its
// directory to that agent; and its volume's name.
func waitingForAgent(t *testing.T) (*dataFixture, *v1alpha1.Flock, v1alpha1.FlockMember, string) {
	t.Helper()
	d := newDataFixture(t)
	d.syncer.agentGrace = 15 * time.Second
	d.addNodeAgent("agent-b", "n-b", true)
	fl, m := agentFlock()
	if st := d.ensure(fl, m); st.ready || d.helperCount() != 0 {
		t.Fatalf("first sync: %+v, %d helpers", st, d.helperCount())
	}
	return d, fl, m, PersistentVolumeName(fl.UID, 1)
}

func TestNodeAgentGraceEndsInAHelper(t *testing.T) {
	d, fl, m, pvName := waitingForAgent(t)
	// Within the grace the member keeps waiting for the agent.
	pv := d.data.volumes[pvName].DeepCopy()
	pv.CreationTimestamp = metav1.NewTime(d.now.Add(-14 * time.Second))
	d.data.volumes[pvName] = pv
	if st := d.ensure(fl, m); st.ready || d.helperCount() != 0 || st.requeue != time.Second {
		t.Fatalf("within the grace: %+v, %d helpers", st, d.helperCount())
	}
	// The grace is over: a helper does it, with a warning, once.
	pv = pv.DeepCopy()
	pv.CreationTimestamp = metav1.NewTime(d.now.Add(-16 * time.Second))
	d.data.volumes[pvName] = pv
	if st := d.ensure(fl, m); st.ready || d.helperCount() != 1 {
		t.Fatalf("after the grace: %+v, %d helpers", st, d.helperCount())
	}
	if !hasDataEvent(d.events, "NodeAgentSlow", "agent-b") {
		t.Errorf("events %v, want NodeAgentSlow naming the agent", d.events)
	}
	d.events = nil
	if st := d.ensure(fl, m); st.ready || d.helperCount() != 1 || len(d.events) != 0 {
		t.Errorf("a sync while the helper runs: %+v, %d helpers, events %v", st, d.helperCount(), d.events)
	}
	d.finishHelper(HelperPrepare, fl, 1, corev1.PodSucceeded)
	if st := d.ensure(fl, m); !st.ready {
		t.Errorf("after the helper: %+v", st)
	}
}

// The agent marks a volume only once the PersistentVolume controller has
// given it its first phase, and at 50 x 3 or 1,000 x 3 members that
// controller takes many volumes up more than the grace after they were
// made: the grace counts from the phase, so no helper pod races the agent
// while the member waits for that controller.
func TestNodeAgentGraceCountsFromTheVolumesFirstPhase(t *testing.T) {
	d, fl, m, pvName := waitingForAgent(t)
	setVolume := func(phase corev1.PersistentVolumePhase, made, phased time.Duration) {
		pv := d.data.volumes[pvName].DeepCopy()
		pv.CreationTimestamp = metav1.NewTime(d.now.Add(-made))
		pv.Status.Phase = phase
		pv.Status.LastPhaseTransitionTime = ptr.To(metav1.NewTime(d.now.Add(-phased)))
		d.data.volumes[pvName] = pv
	}

	// Made a minute ago and still Pending: the member waits for the
	// PersistentVolume controller, the directory is the agent's, and the
	// phase's update (no timer) brings the next sync.
	setVolume(corev1.VolumePending, time.Minute, time.Minute)
	st := d.ensure(fl, m)
	if st.ready || d.helperCount() != 0 || st.requeue != 0 || st.blocked == nil || !strings.Contains(st.blocked.Message, "PersistentVolume controller to take up volume "+pvName) {
		t.Fatalf("Pending a minute after it was made: %+v, %d helpers", st, d.helperCount())
	}
	// Bound 14 s ago: 1 s of the grace is left.
	setVolume(corev1.VolumeBound, time.Minute, 14*time.Second)
	if st := d.ensure(fl, m); st.ready || d.helperCount() != 0 || st.requeue != time.Second {
		t.Fatalf("14 s after its phase: %+v, %d helpers", st, d.helperCount())
	}
	// Bound 16 s ago: a helper does it.
	setVolume(corev1.VolumeBound, time.Minute, 16*time.Second)
	if st := d.ensure(fl, m); st.ready || d.helperCount() != 1 || !hasDataEvent(d.events, "NodeAgentSlow", "agent-b") {
		t.Fatalf("16 s after its phase: %+v, %d helpers, events %v", st, d.helperCount(), d.events)
	}
}

func TestWithoutAReadyNodeAgentAHelperRunsAtOnce(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(d *dataFixture)
	}{
		{"no agent", func(*dataFixture) {}},
		{"agent not Ready", func(d *dataFixture) { d.addNodeAgent("agent-b", "n-b", false) }},
		{"agent on another node", func(d *dataFixture) { d.addNodeAgent("agent-c", "n-c", true) }},
		{"agents off", func(d *dataFixture) { d.addNodeAgent("agent-b", "n-b", true); d.syncer.agentGrace = 0 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newDataFixture(t)
			d.syncer.agentGrace = 15 * time.Second
			tc.setup(d)
			fl, m := agentFlock()
			if st := d.ensure(fl, m); st.ready || d.helperCount() != 1 {
				t.Errorf("%+v, %d helpers; want the helper at once", st, d.helperCount())
			}
		})
	}
}

func TestNodeAgentPodsAreIndexedAndKeepTheirReadiness(t *testing.T) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "agent-x", Namespace: "flock-system",
			Labels:          map[string]string{nodeagent.LabelComponent: nodeagent.ComponentNodeAgent},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "flock-node-agent", UID: "ds", Controller: ptr.To(true)}}},
		Spec: corev1.PodSpec{NodeName: "n-x"},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{
			{Type: corev1.PodReady, Status: corev1.ConditionTrue},
		}},
	}
	keys, err := indexByFlockController(pod)
	if err != nil || len(keys) != 1 || keys[0] != nodeAgentIndexKey("flock-system", "n-x") {
		t.Errorf("index keys %v, %v", keys, err)
	}
	slim, err := TrimPod(pod)
	if err != nil || !isRunningAndReady(slim.(*corev1.Pod)) {
		t.Errorf("trimmed agent pod lost its readiness: %+v", slim)
	}
}
