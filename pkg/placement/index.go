// This file holds NodeIndex, the nodes kept in a form that answers Verify
// without walking every node: admission checks each Flock request against
// thousands of nodes, and a walk over all of them costs more than the request
// may.

package placement

import (
	"maps"
	"math/bits"
	"sync"

	corev1 "k8s.io/api/core/v1"
)

// NodeIndex holds nodes for Verify. It keeps, per label key=value, the set of
// nodes carrying it, and the sets of cordoned, NotReady and tainted nodes
// (NoSchedule or NoExecute), all as bitsets over a slot per node. A check
// intersects the selector's sets, subtracts the cordoned ones, and evaluates
// only the tainted and NotReady nodes one by one; its cost grows with the
// number of nodes by a word per 64 nodes. The answers are Verify's, for the
// same nodes.
//
// The nodes are shared with the caller: Set keeps the pointer, and neither
// side may modify a node after it is set. Safe for concurrent use.
type NodeIndex struct {
	mu     sync.RWMutex
	nodes  []*corev1.Node // by slot; nil for a free slot
	free   []int
	byName map[string]int
	labels map[labelPair]*posting
	// Sets of slots.
	present, cordoned, tainted, notReady bitset
}

// NewNodeIndex returns an empty index.
func NewNodeIndex() *NodeIndex {
	return &NodeIndex{byName: map[string]int{}, labels: map[labelPair]*posting{}}
}

// Len returns the number of nodes in the index.
func (x *NodeIndex) Len() int {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return len(x.byName)
}

// Get returns the node named name, nil when the index has none.
func (x *NodeIndex) Get(name string) *corev1.Node {
	x.mu.RLock()
	defer x.mu.RUnlock()
	if slot, ok := x.byName[name]; ok {
		return x.nodes[slot]
	}
	return nil
}

// Set adds node, or replaces the node of the same name.
func (x *NodeIndex) Set(node *corev1.Node) {
	x.mu.Lock()
	defer x.mu.Unlock()
	slot, ok := x.byName[node.Name]
	switch {
	case !ok:
		slot = x.allocate()
		x.byName[node.Name] = slot
		x.present.put(slot, true)
		x.label(slot, node.Labels)
	case !maps.Equal(x.nodes[slot].Labels, node.Labels):
		x.unlabel(slot, x.nodes[slot].Labels)
		x.label(slot, node.Labels)
	}
	x.nodes[slot] = node
	x.cordoned.put(slot, node.Spec.Unschedulable)
	x.tainted.put(slot, hasExcludingTaint(node.Spec.Taints))
	x.notReady.put(slot, !IsReady(node))
}

// Delete removes the node named name, if present.
func (x *NodeIndex) Delete(name string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	slot, ok := x.byName[name]
	if !ok {
		return
	}
	x.unlabel(slot, x.nodes[slot].Labels)
	delete(x.byName, name)
	x.nodes[slot] = nil
	x.present.put(slot, false)
	x.cordoned.put(slot, false)
	x.tainted.put(slot, false)
	x.notReady.put(slot, false)
	x.free = append(x.free, slot)
}

// Verify is Verify over the nodes of the index.
func (x *NodeIndex) Verify(r Requirement) (*CheckError, []string) {
	replicas := int(max(r.Replicas, 0))
	m := newMatcher(r)
	explicit, _, refusal := explicitNodes(r)
	if refusal != nil {
		return refusal, nil
	}

	x.mu.RLock()
	defer x.mu.RUnlock()
	// eligible starts as every node and ends as the eligible ones.
	eligible := make(bitset, len(x.present))
	copy(eligible, x.present)
	for _, p := range m.selector {
		post := x.labels[p]
		if post == nil {
			clear(eligible)
			break
		}
		post.intersect(eligible)
	}
	var t tally
	t.total = len(x.byName)
	t.selector = t.total - eligible.count()
	t.cordoned = eligible.andCount(x.cordoned)
	eligible.andNot(x.cordoned)
	for slot := range eligible.andIter(x.tainted) {
		if taint := UntoleratedTaint(x.nodes[slot].Spec.Taints, m.tolerations); taint != nil {
			t.add(ReasonTaint, taint)
			eligible.put(slot, false)
		}
	}
	t.eligible = eligible.count()

	var found []*corev1.Node
	var notReady []string
	if len(explicit) > 0 {
		found = make([]*corev1.Node, len(explicit))
		for i, name := range explicit {
			if slot, ok := x.byName[name]; ok {
				found[i] = x.nodes[slot]
				if replicas == len(explicit) && eligible.has(slot) && x.notReady.has(slot) {
					notReady = append(notReady, name)
				}
			}
		}
	}
	if replicas > len(explicit) {
		for slot := range eligible.andIter(x.notReady) {
			notReady = append(notReady, x.nodes[slot].Name)
		}
	}
	return decide(r, m, explicit, found, &t, notReady)
}

func (x *NodeIndex) allocate() int {
	if n := len(x.free); n > 0 {
		slot := x.free[n-1]
		x.free = x.free[:n-1]
		return slot
	}
	x.nodes = append(x.nodes, nil)
	return len(x.nodes) - 1
}

func (x *NodeIndex) label(slot int, labels map[string]string) {
	for k, v := range labels {
		p := x.labels[labelPair{k, v}]
		if p == nil {
			p = &posting{}
			x.labels[labelPair{k, v}] = p
		}
		p.add(slot)
	}
}

func (x *NodeIndex) unlabel(slot int, labels map[string]string) {
	for k, v := range labels {
		if p := x.labels[labelPair{k, v}]; p != nil && p.remove(slot) {
			delete(x.labels, labelPair{k, v})
		}
	}
}

// hasExcludingTaint reports whether taints hold one that can exclude a node
// (NoSchedule or NoExecute).
func hasExcludingTaint(taints []corev1.Taint) bool {
	for i := range taints {
		if taints[i].Effect == corev1.TaintEffectNoSchedule || taints[i].Effect == corev1.TaintEffectNoExecute {
			return true
		}
	}
	return false
}

// smallPosting is the size up to which a posting is a list of slots rather
// than a bitset: labels such as kubernetes.io/hostname are on one node each,
// and a bitset per node would cost a word per 64 nodes.
const smallPosting = 16

// posting is the set of nodes carrying one label key=value: a short list of
// slots while small, a bitset once larger.
type posting struct {
	slots []int // while bits is nil
	bits  bitset
	n     int
}

func (p *posting) add(slot int) {
	p.n++
	if p.bits != nil {
		p.bits.put(slot, true)
		return
	}
	if len(p.slots) < smallPosting {
		p.slots = append(p.slots, slot)
		return
	}
	for _, s := range p.slots {
		p.bits.put(s, true)
	}
	p.bits.put(slot, true)
	p.slots = nil
}

// remove removes slot and reports whether the posting is now empty.
func (p *posting) remove(slot int) bool {
	p.n--
	if p.bits != nil {
		p.bits.put(slot, false)
		return p.n == 0
	}
	for i, s := range p.slots {
		if s == slot {
			p.slots[i] = p.slots[len(p.slots)-1]
			p.slots = p.slots[:len(p.slots)-1]
			break
		}
	}
	return p.n == 0
}

// intersect keeps in b only the slots of p.
func (p *posting) intersect(b bitset) {
	if p.bits != nil {
		b.and(p.bits)
		return
	}
	var keep [smallPosting]int
	k := 0
	for _, s := range p.slots {
		if b.has(s) {
			keep[k] = s
			k++
		}
	}
	clear(b)
	for _, s := range keep[:k] {
		b.put(s, true)
	}
}

// bitset is a set of slots; words past its length are zero.
type bitset []uint64

func (b *bitset) put(slot int, on bool) {
	w, mask := slot/64, uint64(1)<<(slot%64)
	if !on {
		if w < len(*b) {
			(*b)[w] &^= mask
		}
		return
	}
	for len(*b) <= w {
		*b = append(*b, 0)
	}
	(*b)[w] |= mask
}

func (b bitset) has(slot int) bool {
	w := slot / 64
	return w < len(b) && b[w]&(uint64(1)<<(slot%64)) != 0
}

func (b bitset) count() int {
	n := 0
	for _, w := range b {
		n += bits.OnesCount64(w)
	}
	return n
}

// and keeps in b the slots also in o.
func (b bitset) and(o bitset) {
	for i := range b {
		if i < len(o) {
			b[i] &= o[i]
		} else {
			b[i] = 0
		}
	}
}

// andNot removes from b the slots in o.
func (b bitset) andNot(o bitset) {
	for i := range min(len(b), len(o)) {
		b[i] &^= o[i]
	}
}

// andCount returns the number of slots in both b and o.
func (b bitset) andCount(o bitset) int {
	n := 0
	for i := range min(len(b), len(o)) {
		n += bits.OnesCount64(b[i] & o[i])
	}
	return n
}

// andIter yields the slots in both b and o, in ascending order. b may change
// during the iteration at slots already yielded.
func (b bitset) andIter(o bitset) func(yield func(int) bool) {
	return func(yield func(int) bool) {
		for i := range min(len(b), len(o)) {
			w := b[i] & o[i]
			for w != 0 {
				tz := bits.TrailingZeros64(w)
				if !yield(i*64 + tz) {
					return
				}
				w &^= uint64(1) << tz
			}
		}
	}
}
