// File revision.go: template revisions: their hash, their ControllerRevisions and the
// templates recorded in them. Pure.

package flock

import (
	"bytes"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
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

// ChangeCauseAnnotation is the annotation a Flock's new revision copies
// from the Flock, the cause `kubectl flock rollout history` prints, as a
// StatefulSet's revisions carry it.
const ChangeCauseAnnotation = "kubernetes.io/change-cause"

// NewControllerRevision returns the ControllerRevision that records
// template as revision (its hash) of Flock f, with the given revision
// number, labelled flock.dev/name and controller-revision-hash, annotated
// with f's change cause if it has one, and controlled by f. Its data is the
// template as JSON.
func NewControllerRevision(f *v1alpha1.Flock, template *corev1.PodTemplateSpec, revision string, number int64) *appsv1.ControllerRevision {
	data, err := canonicalJSON(template)
	if err != nil {
		panic(err) // see Revision
	}
	cr := &appsv1.ControllerRevision{
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
	if cause, ok := f.Annotations[ChangeCauseAnnotation]; ok {
		cr.Annotations = map[string]string{ChangeCauseAnnotation: cause}
	}
	return cr
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
