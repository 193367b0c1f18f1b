// File node_loss.go: since when nodes have been lost (NotReady or gone), as
// remembered across syncs, and what a sync knows about a member on a lost
// node.

package flock

import (
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"flock.dev/flock/pkg/placement"
)

// nodeLossTracker says since when a node has been lost: NotReady since its
// Ready condition's last transition, or gone since the controller first
// saw it missing. A node object leaves no trace once deleted, so the
// members record it in status (FlockMember.NodeLostSince) and a restarted
// controller recalls it from there (recall), neither shortening nor
// lengthening the wait.
type nodeLossTracker struct {
	mu   sync.Mutex
	seen map[string]time.Time
}

func newNodeLossTracker() *nodeLossTracker {
	return &nodeLossTracker{seen: map[string]time.Time{}}
}

// lostSince returns since when node name (nil: its object is gone) has
// been lost, and false when it is Ready.
func (t *nodeLossTracker) lostSince(name string, node *corev1.Node, now time.Time) (time.Time, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if node != nil {
		if placement.IsReady(node) {
			delete(t.seen, name)
			return time.Time{}, false
		}
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady && !c.LastTransitionTime.IsZero() {
				delete(t.seen, name)
				return c.LastTransitionTime.Time, true
			}
		}
	}
	since, ok := t.seen[name]
	if !ok {
		// Whole seconds, as status records it; rounded up, so a wait
		// is never shortened.
		since = now.Truncate(time.Second)
		if since.Before(now) {
			since = since.Add(time.Second)
		}
		t.seen[name] = since
	}
	return since, true
}

// recall tells the tracker that a member recorded node name lost since
// since, e.g. before the controller restarted: the earliest wins.
func (t *nodeLossTracker) recall(name string, since time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if seen, ok := t.seen[name]; !ok || since.Before(seen) {
		t.seen[name] = since
	}
}

// nodeLoss is what a sync knows about a member on a lost node.
type nodeLoss struct {
	// Since is when the node became NotReady or was first seen gone.
	Since time.Time
	// Note says what memberRecovery does about it.
	Note string
}
