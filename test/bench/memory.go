// This file is the memory case of the bench (-memory=N): flock-apiserver's
// resident set with N nodes, N Flocks of 3 members and 3N pods that are no
// Flock's, the size issue 17 sets a target for (N=1000: under 300 MiB).

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	flockv1alpha1 "flock.dev/flock/pkg/apis/flock/v1alpha1"
	flockclient "flock.dev/flock/pkg/generated/clientset/versioned"
	"flock.dev/flock/test/cluster"
)

// memoryStage is each process's resident set after one stage of the case,
// and its anonymous part (heap and stacks, without mapped files such as the
// binary's text and etcd's database).
type memoryStage struct {
	Stage      string             `json:"stage"`
	RSSMiB     map[string]float64 `json:"rssMiB"`
	RSSAnonMiB map[string]float64 `json:"rssAnonMiB"`
}

// memoryCase grows the cluster in three stages (n nodes; n Flocks x 3, all
// Ready; 3n unrelated pods, Running) and records each process's resident
// set after each stage, settled for a while, with a heap profile of
// flock-apiserver (<heapPath without .pprof>-<stage>.pprof).
func memoryCase(ctx context.Context, c *cluster.Cluster, n int, heapPath string) ([]memoryStage, error) {
	kube, fc, err := benchClients(c)
	if err != nil {
		return nil, err
	}
	var stages []memoryStage
	record := func(stage string) {
		time.Sleep(20 * time.Second) // informers and GC settle
		stages = append(stages, memoryStage{Stage: stage, RSSMiB: procStatus(c, "VmRSS:"), RSSAnonMiB: procStatus(c, "RssAnon:")})
		if heapPath != "" {
			path := strings.TrimSuffix(heapPath, ".pprof") + fmt.Sprintf("-%d.pprof", len(stages))
			if err := saveHeapProfile(ctx, c, path); err != nil {
				fmt.Fprintln(os.Stderr, "bench-e2e: no heap profile:", err)
			}
			// Its metrics too: the watch cache's capacity and the Go
			// runtime's heap, to read the profile by.
			if data, err := adminGet(ctx, c, c.FlockAPIServerURL, "/metrics", 30*time.Second); err != nil {
				fmt.Fprintln(os.Stderr, "bench-e2e: no metrics:", err)
			} else if err := os.WriteFile(strings.TrimSuffix(path, ".pprof")+".metrics", data, 0o644); err != nil {
				fmt.Fprintln(os.Stderr, "bench-e2e: no metrics:", err)
			}
		}
		fmt.Fprintf(os.Stderr, "bench-e2e: memory: %s: %v\n", stage, stages[len(stages)-1].RSSMiB)
	}
	record("start, 50 nodes")

	have := len(c.NodeNames)
	if _, err := parallel(max(n-have, 0), 8, func(i int) error {
		_, err := c.AddNode(ctx, fmt.Sprintf("mem-%d", have+i), nil, nil)
		return err
	}); err != nil {
		return nil, fmt.Errorf("adding nodes: %w", err)
	}
	record(fmt.Sprintf("%d nodes", max(n, have)))

	const flockNS, otherNS = "mem-flocks", "mem-other"
	for _, ns := range []string{flockNS, otherNS} {
		if err := newNamespace(ctx, c, ns); err != nil {
			return nil, err
		}
	}
	create := func(i int) error {
		_, err := fc.FlockV1alpha1().Flocks(flockNS).Create(ctx,
			benchFlock(flockNS, fmt.Sprintf("m-%d", i), 3, flockv1alpha1.ParallelPodManagement), metav1.CreateOptions{})
		return err
	}
	if _, err := parallel(n, 16, create); err != nil {
		return nil, fmt.Errorf("creating %d Flocks: %w", n, err)
	}
	// Count Ready member pods at kube-apiserver: polling a LIST of every
	// Flock would be what the server's memory holds.
	members, err := awaitPods(ctx, kube, flockNS, 3*n, "members Ready", podReady)
	if err != nil {
		return nil, err
	}
	record(fmt.Sprintf("%d Flocks x 3 (%s)", n, members))

	nodes, err := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	if _, err := parallel(3*n, 16, func(i int) error {
		_, err := kube.CoreV1().Pods(otherNS).Create(ctx, unrelatedPod(otherNS, i, nodes.Items[i%len(nodes.Items)].Name), metav1.CreateOptions{})
		return err
	}); err != nil {
		return nil, fmt.Errorf("unrelated pods: %w", err)
	}
	others, err := awaitPods(ctx, kube, otherNS, 3*n, "unrelated pods Running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
	if err != nil {
		return nil, err
	}
	record("and " + others)
	if *memorySettle > 0 {
		// Idle: flock-apiserver compacts its etcd every 5 minutes and the
		// embedded member then defragments a file that is mostly free.
		fmt.Fprintf(os.Stderr, "bench-e2e: memory: idle for %s\n", *memorySettle)
		select {
		case <-ctx.Done():
			return stages, ctx.Err()
		case <-time.After(*memorySettle):
		}
		record(fmt.Sprintf("%s later, idle", *memorySettle))
	}
	stages = append(stages, memoryStage{Stage: "peak (VmHWM)", RSSMiB: procStatus(c, "VmHWM:")})
	return stages, nil
}

// awaitPods polls, every 5 s for up to -memory-wait, until want pods of ns
// are as ok says, and returns how many were ("12 of 30 <what>"); a wait
// that runs out is not an error.
func awaitPods(ctx context.Context, kube kubernetes.Interface, ns string, want int, what string, ok func(*corev1.Pod) bool) (string, error) {
	var state string
	err := pollEvery(ctx, 5*time.Second, *memoryWait, func() (string, bool, error) {
		l, err := kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{ResourceVersion: "0"})
		if err != nil {
			return "", false, err
		}
		n := 0
		for i := range l.Items {
			if ok(&l.Items[i]) {
				n++
			}
		}
		state = fmt.Sprintf("%d of %d %s", n, want, what)
		return state, n == want, nil
	})
	if errors.Is(err, errNotDone) {
		err = nil
	}
	return state, err
}

// errNotDone is pollEvery's error when the limit passes.
var errNotDone = errors.New("not done")

// podReady reports whether pod's Ready condition is True.
func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// pollEvery calls check every interval until it reports done, fails, or
// limit passes (errNotDone); the last state it reported goes into that error
// and to stderr once a minute.
func pollEvery(ctx context.Context, interval, limit time.Duration, check func() (string, bool, error)) error {
	deadline := time.Now().Add(limit)
	lastLog := time.Now()
	for {
		state, done, err := check()
		if err != nil || done {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w after %s: %s", errNotDone, limit, state)
		}
		if time.Since(lastLog) > time.Minute {
			fmt.Fprintln(os.Stderr, "bench-e2e: memory:", state)
			lastLog = time.Now()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(interval):
		}
	}
}

// benchClients returns the benchmark's clients of the core cluster and of
// Flocks, through kube-apiserver, at the benchmark's client QPS.
func benchClients(c *cluster.Cluster) (kubernetes.Interface, flockclient.Interface, error) {
	kube, err := kubernetes.NewForConfig(fast(c.RESTConfig))
	if err != nil {
		return nil, nil, err
	}
	fc, err := flockclient.NewForConfig(fast(c.RESTConfig))
	if err != nil {
		return nil, nil, err
	}
	return kube, fc, nil
}

// unrelatedPod is a bare pod of no Flock's, bound to node, with a body like
// a small workload's.
func unrelatedPod(ns string, i int, node string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("other-%d", i), Namespace: ns,
			Labels: map[string]string{"app": "other", "shard": strconv.Itoa(i % 10)}},
		Spec: corev1.PodSpec{
			NodeName: node,
			Containers: []corev1.Container{{
				Name: "app", Image: "busybox:1.36", Command: []string{"sleep", "infinity"},
				Env: []corev1.EnvVar{{Name: "PAD", Value: strings.Repeat("x", 512)}},
			}},
		},
	}
}

// procStatus reads one /proc/<pid>/status field (in kB) of each control-plane
// process, in MiB.
func procStatus(c *cluster.Cluster, field string) map[string]float64 {
	out := map[string]float64{}
	for _, p := range c.Processes() {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.PID()))
		if err != nil {
			continue
		}
		for _, l := range strings.Split(string(data), "\n") {
			if v, ok := strings.CutPrefix(l, field); ok {
				kb, _ := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 64)
				out[p.Name] = kb / 1024
			}
		}
	}
	return out
}

// saveHeapProfile saves flock-apiserver's heap profile (in use and
// allocated), taken straight from its /debug/pprof as admin.
func saveHeapProfile(ctx context.Context, c *cluster.Cluster, path string) error {
	return savePprof(ctx, c, c.FlockAPIServerURL, "heap?gc=1", 30*time.Second, path)
}

// savePprof fetches one /debug/pprof endpoint of the server at url
// (serverURL) as admin.
func savePprof(ctx context.Context, c *cluster.Cluster, url, endpoint string, timeout time.Duration, path string) error {
	data, err := adminGet(ctx, c, url, "/debug/pprof/"+endpoint, timeout)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o644)
}

// adminGet reads path from the server at url (flock-apiserver or one of the
// control plane's components) as the admin, and returns the body of a 200.
func adminGet(ctx context.Context, c *cluster.Cluster, url, path string, timeout time.Duration) ([]byte, error) {
	cfg := rest.CopyConfig(c.RESTConfig)
	cfg.Host = url
	cfg.Timeout = timeout
	client, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+path, nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s: %.200s", path, resp.Status, data)
	}
	return data, nil
}

// printMemory prints the memory case: one row per stage, one column per
// process.
func printMemory(stages []memoryStage) {
	names := make([]string, 0, len(stages[0].RSSMiB))
	for n := range stages[0].RSSMiB {
		names = append(names, n)
	}
	slices.Sort(names)
	fmt.Printf("Resident set (MiB; in brackets its anonymous part, without mapped files) after each stage, settled 20 s:\n\n| stage | %s |\n|---|%s\n",
		strings.Join(names, " | "), strings.Repeat("---|", len(names)))
	for _, s := range stages {
		fmt.Printf("| %s |", s.Stage)
		for _, n := range names {
			if anon, ok := s.RSSAnonMiB[n]; ok {
				fmt.Printf(" %.0f (%.0f) |", s.RSSMiB[n], anon)
			} else {
				fmt.Printf(" %.0f |", s.RSSMiB[n])
			}
		}
		fmt.Println()
	}
}
