package etcd

// defrag.go gives the space of compacted revisions back. flock-apiserver
// compacts its etcd every few minutes (--etcd-compaction-interval), which
// frees pages inside the database file but never shrinks the file. etcd maps
// that file with MAP_POPULATE, so all of it counts in the process's resident
// set: after 1,000 Flocks x 3 were made, the file was 50 MiB, most of it the
// free pages of revisions compacted away (issue 17). A member whose file is
// mostly free space is defragmented: etcd copies the live pages into a new
// file, which blocks the member's reads and writes for as long as it takes
// (a small file: well under a second).

import (
	"context"
	"math/rand/v2"
	"time"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"
)

// DefragPolicy says when the embedded member defragments its database file.
type DefragPolicy struct {
	// Interval is how often the file is checked (0: never; a random part
	// of it is added so that the members of a cluster do not block at once).
	Interval time.Duration
	// MinFree is the free space, in bytes, below which the file is left as
	// it is; it is defragmented when at least MinFree and at least half of
	// it is free.
	MinFree int64
}

// DefaultDefragPolicy checks every minute and defragments a file with at
// least 16 MiB and at least half of it free.
var DefaultDefragPolicy = DefragPolicy{Interval: time.Minute, MinFree: 16 << 20}

var (
	defragTotal = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace:      "flock",
		Subsystem:      "embedded_etcd",
		Name:           "defrag_total",
		Help:           "Defragmentations of the embedded etcd member's database file, by result (ok, error).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"result"})
	dbSize = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Namespace:      "flock",
		Subsystem:      "embedded_etcd",
		Name:           "db_size_bytes",
		Help:           "Size of the embedded etcd member's database file (all: the file, in_use: what is not free space), at its last check.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"space"})
)

func init() {
	legacyregistry.MustRegister(defragTotal, dbSize)
}

// needsDefrag reports whether a file of size bytes, inUse of them in use,
// is to be defragmented under p.
func (p DefragPolicy) needsDefrag(size, inUse int64) bool {
	free := size - inUse
	return p.Interval > 0 && free >= p.MinFree && 2*free >= size
}

// runDefrag checks the member's file every p.Interval (plus up to a quarter
// of it at random) until ctx is done or the member stops.
func (s *Server) runDefrag(ctx context.Context, p DefragPolicy) {
	s.sizes()
	if p.Interval <= 0 {
		return
	}
	for {
		wait := p.Interval + rand.N(p.Interval/4+1)
		select {
		case <-ctx.Done():
			return
		case <-s.etcd.Server.StopNotify():
			return
		case <-time.After(wait):
		}
		s.maybeDefrag(ctx, p)
	}
}

// maybeDefrag defragments the member's file if p says so, and reports
// whether it did.
func (s *Server) maybeDefrag(ctx context.Context, p DefragPolicy) bool {
	size, inUse := s.sizes()
	if !p.needsDefrag(size, inUse) {
		return false
	}
	logger := klog.FromContext(ctx)
	start := time.Now()
	if err := s.etcd.Server.Defragment(); err != nil {
		defragTotal.WithLabelValues("error").Inc()
		logger.Error(err, "Embedded etcd: defragmentation failed", "sizeBytes", size, "inUseBytes", inUse)
		return false
	}
	defragTotal.WithLabelValues("ok").Inc()
	after, _ := s.sizes()
	logger.Info("Embedded etcd: defragmented the database file", "beforeBytes", size, "inUseBytes", inUse,
		"afterBytes", after, "duration", time.Since(start).Round(time.Millisecond))
	return true
}

// sizes returns the size of the member's file and how much of it is in
// use, and records both in the metrics.
func (s *Server) sizes() (size, inUse int64) {
	be := s.etcd.Server.Backend()
	size, inUse = be.Size(), be.SizeInUse()
	dbSize.WithLabelValues("all").Set(float64(size))
	dbSize.WithLabelValues("in_use").Set(float64(inUse))
	return size, inUse
}
