package flock

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/intstr"

	"flock.dev/flock/pkg/apis/flock/v1alpha1"
)

func TestParseOrdinal(t *testing.T) {
	for _, tc := range []struct {
		pod  string
		ord  int32
		okay bool
	}{
		{"pg-0", 0, true},
		{"pg-12", 12, true},
		{"pg-2147483647", 2147483647, true},
		{"pg-2147483648", 0, false},
		{"pg-01", 0, false},
		{"pg--1", 0, false},
		{"pg-+1", 0, false},
		{"pg-", 0, false},
		{"pg", 0, false},
		{"pg-1-0", 0, false}, // a pod of Flock "pg-1"
		{"pgx-1", 0, false},
		{"pg-1a", 0, false},
	} {
		ord, ok := ParseOrdinal("pg", tc.pod)
		if ok != tc.okay || ord != tc.ord {
			t.Errorf("ParseOrdinal(pg, %q) = %d, %v; want %d, %v", tc.pod, ord, ok, tc.ord, tc.okay)
		}
		if ok && PodName("pg", ord) != tc.pod {
			t.Errorf("PodName(pg, %d) = %q, want %q", ord, PodName("pg", ord), tc.pod)
		}
	}
}

func TestPinnedNode(t *testing.T) {
	pin := func(node string) corev1.NodeSelectorRequirement {
		return corev1.NodeSelectorRequirement{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{node}}
	}
	withTerms := func(terms ...corev1.NodeSelectorTerm) *corev1.Pod {
		return &corev1.Pod{Spec: corev1.PodSpec{Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: terms},
		}}}}
	}
	bound := withTerms(corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{pin("n-a")}})
	bound.Spec.NodeName = "n-z"
	for name, tc := range map[string]struct {
		pod  *corev1.Pod
		want string
	}{
		"no affinity":      {&corev1.Pod{}, ""},
		"bound wins":       {bound, "n-z"},
		"one term":         {withTerms(corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{pin("n-a")}}), "n-a"},
		"every term pins":  {withTerms(corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{pin("n-a")}}, corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{pin("n-a")}}), "n-a"},
		"one term free":    {withTerms(corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{pin("n-a")}}, corev1.NodeSelectorTerm{}), ""},
		"terms disagree":   {withTerms(corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{pin("n-a")}}, corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{pin("n-b")}}), ""},
		"two values":       {withTerms(corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"n-a", "n-b"}}}}), ""},
		"NotIn is no pin":  {withTerms(corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpNotIn, Values: []string{"n-a"}}}}), ""},
		"empty term list":  {withTerms(), ""},
		"label not fields": {withTerms(corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{pin("n-a")}}), ""},
	} {
		if got := PinnedNode(tc.pod); got != tc.want {
			t.Errorf("%s: PinnedNode = %q, want %q", name, got, tc.want)
		}
	}
}

func TestNewMemberPodPinsEveryTerm(t *testing.T) {
	fl := newFlock("pg", 1)
	fl.Spec.Template.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{
			{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"a"}}}},
			{MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpNotIn, Values: []string{"n-x"}}}},
		}},
		PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{Weight: 1}},
	}}
	fl.Spec.Template.Spec.Volumes = []corev1.Volume{
		{Name: "config", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}, // refused by validation; replaced anyway
	}
	fl.Spec.Template.Spec.NodeName = "n-x" // refused by validation; ignored anyway
	orig := fl.DeepCopy()
	pod := NewMemberPod(fl, v1alpha1.FlockMember{Ordinal: 0, Node: "n-a"}, "rev", "/srv/flock")

	if !equality.Semantic.DeepEqual(fl, orig) {
		t.Fatal("NewMemberPod modified the Flock")
	}
	na := pod.Spec.Affinity.NodeAffinity
	if len(na.PreferredDuringSchedulingIgnoredDuringExecution) != 1 {
		t.Error("preferred terms lost")
	}
	terms := na.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	if len(terms) != 2 || len(terms[0].MatchExpressions) != 1 || len(terms[0].MatchFields) != 1 || len(terms[1].MatchFields) != 2 {
		t.Fatalf("terms = %+v", terms)
	}
	if pod.Spec.NodeName != "" || PinnedNode(pod) != "n-a" {
		t.Errorf("PinnedNode = %q", PinnedNode(pod))
	}
	if len(pod.Spec.Volumes) != 2 || pod.Spec.Volumes[0].Name != "config" || pod.Spec.Volumes[1].HostPath == nil ||
		pod.Spec.Volumes[1].HostPath.Path != "/srv/flock/db/pg" {
		t.Errorf("volumes = %+v", pod.Spec.Volumes)
	}
	if why := identityMismatch(fl, v1alpha1.FlockMember{Ordinal: 0, Node: "n-a"}, pod); why != "" {
		t.Errorf("a fresh pod mismatches: %s", why)
	}
	if why := identityMismatch(fl, v1alpha1.FlockMember{Ordinal: 0, Node: "n-b"}, pod); why == "" {
		t.Error("a pod on another node matches")
	}
}

func TestServicePorts(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	spec := &corev1.PodSpec{
		InitContainers: []corev1.Container{
			{Name: "init", Ports: []corev1.ContainerPort{{ContainerPort: 1}}}, // not a sidecar: no port
			{Name: "sidecar", RestartPolicy: &always, Ports: []corev1.ContainerPort{{Name: "metrics", ContainerPort: 9100}}},
		},
		Containers: []corev1.Container{
			{Name: "a", Ports: []corev1.ContainerPort{
				{Name: "pg", ContainerPort: 5432},
				{ContainerPort: 8008, Protocol: corev1.ProtocolTCP},
				{ContainerPort: 8008, Protocol: corev1.ProtocolUDP},
			}},
			{Name: "b", Ports: []corev1.ContainerPort{
				{Name: "pg", ContainerPort: 5433},    // name taken
				{Name: "again", ContainerPort: 5432}, // duplicate port
			}},
		},
	}
	want := []corev1.ServicePort{
		{Name: "metrics", Protocol: corev1.ProtocolTCP, Port: 9100, TargetPort: intstr.FromInt32(9100)},
		{Name: "pg", Protocol: corev1.ProtocolTCP, Port: 5432, TargetPort: intstr.FromInt32(5432)},
		{Name: "tcp-8008", Protocol: corev1.ProtocolTCP, Port: 8008, TargetPort: intstr.FromInt32(8008)},
		{Name: "udp-8008", Protocol: corev1.ProtocolUDP, Port: 8008, TargetPort: intstr.FromInt32(8008)},
		{Name: "tcp-5433", Protocol: corev1.ProtocolTCP, Port: 5433, TargetPort: intstr.FromInt32(5433)},
	}
	if got := ServicePorts(spec); !equality.Semantic.DeepEqual(got, want) {
		t.Errorf("ServicePorts =\n%+v\nwant\n%+v", got, want)
	}
	single := &corev1.PodSpec{Containers: []corev1.Container{{Ports: []corev1.ContainerPort{{ContainerPort: 80}}}}}
	if got := ServicePorts(single); len(got) != 1 || got[0].Name != "" {
		t.Errorf("a single unnamed port = %+v, want it unnamed", got)
	}
	if got := ServicePorts(&corev1.PodSpec{}); got != nil {
		t.Errorf("no ports = %+v", got)
	}
}

func TestRevision(t *testing.T) {
	a := newFlock("pg", 1).Spec.Template
	b := *a.DeepCopy()
	if Revision(&a) != Revision(&b) {
		t.Fatal("equal templates, different revisions")
	}
	b.Labels = map[string]string{"app": "pg"} // same content, new map
	if Revision(&a) != Revision(&b) {
		t.Fatal("equal templates, different revisions")
	}
	b.Spec.Containers[0].Image = "postgres:18"
	if Revision(&a) == Revision(&b) {
		t.Fatal("an image change kept the revision")
	}
	if r := Revision(&a); len(r) == 0 || len(r) > 63 {
		t.Fatalf("revision %q is not a label value", r)
	}
	// Pinned value: a revision must not change across releases for an
	// unchanged template, or every pod would look outdated after an upgrade.
	if got, want := Revision(&corev1.PodTemplateSpec{}), "658c46c486"; got != want {
		t.Fatalf("empty template revision = %q, want %q", got, want)
	}
}

func TestOptionsComplete(t *testing.T) {
	o, err := Options{}.Complete()
	if err != nil || o.ClusterDomain != "cluster.local" || o.DataRoot != "/var/lib/flock" || o.Workers != 1 {
		t.Fatalf("defaults = %+v, %v", o, err)
	}
	for _, bad := range []Options{{DataRoot: "relative"}, {DataRoot: "/"}, {DataRoot: "/a/../b"}, {ClusterDomain: ".local."}} {
		if _, err := bad.Complete(); err == nil {
			t.Errorf("%+v: no error", bad)
		}
	}
}
