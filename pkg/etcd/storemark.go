// File storemark.go: the mark flock-apiserver leaves in its etcd once it
// serves the store. Members' pods and claims in the core cluster name their
// Flock as owner; a store that lost its data serves no Flocks, and
// kube-controller-manager's garbage collector then deletes every member. A
// start on a store without Flocks can tell the two cases apart by the mark:
// a store whose Flocks were all deleted has it, a store that lost its data
// (or was never served) has not.

package etcd

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// storeMarkName is the mark's key under the prefix: beside the
// <group>/<resource>/ paths objects are stored under, never one of them.
const storeMarkName = "flock-apiserver-store"

// StoreMarkKey returns the key of the mark of the store under prefix.
func StoreMarkKey(prefix string) string {
	return strings.TrimSuffix(prefix, "/") + "/" + storeMarkName
}

// StoreMark is the mark's value.
type StoreMark struct {
	// Time is when the mark was written.
	Time time.Time `json:"time"`
	// Reason says why: the store was served (it held Flocks, or nothing in
	// the cluster named a Flock as owner), or an operator accepted it empty.
	Reason string `json:"reason"`
}

// StoreState is what a store under a prefix holds.
type StoreState struct {
	// Mark is the store's mark, nil when it has none.
	Mark *StoreMark
	// Objects says whether any object is stored under the prefix.
	Objects bool
}

// ReadStoreState reads the mark of the store under prefix and whether it
// holds any object (one read of at most two keys, keys only).
func ReadStoreState(ctx context.Context, kv clientv3.KV, prefix string) (StoreState, error) {
	prefix = strings.TrimSuffix(prefix, "/")
	var s StoreState
	mark := StoreMarkKey(prefix)
	resp, err := kv.Get(ctx, mark)
	if err != nil {
		return s, fmt.Errorf("reading %s: %w", mark, err)
	}
	if len(resp.Kvs) > 0 {
		s.Mark = &StoreMark{}
		if err := json.Unmarshal(resp.Kvs[0].Value, s.Mark); err != nil {
			// A mark that cannot be read is still a mark.
			s.Mark.Reason = fmt.Sprintf("unreadable mark %.40q", resp.Kvs[0].Value)
		}
	}
	resp, err = kv.Get(ctx, prefix+"/", clientv3.WithRange(clientv3.GetPrefixRangeEnd(prefix+"/")), clientv3.WithKeysOnly(), clientv3.WithLimit(2))
	if err != nil {
		return s, fmt.Errorf("reading keys under %s: %w", prefix, err)
	}
	for _, e := range resp.Kvs {
		if string(e.Key) != mark {
			s.Objects = true
		}
	}
	return s, nil
}

// MarkStore writes the mark of the store under prefix unless it has one,
// and reports whether it wrote it.
func MarkStore(ctx context.Context, kv clientv3.KV, prefix string, m StoreMark) (bool, error) {
	key := StoreMarkKey(prefix)
	value, err := json.Marshal(m)
	if err != nil {
		return false, err
	}
	resp, err := kv.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, string(value))).
		Commit()
	if err != nil {
		return false, fmt.Errorf("writing %s: %w", key, err)
	}
	return resp.Succeeded, nil
}
