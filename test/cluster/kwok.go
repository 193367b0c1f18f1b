package cluster

// Markers understood by the kwok stages in hack/kwok/stages.yaml. Tests put
// them on pods (label or annotation) or nodes (label) to shape what the fake
// kubelet does.
const (
	// NeverReadyMarker ("true", as a pod label or annotation) keeps a pod
	// Running but never Ready, like a container whose readiness probe fails.
	NeverReadyMarker = "flock.dev/e2e-never-ready"
	// StartDelayAnnotation (a Go duration, e.g. "3s") delays a pod's start.
	StartDelayAnnotation = "flock.dev/e2e-start-delay"
	// NodeNotReadyLabel ("true", on a node) makes kwok report the node
	// Ready=False; removing the label makes it Ready again.
	NodeNotReadyLabel = "flock.dev/e2e-node-not-ready"
)
