// This file is the memory case of the bench (-memory=N): flock-apiserver's
// resident set with N nodes, N Flocks of 3 members and 3N pods that are no
// Flock's, the size issue 17 sets a target for (N=1000: under 300 MiB).

package main

import (
	"context"
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

// memoryStage is each process's resident set after one stage of the case.
type memoryStage struct {
	Stage  string             `json:"stage"`
	RSSMiB map[string]float64 `json:"rssMiB"`
}

// memoryCase grows the cluster in three stages (n nodes; n Flocks x 3, all
// Ready; 3n unrelated pods, Running) and records each process's resident
// set after each stage, settled for a while, with a heap profile of
// flock-apiserver (<heapPath without .pprof>-<stage>.pprof).
func memoryCase(ctx context.Context, c *cluster.Cluster, n int, heapPath string) ([]memoryStage, error) {
	kube, err := kubernetes.NewForConfig(fast(c.RESTConfig))
	if err != nil {
		return nil, err
	}
	fc, err := flockclient.NewForConfig(fast(c.RESTConfig))
	if err != nil {
		return nil, err
	}
	var stages []memoryStage
	record := func(stage string) {
		time.Sleep(20 * time.Second) // informers and GC settle
		stages = append(stages, memoryStage{Stage: stage, RSSMiB: procStatus(c, "VmRSS:")})
		if heapPath != "" {
			path := strings.TrimSuffix(heapPath, ".pprof") + fmt.Sprintf("-%d.pprof", len(stages))
			if err := saveHeapProfile(ctx, c, path); err != nil {
				fmt.Fprintln(os.Stderr, "bench-e2e: no heap profile:", err)
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
	readyReplicas := func() (int32, error) {
		l, err := fc.FlockV1alpha1().Flocks(flockNS).List(ctx, metav1.ListOptions{})
		if err != nil {
			return 0, err
		}
		var sum int32
		for _, f := range l.Items {
			sum += f.Status.ReadyReplicas
		}
		return sum, nil
	}
	// Not timeToReady: its tight polling (a LIST of every Flock every 10 ms)
	// would be what the server's memory holds.
	if _, err := parallel(n, 16, create); err != nil {
		return nil, fmt.Errorf("creating %d Flocks: %w", n, err)
	}
	if err := pollEvery(ctx, 5*time.Second, memoryWait, func() (string, bool, error) {
		ready, err := readyReplicas()
		return fmt.Sprintf("readyReplicas %d of %d", ready, 3*n), ready == int32(3*n), err
	}); err != nil {
		return nil, fmt.Errorf("%d Flocks x 3: %w", n, err)
	}
	record(fmt.Sprintf("%d Flocks x 3 Ready", n))

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
	if err := pollEvery(ctx, 5*time.Second, memoryWait, func() (string, bool, error) {
		l, err := kube.CoreV1().Pods(otherNS).List(ctx, metav1.ListOptions{ResourceVersion: "0"})
		if err != nil {
			return "", false, err
		}
		running := 0
		for _, p := range l.Items {
			if p.Status.Phase == corev1.PodRunning {
				running++
			}
		}
		return fmt.Sprintf("%d of %d unrelated pods Running", running, 3*n), running == 3*n, nil
	}); err != nil {
		return nil, err
	}
	record(fmt.Sprintf("and %d unrelated pods Running", 3*n))
	stages = append(stages, memoryStage{Stage: "peak (VmHWM)", RSSMiB: procStatus(c, "VmHWM:")})
	return stages, nil
}

// memoryWait bounds each wait of the memory case: at 1,000 Flocks on a
// shared 2-core machine, members take tens of minutes to become Ready.
const memoryWait = 45 * time.Minute

// pollEvery calls check every interval until it reports done, fails, or
// limit passes; the last state it reported goes into the timeout error and
// to stderr once a minute.
func pollEvery(ctx context.Context, interval, limit time.Duration, check func() (string, bool, error)) error {
	deadline := time.Now().Add(limit)
	lastLog := time.Now()
	for {
		state, done, err := check()
		if err != nil || done {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not done after %s: %s", limit, state)
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

// savePprof fetches one /debug/pprof endpoint of the server at url (flock-apiserver
// or kube-apiserver) as admin.
func savePprof(ctx context.Context, c *cluster.Cluster, url, endpoint string, timeout time.Duration, path string) error {
	cfg := rest.CopyConfig(c.RESTConfig)
	cfg.Host = url
	cfg.Timeout = timeout
	client, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/debug/pprof/"+endpoint, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %.200s", resp.Status, data)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o644)
}

// printMemory prints the memory case: one row per stage, one column per
// process.
func printMemory(stages []memoryStage) {
	names := make([]string, 0, len(stages[0].RSSMiB))
	for n := range stages[0].RSSMiB {
		names = append(names, n)
	}
	slices.Sort(names)
	fmt.Printf("Resident set (MiB) after each stage, settled 20 s:\n\n| stage | %s |\n|---|%s\n", strings.Join(names, " | "), strings.Repeat("---|", len(names)))
	for _, s := range stages {
		fmt.Printf("| %s |", s.Stage)
		for _, n := range names {
			fmt.Printf(" %.0f |", s.RSSMiB[n])
		}
		fmt.Println()
	}
}
