package main

import (
	"context"
	"fmt"
	"maps"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"flock.dev/flock/test/cluster"
)

// A timeline of Flock members on kwok nodes shows the claims waiting for
// kube-controller-manager's PersistentVolume controller to take up their
// volumes (their phase Bound). pvSample reads what that controller did
// meanwhile, from its own metrics and kube-apiserver's, so the table shows
// where that time goes: how many volumes its one worker synced, how long a
// sync took, how long a volume waited in its queue, and how long
// kube-apiserver took for the volume status writes.

// The rows pvSample's differences make, in their order.
const (
	pvSynced    = "volumes synced by the PersistentVolume controller"
	pvSyncMean  = "its mean sync, ms"
	pvBusy      = "its worker busy, share of the run"
	pvWaitMean  = "a volume's mean wait in its queue, ms"
	pvWrites    = "volume status writes (PUT persistentvolumes/status)"
	pvWriteMean = "their mean time in kube-apiserver, ms"
	pvKCMPut    = "kube-controller-manager's PUTs (every controller), mean at its client, ms"
	pvAPFWait   = "their priority level's (workload-high) mean wait in kube-apiserver's queues, ms"
)

var pvRows = []string{pvSynced, pvSyncMean, pvBusy, pvWaitMean, pvWrites, pvWriteMean, pvKCMPut, pvAPFWait}

// cpuKey prefixes a process's CPU time (clock ticks) in pvSums.
const cpuKey = "cpu:"

// pvSums are the counters pvSample reads, by name, and each process's
// CPU time.
type pvSums map[string]float64

// The counters: the PersistentVolume controller's queue of volumes
// ("volumes", client-go's work queue metrics), kube-apiserver's requests
// writing a volume's status, and what else a status write of that
// controller waits for: kube-controller-manager's PUTs as its client sees
// them (client-go's rest_client metrics; its controllers' PUTs together,
// as that metric has no resource), and the wait of its priority level
// (its service accounts': workload-high) in kube-apiserver's queues
// (API Priority and Fairness). source, when set, is the only process
// whose metrics count.
var pvCounters = []struct {
	name   string
	metric string
	labels []string
	source string
}{
	{"work_sum", "workqueue_work_duration_seconds_sum", []string{`name="volumes"`}, ""},
	{"work_count", "workqueue_work_duration_seconds_count", []string{`name="volumes"`}, ""},
	{"queue_sum", "workqueue_queue_duration_seconds_sum", []string{`name="volumes"`}, ""},
	{"queue_count", "workqueue_queue_duration_seconds_count", []string{`name="volumes"`}, ""},
	{"put_sum", "apiserver_request_duration_seconds_sum", []string{`resource="persistentvolumes"`, `subresource="status"`, `verb="PUT"`}, ""},
	{"put_count", "apiserver_request_duration_seconds_count", []string{`resource="persistentvolumes"`, `subresource="status"`, `verb="PUT"`}, ""},
	{"kcm_put_sum", "rest_client_request_duration_seconds_sum", []string{`verb="PUT"`}, "kube-controller-manager"},
	{"kcm_put_count", "rest_client_request_duration_seconds_count", []string{`verb="PUT"`}, "kube-controller-manager"},
	{"apf_sum", "apiserver_flowcontrol_request_wait_duration_seconds_sum", []string{`priority_level="workload-high"`}, "kube-apiserver"},
	{"apf_count", "apiserver_flowcontrol_request_wait_duration_seconds_count", []string{`priority_level="workload-high"`}, "kube-apiserver"},
}

// pvSample reads the counters from kube-controller-manager and
// kube-apiserver.
func pvSample(ctx context.Context, c *cluster.Cluster) (pvSums, error) {
	out := pvSums{}
	for _, name := range []string{"kube-controller-manager", "kube-apiserver", "flock-apiserver"} {
		data, err := adminGet(ctx, c, serverURL(c, name), "/metrics", 10*time.Second)
		if err != nil {
			return nil, fmt.Errorf("reading the metrics of %s: %w", name, err)
		}
		sumCounters(string(data), name, out)
	}
	for name, t := range procTicks(c) {
		out[cpuKey+name] = t
	}
	return out, nil
}

// sumCounters adds to out, for each of pvCounters, the values of the lines
// of text (Prometheus' text format) of its metric that carry its labels;
// kube-apiserver's writes and flock-apiserver's (writeOf, under writesKey and
// flockWritesKey); and the requests of the clients of
// process source that kube-apiserver refused with a conflict (client-go's
// rest_client_requests_total, code 409), which say whose write lost a race.
func sumCounters(text, source string, out pvSums) {
	for line := range strings.Lines(text) {
		line = strings.TrimSuffix(line, "\n")
		name, rest, ok := strings.Cut(line, "{")
		if !ok {
			continue
		}
		i := strings.LastIndexByte(rest, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(rest[i+1:], 64)
		if err != nil {
			continue
		}
		if name == "apiserver_request_total" {
			// kube-apiserver's writes to the core cluster, and
			// flock-apiserver's to the Flock API (its own etcd),
			// counted apart.
			if what := writeOf(rest[:i]); what != "" {
				switch source {
				case "kube-apiserver":
					out[writesKey+what] += v
				case "flock-apiserver":
					out[flockWritesKey+what] += v
				}
			}
			continue
		}
		if name == "rest_client_requests_total" {
			if strings.Contains(rest[:i], `code="409"`) {
				out[conflictsKey+source] += v
			}
			continue
		}
		for _, k := range pvCounters {
			if name != k.metric || k.source != "" && k.source != source {
				continue
			}
			all := true
			for _, l := range k.labels {
				all = all && strings.Contains(rest[:i], l)
			}
			if all {
				out[k.name] += v
			}
		}
	}
}

// writeOf names the write an API server's request count with labels
// (Prometheus' text format, without the braces' end) counts, when it counts
// writes that were not dry runs: "<verb> <resource>", the subresource after
// a slash, the group after a dot, and a code other than 2xx in parentheses;
// "" otherwise.
func writeOf(labels string) string {
	l := map[string]string{}
	for part := range strings.SplitSeq(strings.TrimSuffix(labels, "}"), ",") {
		k, v, ok := strings.Cut(part, "=")
		if ok {
			l[k] = strings.Trim(v, `"`)
		}
	}
	switch l["verb"] {
	case "POST", "PUT", "PATCH", "DELETE":
	default:
		return ""
	}
	if l["dry_run"] != "" || l["resource"] == "" {
		return ""
	}
	what := l["resource"]
	if l["group"] != "" {
		what += "." + l["group"]
	}
	if l["subresource"] != "" {
		what += "/" + l["subresource"]
	}
	if code := l["code"]; code != "" && code[0] != '2' {
		what += " (" + code + ")"
	}
	return l["verb"] + " " + what
}

// writesKey prefixes a count of kube-apiserver's writes in pvSums,
// flockWritesKey one of flock-apiserver's (the Flock API's); conflictsKey
// a count of a process's requests refused with a conflict.
const (
	writesKey      = "writes:"
	flockWritesKey = "flock-writes:"
	conflictsKey   = "conflicts:"
)

// pvDiff returns the rows' values over a run of d from before to after,
// of members members.
func pvDiff(before, after pvSums, d time.Duration, members int) map[string]float64 {
	delta := func(k string) float64 { return after[k] - before[k] }
	mean := func(sum, count string) float64 {
		if n := delta(count); n > 0 {
			return delta(sum) / n * 1000
		}
		return 0
	}
	out := map[string]float64{
		pvSynced:    delta("work_count"),
		pvSyncMean:  mean("work_sum", "work_count"),
		pvWaitMean:  mean("queue_sum", "queue_count"),
		pvWrites:    delta("put_count"),
		pvWriteMean: mean("put_sum", "put_count"),
		pvKCMPut:    mean("kcm_put_sum", "kcm_put_count"),
		pvAPFWait:   mean("apf_sum", "apf_count"),
	}
	if d > 0 {
		out[pvBusy] = delta("work_sum") / d.Seconds()
		for k := range after {
			if name, ok := strings.CutPrefix(k, cpuKey); ok {
				out[cpuRow(name)] = delta(k) / clockTicks / d.Seconds()
			}
		}
	}
	var writes float64
	for k := range after {
		if what, ok := strings.CutPrefix(k, writesKey); ok && members > 0 && delta(k) > 0 {
			out[writesRow(what)] = delta(k) / float64(members)
			writes += delta(k)
		}
	}
	if members > 0 {
		out[writesTotal] = writes / float64(members)
	}
	for k := range after {
		if what, ok := strings.CutPrefix(k, flockWritesKey); ok && members > 0 && delta(k) > 0 {
			out[flockWritesRow(what)] = delta(k) / float64(members)
		}
	}
	for k := range after {
		if who, ok := strings.CutPrefix(k, conflictsKey); ok && members > 0 && delta(k) > 0 {
			out[conflictsRow(who)] = delta(k) / float64(members)
		}
	}
	return out
}

// pvControllerRows are one row per figure of pvDiff, the samples of the
// runs of one case.
type pvControllerRows struct {
	namedRows
	// runs counts the runs added, by kind.
	runs map[string]int
}

func newPVControllerRows(caseName string) *pvControllerRows {
	return &pvControllerRows{namedRows: namedRows{caseName: caseName, prefix: "PersistentVolume controller in "}, runs: map[string]int{}}
}

func (p *pvControllerRows) add(kind string, values map[string]float64) {
	p.runs[kind]++
	for name, v := range values {
		p.namedRows.add(kind, name, v)
	}
}

// writesRow is the row of kube-apiserver's writes what (a verb and a
// resource) per member over a run; writesTotal the row of all of them.
func writesRow(what string) string { return "writes per member: " + what }

const writesTotal = "writes per member to kube-apiserver, all"

// flockWritesRow is the row of flock-apiserver's writes what (the Flock
// API's: a Flock's creates, its status) per member over a run.
func flockWritesRow(what string) string { return flockWritesRowPrefix + what }

const flockWritesRowPrefix = "writes per member to flock-apiserver: "

// conflictsRow is the row of process who's requests refused with a
// conflict (409), per member over a run.
func conflictsRow(who string) string { return conflictsRowPrefix + who }

const conflictsRowPrefix = "conflicts (409) per member, requests of "

// cpuRow is the row of the CPU process name used over a run.
func cpuRow(name string) string { return "CPU of " + name + ", cores" }

func (p *pvControllerRows) result() []row {
	// A write a run did not make is absent from its values: it counts as
	// 0 in the median of that kind's runs, or a write one run in eight
	// made would show as if every run made it.
	for name, r := range p.rows {
		if !strings.HasPrefix(name, "writes per member: ") && !strings.HasPrefix(name, flockWritesRowPrefix) && !strings.HasPrefix(name, conflictsRowPrefix) {
			continue
		}
		for kind, xs := range r.Samples {
			for len(xs) < p.runs[kind] {
				xs = append(xs, 0)
			}
			r.Samples[kind] = xs
		}
	}
	names := slices.Clone(pvRows)
	for _, prefix := range []string{"CPU of ", writesTotal, "writes per member: ", flockWritesRowPrefix, conflictsRowPrefix} {
		for _, n := range slices.Sorted(maps.Keys(p.rows)) {
			if strings.HasPrefix(n, prefix) {
				names = append(names, n)
			}
		}
	}
	return p.inOrder(names)
}

// printPVController prints the rows pvControllerRows made, a column per
// kind (the PersistentVolume controller's rows are of the Flock's runs:
// the StatefulSet's members have no volumes).
func printPVController(rows []row) {
	if len(rows) == 0 {
		return
	}
	caseName, _, _ := strings.Cut(strings.TrimPrefix(rows[0].Case, "PersistentVolume controller in "), ": ")
	fmt.Printf("\nDuring the runs of the case %s: kube-controller-manager's PersistentVolume controller (one worker for the\n"+
		"cluster's volumes), from its metrics and kube-apiserver's; the CPU each process used (%d cores here); kube-apiserver's\n"+
		"writes per member (not dry runs; every writer: controllers, kwok, the node agent, events), and flock-apiserver's (the\n"+
		"Flock API's: the Flocks' creates and their status); medians:\n\n| | %s |\n|---|---|---|---|\n",
		caseName, runtime.NumCPU(), strings.Join(readyKinds, " | "))
	for _, r := range rows {
		_, name, _ := strings.Cut(r.Case, ": ")
		format := "%.1f"
		if name == pvBusy || strings.HasPrefix(name, "CPU of ") {
			format = "%.2f"
		} else if name == pvSynced || name == pvWrites {
			format = "%.0f"
		}
		fmt.Println(kindsLine(name, r, format))
	}
}
