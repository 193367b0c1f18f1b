package main

import (
	"maps"
	"sync"
	"time"

	"flock.dev/flock/test/cluster"
)

// anonSampleEvery is how often the anonymous resident set is sampled.
const anonSampleEvery = 250 * time.Millisecond

// anonPeaks samples each control-plane process's anonymous resident set
// (RssAnon) while a run goes on and keeps the highest. The kernel keeps a
// peak only of the whole resident set (VmHWM), which also counts mapped
// files, such as an etcd database mapped with MAP_POPULATE, that the kernel
// can drop under memory pressure; the anonymous part is what it cannot.
type anonPeaks struct {
	stop chan struct{}
	done chan struct{}

	mu   sync.Mutex
	peak map[string]float64
}

// sampleAnonPeaks starts sampling c's processes until stopped.
func sampleAnonPeaks(c *cluster.Cluster) *anonPeaks {
	a := &anonPeaks{stop: make(chan struct{}), done: make(chan struct{}), peak: map[string]float64{}}
	go func() {
		defer close(a.done)
		t := time.NewTicker(anonSampleEvery)
		defer t.Stop()
		for {
			a.sample(c)
			select {
			case <-a.stop:
				return
			case <-t.C:
			}
		}
	}()
	return a
}

func (a *anonPeaks) sample(c *cluster.Cluster) {
	now := procStatus(c, "RssAnon:")
	a.mu.Lock()
	defer a.mu.Unlock()
	for name, v := range now {
		a.peak[name] = max(a.peak[name], v)
	}
}

// Stop ends the sampling and returns the peaks in MiB.
func (a *anonPeaks) Stop() map[string]float64 {
	select {
	case <-a.stop:
	default:
		close(a.stop)
	}
	<-a.done
	a.mu.Lock()
	defer a.mu.Unlock()
	return maps.Clone(a.peak)
}
