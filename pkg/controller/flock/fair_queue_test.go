package flock

import (
	"slices"
	"testing"
	"time"
)

// TestNamespaceRoundRobin: a namespace's burst does not hold back another
// namespace's key; within a namespace the order is FIFO.
func TestNamespaceRoundRobin(t *testing.T) {
	q := newNamespaceRoundRobin(nil)
	for _, k := range []string{"flood/a", "flood/b", "flood/c", "flood/d", "quiet/x", "other/y", "quiet/z"} {
		q.Push(k)
	}
	q.Touch("flood/a") // keeps its place
	var got []string
	for q.Len() > 0 {
		got = append(got, q.Pop())
	}
	want := []string{"flood/a", "quiet/x", "other/y", "flood/b", "quiet/z", "flood/c", "flood/d"}
	if !slices.Equal(got, want) {
		t.Errorf("order %v, want %v", got, want)
	}
	// Emptied namespaces leave no trace; a later key starts afresh.
	if len(q.byNamespace) != 0 || q.ring.Len() != 0 || len(q.inRing) != 0 || len(q.queued) != 0 {
		t.Errorf("left over: %v %d %v %v", q.byNamespace, q.ring.Len(), q.inRing, q.queued)
	}
	q.Push("quiet/x")
	if q.Len() != 1 || q.Pop() != "quiet/x" {
		t.Error("a key pushed after emptying is not served")
	}
}

// TestWorkQueueIsFairAcrossNamespaces: through client-go's workqueue (the
// queue the controller runs), a key of a quiet namespace queued behind a
// flood is served second, and a key added again while queued is served
// once.
func TestWorkQueueIsFairAcrossNamespaces(t *testing.T) {
	q := newWorkQueue(newPrecedenceMarks())
	defer q.ShutDown()
	for i := range 100 {
		q.Add("flood/f-" + string(rune('a'+i%26)) + string(rune('a'+i/26)))
	}
	q.Add("probe/p")
	q.Add("flood/f-aa") // already queued
	var got []string
	for q.Len() > 0 {
		k, _ := q.Get()
		got = append(got, k)
		q.Done(k)
	}
	if len(got) != 101 || got[1] != "probe/p" {
		t.Errorf("served %d keys, second %q", len(got), got[1])
	}
	// Delayed keys still arrive.
	q.AddAfter("late/k", time.Millisecond)
	if k, _ := q.Get(); k != "late/k" {
		t.Errorf("delayed key %q", k)
	}
}

// TestWorkQueueGivesNewAndChangedFlocksPrecedence: through client-go's
// workqueue, a marked key (a new or changed Flock) is served before the
// catch-up work of its namespace queued ahead of it; a key queued as
// catch-up and then marked moves forward; namespaces still take turns, so a
// burst of new Flocks in one namespace does not hold back another
// namespace's catch-up work; a mark is used once.
func TestWorkQueueGivesNewAndChangedFlocksPrecedence(t *testing.T) {
	marks := newPrecedenceMarks()
	q := newWorkQueue(marks)
	defer q.ShutDown()
	q.Add("quiet/resync")
	for i := range 50 {
		q.Add("flood/f-" + string(rune('a'+i%26)) + string(rune('a'+i/26)))
	}
	for _, k := range []string{"flood/new", "flood/new2", "other/new", "flood/f-ab"} {
		marks.mark(k)
		q.Add(k) // flood/f-ab is queued already: it moves to the first lane
	}
	q.Add("other/resync")
	var got []string
	for q.Len() > 0 {
		k, _ := q.Get()
		got = append(got, k)
		q.Done(k)
	}
	if len(got) != 55 {
		t.Fatalf("served %d keys, want 55: %v", len(got), got)
	}
	want := []string{"quiet/resync", "flood/new", "other/new", "flood/new2", "other/resync", "flood/f-ab", "flood/f-aa", "flood/f-ba"}
	if !slices.Equal(got[:len(want)], want) {
		t.Errorf("first served %v, want %v", got[:len(want)], want)
	}
	// The marks were used: the same key queued again is catch-up work.
	q.Add("flood/x")
	q.Add("flood/new")
	if k, _ := q.Get(); k != "flood/x" {
		t.Errorf("served %q first; a used mark gave precedence again", k)
	}
}
