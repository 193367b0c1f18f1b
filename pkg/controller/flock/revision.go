package flock

import (
	"encoding/json"
	"hash/fnv"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/rand"
)

// Revision returns the revision of a pod template: a short, stable hash of
// its JSON form, safe as a label value. Equal templates have equal
// revisions across processes and restarts (encoding/json writes struct
// fields in declaration order and map keys sorted); any change to the
// template changes it. It is written to status.updateRevision and to each
// pod's controller-revision-hash label.
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
