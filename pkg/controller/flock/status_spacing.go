// File status_spacing.go: the status writes of a big Flock are spaced, since
// each one carries every member (issue 17).

package flock

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"flock.dev/flock/pkg/apis/flock/v1alpha1"
)

const (
	// statusSpacingPerMember is how far apart two status writes of one
	// Flock are kept per member in its status, up to maxStatusSpacing.
	statusSpacingPerMember = 2 * time.Millisecond
	// maxStatusSpacing bounds the spacing: a 500-member Flock's status is
	// written at most once a second while its members progress.
	maxStatusSpacing = time.Second
	// messageSpacing is how far a status write that changes nothing but
	// messages (of members, or of conditions whose status and reason stay)
	// is kept from the Flock's last write, whatever its size: a member's
	// passing steps ("waiting to be scheduled", "Pending and not Ready", the
	// next member waiting for its data) are folded into the write that
	// follows within it, and a message that stays is written at most this
	// late. It is at most maxStatusSpacing, after which the pacer forgets a
	// write.
	messageSpacing = time.Second
)

// statusSpacing is how far apart the status writes of a Flock with that many
// members are kept: 6 ms for 3 members, a second from 500. A status carries
// one entry per member, so a big Flock's status written on each of its
// members' steps would make every write large and frequent at once, fill
// the server's watch history with copies of it, and leave a client's
// read-modify-write of the Flock little chance between two of them.
func statusSpacing(members int) time.Duration {
	return min(time.Duration(members)*statusSpacingPerMember, maxStatusSpacing)
}

// statusPacer remembers when this controller last wrote each Flock.
type statusPacer struct {
	// spacing is statusSpacing, or nil for no spacing.
	spacing func(members int) time.Duration
	// clock times the writes.
	clock clock.PassiveClock

	mu    sync.Mutex
	last  map[types.UID]time.Time
	swept time.Time
}

func newStatusPacer(spacing func(members int) time.Duration, clk clock.PassiveClock) *statusPacer {
	return &statusPacer{spacing: spacing, clock: clk, last: map[types.UID]time.Time{}}
}

// wait returns how long a status write of f, a Flock whose status would list
// that many members, must still wait; messagesOnly says the write would
// change nothing but messages (statusMessagesChanged), which wait at least
// messageSpacing. A write never waits when f is being
// deleted or its status does not show its generation yet: both are what a
// user waits on.
func (p *statusPacer) wait(f *v1alpha1.Flock, members int, messagesOnly bool, now time.Time) time.Duration {
	if p.spacing == nil || f.DeletionTimestamp != nil || f.Status.ObservedGeneration < f.Generation {
		return 0
	}
	p.mu.Lock()
	last, ok := p.last[f.UID]
	p.mu.Unlock()
	if !ok {
		return 0
	}
	spacing := p.spacing(members)
	if messagesOnly {
		spacing = max(spacing, messageSpacing)
	}
	return max(spacing-now.Sub(last), 0)
}

// wrote notes that this controller wrote the status of Flock uid just now.
// Notes older than any spacing are dropped once per maxStatusSpacing.
func (p *statusPacer) wrote(uid types.UID) {
	now := p.clock.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.last[uid] = now
	if now.Sub(p.swept) < maxStatusSpacing {
		return
	}
	for u, t := range p.last {
		if now.Sub(t) >= maxStatusSpacing {
			delete(p.last, u)
		}
	}
	p.swept = now
}

// len returns how many Flocks' writes are remembered.
func (p *statusPacer) len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.last)
}

// statusChange is what a status write would change.
type statusChange int

const (
	statusUnchanged statusChange = iota
	// statusMessagesChanged: the messages of members or conditions and
	// nothing else.
	statusMessagesChanged
	statusChanged
)

// statusChangeOf says what mutate would change in st (it mutates a copy).
func statusChangeOf(st *v1alpha1.FlockStatus, mutate func(*v1alpha1.FlockStatus)) statusChange {
	next := st.DeepCopy()
	mutate(next)
	if equality.Semantic.DeepEqual(st, next) {
		return statusUnchanged
	}
	if len(next.Members) != len(st.Members) || len(next.Conditions) != len(st.Conditions) {
		return statusChanged
	}
	was := st.DeepCopy()
	for i := range next.Members {
		was.Members[i].Message, next.Members[i].Message = "", ""
	}
	for i := range next.Conditions {
		was.Conditions[i].Message, next.Conditions[i].Message = "", ""
	}
	if equality.Semantic.DeepEqual(was, next) {
		return statusMessagesChanged
	}
	return statusChanged
}

// statusWait returns how long the status write that merge would make of f,
// listing that many members, must still wait: 0 when it changes nothing.
func (p *statusPacer) statusWait(f *v1alpha1.Flock, members int, merge func(*v1alpha1.FlockStatus), now time.Time) time.Duration {
	longest := p.wait(f, members, true, now)
	if longest == 0 {
		return 0
	}
	switch statusChangeOf(&f.Status, merge) {
	case statusUnchanged:
		return 0
	case statusMessagesChanged:
		return longest
	default:
		return p.wait(f, members, false, now)
	}
}
