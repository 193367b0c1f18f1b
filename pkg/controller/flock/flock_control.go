// File flock_control.go: FlockControl, the reconcile logic the loop calls,
// and its implementation's type, defaultFlockControl, whose methods are the
// steps of a sync (in their own files) and Sync (control.go).

package flock

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/record"

	"flock.dev/flock/pkg/apis/flock/v1alpha1"
	"flock.dev/flock/pkg/generated/clientset/versioned"
	flocklisters "flock.dev/flock/pkg/generated/listers/flock/v1alpha1"
)

// FlockControl reconciles one Flock: it places members, adopts and releases
// pods, keeps the headless Service, creates and deletes member pods and
// writes the status. The loop depends on this interface; defaultFlockControl
// is its implementation.
type FlockControl interface {
	// Sync drives flock towards its spec. pods are the pods flock controls
	// and the orphans its selector matches, from the cache (read-only).
	// now is the time the sync started.
	Sync(ctx context.Context, flock *v1alpha1.Flock, pods []*corev1.Pod, now time.Time) (Result, error)
	// SweepStrays deletes what a gone Flock of that name left that only
	// a replica without the lease can have made (strays.go).
	SweepStrays(ctx context.Context, namespace, name string) error
}

// Result is what one Sync tells the loop.
type Result struct {
	// RequeueAfter, when positive, asks for another sync after that long
	// (a pod becomes available after minReadySeconds).
	RequeueAfter time.Duration
	// Members counts the members (ordinals < replicas) by state; nil when
	// the status was not computed.
	Members map[MemberState]int
}

// requeue asks for another sync after d, or sooner if already asked.
func (r *Result) requeue(d time.Duration) {
	if d > 0 && (r.RequeueAfter == 0 || d < r.RequeueAfter) {
		r.RequeueAfter = d
	}
}

type defaultFlockControl struct {
	members     MemberControl
	revisions   RevisionControl
	status      StatusUpdater
	flockClient versioned.Interface
	flockLister flocklisters.FlockLister
	nodeLister  corelisters.NodeLister
	// namespaceLister shows which namespaces are being deleted (nil: none
	// is, as far as this control knows).
	namespaceLister corelisters.NamespaceLister
	recorder        record.EventRecorder
	opts            Options
	// lost remembers since when nodes have been lost (memberRecovery).
	lost *nodeLossTracker
	// data makes and removes members' volumes, claims and directories.
	data *dataSyncer
	// written are the Flocks as this controller last wrote them, until
	// its cache shows them (status writes go through a
	// recordingStatusUpdater).
	written *writtenFlocks
	// paced spaces the status writes of big Flocks.
	paced *statusPacer
	// created are the member pods created that the pod cache does not
	// show yet (created_pods.go).
	created *createdPods
}

var _ FlockControl = &defaultFlockControl{}
