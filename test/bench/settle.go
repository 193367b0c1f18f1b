// This file waits, between the API cases' targets, until the controllers
// have caught up with the objects the last target made, so that one
// target's follow-up work (a Flock's status, Service, budget and revision;
// a StatefulSet's revision and status; kube-controller-manager's endpoints
// and budgets' status) is not measured as the next target's.

package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"flock.dev/flock/test/cluster"
)

// settleMax bounds one wait between API cases, readySettleMax one between
// readiness runs (at the scale case's node count kwok's heartbeats alone
// may keep the plane above settleCores); settlePoll is how long the control
// plane's CPU is sampled between reads of the queues; settleCores is the
// CPU (in cores, all processes of the control plane together) under which
// it counts as idle: kube-apiserver rebuilding its OpenAPI after the CRD's
// install, the garbage collector or kwok's heartbeats of 50 nodes are not
// queues.
const (
	settleMax      = 3 * time.Minute
	readySettleMax = time.Minute
	settlePoll     = 250 * time.Millisecond
	settleCores    = 0.3
)

// settle waits until every work queue of flock-apiserver's controllers and
// of kube-controller-manager is empty with nothing in progress
// (workqueue_depth and workqueue_unfinished_work_seconds all 0) and the
// control plane uses less than settleCores, at two reads in a row, at most
// limit (it then says so and returns). It returns how long it waited.
func settle(ctx context.Context, c *cluster.Cluster, limit time.Duration) time.Duration {
	start := time.Now()
	urls := []string{serverURL(c, "flock-apiserver"), serverURL(c, "kube-controller-manager")}
	idleReads, busy := 0, ""
	for time.Since(start) < limit && ctx.Err() == nil {
		busy = ""
		for _, url := range urls {
			b, err := queuesBusy(ctx, c, url)
			if err != nil {
				fmt.Fprintf(os.Stderr, "bench-e2e: reading the work queues of %s: %v; not waiting\n", url, err)
				return time.Since(start)
			}
			if b != "" {
				busy = b
				break
			}
		}
		if busy == "" {
			if cores := planeCPU(c, settlePoll); cores > settleCores {
				busy = fmt.Sprintf("the control plane used %.2f cores", cores)
			}
		}
		if busy == "" {
			if idleReads++; idleReads == 2 {
				return time.Since(start)
			}
		} else {
			idleReads = 0
		}
	}
	if ctx.Err() == nil {
		fmt.Fprintf(os.Stderr, "bench-e2e: the controllers were still busy after %s (%s); measuring anyway\n", limit, busy)
	}
	return time.Since(start)
}

// planeCPU returns the CPU the control plane's processes used over d, in
// cores (it sleeps d).
func planeCPU(c *cluster.Cluster, d time.Duration) float64 {
	before := planeTicks(c)
	start := time.Now()
	time.Sleep(d)
	return (planeTicks(c) - before) / clockTicks / time.Since(start).Seconds()
}

// clockTicks is the kernel's USER_HZ, the unit of /proc/<pid>/stat's times.
const clockTicks = 100

// planeTicks sums the user and system time of the control plane's
// processes, in clock ticks.
func planeTicks(c *cluster.Cluster) float64 {
	var sum float64
	for _, t := range procTicks(c) {
		sum += t
	}
	return sum
}

// procTicks returns the user and system time of each of the control
// plane's processes, in clock ticks, by name.
func procTicks(c *cluster.Cluster) map[string]float64 {
	out := map[string]float64{}
	for _, p := range c.Processes() {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.PID()))
		if err != nil {
			continue
		}
		s := string(data)
		// Fields after the command (in parentheses): utime and stime are
		// the 12th and 13th.
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) < 13 {
			continue
		}
		ut, _ := strconv.ParseFloat(f[11], 64)
		st, _ := strconv.ParseFloat(f[12], 64)
		out[p.Name] += ut + st
	}
	return out
}

// queuesBusy reads the work queue metrics of the server at url and returns
// the first queue with work queued or in progress ("" when none has).
func queuesBusy(ctx context.Context, c *cluster.Cluster, url string) (string, error) {
	data, err := adminGet(ctx, c, url, "/metrics", 10*time.Second)
	if err != nil {
		return "", err
	}
	for line := range strings.Lines(string(data)) {
		line = strings.TrimSuffix(line, "\n")
		if !strings.HasPrefix(line, "workqueue_depth{") && !strings.HasPrefix(line, "workqueue_unfinished_work_seconds{") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil && v > 0 {
			return line[:i], nil
		}
	}
	return "", nil
}

// settleBefore settles before target's part of case and logs the wait.
func settleBefore(ctx context.Context, c *cluster.Cluster, what, target string) {
	d := settle(ctx, c, settleMax)
	fmt.Fprintf(os.Stderr, "bench-e2e: %s, %s: the controllers settled in %s\n", what, target, d.Round(time.Millisecond))
}
