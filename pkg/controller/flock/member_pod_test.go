package flock

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"

	"flock.dev/flock/pkg/apis/flock/v1alpha1"
)

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
	pod := NewMemberPod(fl, v1alpha1.FlockMember{Ordinal: 0, Node: "n-a"}, "rev")

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
	if len(pod.Spec.Volumes) != 2 || pod.Spec.Volumes[0].Name != "config" || pod.Spec.Volumes[1].PersistentVolumeClaim == nil ||
		pod.Spec.Volumes[1].PersistentVolumeClaim.ClaimName != "data-pg-0" {
		t.Errorf("volumes = %+v", pod.Spec.Volumes)
	}
	if why := identityMismatch(fl, v1alpha1.FlockMember{Ordinal: 0, Node: "n-a"}, pod); why != "" {
		t.Errorf("a fresh pod mismatches: %s", why)
	}
	if why := identityMismatch(fl, v1alpha1.FlockMember{Ordinal: 0, Node: "n-b"}, pod); why == "" {
		t.Error("a pod on another node matches")
	}
}
