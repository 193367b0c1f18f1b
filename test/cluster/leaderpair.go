// This file runs two flock-apiservers that share one etcd of their own, so
// that one of them leads the embedded controller (Lease
// flock-system/flock-controller) and the other takes over when it goes.

package cluster

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strings"
	"time"
)

// Lines flock-apiserver logs about the controller Lease.
var (
	// LeaderBecameRE: the server leads; the submatch is its identity.
	LeaderBecameRE = regexp.MustCompile(`"Became leader; starting the Flock controller".* identity="([^"]+)"`)
	// LeaderOtherRE: another server leads; the submatch is the leader's identity.
	LeaderOtherRE = regexp.MustCompile(`"Another replica leads the Flock controller".* leader="([^"]+)"`)
)

// FlockPair is two flock-apiservers on one etcd: A, an extra server that
// led first, and B, the server behind the APIService, which followed A.
type FlockPair struct {
	// Etcd is the store both use (a process of its own, etcd-<name>).
	Etcd *Etcd
	// A is flock-apiserver-<name>-a; B the main flock-apiserver.
	A *FlockServer
	B *Process
	// IDA is A's leader identity.
	IDA string
}

// StartFlockPair starts etcd-<name>, stops the main flock-apiserver, starts
// A (flock-apiserver-<name>-a) on that etcd with args and waits until it
// leads, then restarts the main flock-apiserver as B with mainArgs followed
// by the same etcd and args, and waits until B reports A as leader. Each
// server start is bounded by timeout. The caller restores the main server
// (RestartFlockAPIServer) and stops A and the etcd when done; they are
// returned even with an error, as far as they were started.
func (c *Cluster) StartFlockPair(ctx context.Context, name string, mainArgs, args []string, timeout time.Duration) (*FlockPair, error) {
	pair := &FlockPair{}
	var err error
	if pair.Etcd, err = c.StartEtcd(ctx, "etcd-"+name); err != nil {
		return pair, err
	}
	shared := append([]string{"--etcd-servers=" + pair.Etcd.URL}, args...)
	if err := c.FlockProcess().Stop(DefaultStopGrace); err != nil {
		return pair, err
	}
	startCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if pair.A, err = c.StartExtraFlockAPIServer(startCtx, "flock-apiserver-"+name+"-a", shared); err != nil {
		return pair, err
	}
	if pair.IDA, err = WaitLogLine(startCtx, pair.A.LogFile, LeaderBecameRE); err != nil {
		return pair, err
	}
	if pair.B, err = c.RestartFlockAPIServer(startCtx, append(append([]string{}, mainArgs...), shared...)); err != nil {
		return pair, err
	}
	led, err := WaitLogLine(startCtx, pair.B.LogFile, LeaderOtherRE)
	if err != nil {
		return pair, err
	}
	if led != pair.IDA {
		return pair, fmt.Errorf("B (pid %d) reports leader %q, want A's %q", pair.B.PID(), led, pair.IDA)
	}
	return pair, nil
}

// LatestRunLog returns the part of a harness log written by the latest
// process (after the last "=== <time>: <command>" line the harness writes
// at each start).
func LatestRunLog(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	s := string(data)
	if i := strings.LastIndex(s, "\n=== "); i >= 0 {
		s = s[i+1:]
	}
	return s, nil
}

// WaitLogLine waits (until ctx ends) for a line matching re in the latest
// run of a harness log, and returns the first submatch of the first such
// line.
func WaitLogLine(ctx context.Context, path string, re *regexp.Regexp) (string, error) {
	for {
		log, err := LatestRunLog(path)
		if err != nil {
			return "", err
		}
		if m := re.FindStringSubmatch(log); m != nil {
			return m[1], nil
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("no line matching %q in %s: %w", re, path, ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
}
