// File backlog_test.go: when the controller warns that its queue stays behind.

package flock

import (
	"testing"
	"time"
)

func TestBacklogWarnsOnlyWhenBehindForLong(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var b backlogTracker
	steps := []struct {
		after time.Duration
		depth int
		warn  bool
	}{
		{0, backlogDepth - 1, false},            // not behind
		{10 * time.Second, backlogDepth, false}, // behind from here
		{50 * time.Second, 5000, false},         // 40 s behind
		{70 * time.Second, backlogDepth, true},  // 60 s behind: warn
		{80 * time.Second, 5000, false},         // warned 10 s ago
		{130 * time.Second, 5000, true},         // a minute after the warning
		{140 * time.Second, 3, false},           // caught up
		{150 * time.Second, 5000, false},        // behind again, anew
		{200 * time.Second, 5000, false},        // 50 s
		{210 * time.Second, 5000, true},         // 60 s
	}
	for _, s := range steps {
		warn, since := b.observe(t0.Add(s.after), s.depth)
		if warn != s.warn {
			t.Errorf("at +%v depth %d: warn = %v, want %v (behind since %v)", s.after, s.depth, warn, s.warn, since)
		}
	}
}
