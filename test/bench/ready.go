// File ready.go: the readiness cases of bench-e2e: create -> all member pods Ready and ->
// status.readyReplicas for StatefulSets without volumes, StatefulSets with node-local
// PersistentVolumes (StatefulSet+PV) and Flocks, each case run -runs times with the kinds
// taking turns (the table shows medians), and the flood case (StatefulSet and Flock only):
// time to a new object's first pod while another namespace floods the controller with creates.
// With -real-nodes=N the one case is N members Parallel on N real nodes (realnode.go).

package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	flockv1alpha1 "flock.dev/flock/pkg/apis/flock/v1alpha1"
	flockclient "flock.dev/flock/pkg/generated/clientset/versioned"
	"flock.dev/flock/test/cluster"
)

// readyTimes are the two times to readiness of one run.
type readyTimes struct {
	start        time.Time // when the first object was created
	pods, status time.Duration
}

// The kinds of the readiness cases besides tSTS, a StatefulSet without
// volumes (the anchor issue 17 names).
const (
	// tSTSPV is a StatefulSet whose every member has node-local data: a
	// claim from localClass, bound to a hostPath PersistentVolume an admin
	// prepared on one node; what a user of StatefulSets builds to get what a
	// Flock member has (its own PersistentVolume and claim on its node).
	tSTSPV = "StatefulSet+PV"
	tFlock = "Flock"
)

// readyKinds are the kinds the readiness cases compare, in the table's
// column order; floodKinds those of the flood case.
var (
	readyKinds = []string{tSTS, tSTSPV, tFlock}
	floodKinds = []string{tSTS, tFlock}
)

// localClass is the StorageClass of the StatefulSet+PV kind's volumes:
// static (no provisioner), bound when the first consumer is scheduled, as
// Kubernetes recommends for local volumes.
const localClass = "bench-local"

// localVolumeSize is the size of each StatefulSet+PV volume and claim.
var localVolumeSize = resource.MustParse("1Gi")

// kindClients creates and reads StatefulSets and Flocks for the readiness
// cases.
type kindClients struct {
	kube  kubernetes.Interface
	flock flockclient.Interface
	// realNodes: the members run on real nodes (onRealNodes), the Flock's
	// with their data directory mounted at /data as the StatefulSet+PV's.
	realNodes bool
}

// create creates object name of kind in ns with members members.
func (k kindClients) create(ctx context.Context, kind, ns, name string, members int32, ordered bool) error {
	if kind != tFlock {
		policy := appsv1.ParallelPodManagement
		if ordered {
			policy = appsv1.OrderedReadyPodManagement
		}
		build := benchStatefulSet
		if kind == tSTSPV {
			build = benchStatefulSetPV
		}
		s := build(ns, name, members, policy)
		if k.realNodes {
			onRealNodes(&s.Spec.Template.Spec)
		}
		_, err := k.kube.AppsV1().StatefulSets(ns).Create(ctx, s, metav1.CreateOptions{})
		return err
	}
	policy := flockv1alpha1.ParallelPodManagement
	if ordered {
		policy = flockv1alpha1.OrderedReadyPodManagement
	}
	f := benchFlock(ns, name, members, policy)
	if k.realNodes {
		onRealNodes(&f.Spec.Template.Spec)
		f.Spec.Template.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
	}
	_, err := k.flock.FlockV1alpha1().Flocks(ns).Create(ctx, f, metav1.CreateOptions{})
	return err
}

// readyWatches are the watches of a readiness run of kind in ns: its pods,
// and its objects' status.readyReplicas.
func (k kindClients) readyWatches(kind, ns string) func(*readyCount) []watchSpec {
	return func(rc *readyCount) []watchSpec {
		var objects watchSpec
		if kind == tFlock {
			objects = watchSpec{func(ctx context.Context, opts metav1.ListOptions) (string, error) {
				l, err := k.flock.FlockV1alpha1().Flocks(ns).List(ctx, opts)
				return listRV(l, err)
			}, func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
				return k.flock.FlockV1alpha1().Flocks(ns).Watch(ctx, opts)
			}, func(ev watch.Event) {
				if f, ok := ev.Object.(*flockv1alpha1.Flock); ok {
					rc.object(f.Name, ev.Type == watch.Deleted, f.Status.ReadyReplicas)
				}
			}}
		} else {
			objects = watchSpec{func(ctx context.Context, opts metav1.ListOptions) (string, error) {
				l, err := k.kube.AppsV1().StatefulSets(ns).List(ctx, opts)
				return listRV(l, err)
			}, func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
				return k.kube.AppsV1().StatefulSets(ns).Watch(ctx, opts)
			}, func(ev watch.Event) {
				if s, ok := ev.Object.(*appsv1.StatefulSet); ok {
					rc.object(s.Name, ev.Type == watch.Deleted, s.Status.ReadyReplicas)
				}
			}}
		}
		return []watchSpec{podWatch(k.kube, ns, "", rc.pod), objects}
	}
}

// readyOut is what readyCases measured: one row per case and measure, and
// for the case with a timeline its steps and the PersistentVolume
// controller's figures during the Flock's runs.
type readyOut struct {
	rows, timeline, pvController []row
}

// readyCases measures create -> all members Ready (pods Ready, and
// status.readyReplicas) for each of readyKinds, then the flood case. Each
// case runs *readyRuns times; a row holds the medians, and its samples
// every run's time. The StatefulSet+PV kind's volumes are made before its
// timer starts (prepareLocalVolumes). On real nodes (-real-nodes) the one
// case is N members Parallel on the N real nodes, without the flood case,
// and its timeline (the steps of its members) is always recorded.
func readyCases(ctx context.Context, c *cluster.Cluster) (readyOut, error) {
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
	// The StatefulSet+PV volumes' host directory; on real nodes it is
	// under the data root, which each node has of its own in the work
	// directory (cluster.RealNode.DataDir).
	volumeDir := "/tmp/bench-local"
	onReal := len(c.RealNodes()) > 0
	if onReal {
		n := len(c.RealNodes())
		cases = []readyCase{{name: fmt.Sprintf("%d members Parallel, %d real nodes", n, n), objects: 1, members: int32(n)}}
		volumeDir = filepath.Join(c.DataRoot(), "bench-local")
	}
	kube, fc, err := benchClients(c)
	if err != nil {
		return readyOut{}, err
	}
	k := kindClients{kube: kube, flock: fc, realNodes: onReal}
	if err := ensureLocalClass(ctx, kube); err != nil {
		return readyOut{}, err
	}
	kinds, err := kindsToRun(*skipKinds)
	if err != nil {
		return readyOut{}, err
	}
	var rows []row
	steps, pvc := newTimelineRows(""), newPVControllerRows("")
	for ci, rc := range cases {
		for i := len(c.NodeNames); i < rc.nodeCount; i++ {
			if _, err := c.AddNode(ctx, fmt.Sprintf("scale-%d", i), nil, nil); err != nil {
				return readyOut{}, fmt.Errorf("adding node %d: %w", i, err)
			}
		}
		if simulatedAgents {
			if err := c.WaitKwokNodeAgents(ctx); err != nil {
				return readyOut{}, err
			}
		}
		pods := row{Case: "ready: " + rc.name, Unit: "ms", Values: map[string]float64{}, Samples: map[string][]float64{}, Unfinished: map[string]string{}}
		status := row{Case: "readyReplicas: " + rc.name, Unit: "ms", Values: map[string]float64{}, Samples: map[string][]float64{}}
		for run := range *readyRuns {
			for _, kind := range turns(kinds, run) {
				ns := fmt.Sprintf("ready-%d-%d-%s", ci, run, kindSlug(kind))
				if err := newNamespace(ctx, c, ns); err != nil {
					return readyOut{}, err
				}
				volumes := fmt.Sprintf("%d-%d", ci, run)
				if kind == tSTSPV {
					if err := prepareLocalVolumes(ctx, kube, volumes, volumeDir, rc.objects*int(rc.members)); err != nil {
						return readyOut{}, fmt.Errorf("%s %s: %w", rc.name, kind, err)
					}
				}
				var tl *timeline
				var pvBefore pvSums
				// Only the first case whose name matches has a timeline: its
				// rows hold one case's runs.
				if steps.caseName == "" && (onReal || (*timelineCase != "" && strings.Contains(rc.name, *timelineCase))) {
					steps.caseName, pvc.caseName = rc.name, rc.name
				}
				if steps.caseName == rc.name {
					if tl, err = watchTimeline(ctx, kube, ns); err != nil {
						return readyOut{}, err
					}
					if pvBefore, err = pvSample(ctx, c); err != nil {
						fmt.Fprintln(os.Stderr, "bench-e2e: no PersistentVolume controller figures:", err)
					}
				}
				var profiled chan error
				if kind == tFlock && run == 0 && *profile != "" && strings.HasPrefix(rc.name, *profileCase) {
					profiled = make(chan error, 1)
					go func() {
						profiled <- cpuProfiles(ctx, c, profiledServers, *profileSecs, func(server string) string { return serverProfilePath(*profile, server) })
					}()
				}
				t, err := timeToReady(ctx, ns, rc.objects, rc.members,
					func(i int) error { return k.create(ctx, kind, ns, fmt.Sprintf("r-%d", i), rc.members, rc.ordered) },
					k.readyWatches(kind, ns))
				if profiled != nil {
					if perr := <-profiled; perr != nil {
						fmt.Fprintln(os.Stderr, "bench-e2e: CPU profiles:", perr)
					}
				}
				if tl != nil {
					tl.close()
					steps.add(kind, tl.last(t.start, rc.objects*int(rc.members)))
					if pvBefore != nil && err == nil {
						if after, perr := pvSample(ctx, c); perr == nil {
							values := pvDiff(pvBefore, after, t.pods, rc.objects*int(rc.members))
							if kind != tFlock {
								for _, name := range pvRows {
									delete(values, name)
								}
							}
							pvc.add(kind, values)
						}
					}
				}
				var notReady *notReadyError
				if errors.As(err, &notReady) {
					// Recorded, and its namespace deleted so that its
					// pending pods do not load the next kinds' runs.
					pods.Unfinished[kind] = notReady.Error()
					fmt.Fprintf(os.Stderr, "bench-e2e: %s %s: %v\n", rc.name, kind, notReady)
					stuck := k.stuckReport(ctx, kind, ns, notReady.want)
					for _, line := range stuck {
						fmt.Fprintf(os.Stderr, "bench-e2e:   %s\n", line)
					}
					pods.Stuck = append(pods.Stuck, kind+": "+strings.Join(stuck, " | "))
					if err := endRun(ctx, c, kube, ns, volumes); err != nil {
						return readyOut{}, err
					}
					continue
				}
				if err != nil {
					return readyOut{}, fmt.Errorf("%s %s: %w", rc.name, kind, err)
				}
				if kind == tSTSPV {
					if err := checkLocalData(ctx, kube, ns); err != nil {
						return readyOut{}, fmt.Errorf("%s %s: %w", rc.name, kind, err)
					}
				}
				pods.Samples[kind] = append(pods.Samples[kind], float64(t.pods.Milliseconds()))
				status.Samples[kind] = append(status.Samples[kind], float64(t.status.Milliseconds()))
				if err := endRun(ctx, c, kube, ns, volumes); err != nil {
					return readyOut{}, err
				}
			}
		}
		rows = append(rows, pods.medians(), status.medians())
		fmt.Fprintf(os.Stderr, "bench-e2e: %s done\n", rc.name)
	}
	if *floodN > 0 && !onReal {
		flood, err := floodCase(ctx, c, k)
		if err != nil {
			return readyOut{}, err
		}
		rows = append(rows, flood)
	}
	return readyOut{rows: rows, timeline: steps.result(), pvController: pvc.result()}, nil
}

// turns returns the order kinds take in run number run: the order rotates
// by one each run, so none always runs first (or last) on a machine warmed
// or loaded by the others.
func turns(kinds []string, run int) []string {
	k := run % len(kinds)
	return append(slices.Clone(kinds[k:]), kinds[:k]...)
}

// kindSlug is kind as part of a namespace name.
func kindSlug(kind string) string {
	return strings.ReplaceAll(strings.ToLower(kind), "+", "-")
}

// ensureLocalClass creates localClass unless it exists.
func ensureLocalClass(ctx context.Context, kube kubernetes.Interface) error {
	mode := storagev1.VolumeBindingWaitForFirstConsumer
	_, err := kube.StorageV1().StorageClasses().Create(ctx, &storagev1.StorageClass{
		ObjectMeta:        metav1.ObjectMeta{Name: localClass},
		Provisioner:       "kubernetes.io/no-provisioner",
		VolumeBindingMode: &mode,
	}, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

// volumeSetLabel labels the volumes prepareLocalVolumes makes for one run.
const volumeSetLabel = "bench.flock.dev/volume-set"

// prepareLocalVolumes does the admin's part of the StatefulSet+PV kind, as a
// static local provisioner would have before anyone creates a StatefulSet:
// it makes the PersistentVolumes of localVolumes in dir for the cluster's
// nodes, labelled with set, and waits until kube-controller-manager's
// PersistentVolume controller has made every one Available.
func prepareLocalVolumes(ctx context.Context, kube kubernetes.Interface, set, dir string, claims int) error {
	nodes, err := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	var hosts []string
	for _, n := range nodes.Items {
		if h := n.Labels[corev1.LabelHostname]; h != "" {
			hosts = append(hosts, h)
		}
	}
	if len(hosts) == 0 {
		return fmt.Errorf("no node has label %s", corev1.LabelHostname)
	}
	slices.Sort(hosts)
	pvs := localVolumes(set, dir, claims, hosts)
	if _, err := parallel(len(pvs), 16, func(i int) error {
		_, err := kube.CoreV1().PersistentVolumes().Create(ctx, pvs[i], metav1.CreateOptions{})
		return err
	}); err != nil {
		return fmt.Errorf("creating volumes: %w", err)
	}
	selector := metav1.ListOptions{LabelSelector: volumeSetLabel + "=" + set}
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(100 * time.Millisecond) {
		l, err := kube.CoreV1().PersistentVolumes().List(ctx, selector)
		if err != nil {
			return err
		}
		available := 0
		for _, pv := range l.Items {
			if pv.Status.Phase == corev1.VolumeAvailable {
				available++
			}
		}
		if available == len(pvs) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d volumes Available after 2 minutes", available, len(pvs))
		}
	}
}

// localVolumes are claims+len(hosts) hostPath PersistentVolumes of
// localClass, dir/<name> on their node, each with a required node affinity
// to one of hosts, taken round-robin: one volume per claim and one spare
// on each node. A static provisioner offers every node's disks, so there
// are more volumes than claims; here the spares also keep the scheduler
// out of a dead end it could otherwise reach with exactly one volume per
// claim: the last member of a StatefulSet left with free volumes only on
// nodes its own members hold, Pending for good under the anti-affinity.
func localVolumes(set, dir string, claims int, hosts []string) []*corev1.PersistentVolume {
	pathType := corev1.HostPathDirectoryOrCreate
	pvs := make([]*corev1.PersistentVolume, claims+len(hosts))
	for i := range pvs {
		name := fmt.Sprintf("bench-local-%s-%d", set, i)
		pvs[i] = &corev1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{volumeSetLabel: set}},
			Spec: corev1.PersistentVolumeSpec{
				Capacity:                      corev1.ResourceList{corev1.ResourceStorage: localVolumeSize},
				AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
				StorageClassName:              localClass,
				PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{
					Path: path.Join(dir, name), Type: &pathType,
				}},
				NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{
					NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{
						Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{hosts[i%len(hosts)]},
					}}}},
				}},
			},
		}
	}
	return pvs
}

// checkLocalData checks, after the timer, that the StatefulSet+PV kind was
// what it stands for: every pod in ns runs on the node of the volume its
// claim "data-<pod>" is bound to, and no two pods of one StatefulSet share a
// node.
func checkLocalData(ctx context.Context, kube kubernetes.Interface, ns string) error {
	pods, err := kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	taken := map[string]string{} // StatefulSet/node -> pod
	for _, p := range pods.Items {
		claim, err := kube.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "data-"+p.Name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("pod %s: %w", p.Name, err)
		}
		if claim.Status.Phase != corev1.ClaimBound {
			return fmt.Errorf("pod %s: claim %s is %s", p.Name, claim.Name, claim.Status.Phase)
		}
		pv, err := kube.CoreV1().PersistentVolumes().Get(ctx, claim.Spec.VolumeName, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("pod %s: %w", p.Name, err)
		}
		if host := volumeHost(pv); host != p.Spec.NodeName {
			return fmt.Errorf("pod %s runs on %s, its volume %s is on %s", p.Name, p.Spec.NodeName, pv.Name, host)
		}
		key := p.Labels["app"] + "/" + p.Spec.NodeName
		if other, ok := taken[key]; ok {
			return fmt.Errorf("pods %s and %s of one StatefulSet both run on %s", other, p.Name, p.Spec.NodeName)
		}
		taken[key] = p.Name
	}
	return nil
}

// volumeHost is the node a volume of localVolumes is on ("" for any other
// volume).
func volumeHost(pv *corev1.PersistentVolume) string {
	if a := pv.Spec.NodeAffinity; a != nil && a.Required != nil && len(a.Required.NodeSelectorTerms) == 1 {
		if e := a.Required.NodeSelectorTerms[0].MatchExpressions; len(e) == 1 && e[0].Key == corev1.LabelHostname && len(e[0].Values) == 1 {
			return e[0].Values[0]
		}
	}
	return ""
}

// endRun ends a readiness run: it deletes the run's namespace ns (waiting
// until it and its pods are gone), then the PersistentVolumes of the run,
// the StatefulSet+PV's set and those its members' claims held (a Flock's
// Retain policy keeps its members' volumes), waits until they are gone and
// until the controllers have settled. So every run starts from the same
// cluster: kube-controller-manager's PersistentVolume controller syncs
// every volume of the cluster every 15 s, on the one worker that also takes
// up a run's new volumes, and the scheduler and kwok carry every pod; a run
// must not pay for the objects of the runs before it.
func endRun(ctx context.Context, c *cluster.Cluster, kube kubernetes.Interface, ns, set string) error {
	start := time.Now()
	if err := deleteNamespace(ctx, c, ns); err != nil {
		return err
	}
	if err := deleteRunVolumes(ctx, kube, ns, set); err != nil {
		return err
	}
	settle(ctx, c, readySettleMax)
	fmt.Fprintf(os.Stderr, "bench-e2e: namespace %s and its volumes deleted and the controllers settled in %s\n",
		ns, time.Since(start).Round(time.Millisecond))
	return nil
}

// deleteRunVolumes deletes the PersistentVolumes of set and those whose
// claim reference names namespace ns, and waits (at most 2 minutes) until
// they are gone.
func deleteRunVolumes(ctx context.Context, kube kubernetes.Interface, ns, set string) error {
	ofRun := func(pv *corev1.PersistentVolume) bool {
		return pv.Labels[volumeSetLabel] == set || (pv.Spec.ClaimRef != nil && pv.Spec.ClaimRef.Namespace == ns)
	}
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(200 * time.Millisecond) {
		l, err := kube.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		left := 0
		for _, pv := range l.Items {
			if !ofRun(&pv) {
				continue
			}
			left++
			if pv.DeletionTimestamp != nil {
				continue
			}
			if err := kube.CoreV1().PersistentVolumes().Delete(ctx, pv.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("deleting volume %s: %w", pv.Name, err)
			}
		}
		if left == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d volumes of namespace %s not gone after 2 minutes", left, ns)
		}
	}
}

// medians sets r's values to the medians of its samples.
func (r row) medians() row {
	for kind, xs := range r.Samples {
		r.Values[kind] = median(append([]float64(nil), xs...))
	}
	return r
}

// timeToReady creates objects (16 at a time) and watches until every
// member pod is Ready at once and the objects' readyReplicas add up. Both
// are watched, not polled: a LIST of thousands of pods or objects every few
// milliseconds would load the servers the case measures (a profile of
// flock-apiserver at 1,000 x 3 found a quarter of its CPU serving such
// LISTs of Flocks).
func timeToReady(ctx context.Context, ns string, objects int, members int32,
	create func(i int) error, watches func(*readyCount) []watchSpec) (readyTimes, error) {
	rc := &readyCount{want: int32(objects) * members, ready: map[string]struct{}{}, replicas: map[string]int32{}, done: make(chan struct{})}
	var ws watchSet
	if err := ws.start(ctx, watches(rc)...); err != nil {
		return readyTimes{}, err
	}
	defer ws.close()
	rc.mu.Lock()
	rc.start = time.Now()
	rc.out.start = rc.start
	rc.mu.Unlock()
	if _, err := parallel(objects, 16, create); err != nil {
		return readyTimes{start: rc.start}, err
	}
	timer := time.NewTimer(time.Until(rc.start.Add(*readyTimeout)))
	defer timer.Stop()
	select {
	case <-rc.done:
	case <-timer.C:
	case <-ctx.Done():
		return readyTimes{}, ctx.Err()
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.out.pods == 0 || rc.out.status == 0 {
		return rc.out, &notReadyError{after: *readyTimeout, ready: int32(len(rc.ready)), want: rc.want}
	}
	return rc.out, nil
}

// readyCount follows, from watches, how many member pods are Ready and what
// the objects' status.readyReplicas add up to, and records when each first
// reached want.
type readyCount struct {
	mu       sync.Mutex
	start    time.Time
	want     int32
	ready    map[string]struct{} // the Ready pods
	replicas map[string]int32    // object -> status.readyReplicas
	sum      int32
	out      readyTimes
	done     chan struct{} // closed once both times are recorded
}

// pod takes a pod's event.
func (rc *readyCount) pod(ev watch.Event) {
	p, ok := ev.Object.(*corev1.Pod)
	if !ok {
		return
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if ev.Type != watch.Deleted && isReady(p) {
		rc.ready[p.Name] = struct{}{}
	} else {
		delete(rc.ready, p.Name)
	}
	rc.check()
}

// object takes an object's status.readyReplicas (0 when deleted).
func (rc *readyCount) object(name string, deleted bool, readyReplicas int32) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if deleted {
		readyReplicas = 0
	}
	rc.sum += readyReplicas - rc.replicas[name]
	rc.replicas[name] = readyReplicas
	rc.check()
}

// check records the times reached; rc.mu is held. Events before the start
// (none: the namespace is new) do not count.
func (rc *readyCount) check() {
	if rc.start.IsZero() || (rc.out.pods != 0 && rc.out.status != 0) {
		return
	}
	if rc.out.pods == 0 && int32(len(rc.ready)) == rc.want {
		rc.out.pods = time.Since(rc.start)
	}
	if rc.out.status == 0 && rc.sum == rc.want {
		rc.out.status = time.Since(rc.start)
	}
	if rc.out.pods != 0 && rc.out.status != 0 {
		close(rc.done)
	}
}

// notReadyError says that a readiness case's members were not all Ready
// within -ready-timeout.
type notReadyError struct {
	after       time.Duration
	ready, want int32
}

func (e *notReadyError) Error() string {
	return fmt.Sprintf("not all Ready within %s: %d of %d", e.after, e.ready, e.want)
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
// The kinds are floodKinds (no StatefulSet+PV: the case is about the
// controller's queue, not the members' data). Each kind runs *readyRuns
// times with fresh namespaces; the flood objects
// stay (later runs see a larger backlog behind them, for both kinds alike).
func floodCase(ctx context.Context, c *cluster.Cluster, k kindClients) (row, error) {
	r := row{Case: fmt.Sprintf("first pod of a new 2-member object while %d others flood another namespace", *floodN), Unit: "ms",
		Values: map[string]float64{}, Samples: map[string][]float64{}}
	for run := range *readyRuns {
		for _, kind := range turns(floodKinds, run) {
			floodNS := fmt.Sprintf("flood-%d-%s", run, kindSlug(kind))
			probeNS := fmt.Sprintf("probe-%d-%s", run, kindSlug(kind))
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

// kindsToRun returns readyKinds without those skip names (comma-separated),
// or an error naming a kind that is not one of them.
func kindsToRun(skip string) ([]string, error) {
	kinds := slices.Clone(readyKinds)
	for _, k := range strings.Split(skip, ",") {
		if k = strings.TrimSpace(k); k == "" {
			continue
		}
		if !slices.Contains(readyKinds, k) {
			return nil, fmt.Errorf("-skip-kinds: %q is not one of %s", k, strings.Join(readyKinds, ", "))
		}
		kinds = slices.DeleteFunc(kinds, func(s string) bool { return s == k })
	}
	if len(kinds) == 0 {
		return nil, fmt.Errorf("-skip-kinds: %q leaves no kind to run", skip)
	}
	return kinds, nil
}
