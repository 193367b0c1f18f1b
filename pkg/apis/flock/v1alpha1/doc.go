// +k8s:deepcopy-gen=package
// +k8s:conversion-gen=flock.dev/flock/pkg/apis/flock
// +k8s:defaulter-gen=TypeMeta
// +k8s:openapi-gen=true
// +k8s:openapi-model-package=dev.flock.v1alpha1
// +groupName=flock.dev

// Package v1alpha1 is the v1alpha1 version of the flock.dev API: the Flock,
// a set of stateful members where member i always runs on node i.
package v1alpha1
