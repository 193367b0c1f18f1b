// File backlog.go: a warning in the log when the work queue stays behind
// (its depth stays high), so an operator learns the controller is the
// bottleneck before users do (issue 17).

package flock

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"
)

const (
	// backlogDepth is the queue depth from which the controller counts as
	// behind.
	backlogDepth = 100
	// backlogWarnAfter is how long the queue must stay behind before a
	// warning; warnings repeat at most this often.
	backlogWarnAfter = time.Minute
	// backlogCheckEvery is how often the depth is sampled.
	backlogCheckEvery = 10 * time.Second
)

// backlogTracker decides, from samples of the queue's depth, when to warn.
type backlogTracker struct {
	behindSince time.Time // zero while not behind
	lastWarn    time.Time
}

// observe records depth at now and reports whether to warn, and since when
// the queue has been behind.
func (b *backlogTracker) observe(now time.Time, depth int) (bool, time.Time) {
	if depth < backlogDepth {
		b.behindSince, b.lastWarn = time.Time{}, time.Time{}
		return false, time.Time{}
	}
	if b.behindSince.IsZero() {
		b.behindSince = now
	}
	if now.Sub(b.behindSince) < backlogWarnAfter || (!b.lastWarn.IsZero() && now.Sub(b.lastWarn) < backlogWarnAfter) {
		return false, b.behindSince
	}
	b.lastWarn = now
	return true, b.behindSince
}

// watchBacklog samples the queue until ctx is done and warns while it
// stays behind.
func (c *Controller) watchBacklog(ctx context.Context, workers int) {
	logger := klog.FromContext(ctx)
	var b backlogTracker
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		depth := c.workQueue().Len()
		if warn, since := b.observe(c.clock.Now(), depth); warn {
			logger.Info("Warning: the Flock work queue stays behind; Flocks wait before they are synced. "+
				"See workqueue_queue_duration_seconds{name=\"flock\"}; raise --kube-api-qps/--kube-api-burst or --workers if the core cluster allows",
				"depth", depth, "behindFor", c.clock.Since(since).Round(time.Second), "workers", workers)
		}
	}, backlogCheckEvery)
}
