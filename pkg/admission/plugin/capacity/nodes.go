package capacity

import (
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
)

// nodeSnapshot is the list of nodes the plugin checks against. Listing 5,000
// nodes from a lister copies 5,000 pointers twice and walks a map; the
// snapshot does that only after the node informer reported a change, so most
// requests only read a slice. Without change notifications (tracked false)
// every request lists.
type nodeSnapshot struct {
	lister  corelisters.NodeLister
	tracked bool
	// changes counts the node informer's events. The informer updates its
	// store before it notifies handlers, so a snapshot built after reading
	// changes is at least as new as that count.
	changes atomic.Uint64
	current atomic.Pointer[builtNodes]
}

type builtNodes struct {
	changes uint64
	nodes   []*corev1.Node
}

func newNodeSnapshot(lister corelisters.NodeLister) *nodeSnapshot {
	return &nodeSnapshot{lister: lister}
}

// track makes the snapshot follow the events of informer.
func (s *nodeSnapshot) track(informer cache.SharedIndexInformer) error {
	bump := func() { s.changes.Add(1) }
	_, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { bump() },
		UpdateFunc: func(any, any) { bump() },
		DeleteFunc: func(any) { bump() },
	})
	if err != nil {
		return err
	}
	s.tracked = true
	return nil
}

// list returns the nodes. The slice and the nodes are shared: read only.
func (s *nodeSnapshot) list() ([]*corev1.Node, error) {
	changes := s.changes.Load()
	if cur := s.current.Load(); s.tracked && cur != nil && cur.changes == changes {
		return cur.nodes, nil
	}
	nodes, err := s.lister.List(labels.Everything())
	if err != nil {
		return nil, err
	}
	s.current.Store(&builtNodes{changes: changes, nodes: nodes})
	return nodes, nil
}
