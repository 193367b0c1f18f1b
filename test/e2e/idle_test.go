package e2e

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// idleWindow is how long a converged Flock is watched for writes: longer
// than the controller's shortest requeue (its status spacing and the
// checks it schedules for members), a bounded wait.
const idleWindow = 8 * time.Second

// An idle Flock costs its cluster nothing, across a restart too: once a
// Flock has converged, nothing of it is written — neither the Flock nor
// its pods, claims, volumes, Service, budget, revisions or events — while
// nothing changes, and a restarted flock-apiserver, whose controller syncs
// every Flock again from its fresh caches, writes nothing either.
func TestLifecycleIdleFlockWritesNothingAcrossARestart(t *testing.T) {
	ns := newNamespace(t)
	lcNodes(t, ns, 2)
	const name = "idle"
	createFlock(t, lcFlock(name, ns, 2))
	waitFlockAvailable(t, ns, name)

	// Converged: no object of the Flock changes for a whole window.
	var settled []string
	eventually(t, lcTimeout, "Flock "+ns+"/"+name+" and its objects unchanged for "+idleWindow.String(), func(ctx context.Context) error {
		before, err := idleFingerprint(ctx, ns)
		if err != nil {
			return err
		}
		time.Sleep(idleWindow)
		after, err := idleFingerprint(ctx, ns)
		if err != nil {
			return err
		}
		if d := fingerprintDiff(before, after); d != "" {
			return fmt.Errorf("written within %s: %s", idleWindow, d)
		}
		settled = after
		return nil
	})

	if _, err := env.RestartFlockAPIServer(ctxFor(t), flockArgs()); err != nil {
		t.Fatalf("restart flock-apiserver: %v", err)
	}
	// The restarted controller has synced every Flock of the cluster once
	// its queue has taken at least as many as there are and is empty.
	list, err := env.Flock.FlockV1alpha1().Flocks("").List(ctxFor(t), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, lcTimeout, fmt.Sprintf("the restarted controller's queue took the %d Flocks and is empty", len(list.Items)), func(ctx context.Context) error {
		return controllerQueueDrained(t, len(list.Items))
	})
	time.Sleep(idleWindow)
	after, err := idleFingerprint(ctxFor(t), ns)
	if err != nil {
		t.Fatal(err)
	}
	if d := fingerprintDiff(settled, after); d != "" {
		t.Errorf("a converged Flock was written after flock-apiserver restarted: %s", d)
	}
}

// idleFingerprint lists every object of a test namespace a Flock's
// controller (or a controller following it) could write, and the Flock's
// volumes, as sorted "kind name resourceVersion" lines.
func idleFingerprint(ctx context.Context, ns string) ([]string, error) {
	all, core := metav1.ListOptions{}, env.Kube.CoreV1()
	lists := []struct {
		kind string
		list func() (runtime.Object, error)
	}{
		{"flock", func() (runtime.Object, error) { return env.Flock.FlockV1alpha1().Flocks(ns).List(ctx, all) }},
		{"pod", func() (runtime.Object, error) { return core.Pods(ns).List(ctx, all) }},
		{"claim", func() (runtime.Object, error) { return core.PersistentVolumeClaims(ns).List(ctx, all) }},
		{"volume", func() (runtime.Object, error) {
			return core.PersistentVolumes().List(ctx, metav1.ListOptions{LabelSelector: "flock.dev/namespace=" + ns})
		}},
		{"service", func() (runtime.Object, error) { return core.Services(ns).List(ctx, all) }},
		{"event", func() (runtime.Object, error) { return core.Events(ns).List(ctx, all) }},
		{"poddisruptionbudget", func() (runtime.Object, error) { return env.Kube.PolicyV1().PodDisruptionBudgets(ns).List(ctx, all) }},
		{"controllerrevision", func() (runtime.Object, error) { return env.Kube.AppsV1().ControllerRevisions(ns).List(ctx, all) }},
	}
	var out []string
	for _, l := range lists {
		list, err := l.list()
		if err != nil {
			return nil, fmt.Errorf("list %ss: %w", l.kind, err)
		}
		if err := meta.EachListItem(list, func(o runtime.Object) error {
			m, err := meta.Accessor(o)
			if err != nil {
				return err
			}
			out = append(out, l.kind+" "+m.GetName()+" "+m.GetResourceVersion())
			return nil
		}); err != nil {
			return nil, err
		}
	}
	slices.Sort(out)
	return out, nil
}

// fingerprintDiff says which lines of two fingerprints differ ("" if none).
func fingerprintDiff(before, after []string) string {
	var d []string
	for _, l := range before {
		if !slices.Contains(after, l) {
			d = append(d, "-"+l)
		}
	}
	for _, l := range after {
		if !slices.Contains(before, l) {
			d = append(d, "+"+l)
		}
	}
	return strings.Join(d, ", ")
}

var (
	queueAddsRE  = regexp.MustCompile(`(?m)^workqueue_adds_total\{name="flock"\} (\d+)`)
	queueDepthRE = regexp.MustCompile(`(?m)^workqueue_depth\{name="flock"\} (\d+)`)
	queueBusyRE  = regexp.MustCompile(`(?m)^workqueue_unfinished_work_seconds\{name="flock"\} (\S+)`)
)

// controllerQueueDrained is nil once flock-apiserver's controller queue
// has taken at least n keys since the process started and holds none,
// none of them in a sync.
func controllerQueueDrained(t *testing.T, n int) error {
	code, body := directRequest(t, env.PKI.FrontProxyClient, http.MethodGet, "/metrics", nil,
		map[string]string{"X-Remote-User": "admin", "X-Remote-Group": "system:masters"})
	if code != http.StatusOK {
		return fmt.Errorf("/metrics: %d: %.200s", code, body)
	}
	value := func(re *regexp.Regexp) (float64, error) {
		m := re.FindStringSubmatch(body)
		if m == nil {
			return 0, fmt.Errorf("/metrics has no %s", re)
		}
		return strconv.ParseFloat(m[1], 64)
	}
	adds, err := value(queueAddsRE)
	if err != nil {
		return err
	}
	depth, err := value(queueDepthRE)
	if err != nil {
		return err
	}
	busy, err := value(queueBusyRE)
	if err != nil {
		return err
	}
	if adds < float64(n) || depth > 0 || busy > 0 {
		return fmt.Errorf("queue: %v added (want at least %d), %v waiting, %vs of work unfinished", adds, n, depth, busy)
	}
	return nil
}
