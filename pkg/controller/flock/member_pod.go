// File member_pod.go: the member pod: built from a template revision and a member, pinned
// to the member's node by a required node affinity (with a claim template: kept off the
// Flock's other pods and free to follow its volume), mounting the member's claim. Pure.

package flock

import (
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"flock.dev/flock/pkg/apis/flock/v1alpha1"
)

// nodeNameField is the field selector key a pod's required node
// affinity uses to pin it to one node.
const nodeNameField = "metadata.name"

// NewMemberPod returns the pod of member m of Flock f: named <flock>-<i>,
// with hostname and subdomain for its DNS name, the template's labels plus
// the member labels and revision, a required node affinity to m.Node AND-ed
// into every term of the template's own required node affinity, the
// member's claim <volumeName>-<flock>-<i> as the volume volumeName (never a
// hostPath), and a controller ownerReference to f. f is not modified.
//
// With a claim template the member follows its volume instead: the pod is
// not pinned (unless spec.placement.nodes names its node), but required to
// match spec.placement.nodeSelector and to stay off the nodes of the
// Flock's other pods (anti-affinity on kubernetes.io/hostname), and it
// prefers m.Node, so it stays where it was when its volume allows.
func NewMemberPod(f *v1alpha1.Flock, m v1alpha1.FlockMember, revision string) *corev1.Pod {
	return newMemberPodFromTemplate(f, &f.Spec.Template, m, revision)
}

// newMemberPodFromTemplate is NewMemberPod with the pod template of a given
// revision (an earlier template of f, from its ControllerRevision) instead
// of f's current one. template is not modified.
func newMemberPodFromTemplate(f *v1alpha1.Flock, template *corev1.PodTemplateSpec, m v1alpha1.FlockMember, revision string) *corev1.Pod {
	tmpl := template.DeepCopy()
	name := PodName(f.Name, m.Ordinal)

	labels := make(map[string]string, len(tmpl.Labels)+4)
	maps.Copy(labels, tmpl.Labels)
	maps.Copy(labels, memberLabels(f, m.Ordinal))
	if revision != "" {
		labels[v1alpha1.LabelRevision] = revision
	}

	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:            name,
			Namespace:       f.Namespace,
			Labels:          labels,
			Annotations:     tmpl.Annotations,
			Finalizers:      tmpl.Finalizers,
			OwnerReferences: []metav1.OwnerReference{*newControllerRef(f)},
		},
		Spec: tmpl.Spec,
	}
	pod.Spec.Hostname = name
	pod.Spec.Subdomain = serviceNameOf(f)
	// The member's node is placement's decision; the scheduler binds the
	// pod there (checking resources and taints), never a template.
	pod.Spec.NodeName = ""
	if followsVolume(f, m.Ordinal) {
		// A member follows its volume, wherever that may be used, within
		// the Flock's pool; members never share a node.
		requireNodeLabels(&pod.Spec, f.Spec.Placement.NodeSelector)
		preferNode(&pod.Spec, m.Node)
	} else {
		pinToNode(&pod.Spec, m.Node)
	}
	if usesClaimTemplate(f) {
		avoidFlockPeers(&pod.Spec, f)
	}

	volumeName := volumeNameOf(f)
	// Validation refuses a template volume of this name; replace it anyway
	// so the pod can never mount anything else as the member's data.
	pod.Spec.Volumes = slices.DeleteFunc(pod.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == volumeName })
	pod.Spec.Volumes = append(pod.Spec.Volumes, memberDataVolume(f, m.Ordinal))
	return pod
}

// avoidFlockPeers adds to spec a required pod anti-affinity on
// kubernetes.io/hostname to the pods of Flock f.
func avoidFlockPeers(spec *corev1.PodSpec, f *v1alpha1.Flock) {
	paa := ensure(&ensure(&spec.Affinity).PodAntiAffinity)
	paa.RequiredDuringSchedulingIgnoredDuringExecution = append(paa.RequiredDuringSchedulingIgnoredDuringExecution, corev1.PodAffinityTerm{
		LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{v1alpha1.LabelFlockName: f.Name}},
		TopologyKey:   hostnameLabel,
	})
}

// pinToNode ANDs "metadata.name In [node]" into every term of spec's
// required node affinity, adding one term when there is none.
func pinToNode(spec *corev1.PodSpec, node string) {
	pin := corev1.NodeSelectorRequirement{Key: nodeNameField, Operator: corev1.NodeSelectorOpIn, Values: []string{node}}
	for _, term := range requiredNodeTerms(spec) {
		term.MatchFields = append(term.MatchFields, pin)
	}
}

// requireNodeLabels ANDs "key In [value]" for each of labels (sorted by key)
// into every term of spec's required node affinity; nothing when labels is
// empty.
func requireNodeLabels(spec *corev1.PodSpec, labels map[string]string) {
	if len(labels) == 0 {
		return
	}
	keys := slices.Sorted(maps.Keys(labels))
	for _, term := range requiredNodeTerms(spec) {
		for _, k := range keys {
			term.MatchExpressions = append(term.MatchExpressions,
				corev1.NodeSelectorRequirement{Key: k, Operator: corev1.NodeSelectorOpIn, Values: []string{labels[k]}})
		}
	}
}

// preferNode adds to spec a preferred node affinity, of the highest weight,
// to node.
func preferNode(spec *corev1.PodSpec, node string) {
	na := nodeAffinityOf(spec)
	na.PreferredDuringSchedulingIgnoredDuringExecution = append(na.PreferredDuringSchedulingIgnoredDuringExecution, corev1.PreferredSchedulingTerm{
		Weight: 100,
		Preference: corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{
			{Key: nodeNameField, Operator: corev1.NodeSelectorOpIn, Values: []string{node}}}},
	})
}

// requiredNodeTerms returns the terms of spec's required node affinity,
// adding one empty term when there is none, for the caller to AND
// requirements into.
func requiredNodeTerms(spec *corev1.PodSpec) []*corev1.NodeSelectorTerm {
	req := ensure(&nodeAffinityOf(spec).RequiredDuringSchedulingIgnoredDuringExecution)
	if len(req.NodeSelectorTerms) == 0 {
		req.NodeSelectorTerms = []corev1.NodeSelectorTerm{{}}
	}
	terms := make([]*corev1.NodeSelectorTerm, len(req.NodeSelectorTerms))
	for i := range req.NodeSelectorTerms {
		terms[i] = &req.NodeSelectorTerms[i]
	}
	return terms
}

// nodeAffinityOf returns spec's node affinity, adding an empty one (and an
// empty affinity) when there is none.
func nodeAffinityOf(spec *corev1.PodSpec) *corev1.NodeAffinity {
	return ensure(&ensure(&spec.Affinity).NodeAffinity)
}

// ensure returns *p, set to a new zero T first when it is nil.
func ensure[T any](p **T) *T {
	if *p == nil {
		*p = new(T)
	}
	return *p
}

// PinnedNode returns the node a pod is bound or pinned to: spec.nodeName
// when set, else the node named by a "metadata.name In [node]" match field
// present in every term of its required node affinity. It returns "" for a
// pod that may run on more than one node.
func PinnedNode(pod *corev1.Pod) string {
	if pod.Spec.NodeName != "" {
		return pod.Spec.NodeName
	}
	a := pod.Spec.Affinity
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return ""
	}
	terms := a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	if len(terms) == 0 {
		return ""
	}
	node := ""
	for _, term := range terms {
		found := ""
		for _, r := range term.MatchFields {
			if r.Key == nodeNameField && r.Operator == corev1.NodeSelectorOpIn && len(r.Values) == 1 {
				found = r.Values[0]
				break
			}
		}
		if found == "" || (node != "" && found != node) {
			return ""
		}
		node = found
	}
	return node
}
