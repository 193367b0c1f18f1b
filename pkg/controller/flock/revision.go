package flock

import (
	"bytes"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/rand"

	"flock.dev/flock/pkg/apis/flock/v1alpha1"
)

// Revision returns the revision of a pod template: a short, stable hash of
// its JSON form, safe as a label value. Equal templates have equal
// revisions across processes and restarts (encoding/json writes struct
// fields in declaration order and map keys sorted); any change to the
// template changes it. It is written to status.updateRevision and
// status.currentRevision, to each pod's controller-revision-hash label, and
// names the template's ControllerRevision (RevisionName).
func Revision(template *corev1.PodTemplateSpec) string {
	data, err := json.Marshal(template)
	if err != nil {
		// A PodTemplateSpec has no channels, funcs or cycles; Marshal
		// cannot fail on it.
		panic(err)
	}
	h := fnv.New32a()
	_, _ = h.Write(data)
	return rand.SafeEncodeString(strconv.FormatUint(uint64(h.Sum32()), 10))
}

// RevisionName returns the name of the ControllerRevision that records
// revision of a Flock: <flock>-<revision>. (The revision alone is the label
// value and the status field: <flock>-<revision> may exceed the 63
// characters of a label value.)
func RevisionName(flockName, revision string) string {
	return flockName + "-" + revision
}

// NewControllerRevision returns the ControllerRevision that records
// template as revision (its hash) of Flock f, with the given revision
// number, labelled flock.dev/name and controller-revision-hash, and
// controlled by f. Its data is the template as JSON.
func NewControllerRevision(f *v1alpha1.Flock, template *corev1.PodTemplateSpec, revision string, number int64) *appsv1.ControllerRevision {
	data, err := canonicalJSON(template)
	if err != nil {
		panic(err) // see Revision
	}
	return &appsv1.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{
			Name:      RevisionName(f.Name, revision),
			Namespace: f.Namespace,
			Labels: map[string]string{
				v1alpha1.LabelFlockName: f.Name,
				v1alpha1.LabelRevision:  revision,
			},
			OwnerReferences: []metav1.OwnerReference{*newControllerRef(f)},
		},
		Data:     runtime.RawExtension{Raw: data},
		Revision: number,
	}
}

// TemplateOf returns the pod template a ControllerRevision of a Flock
// records.
func TemplateOf(cr *appsv1.ControllerRevision) (*corev1.PodTemplateSpec, error) {
	if len(cr.Data.Raw) == 0 {
		return nil, fmt.Errorf("ControllerRevision %s/%s has no data", cr.Namespace, cr.Name)
	}
	tmpl := &corev1.PodTemplateSpec{}
	if err := json.Unmarshal(cr.Data.Raw, tmpl); err != nil {
		return nil, fmt.Errorf("decoding the template of ControllerRevision %s/%s: %w", cr.Namespace, cr.Name, err)
	}
	return tmpl, nil
}

// revisionOf returns the revision a ControllerRevision records: its
// controller-revision-hash label.
func revisionOf(cr *appsv1.ControllerRevision) string {
	return cr.Labels[v1alpha1.LabelRevision]
}

// updatePlan is what one sync knows about a Flock's revisions: which
// revision new pods get, and how a rolling update proceeds.
type updatePlan struct {
	// Strategy is spec.updateStrategy.type (RollingUpdate when empty).
	Strategy v1alpha1.FlockUpdateStrategyType
	// Partition is the lowest ordinal a rolling update replaces, within
	// [0, replicas].
	Partition int32
	// MaxUnavailable is how many members may be unavailable while pods
	// are replaced (at least 1).
	MaxUnavailable int
	// Update is the revision of the Flock's template; Current the revision
	// of members not yet updated (status.currentRevision, or Update).
	Update, Current string
	// CurrentTemplate is Current's template when it differs from Update
	// and its ControllerRevision could be read; nil otherwise, and then
	// every pod is created from the Flock's template.
	CurrentTemplate *corev1.PodTemplateSpec
	// Front is the rolling update's front: members at ordinals >= Front are
	// created at Update, those below it (whose turn has not come) at
	// Current. See rollingFront.
	Front int32
}

// newUpdatePlan returns the update plan of Flock f, whose pods by ordinal
// are pods.
func newUpdatePlan(f *v1alpha1.Flock, pods map[int32]*corev1.Pod, update, current string, currentTemplate *corev1.PodTemplateSpec) updatePlan {
	replicas := replicasOf(f)
	p := updatePlan{
		Strategy:       f.Spec.UpdateStrategy.Type,
		Partition:      partitionOf(f),
		MaxUnavailable: maxUnavailableOf(f),
		Update:         update,
		Current:        current,
	}
	if p.Strategy == "" {
		p.Strategy = v1alpha1.RollingUpdateFlockStrategyType
	}
	if current == "" {
		p.Current = update
	}
	if p.Current != update {
		p.CurrentTemplate = currentTemplate
	}
	p.Front = rollingFront(pods, replicas, p.Partition, update)
	return p
}

// templateFor returns the template and revision of a new pod for member
// ordinal. OnDelete and members at or above the rolling front get the
// Flock's template; a member below the front (a pod deleted while a
// rolling update has not reached it, or below the partition) comes back at
// the current revision, so a template that is still being rolled out (and
// may be broken) reaches members only in rollout order.
func (p updatePlan) templateFor(f *v1alpha1.Flock, ordinal int32) (*corev1.PodTemplateSpec, string) {
	if p.Strategy == v1alpha1.RollingUpdateFlockStrategyType && ordinal < p.Front && p.CurrentTemplate != nil {
		return p.CurrentTemplate, p.Current
	}
	return &f.Spec.Template, p.Update
}

// partitionOf returns the partition of a RollingUpdate Flock within
// [0, replicas], and 0 for OnDelete.
func partitionOf(f *v1alpha1.Flock) int32 {
	us := f.Spec.UpdateStrategy
	if us.Type == v1alpha1.OnDeleteFlockStrategyType || us.RollingUpdate == nil || us.RollingUpdate.Partition == nil {
		return 0
	}
	return min(max(*us.RollingUpdate.Partition, 0), replicasOf(f))
}

// maxUnavailableOf returns rollingUpdate.maxUnavailable as a number of
// members: a percentage of replicas rounded down, and at least 1.
func maxUnavailableOf(f *v1alpha1.Flock) int {
	ru := f.Spec.UpdateStrategy.RollingUpdate
	if ru == nil || ru.MaxUnavailable == nil {
		return 1
	}
	n, err := intstr.GetScaledValueFromIntOrPercent(ru.MaxUnavailable, int(replicasOf(f)), false)
	if err != nil || n < 1 {
		return 1
	}
	return n
}

// rollingFront returns the lowest ordinal o >= partition such that every
// member from o up to replicas-1 has no pod, a terminating one, or one at
// the update revision: the members a rolling update has reached (or would
// reach next, if their pods were there). It is replicas when the top member
// still runs an earlier revision.
func rollingFront(pods map[int32]*corev1.Pod, replicas, partition int32, update string) int32 {
	front := replicas
	for o := replicas - 1; o >= partition; o-- {
		pod := pods[o]
		if pod != nil && !isTerminating(pod) && podRevision(pod) != update {
			break
		}
		front = o
	}
	return front
}

// failingWaitingReasons are container waiting reasons that show a
// template cannot work: a rollout need not wait longer to call it halted.
var failingWaitingReasons = map[string]bool{
	"CrashLoopBackOff": true, "ErrImagePull": true, "ImagePullBackOff": true, "InvalidImageName": true,
	"CreateContainerConfigError": true, "CreateContainerError": true, "RunContainerError": true,
}

// haltedPod returns the pod a rolling update of Flock f is halted on: the
// highest member at or above the partition whose pod runs the update
// revision and is not Ready, and either shows a failure (a container
// crash-looping or failing to start, or the pod Failed) or has not become
// Ready within haltAfter of its creation. why says which. When no pod is
// halted yet, recheck is how long until one would be (0: none pending). A
// Flock without a rollout in progress (currentRevision == update) or with
// OnDelete has no halted pod.
func haltedPod(f *v1alpha1.Flock, pods map[int32]*corev1.Pod, update, current string, haltAfter time.Duration, now time.Time) (pod *corev1.Pod, why string, recheck time.Duration) {
	if f.Spec.UpdateStrategy.Type == v1alpha1.OnDeleteFlockStrategyType || current == "" || current == update {
		return nil, "", 0
	}
	for ord := replicasOf(f) - 1; ord >= partitionOf(f); ord-- {
		p := pods[ord]
		if p == nil || isTerminating(p) || podRevision(p) != update || isRunningAndReady(p) {
			continue
		}
		if why := podFailure(p); why != "" {
			return p, why, 0
		}
		age := now.Sub(p.CreationTimestamp.Time)
		if age >= haltAfter {
			why := fmt.Sprintf("it has not become Ready within %s of its creation", haltAfter)
			if c := podReadyCondition(p); c != nil && (c.Message != "" || c.Reason != "") {
				detail := c.Message
				if detail == "" {
					detail = c.Reason
				}
				why += " (" + detail + ")"
			}
			return p, why, 0
		}
		if d := haltAfter - age; recheck == 0 || d < recheck {
			recheck = d
		}
	}
	return nil, "", recheck
}

// podFailure says how a pod shows that it cannot run ("" when it does not).
func podFailure(pod *corev1.Pod) string {
	if pod.Status.Phase == corev1.PodFailed {
		msg := "it failed"
		if pod.Status.Reason != "" {
			msg += ": " + pod.Status.Reason
		}
		return msg
	}
	statuses := append(slices.Clone(pod.Status.InitContainerStatuses), pod.Status.ContainerStatuses...)
	for _, cs := range statuses {
		if w := cs.State.Waiting; w != nil && failingWaitingReasons[w.Reason] {
			msg := fmt.Sprintf("container %s is in %s", cs.Name, w.Reason)
			if w.Message != "" {
				msg += ": " + w.Message
			}
			return msg
		}
	}
	return ""
}

// canonicalJSON encodes v as JSON with object keys sorted. kube-apiserver
// stores a ControllerRevision's data in that form after any patch (the
// garbage collector patches ownerReferences when it orphans), and its
// validation compares data byte for byte: data in Go field order would make
// every such patch fail as "field is immutable".
func canonicalJSON(v interface{}) ([]byte, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	// UseNumber keeps integers exact (no float64 round trip).
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var generic interface{}
	if err := dec.Decode(&generic); err != nil {
		return nil, err
	}
	return json.Marshal(generic)
}
