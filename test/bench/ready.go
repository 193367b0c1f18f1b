// File ready.go: the readiness cases of bench-e2e: create -> all member pods Ready and ->
// status.readyReplicas for StatefulSets and Flocks, each case run -runs times with the two
// kinds taking turns (the table shows medians), and the flood case: time to a new object's
// first pod while another namespace floods the controller with creates.

package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	flockv1alpha1 "flock.dev/flock/pkg/apis/flock/v1alpha1"
	flockclient "flock.dev/flock/pkg/generated/clientset/versioned"
	"flock.dev/flock/test/cluster"
)

// readyTimes are the two times to readiness of one run.
type readyTimes struct{ pods, status time.Duration }

// readyKinds are the two kinds the readiness cases compare.
var readyKinds = []string{tSTS, "Flock"}

// kindClients creates and reads StatefulSets and Flocks for the readiness
// cases.
type kindClients struct {
	kube  kubernetes.Interface
	flock flockclient.Interface
}

// create creates object name of kind in ns with members members.
func (k kindClients) create(ctx context.Context, kind, ns, name string, members int32, ordered bool) error {
	if kind == tSTS {
		policy := appsv1.ParallelPodManagement
		if ordered {
			policy = appsv1.OrderedReadyPodManagement
		}
		_, err := k.kube.AppsV1().StatefulSets(ns).Create(ctx, benchStatefulSet(ns, name, members, policy), metav1.CreateOptions{})
		return err
	}
	policy := flockv1alpha1.ParallelPodManagement
	if ordered {
		policy = flockv1alpha1.OrderedReadyPodManagement
	}
	_, err := k.flock.FlockV1alpha1().Flocks(ns).Create(ctx, benchFlock(ns, name, members, policy), metav1.CreateOptions{})
	return err
}

// readyReplicas adds up status.readyReplicas of the objects of kind in ns.
func (k kindClients) readyReplicas(ctx context.Context, kind, ns string) (int32, error) {
	var sum int32
	if kind == tSTS {
		l, err := k.kube.AppsV1().StatefulSets(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return 0, err
		}
		for _, s := range l.Items {
			sum += s.Status.ReadyReplicas
		}
		return sum, nil
	}
	l, err := k.flock.FlockV1alpha1().Flocks(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, err
	}
	for _, f := range l.Items {
		sum += f.Status.ReadyReplicas
	}
	return sum, nil
}

// readyCases measures create -> all members Ready (pods Ready, and
// status.readyReplicas) for StatefulSets and Flocks, then the flood case.
// Each case runs *readyRuns times; a row holds the medians, and its
// samples every run's time.
func readyCases(ctx context.Context, c *cluster.Cluster) ([]row, error) {
	type readyCase struct {
		name      string
		objects   int
		members   int32
		ordered   bool
		nodeCount int
	}
	cases := []readyCase{
		{name: "5 members Parallel", objects: 1, members: 5},
		{name: "5 members OrderedReady", objects: 1, members: 5, ordered: true},
		{name: "50 x 3 Parallel, 50 nodes", objects: 50, members: 3},
	}
	if *scaleN > 0 {
		cases = append(cases, readyCase{name: fmt.Sprintf("%d x 3 Parallel, %d nodes", *scaleN, max(*scaleN, 50)), objects: *scaleN, members: 3, nodeCount: *scaleN})
	}
	kube, fc, err := benchClients(c)
	if err != nil {
		return nil, err
	}
	k := kindClients{kube: kube, flock: fc}
	var rows []row
	for ci, rc := range cases {
		for i := len(c.NodeNames); i < rc.nodeCount; i++ {
			if _, err := c.AddNode(ctx, fmt.Sprintf("scale-%d", i), nil, nil); err != nil {
				return nil, fmt.Errorf("adding node %d: %w", i, err)
			}
		}
		pods := row{Case: "ready: " + rc.name, Unit: "ms", Values: map[string]float64{}, Samples: map[string][]float64{}}
		status := row{Case: "readyReplicas: " + rc.name, Unit: "ms", Values: map[string]float64{}, Samples: map[string][]float64{}}
		for run := range *readyRuns {
			for _, kind := range turns(run) {
				ns := fmt.Sprintf("ready-%d-%d-%s", ci, run, strings.ToLower(kind))
				if err := newNamespace(ctx, c, ns); err != nil {
					return nil, err
				}
				var profiled chan error
				if kind == "Flock" && rc.objects == 50 && run == 0 && *profile != "" {
					profiled = make(chan error, 1)
					go func() { profiled <- cpuProfile(ctx, c, 10, *profile) }()
				}
				t, err := timeToReady(ctx, kube, ns, rc.objects, rc.members,
					func(i int) error { return k.create(ctx, kind, ns, fmt.Sprintf("r-%d", i), rc.members, rc.ordered) },
					func() (int32, error) { return k.readyReplicas(ctx, kind, ns) })
				if profiled != nil {
					if perr := <-profiled; perr != nil {
						fmt.Fprintln(os.Stderr, "bench-e2e: no CPU profile:", perr)
					}
				}
				if err != nil {
					return nil, fmt.Errorf("%s %s: %w", rc.name, kind, err)
				}
				pods.Samples[kind] = append(pods.Samples[kind], float64(t.pods.Milliseconds()))
				status.Samples[kind] = append(status.Samples[kind], float64(t.status.Milliseconds()))
			}
		}
		rows = append(rows, pods.medians(), status.medians())
		fmt.Fprintf(os.Stderr, "bench-e2e: %s done\n", rc.name)
	}
	if *floodN > 0 {
		flood, err := floodCase(ctx, c, k)
		if err != nil {
			return nil, err
		}
		rows = append(rows, flood)
	}
	return rows, nil
}

// turns returns the order the two kinds take in run number run: they
// alternate, so neither always runs on a machine warmed (or loaded) by the
// other.
func turns(run int) []string {
	if run%2 == 1 {
		return []string{readyKinds[1], readyKinds[0]}
	}
	return readyKinds
}

// medians sets r's values to the medians of its samples.
func (r row) medians() row {
	for kind, xs := range r.Samples {
		r.Values[kind] = median(append([]float64(nil), xs...))
	}
	return r
}

// timeToReady creates objects (16 at a time) and polls until every member
// pod is Ready and the objects' readyReplicas add up.
func timeToReady(ctx context.Context, kube kubernetes.Interface, ns string, objects int, members int32,
	create func(i int) error, readyReplicas func() (int32, error)) (readyTimes, error) {
	want := int32(objects) * members
	start := time.Now()
	if _, err := parallel(objects, 16, create); err != nil {
		return readyTimes{}, err
	}
	var out readyTimes
	deadline := start.Add(10 * time.Minute)
	for out.pods == 0 || out.status == 0 {
		if time.Now().After(deadline) {
			return out, fmt.Errorf("not ready after 10 minutes (pods at %v, status at %v)", out.pods, out.status)
		}
		if out.pods == 0 {
			l, err := kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return out, err
			}
			var ready int32
			for _, p := range l.Items {
				if isReady(&p) {
					ready++
				}
			}
			if ready == want {
				out.pods = time.Since(start)
			}
		}
		if out.status == 0 {
			n, err := readyReplicas()
			if err != nil {
				return out, err
			}
			if n == want {
				out.status = time.Since(start)
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	return out, nil
}

// isReady reports whether p is Ready and not being deleted.
func isReady(p *corev1.Pod) bool {
	for _, cond := range p.Status.Conditions {
		if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue && p.DeletionTimestamp == nil {
			return true
		}
	}
	return false
}

// floodCase measures, for each kind, the time from creating a new
// 2-member object in a quiet namespace to its first pod, while another
// namespace floods the same controller: -flood one-member objects of the
// kind created 16 at a time, the new object created once half of them are.
// Each kind runs *readyRuns times with fresh namespaces; the flood objects
// stay (later runs see a larger backlog behind them, for both kinds alike).
func floodCase(ctx context.Context, c *cluster.Cluster, k kindClients) (row, error) {
	r := row{Case: fmt.Sprintf("first pod of a new 2-member object while %d others flood another namespace", *floodN), Unit: "ms",
		Values: map[string]float64{}, Samples: map[string][]float64{}}
	for run := range *readyRuns {
		for _, kind := range turns(run) {
			floodNS := fmt.Sprintf("flood-%d-%s", run, strings.ToLower(kind))
			probeNS := fmt.Sprintf("probe-%d-%s", run, strings.ToLower(kind))
			for _, ns := range []string{floodNS, probeNS} {
				if err := newNamespace(ctx, c, ns); err != nil {
					return r, err
				}
			}
			var done sync.WaitGroup
			half := make(chan struct{})
			var once sync.Once
			var floodErr error
			var created int
			var mu sync.Mutex
			done.Go(func() {
				_, floodErr = parallel(*floodN, 16, func(i int) error {
					err := k.create(ctx, kind, floodNS, fmt.Sprintf("f-%d", i), 1, false)
					mu.Lock()
					created++
					if created >= *floodN/2 {
						once.Do(func() { close(half) })
					}
					mu.Unlock()
					return err
				})
				once.Do(func() { close(half) })
			})
			<-half
			start := time.Now()
			if err := k.create(ctx, kind, probeNS, "probe", 2, false); err != nil {
				done.Wait()
				return r, err
			}
			var first time.Duration
			for first == 0 {
				if time.Since(start) > 10*time.Minute {
					done.Wait()
					return r, fmt.Errorf("flood %s: no pod of the new object after 10 minutes", kind)
				}
				l, err := k.kube.CoreV1().Pods(probeNS).List(ctx, metav1.ListOptions{})
				if err != nil {
					done.Wait()
					return r, err
				}
				if len(l.Items) > 0 {
					first = time.Since(start)
				}
				time.Sleep(10 * time.Millisecond)
			}
			done.Wait()
			if floodErr != nil {
				return r, fmt.Errorf("flood %s: %w", kind, floodErr)
			}
			r.Samples[kind] = append(r.Samples[kind], float64(first.Milliseconds()))
		}
	}
	fmt.Fprintln(os.Stderr, "bench-e2e: flood done")
	return r.medians(), nil
}
