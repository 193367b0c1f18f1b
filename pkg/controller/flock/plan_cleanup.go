// File plan_cleanup.go: the data-cleanup decision under the Delete retention policies:
// which members' data goes, which wait and for which pods, which member pods go first, and
// which helper pods a step still needs. Pure functions of what syncCleanup read.

package flock

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"flock.dev/flock/pkg/apis/flock/v1alpha1"
)

// cleanupScope says which members' data a sync of a Flock may remove.
type cleanupScope struct {
	// active is false for a Flock being deleted without the data-cleanup
	// finalizer: nothing is done.
	active bool
	// orphaning: the Flock is deleted with orphaned dependents; its pods
	// live on, so all its data is kept.
	orphaning bool
	// all: the Flock is deleted under whenDeleted: Delete: every member's
	// data goes (the retained members' too), its pods first.
	all bool
}

// cleanupScopeOf returns the cleanup scope of f.
func cleanupScopeOf(f *v1alpha1.Flock) cleanupScope {
	deleting := f.DeletionTimestamp != nil
	if deleting && !hasFinalizer(f, v1alpha1.FinalizerDataCleanup) {
		return cleanupScope{}
	}
	orphaning := deleting && hasFinalizer(f, metav1.FinalizerOrphanDependents)
	return cleanupScope{
		active:    true,
		orphaning: orphaning,
		all:       deleting && f.Spec.Storage.Retention.WhenDeleted == v1alpha1.DeleteRetentionPolicy && !orphaning,
	}
}

// cleanupTargets returns, in ordinal order, the members of f whose data the
// scope removes: all of them, or under whenScaled: Delete those at or above
// replicas; none when orphaning.
func cleanupTargets(f *v1alpha1.Flock, scope cleanupScope, members map[int32]v1alpha1.FlockMember) []v1alpha1.FlockMember {
	if !scope.active || scope.orphaning {
		return nil
	}
	scaled := f.Spec.Storage.Retention.WhenScaled == v1alpha1.DeleteRetentionPolicy
	var out []v1alpha1.FlockMember
	for _, m := range sortedMembers(members) {
		if scope.all || (scaled && m.Ordinal >= replicasOf(f)) {
			out = append(out, m)
		}
	}
	return out
}

// cleanupInput is what planCleanup decides from.
type cleanupInput struct {
	flock *v1alpha1.Flock
	// members are the recorded members, plus (when the scope is all) those
	// a scale down left with their data (withRetainedMembers).
	members map[int32]v1alpha1.FlockMember
	// pods are the Flock's pods by ordinal; nodes the cluster's by name.
	pods  map[int32]*corev1.Pod
	nodes map[string]*corev1.Node
	// claimUsers are, by claim name, the pods of the namespace that mount
	// it and have not terminated (sorted); nil when they could not be read.
	claimUsers map[string][]string
	// dataDir is the Flock's data directory on a node.
	dataDir string
}

// cleanupPlan is planCleanup's decision.
type cleanupPlan struct {
	// orphaned: the Flock is deleted with orphaned dependents while a
	// retention policy is Delete (its data is kept; say so).
	orphaned bool
	// deletions are the member pods that go first (the Flock is deleted).
	deletions []podDeletion
	// remove are the members whose data is removed now, in ordinal order.
	remove []v1alpha1.FlockMember
	// pending are the members whose data is to go (remove included): they
	// stay in status; messages say what those not in remove wait for.
	pending  map[int32]bool
	messages map[int32]string
}

// planCleanup decides a sync's data cleanup (see syncCleanup): under
// whenDeleted: Delete the member pods are deleted first (force-deleted when
// their node is known down); a member whose data is to go waits for its
// own pod and for any other pod that mounts its claim, and is removed
// once none is left.
func planCleanup(in cleanupInput) cleanupPlan {
	f := in.flock
	scope := cleanupScopeOf(f)
	plan := cleanupPlan{pending: map[int32]bool{}, messages: map[int32]string{}}
	if !scope.active {
		return plan
	}
	plan.orphaned = scope.orphaning && wantsFinalizer(f)
	if scope.all {
		for _, ord := range sortedOrdinals(in.pods) {
			pod := in.pods[ord]
			force := mustForceDelete(pod, in.nodes)
			switch {
			case isTerminating(pod) && force:
				plan.deletions = append(plan.deletions, podDeletion{ord: ord, pod: pod, why: "the Flock is deleted", force: true})
			case !isTerminating(pod):
				plan.deletions = append(plan.deletions, podDeletion{ord: ord, pod: pod, why: "the Flock is deleted; its data is removed next", force: force, changes: true})
			}
		}
	}
	for _, m := range cleanupTargets(f, scope, in.members) {
		ord := m.Ordinal
		plan.pending[ord] = true
		if pod := in.pods[ord]; pod != nil {
			plan.messages[ord] = fmt.Sprintf("data directory %s on node %s is removed once pod %s is gone", in.dataDir, m.Node, pod.Name)
			continue
		}
		if in.claimUsers == nil {
			continue // who uses the claim is unknown: wait
		}
		// Any other pod still using the claim (a member pod orphaned or
		// released, say) is waited for.
		if users := in.claimUsers[ClaimName(f, ord)]; len(users) > 0 {
			plan.messages[ord] = fmt.Sprintf("data directory %s on node %s is removed once pod %s, which uses it, is gone",
				in.dataDir, m.Node, strings.Join(users, ", "))
			continue
		}
		plan.remove = append(plan.remove, m)
	}
	return plan
}

// helperNeeded returns whether a step still needs the helper pod of job for
// ordinal of f: a prepare helper while the member is starting (below
// replicas, no pod, the Flock not deleted); a cleanup helper while the
// member's data is pending removal, or while a member scaled back up waits
// for it (then gets fresh data and deletes it).
func helperNeeded(f *v1alpha1.Flock, pods map[int32]*corev1.Pod, pending map[int32]bool) func(job string, ordinal int32) bool {
	return func(job string, ord int32) bool {
		starting := f.DeletionTimestamp == nil && ord < replicasOf(f) && pods[ord] == nil
		if job == HelperCleanup {
			return pending[ord] || starting
		}
		return starting
	}
}
