package validation

// The measurement behind MaxReplicas: the largest Flock's stored object,
// status and managedFields included, stays well under etcd's request limit.

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"flock.dev/flock/pkg/apis/flock/v1alpha1"
)

// etcdRequestLimit is etcd's default --max-request-bytes (1.5 MiB), which
// bounds one stored object.
const etcdRequestLimit = 1536 * 1024

// worstCaseFlock is a Flock of n members with the longest names validation
// and Kubernetes allow (63-character namespace, 50-character name,
// 253-character node names), every member field set with a long message,
// and the controller's managedFields entry for the status.
func worstCaseFlock(n int) *v1alpha1.Flock {
	f := &v1alpha1.Flock{}
	f.Name = strings.Repeat("f", 50)
	f.Namespace = strings.Repeat("n", 63)
	lost := metav1.Now()
	var fields []string
	for i := range n {
		node := fmt.Sprintf("%s-%05d", strings.Repeat("node", 61), i)
		pod := fmt.Sprintf("%s-%d", f.Name, i)
		f.Status.Members = append(f.Status.Members, v1alpha1.FlockMember{
			Ordinal: int32(i), Node: node, Pod: pod, Ready: true, Revision: "78d5788d68",
			Hostname:         pod + "." + f.Name + "." + f.Namespace + ".svc.cluster.local",
			PersistentVolume: fmt.Sprintf("flock-0b5a3f7e-6a2c-4e0f-9d8b-1c2d3e4f5a6b-%d", i),
			Claim:            "data-" + pod,
			Message: "member " + fmt.Sprint(i) + " waits for node " + node +
				", which is gone since 2026-01-01T00:00:00Z; memberRecovery Reassign moves it to another node at 2026-01-01T00:01:00Z",
			NodeLostSince: &lost,
		})
		fields = append(fields, fmt.Sprintf(`"k:{\"ordinal\":%d}":{".":{},"f:claim":{},"f:hostname":{},"f:message":{},"f:node":{},"f:nodeLostSince":{},"f:ordinal":{},"f:persistentVolume":{},"f:pod":{},"f:ready":{},"f:revision":{}}`, i))
	}
	f.ManagedFields = []metav1.ManagedFieldsEntry{{
		Manager: "flock-controller", Operation: metav1.ManagedFieldsOperationUpdate, Subresource: "status", FieldsType: "FieldsV1",
		FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:status":{"f:members":{` + strings.Join(fields, ",") + `}}}`)},
	}}
	return f
}

func TestMaxReplicasStatusFits(t *testing.T) {
	size := func(n int) int {
		b, err := json.Marshal(worstCaseFlock(n))
		if err != nil {
			t.Fatal(err)
		}
		return len(b)
	}
	atMax, twice := size(MaxReplicas), size(2*MaxReplicas)
	t.Logf("%d members: %d bytes (%.0f%% of etcd's limit); %d members: %d bytes (%.0f%%)",
		MaxReplicas, atMax, 100*float64(atMax)/etcdRequestLimit, 2*MaxReplicas, twice, 100*float64(twice)/etcdRequestLimit)
	// Room to spare: at most half the limit, for the spec (a large pod
	// template), conditions and other managers' fields.
	if atMax > etcdRequestLimit/2 {
		t.Errorf("a Flock of MaxReplicas=%d members takes %d bytes, more than half of etcd's %d", MaxReplicas, atMax, etcdRequestLimit)
	}
	// And the limit is not far below what fits: twice as many would leave
	// too little room.
	if twice <= etcdRequestLimit*3/4 {
		t.Errorf("twice MaxReplicas (%d members) takes only %d bytes of %d: MaxReplicas could be larger", 2*MaxReplicas, twice, etcdRequestLimit)
	}
}
