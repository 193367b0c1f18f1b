package main

import (
	"math"
	"testing"
	"time"
)

func TestPVControllerFigures(t *testing.T) {
	before, after := pvSums{}, pvSums{}
	sumCounters(`# HELP workqueue_work_duration_seconds How long in seconds processing an item from workqueue takes.
workqueue_work_duration_seconds_sum{name="volumes"} 1
workqueue_work_duration_seconds_count{name="volumes"} 10
workqueue_work_duration_seconds_sum{name="claims"} 100
workqueue_queue_duration_seconds_sum{name="volumes"} 2
workqueue_queue_duration_seconds_count{name="volumes"} 10
apiserver_request_duration_seconds_sum{component="apiserver",dry_run="",group="",resource="persistentvolumes",scope="resource",subresource="status",verb="PUT",version="v1"} 0.5
apiserver_request_duration_seconds_count{component="apiserver",dry_run="",group="",resource="persistentvolumes",scope="resource",subresource="status",verb="PUT",version="v1"} 5
apiserver_request_duration_seconds_count{component="apiserver",dry_run="",group="",resource="persistentvolumes",scope="resource",subresource="",verb="PUT",version="v1"} 50
`, before)
	sumCounters(`workqueue_work_duration_seconds_sum{name="volumes"} 4
workqueue_work_duration_seconds_count{name="volumes"} 110
workqueue_queue_duration_seconds_sum{name="volumes"} 12
workqueue_queue_duration_seconds_count{name="volumes"} 110
apiserver_request_duration_seconds_sum{component="apiserver",dry_run="",group="",resource="persistentvolumes",scope="resource",subresource="status",verb="PUT",version="v1"} 2.5
apiserver_request_duration_seconds_count{component="apiserver",dry_run="",group="",resource="persistentvolumes",scope="resource",subresource="status",verb="PUT",version="v1"} 105
`, after)
	before[cpuKey+"etcd"], after[cpuKey+"etcd"] = 100, 100+3*clockTicks
	got := pvDiff(before, after, 6*time.Second)
	want := map[string]float64{pvSynced: 100, pvSyncMean: 30, pvBusy: 0.5, pvWaitMean: 100, pvWrites: 100, pvWriteMean: 20, cpuRow("etcd"): 0.5}
	for k, w := range want {
		if math.Abs(got[k]-w) > 1e-9 {
			t.Errorf("%s = %v, want %v (the claims queue and other subresources left out)", k, got[k], w)
		}
	}
}

func TestKubeProfilePath(t *testing.T) {
	for in, want := range map[string]string{
		"_output/bench-e2e-flock-apiserver.pprof": "_output/bench-e2e-kube-apiserver.pprof",
		"/tmp/p.pprof":                            "/tmp/p-kube-apiserver.pprof",
	} {
		if got := kubeProfilePath(in); got != want {
			t.Errorf("kubeProfilePath(%q) = %q, want %q", in, got, want)
		}
	}
}
