package e2e

// Issue 5, leader election: two flock-apiservers sharing one external etcd
// run one controller between them (Lease flock-system/flock-controller);
// when the leader is killed the other takes the Lease and carries on, with
// no member duplicated or lost.

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"flock.dev/flock/test/cluster"
)

const (
	leaderLeaseNamespace = "flock-system"
	leaderLeaseName      = "flock-controller"
	// leaderRestartTimeout bounds starting or restarting one flock-apiserver.
	leaderRestartTimeout = 3 * time.Minute
)

var leaderBecameRE = cluster.LeaderBecameRE

func TestControllerLeaderElection(t *testing.T) {
	// The servers log pod creations (-v=2) and hand over faster than the
	// defaults (15s, 10s, 2s) would.
	a, b, idA := startLeaderPair(t, "leader", "-v=2",
		"--leader-elect-lease-duration=10s", "--leader-elect-renew-deadline=8s", "--leader-elect-retry-period=1s")
	if holder := leaderLeaseHolder(t); holder != idA {
		t.Fatalf("Lease holder %q, but A (pid %d) logged that it leads as %q", holder, a.PID(), idA)
	}

	// An OrderedReady Flock whose pods turn Ready 4s after they start: A
	// creates lead-0 and is killed long before lead-0 is Ready.
	ns := newNamespace(t)
	const name = "lead"
	f := newFlock(name, ns, 3)
	f.Spec.Template.Annotations = map[string]string{cluster.StartDelayAnnotation: "4s"}
	rec := watchPods(t, ns, "")
	createFlock(t, f)
	eventually(t, 30*time.Second, "lead-0 created", func(context.Context) error {
		if !slices.ContainsFunc(rec.events(t), func(e podEvent) bool { return e.Pod.Name == "lead-0" }) {
			return fmt.Errorf("no event for lead-0 yet")
		}
		return nil
	})
	createdRE := regexp.MustCompile(`"Created member pod".* pod="` + regexp.QuoteMeta(ns) + `/(` + name + `-\d+)"`)
	if got := leaderWaitLog(t, a.LogFile, createdRE, 5*time.Second); got != "lead-0" {
		t.Fatalf("A logged creating %s first, want lead-0", got)
	}
	if err := a.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	t.Logf("SIGKILLed leader A (pid %d): %v", a.PID(), a.ExitErr())
	if evs := rec.events(t); slices.ContainsFunc(evs, func(e podEvent) bool { return e.Pod.Name != "lead-0" }) {
		t.Fatalf("pods other than lead-0 existed before A was killed:\n%s", rec)
	}

	// B takes over. On every look until the Flock is Available: no pod
	// without a recorded member, no pod off its member's node, no ordinal
	// or node recorded twice.
	var final *corev1.PodList
	eventually(t, ctlMemberTimeout, "Flock Available after the handover", func(ctx context.Context) error {
		pods, err := env.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		fl, err := env.Flock.FlockV1alpha1().Flocks(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		ords, nodes := map[int32]string{}, map[string]int32{}
		for _, m := range fl.Status.Members {
			if _, dup := ords[m.Ordinal]; dup {
				t.Errorf("ordinal %d recorded twice: %+v", m.Ordinal, fl.Status.Members)
			}
			if o, dup := nodes[m.Node]; dup {
				t.Errorf("node %s holds members %d and %d", m.Node, o, m.Ordinal)
			}
			ords[m.Ordinal], nodes[m.Node] = m.Node, m.Ordinal
		}
		for _, p := range pods.Items {
			node, ok := ords[int32(ctlOrdinalOf(p.Name))]
			switch {
			case !ok:
				t.Errorf("pod %s exists without a member: %+v", p.Name, fl.Status.Members)
			case p.Spec.NodeName != "" && p.Spec.NodeName != node:
				t.Errorf("pod %s runs on %s, its member is on %s", p.Name, p.Spec.NodeName, node)
			}
		}
		if t.Failed() {
			t.FailNow()
		}
		if err := flockAvailableErr(fl); err != nil {
			return err
		}
		final = pods
		return nil
	})
	t.Logf("Available %v after the kill", time.Since(killed).Round(time.Millisecond))

	idB := leaderWaitLog(t, b.LogFile, leaderBecameRE, 5*time.Second)
	if holder := leaderLeaseHolder(t); holder != idB || idB == idA {
		t.Errorf("Lease holder %q after the kill, want B's identity %q (A was %q)", holder, idB, idA)
	}

	// Each pod was created once, and by the leader of the time: lead-0 by
	// A, the others by B after it became leader.
	if len(final.Items) != 3 {
		t.Errorf("%d pods, want 3", len(final.Items))
	}
	evs := rec.events(t)
	for i := range 3 {
		pod := ctlMemberPodName(name, i)
		var adds int
		for _, e := range evs {
			if e.Pod.Name == pod && e.Type == watch.Added {
				adds++
			}
			if e.Type == watch.Deleted {
				t.Errorf("pod %s deleted during the handover", e.Pod.Name)
			}
		}
		if adds != 1 {
			t.Errorf("pod %s created %d times, want once; events:\n%s", pod, adds, rec)
		}
	}
	aLog, bLog := leaderLogRun(t, a.LogFile), leaderLogRun(t, b.LogFile)
	if got := leaderMatchAll(createdRE, aLog); !slices.Equal(got, []string{"lead-0"}) {
		t.Errorf("A created %v, want [lead-0]", got)
	}
	bLead := leaderBecameRE.FindStringIndex(bLog)
	if got := leaderMatchAll(createdRE, bLog); !slices.Equal(got, []string{"lead-1", "lead-2"}) {
		t.Errorf("B created %v, want [lead-1 lead-2]", got)
	} else if first := createdRE.FindStringIndex(bLog); bLead == nil || first[0] < bLead[0] {
		t.Errorf("B created a pod before it became leader:\n%s", bLog)
	}

	ctlDeleteFlock(t, ns, name, true)
}

// leaderLeaseHolder is the holder of the controller's Lease.
func leaderLeaseHolder(t *testing.T) string {
	t.Helper()
	l, err := env.Kube.CoordinationV1().Leases(leaderLeaseNamespace).Get(ctxFor(t), leaderLeaseName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// leaderLogRun returns the part of a harness log written by the latest process.
func leaderLogRun(t *testing.T, path string) string {
	t.Helper()
	s, err := cluster.LatestRunLog(path)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// leaderWaitLog waits until the latest run in a log has a line matching re
// and returns the first submatch of the first such line.
func leaderWaitLog(t *testing.T, path string, re *regexp.Regexp, timeout time.Duration) string {
	t.Helper()
	var got string
	eventually(t, timeout, fmt.Sprintf("a line matching %q in %s", re, path), func(context.Context) error {
		m := re.FindStringSubmatch(leaderLogRun(t, path))
		if m == nil {
			return fmt.Errorf("none yet")
		}
		got = m[1]
		return nil
	})
	return got
}

// leaderMatchAll returns the first submatch of every match of re in s.
func leaderMatchAll(re *regexp.Regexp, s string) []string {
	var out []string
	for _, m := range re.FindAllStringSubmatch(s, -1) {
		out = append(out, m[1])
	}
	return out
}

// A leader hung longer than its lease (SIGSTOP, then SIGCONT) loses the
// lease to the other server: it stops only its controller, keeps serving
// the API, and campaigns again, leading once more when the other one goes.
func TestControllerLeaseLostKeepsServing(t *testing.T) {
	// A renew deadline of 8s, not less: on a loaded machine a leader that
	// is not hung can miss a shorter one, and the Lease then moves when
	// the test does not expect it.
	a, b, idA := startLeaderPair(t, "lease",
		"--leader-elect-lease-duration=10s", "--leader-elect-renew-deadline=8s", "--leader-elect-retry-period=1s")

	// A hangs for longer than the lease: B takes over.
	if err := a.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	idB := leaderWaitLog(t, b.LogFile, leaderBecameRE, 60*time.Second)
	if idB == idA {
		t.Fatalf("B leads as A's identity %q", idA)
	}
	if err := a.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	lostRE := regexp.MustCompile(`"Lost the Flock controller lease; the controller stopped, campaigning again".* identity="([^"]+)"`)
	if got := leaderWaitLog(t, a.LogFile, lostRE, 60*time.Second); got != idA {
		t.Fatalf("A logged losing the lease as %q, want %q", got, idA)
	}
	leaderWaitLog(t, a.LogFile, regexp.MustCompile(`"(Shutting down Flock controller)"`), 30*time.Second)

	// A keeps serving: it does not exit, and answers a list of Flocks.
	client, err := env.HTTPClient(env.PKI.FrontProxyClient)
	if err != nil {
		t.Fatal(err)
	}
	consistently(t, 5*time.Second, "A serves the API after losing the lease", func(ctx context.Context) error {
		if a.Exited() {
			return fmt.Errorf("A exited: %v\n%s", a.ExitErr(), a.LogTail(20))
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, a.URL+"/apis/flock.dev/v1alpha1/flocks", nil)
		req.Header.Set("X-Remote-User", "admin")
		req.Header.Set("X-Remote-Group", "system:masters")
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("list on A: %d %s", resp.StatusCode, body)
		}
		return nil
	})
	if holder := leaderLeaseHolder(t); holder != idB {
		t.Errorf("Lease holder %q, want B's %q", holder, idB)
	}

	// A campaigns again: once B stops (releasing the lease), A leads
	// (once more than before, however often that was).
	led := len(leaderBecameRE.FindAllString(leaderLogRun(t, a.LogFile), -1))
	if err := b.Stop(cluster.DefaultStopGrace); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "A leads again", func(context.Context) error {
		if n := len(leaderBecameRE.FindAllString(leaderLogRun(t, a.LogFile), -1)); n <= led {
			return fmt.Errorf("A became leader %d times, as before B stopped", n)
		}
		if holder := leaderLeaseHolder(t); holder != idA {
			return fmt.Errorf("Lease holder %q, want A's %q", holder, idA)
		}
		return nil
	})
}

// startLeaderPair starts two flock-apiservers on an etcd of their own
// (cluster.StartFlockPair) with args added to both: A, which leads, and the
// main server (the one behind the APIService, so kubectl and the garbage
// collector see the shared store) restarted as B, which follows A. The main
// server is restored as it was when the test ends. It returns A, B and A's
// leader identity.
func startLeaderPair(t *testing.T, name string, args ...string) (*cluster.FlockServer, *cluster.Process, string) {
	t.Helper()
	// The pair's store is new while the main store's Flocks have members:
	// not a store that lost them (--store-guard).
	args = append([]string{"--store-guard=false"}, args...)
	pair, err := env.StartFlockPair(ctxFor(t), name, flockArgs(), args, leaderRestartTimeout)
	if pair.Etcd != nil {
		t.Cleanup(func() {
			if err := pair.Etcd.Stop(cluster.DefaultStopGrace); err != nil {
				t.Error(err)
			}
		})
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), leaderRestartTimeout)
			defer cancel()
			if _, err := env.RestartFlockAPIServer(ctx, flockArgs()); err != nil {
				t.Errorf("restoring the main flock-apiserver: %v", err)
			}
		})
	}
	if pair.A != nil {
		t.Cleanup(func() {
			// A may be stopped (SIGSTOP) by the test; wake it to stop it.
			_ = pair.A.Signal(syscall.SIGCONT)
			_ = pair.A.Stop(cluster.DefaultStopGrace)
		})
	}
	if err != nil {
		t.Fatal(err)
	}
	return pair.A, pair.B, pair.IDA
}
