// Package flock is the embedded Flock controller: it turns each Flock into
// member pods <flock>-<ordinal>, each pinned to the node recorded for it in
// status.members, a headless Service, and a truthful status; it rolls
// template changes out, removes data directories under the Delete
// retention policies, and applies memberRecovery to members on lost nodes.
//
// The package is layered like the StatefulSet controller; no file calls up
// into a file above it:
//
//   - controller.go, event_handlers.go and loop.go (its type): the loop. Informers, event
//     handlers, a typed rate-limited workqueue, workers and sync, which
//     gathers a Flock and its candidate pods from the caches and hands them
//     to a FlockControl.
//   - control.go: FlockControl's Sync (flock_control.go holds the types
//     FlockControl, Result and defaultFlockControl), which reads one
//     snapshot (snapshot.go) of what the sync needs and runs the steps of
//     one sync in order. Decisions are pure functions of the snapshot
//     (planPlacement, planRecovery, blockedMembers, planMember,
//     planRollingUpdate), executed by the steps: member_placement.go
//     (nodes of new members), recovery.go (members on lost nodes: Wait or Reassign),
//     service.go (the headless Service), rollout.go (template revisions as
//     ControllerRevisions, the rolling update, revision history),
//     member_sync.go (creating and deleting member pods), cleanup.go
//     (data-cleanup helper pods), blockage.go (why members cannot run),
//     events.go (events on Flocks) and writes.go (pod deletion and the
//     data-cleanup finalizer, shared by the steps).
//   - member_control.go, revision_control.go and status_updater.go: the
//     writes (MemberControl, RevisionControl, StatusUpdater), through the
//     clientsets with a field manager, and the reads the reconcile logic
//     needs, through listers. Tests replace them.
//   - ref_manager.go: adoption and release of pods by ControllerRef rules.
//   - pure helpers that need no client: options.go (Options and defaults),
//     accessors.go (spec accessors and derived names), predicates.go (pod
//     and node predicates), member_pod.go and cleanup_pod.go (the pods the
//     controller makes), status.go (status and conditions), revision.go
//     (revision hashes and ControllerRevisions) and update_plan.go (the
//     update plan and halted rollouts).
//
// Placement decisions come from flock.dev/flock/pkg/placement, the same rule
// the admission plugin enforces.
package flock
