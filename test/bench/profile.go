// This file profiles the API path (-api-profile): CPU profiles of
// flock-apiserver and kube-apiserver while Flocks are created, then read,
// at c=16, through the aggregator and straight at flock-apiserver.

package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"flock.dev/flock/test/cluster"
)

// apiProfiles runs each profiled workload for d while both servers are
// profiled, and saves the profiles as
// _output/bench-e2e-<workload>-<server>.pprof; it prints each workload's
// rate.
func apiProfiles(ctx context.Context, c *cluster.Cluster, targets map[string]target, d time.Duration) error {
	seconds := int(d / time.Second)
	for _, via := range []string{tFlockAgg, tFlockDirs} {
		t := targets[via]
		tag := "agg"
		if via == tFlockDirs {
			tag = "direct"
		}
		ns := "profile-" + tag
		if err := newNamespace(ctx, c, ns); err != nil {
			return err
		}
		var created atomic.Int64
		workloads := []struct {
			name string
			op   func(i int) error
		}{
			{"create", func(i int) error {
				created.Add(1)
				return t.create(ctx, ns, fmt.Sprintf("p-%d", i))
			}},
			{"get", func(i int) error { return t.get(ctx, ns, fmt.Sprintf("p-%d", i%int(max(created.Load(), 1)))) }},
		}
		for _, w := range workloads {
			name := w.name + "-" + tag
			profiled := make(chan error, 1)
			go func() {
				profiled <- cpuProfiles(ctx, c, []string{"flock-apiserver", "kube-apiserver"}, seconds, func(server string) string {
					return filepath.Join(filepath.Dir(*outPath), fmt.Sprintf("bench-e2e-%s-%s.pprof", name, server))
				})
			}()
			// Run the workload for the profiles' duration.
			var stop atomic.Bool
			var done atomic.Int64
			var failed atomic.Value
			start := time.Now()
			time.AfterFunc(d, func() { stop.Store(true) })
			var next atomic.Int64
			var workers sync.WaitGroup
			for range 16 {
				workers.Go(func() {
					for !stop.Load() {
						if err := w.op(int(next.Add(1) - 1)); err != nil {
							failed.CompareAndSwap(nil, err)
							return
						}
						done.Add(1)
					}
				})
			}
			workers.Wait()
			rate := float64(done.Load()) / time.Since(start).Seconds()
			perr := <-profiled
			if err, _ := failed.Load().(error); err != nil {
				return fmt.Errorf("profiling %s: %w", name, err)
			}
			note := ""
			if perr != nil {
				note = " (no profile: " + strings.ReplaceAll(perr.Error(), "\n", "; ") + ")"
			}
			fmt.Fprintf(os.Stderr, "bench-e2e: profiled %s: %.0f/s over %s%s\n", name, rate, d, note)
		}
	}
	return nil
}
