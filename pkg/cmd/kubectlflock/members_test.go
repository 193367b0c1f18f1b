package kubectlflock

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"flock.dev/flock/pkg/apis/flock/v1alpha1"
)

func testFlock() *v1alpha1.Flock {
	return &v1alpha1.Flock{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns"},
		Status: v1alpha1.FlockStatus{Members: []v1alpha1.FlockMember{
			{Ordinal: 1, Node: "node-b", Pod: "web-1", Ready: false, Revision: "web-2", Message: "pod pending"},
			{Ordinal: 0, Node: "node-a", Pod: "web-0", Ready: true, Revision: "web-1", Claim: "data-web-0", PersistentVolume: "flock-abc-0", Hostname: "web-0.web.ns.svc.cluster.local"},
		}},
	}
}

func TestMemberRows(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	pods := map[string]*corev1.Pod{"web-0": {
		ObjectMeta: metav1.ObjectMeta{Name: "web-0", CreationTimestamp: metav1.NewTime(now.Add(-90 * time.Minute))},
		Status:     corev1.PodStatus{PodIP: "10.0.0.7"},
	}}
	nodes := map[string]*corev1.Node{"node-a": {ObjectMeta: metav1.ObjectMeta{Name: "node-a", Labels: map[string]string{corev1.LabelTopologyZone: "zone-1"}}}}
	rows := memberRows(testFlock(), pods, nodes)
	if len(rows) != 2 || rows[0].Ordinal != 0 || rows[1].Ordinal != 1 {
		t.Fatalf("rows %+v, want ordinals 0 and 1 in order", rows)
	}
	if r := rows[0]; r.Zone != "zone-1" || r.IP != "10.0.0.7" || r.Data != "pvc/data-web-0,pv/flock-abc-0" || r.Created == nil || !r.Ready {
		t.Errorf("row 0 = %+v", r)
	}
	if r := rows[1]; r.Zone != "" || r.IP != "" || r.Created != nil || r.Node != "node-b" {
		t.Errorf("row 1 = %+v; its pod and node are unknown", r)
	}

	var buf bytes.Buffer
	if err := printRows(&buf, rows, "", false, now); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	want := [][]string{
		{"ORDINAL", "NODE", "ZONE", "POD", "IP", "READY", "REVISION", "DATA", "AGE"},
		{"0", "node-a", "zone-1", "web-0", "10.0.0.7", "true", "web-1", "pvc/data-web-0,pv/flock-abc-0", "90m"},
		{"1", "node-b", "<none>", "web-1", "<none>", "false", "web-2", "<none>", "<none>"},
	}
	if len(lines) != len(want) {
		t.Fatalf("table:\n%s", buf.String())
	}
	for i, w := range want {
		if got := strings.Fields(lines[i]); strings.Join(got, " ") != strings.Join(w, " ") {
			t.Errorf("line %d = %q, want %q", i, got, w)
		}
	}

	buf.Reset()
	if err := printRows(&buf, rows, "wide", true, now); err != nil {
		t.Fatal(err)
	}
	header := strings.Fields(strings.SplitN(buf.String(), "\n", 2)[0])
	if header[0] != "NAMESPACE" || header[1] != "FLOCK" || header[len(header)-2] != "HOSTNAME" || header[len(header)-1] != "MESSAGE" {
		t.Errorf("wide header with the Flock: %q", header)
	}
	if !strings.Contains(buf.String(), "pod pending") || !strings.Contains(buf.String(), "web-0.web.ns.svc.cluster.local") {
		t.Errorf("wide table lacks the message or the hostname:\n%s", buf.String())
	}

	buf.Reset()
	if err := printRows(&buf, rows, "json", false, now); err != nil {
		t.Fatal(err)
	}
	var back []MemberRow
	if err := json.Unmarshal(buf.Bytes(), &back); err != nil || len(back) != 2 || back[0].Zone != "zone-1" || back[1].Pod != "web-1" {
		t.Errorf("json round trip: %v, %+v", err, back)
	}
	if err := printRows(&buf, rows, "yaml", false, now); err == nil || !strings.Contains(err.Error(), "yaml") {
		t.Errorf("unsupported output: %v, want an error naming it", err)
	}
}

func TestOnNode(t *testing.T) {
	a := testFlock()
	b := testFlock()
	b.Name = "db"
	b.Status.Members = []v1alpha1.FlockMember{{Ordinal: 0, Node: "node-c"}}
	got := onNode([]v1alpha1.Flock{*a, *b}, "node-b")
	if len(got) != 1 || got[0].Name != "web" || len(got[0].Status.Members) != 1 || got[0].Status.Members[0].Ordinal != 1 {
		t.Fatalf("onNode(node-b) = %+v, want web's member 1 only", got)
	}
	if len(a.Status.Members) != 2 {
		t.Error("onNode changed its input")
	}
	if got := onNode([]v1alpha1.Flock{*a, *b}, "node-z"); len(got) != 0 {
		t.Errorf("onNode(node-z) = %+v, want none", got)
	}
}
