// Package flock is the embedded Flock controller: it turns each Flock into
// member pods <flock>-<ordinal>, each pinned to the node recorded for it in
// status.members, a headless Service, and a truthful status; it rolls
// template changes out, removes data directories under the Delete
// retention policies, and applies memberRecovery to members on lost nodes.
//
// The package is layered like the StatefulSet controller:
//
//   - controller.go: the loop. Informers, event handlers, a typed
//     rate-limited workqueue, workers and sync, which gathers a Flock and its
//     candidate pods from the caches and hands them to a FlockControl.
//   - control.go: the reconcile logic (FlockControl, implemented by
//     defaultFlockControl): placement, adoption, the Service, creating and
//     deleting member pods, status. Its parts for the lifecycle of members:
//     rollout.go (template revisions as ControllerRevisions, the rolling
//     update, revision history), cleanup.go (data-cleanup helper pods and the
//     flock.dev/data-cleanup finalizer) and recovery.go (members on lost
//     nodes: Wait or Reassign).
//   - member_control.go, revision_control.go and status_updater.go: the
//     writes (MemberControl, RevisionControl, StatusUpdater), through the
//     clientsets with a field manager, and the reads the reconcile logic
//     needs, through listers. Tests replace them.
//   - ref_manager.go: adoption and release of pods by ControllerRef rules.
//   - pod.go, status.go, revision.go: pure helpers that need no client
//     (member and cleanup pods, the Service, node pinning, status and
//     conditions, revision hashes, the update plan and halted rollouts).
//
// Placement decisions come from flock.dev/flock/pkg/placement, the same rule
// the admission plugin enforces.
package flock
