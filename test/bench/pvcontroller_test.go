package main

import (
	"math"
	"strings"
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
apiserver_request_total{code="201",component="apiserver",dry_run="",group="",resource="pods",scope="resource",subresource="",verb="POST",version="v1"} 7
apiserver_request_total{code="201",component="apiserver",dry_run="All",group="",resource="pods",scope="resource",subresource="",verb="POST",version="v1"} 7
rest_client_requests_total{code="409",host="127.0.0.1:6443",method="PUT"} 3
rest_client_requests_total{code="200",host="127.0.0.1:6443",method="PUT"} 40
rest_client_request_duration_seconds_sum{host="127.0.0.1:6443",verb="PUT"} 7
rest_client_request_duration_seconds_count{host="127.0.0.1:6443",verb="PUT"} 7
apiserver_flowcontrol_request_wait_duration_seconds_sum{execute="true",flow_schema="kube-system-service-accounts",priority_level="workload-high"} 1
apiserver_flowcontrol_request_wait_duration_seconds_count{execute="true",flow_schema="kube-system-service-accounts",priority_level="workload-high"} 100
apiserver_flowcontrol_request_wait_duration_seconds_sum{execute="true",flow_schema="service-accounts",priority_level="workload-low"} 50
apiserver_flowcontrol_request_wait_duration_seconds_count{execute="true",flow_schema="service-accounts",priority_level="workload-low"} 100
`, "kube-apiserver", before)
	sumCounters(`rest_client_request_duration_seconds_sum{host="127.0.0.1:6443",verb="PUT"} 2
rest_client_request_duration_seconds_count{host="127.0.0.1:6443",verb="PUT"} 100
rest_client_request_duration_seconds_sum{host="127.0.0.1:6443",verb="GET"} 9
`, "kube-controller-manager", before)
	sumCounters(`rest_client_request_duration_seconds_sum{host="127.0.0.1:6443",verb="PUT"} 6
rest_client_request_duration_seconds_count{host="127.0.0.1:6443",verb="PUT"} 150
rest_client_request_duration_seconds_sum{host="127.0.0.1:6443",verb="GET"} 99
`, "kube-controller-manager", after)
	sumCounters(`workqueue_work_duration_seconds_sum{name="volumes"} 4
workqueue_work_duration_seconds_count{name="volumes"} 110
workqueue_queue_duration_seconds_sum{name="volumes"} 12
workqueue_queue_duration_seconds_count{name="volumes"} 110
apiserver_request_duration_seconds_sum{component="apiserver",dry_run="",group="",resource="persistentvolumes",scope="resource",subresource="status",verb="PUT",version="v1"} 2.5
apiserver_request_duration_seconds_count{component="apiserver",dry_run="",group="",resource="persistentvolumes",scope="resource",subresource="status",verb="PUT",version="v1"} 105
apiserver_request_total{code="201",component="apiserver",dry_run="",group="",resource="pods",scope="resource",subresource="",verb="POST",version="v1"} 17
apiserver_request_total{code="409",component="apiserver",dry_run="",group="",resource="pods",scope="resource",subresource="",verb="POST",version="v1"} 2
apiserver_request_total{code="201",component="apiserver",dry_run="All",group="",resource="pods",scope="resource",subresource="",verb="POST",version="v1"} 70
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="persistentvolumes",scope="resource",subresource="status",verb="PUT",version="v1"} 8
apiserver_request_total{code="200",component="apiserver",dry_run="",group="policy",resource="poddisruptionbudgets",scope="resource",subresource="status",verb="PUT",version="v1"} 2
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="pods",scope="resource",subresource="",verb="GET",version="v1"} 500
rest_client_requests_total{code="409",host="127.0.0.1:6443",method="PUT"} 4
rest_client_requests_total{code="409",host="127.0.0.1:6443",method="POST"} 1
rest_client_requests_total{code="200",host="127.0.0.1:6443",method="PUT"} 90
rest_client_request_duration_seconds_sum{host="127.0.0.1:6443",verb="PUT"} 70
rest_client_request_duration_seconds_count{host="127.0.0.1:6443",verb="PUT"} 8
apiserver_flowcontrol_request_wait_duration_seconds_sum{execute="true",flow_schema="kube-system-service-accounts",priority_level="workload-high"} 1.5
apiserver_flowcontrol_request_wait_duration_seconds_count{execute="true",flow_schema="kube-system-service-accounts",priority_level="workload-high"} 200
apiserver_flowcontrol_request_wait_duration_seconds_sum{execute="true",flow_schema="service-accounts",priority_level="workload-low"} 90
apiserver_flowcontrol_request_wait_duration_seconds_count{execute="true",flow_schema="service-accounts",priority_level="workload-low"} 110
`, "kube-apiserver", after)
	sumCounters(`rest_client_requests_total{code="409",host="127.0.0.1:6443",method="PUT"} 0
apiserver_request_total{code="201",component="apiserver",dry_run="",group="flock.dev",resource="flocks",scope="resource",subresource="",verb="POST",version="v1alpha1"} 1
`, "flock-apiserver", before)
	sumCounters(`rest_client_requests_total{code="409",host="127.0.0.1:6443",method="PUT"} 1
apiserver_request_total{code="201",component="apiserver",dry_run="",group="flock.dev",resource="flocks",scope="resource",subresource="",verb="POST",version="v1alpha1"} 2
apiserver_request_total{code="200",component="apiserver",dry_run="",group="flock.dev",resource="flocks",scope="resource",subresource="status",verb="PUT",version="v1alpha1"} 6
apiserver_request_total{code="409",component="apiserver",dry_run="",group="flock.dev",resource="flocks",scope="resource",subresource="status",verb="PUT",version="v1alpha1"} 1
apiserver_request_total{code="200",component="apiserver",dry_run="",group="flock.dev",resource="flocks",scope="resource",subresource="",verb="GET",version="v1alpha1"} 90
`, "flock-apiserver", after)
	before[cpuKey+"etcd"], after[cpuKey+"etcd"] = 100, 100+3*clockTicks
	got := pvDiff(before, after, 6*time.Second, 2)
	want := map[string]float64{pvSynced: 100, pvSyncMean: 30, pvBusy: 0.5, pvWaitMean: 100, pvWrites: 100, pvWriteMean: 20, cpuRow("etcd"): 0.5,
		pvKCMPut: 80, pvAPFWait: 5,
		writesRow("POST pods"): 5, writesRow("POST pods (409)"): 1, writesRow("PUT persistentvolumes/status"): 4, writesRow("PUT poddisruptionbudgets.policy/status"): 1, writesTotal: 11,
		conflictsRow("kube-apiserver"): 1, conflictsRow("flock-apiserver"): 0.5,
		flockWritesRow("POST flocks.flock.dev"): 0.5, flockWritesRow("PUT flocks.flock.dev/status"): 3, flockWritesRow("PUT flocks.flock.dev/status (409)"): 0.5}
	for k, w := range want {
		if math.Abs(got[k]-w) > 1e-9 {
			t.Errorf("%s = %v, want %v (the claims queue, other subresources, dry runs, reads, other codes, kube-apiserver's own client and other priority levels left out; flock-apiserver's writes in rows of their own, not in the total)", k, got[k], w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("rows %v, want only %v", got, want)
	}
}

func TestServerProfilePath(t *testing.T) {
	for _, tc := range []struct{ path, server, want string }{
		{"_output/bench-e2e-flock-apiserver.pprof", "kube-apiserver", "_output/bench-e2e-kube-apiserver.pprof"},
		{"_output/bench-e2e-flock-apiserver.pprof", "kube-controller-manager", "_output/bench-e2e-kube-controller-manager.pprof"},
		{"_output/bench-e2e-flock-apiserver.pprof", "flock-apiserver", "_output/bench-e2e-flock-apiserver.pprof"},
		{"/tmp/p.pprof", "kube-apiserver", "/tmp/p-kube-apiserver.pprof"},
		{"/tmp/p.pprof", "flock-apiserver", "/tmp/p.pprof"},
	} {
		if got := serverProfilePath(tc.path, tc.server); got != tc.want {
			t.Errorf("serverProfilePath(%q, %q) = %q, want %q", tc.path, tc.server, got, tc.want)
		}
	}
}

func TestPVControllerRowsCountAWriteARunDidNotMakeAsZero(t *testing.T) {
	// The same for a process's requests refused with a conflict.
	for _, conflict := range []string{writesRow("POST pods (409)"), flockWritesRow("PUT flocks.flock.dev/status (409)"), conflictsRow("flock-apiserver")} {
		rows := newPVControllerRows("2 members")
		rows.add(tFlock, map[string]float64{writesTotal: 30, conflict: 0.5})
		rows.add(tFlock, map[string]float64{writesTotal: 31})
		rows.add(tFlock, map[string]float64{writesTotal: 32})
		rows.add(tSTS, map[string]float64{writesTotal: 15})
		var got *row
		for _, r := range rows.result() {
			if strings.HasSuffix(r.Case, ": "+conflict) {
				got = &r
			}
		}
		if got == nil {
			t.Fatalf("no row %q", conflict)
		}
		if xs := got.Samples[tFlock]; len(xs) != 3 || got.Values[tFlock] != 0 {
			t.Errorf("%s: Flock's samples %v and median %v, want 3 samples (0.5, 0, 0) and median 0", conflict, xs, got.Values[tFlock])
		}
		if _, ok := got.Values[tSTS]; ok {
			t.Errorf("%s: the StatefulSet, which never made the write, has a value %v; want none (shown as -)", conflict, got.Values[tSTS])
		}
	}
}
