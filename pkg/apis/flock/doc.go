// +k8s:deepcopy-gen=package
// +groupName=flock.dev

// Package flock is the internal version of the flock.dev API.
package flock
