// File cleanup.go: data cleanup under the Delete retention policies: which members' data
// goes and when, and when the data-cleanup finalizer may go.

package flock

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"

	"flock.dev/flock/pkg/apis/flock/v1alpha1"
)

// cleanupRecheck is how soon a sync with data cleanups pending runs again
// even when no event brings it.
const cleanupRecheck = 30 * time.Second

// cleanupOutcome is what syncCleanup tells the rest of a sync.
type cleanupOutcome struct {
	// pending are members whose data directory is still to be removed:
	// they stay in status.members, which makes the work durable.
	pending map[int32]bool
	// done are members (ordinal -> node) whose cleanup finished or was
	// skipped: they leave status.members.
	done map[int32]string
	// messages are the status messages of pending members.
	messages map[int32]string
	// requeue, when positive, asks for another sync (a failed helper is
	// retried after helperRetryDelay).
	requeue time.Duration
	// complete is set for a Flock being deleted when nothing is left to
	// clean: the finalizer may go.
	complete bool
}

// wantsFinalizer reports whether Flock f needs the data-cleanup finalizer:
// when either retention policy is Delete, deleting the Flock must wait for
// the cleanups (those of a scale down in progress too).
func wantsFinalizer(f *v1alpha1.Flock) bool {
	return v1alpha1.WantsDataCleanupFinalizer(f.Spec.Storage.Retention.WhenDeleted, f.Spec.Storage.Retention.WhenScaled)
}

func hasFinalizer(f *v1alpha1.Flock, name string) bool {
	return slices.Contains(f.Finalizers, name)
}

// syncCleanup removes the data of members that the retention policies say
// to remove (dataSyncer.remove: directory by a helper pod in the server's
// namespace, then claim, then PersistentVolume):
//   - whenScaled: Delete: members removed by a scale down, once their pods
//     are gone;
//   - whenDeleted: Delete: every member of a Flock being deleted, once the
//     member pods (which this deletes itself: the garbage collector leaves
//     them while the finalizer holds the Flock) are gone, and the data that
//     scale downs under whenScaled: Retain kept (withRetainedMembers).
//
// A member waiting for its cleanup stays in status, so the work survives a
// restart. A member whose node is gone keeps its directory there (with an
// event); its claim and volume still go. A Flock deleted with orphaned
// dependents keeps all its data: its pods live on. Helper pods no step
// needs any more are deleted. Nothing is done for a Flock being deleted
// that does not carry the finalizer. The helpers run in the server's
// namespace, so a namespace being deleted does not stop them.
func (fc *defaultFlockControl) syncCleanup(ctx context.Context, f *v1alpha1.Flock, members map[int32]v1alpha1.FlockMember, pods map[int32]*corev1.Pod, nodes map[string]*corev1.Node, now time.Time) (cleanupOutcome, error) {
	out := cleanupOutcome{pending: map[int32]bool{}, done: map[int32]string{}, messages: map[int32]string{}}
	deleting := f.DeletionTimestamp != nil
	if deleting && !hasFinalizer(f, v1alpha1.FinalizerDataCleanup) {
		return out, nil
	}
	replicas := replicasOf(f)
	retention := f.Spec.Storage.Retention
	orphaning := deleting && hasFinalizer(f, metav1.FinalizerOrphanDependents)
	cleanAll := deleting && retention.WhenDeleted == v1alpha1.DeleteRetentionPolicy && !orphaning
	need := func(m v1alpha1.FlockMember) bool {
		switch {
		case orphaning:
			return false
		case cleanAll:
			return true
		}
		return retention.WhenScaled == v1alpha1.DeleteRetentionPolicy && m.Ordinal >= replicas
	}
	if orphaning && wantsFinalizer(f) {
		fc.event(f, corev1.EventTypeNormal, "DataCleanupSkipped",
			"the Flock is deleted with orphaned dependents: its pods keep running, so their data is kept")
	}
	dir := MemberDataDir(fc.opts.DataRoot, f)
	var errs []error

	// While the Flock is deleted, its member pods go first.
	if cleanAll {
		for _, ord := range sortedOrdinals(pods) {
			pod := pods[ord]
			force := mustForceDelete(pod, nodes)
			switch {
			case isTerminating(pod) && force:
				errs = append(errs, fc.deletePod(ctx, f, pod, "the Flock is deleted", true))
			case !isTerminating(pod):
				errs = append(errs, fc.deletePod(ctx, f, pod, "the Flock is deleted; its data is removed next", force))
			}
		}
	}

	if cleanAll && !usesClaimTemplate(f) {
		// Members a scale down left with their data (whenScaled: Retain)
		// are no longer in status; their volumes say where they were.
		vols, err := fc.data.data.ListVolumes(labels.SelectorFromSet(labels.Set{LabelFlockUID: string(f.UID)}))
		if err != nil {
			errs = append(errs, err)
		}
		members = withRetainedMembers(f, members, vols, nodes)
	}
	for _, m := range sortedMembers(members) {
		if !need(m) {
			continue
		}
		ord := m.Ordinal
		out.pending[ord] = true
		if pod := pods[ord]; pod != nil {
			out.messages[ord] = fmt.Sprintf("data directory %s on node %s is removed once pod %s is gone", dir, m.Node, pod.Name)
			continue
		}
		// Any other pod still using the claim (a member pod orphaned or
		// released, say) is waited for.
		users, err := fc.podsUsingClaim(f, ClaimName(f, ord))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if len(users) > 0 {
			out.messages[ord] = fmt.Sprintf("data directory %s on node %s is removed once pod %s, which uses it, is gone",
				dir, m.Node, strings.Join(users, ", "))
			continue
		}
		st, err := fc.data.remove(ctx, f, m, nodes[m.Node], now)
		if err != nil {
			errs = append(errs, err)
		}
		if st.done {
			delete(out.pending, ord)
			out.done[ord] = m.Node
			continue
		}
		out.messages[ord] = st.message
		if st.requeue > 0 && (out.requeue == 0 || st.requeue < out.requeue) {
			out.requeue = st.requeue
		}
	}

	// Helpers no step needs: prepare helpers of members that are not
	// starting; cleanup helpers of members not being cleaned up, except
	// those of members scaled back up (the member waits for the helper,
	// then gets fresh data and deletes it).
	errs = append(errs, fc.data.sweepHelpers(ctx, f, func(job string, ord int32) bool {
		starting := !deleting && ord < replicas && pods[ord] == nil
		if job == HelperCleanup {
			return out.pending[ord] || starting
		}
		return starting
	}))
	out.complete = deleting && len(out.pending) == 0
	if len(out.pending) > 0 && out.requeue == 0 {
		// The helper pods' events bring the next sync; should one be lost
		// (the fault suite saw a deletion held after kube's etcd
		// restarted), the cleanup is looked at again anyway.
		out.requeue = cleanupRecheck
	}
	return out, utilerrors.NewAggregate(errs)
}

// podsUsingClaim returns the names of the pods in f's namespace that mount
// the claim and have not terminated.
func (fc *defaultFlockControl) podsUsingClaim(f *v1alpha1.Flock, claim string) ([]string, error) {
	pods, err := fc.members.ListPods(f.Namespace, labels.Everything())
	if err != nil {
		return nil, err
	}
	var users []string
	for _, pod := range pods {
		if isTerminal(pod) {
			continue
		}
		if slices.ContainsFunc(pod.Spec.Volumes, func(v corev1.Volume) bool {
			return v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == claim
		}) {
			users = append(users, pod.Name)
		}
	}
	slices.Sort(users)
	return users, nil
}

// recordDataNames sets the PersistentVolume and claim names of the members
// whose claim exists and is theirs (for status).
func (fc *defaultFlockControl) recordDataNames(f *v1alpha1.Flock, members map[int32]v1alpha1.FlockMember) {
	for ord, m := range members {
		m.PersistentVolume, m.Claim = "", ""
		claim, err := fc.data.data.GetClaim(f.Namespace, ClaimName(f, ord))
		if err == nil && claimConflict(f, ord, claim) == "" {
			m.Claim = claim.Name
			m.PersistentVolume = claim.Spec.VolumeName
		}
		members[ord] = m
	}
}

// withRetainedMembers returns members plus a member for each of volumes (the
// Flock's node-local PersistentVolumes) whose ordinal is not a member any
// more, as a scale down under whenScaled: Retain leaves them: on the node
// whose hostname the volume is pinned to (its name when no node has it).
// members is not modified.
func withRetainedMembers(f *v1alpha1.Flock, members map[int32]v1alpha1.FlockMember, volumes []*corev1.PersistentVolume, nodes map[string]*corev1.Node) map[int32]v1alpha1.FlockMember {
	out := maps.Clone(members)
	for _, pv := range volumes {
		ord64, err := strconv.ParseInt(pv.Labels[v1alpha1.LabelOrdinal], 10, 32)
		ord := int32(ord64)
		if err != nil || ord < 0 || pv.Name != PersistentVolumeName(f.UID, ord) {
			continue
		}
		if _, ok := out[ord]; ok {
			continue
		}
		node := volumeHostname(pv)
		for _, n := range nodes {
			if volumeOnNode(pv, NodeHostname(n)) {
				node = n.Name
				break
			}
		}
		if node == "" {
			continue
		}
		out[ord] = v1alpha1.FlockMember{Ordinal: ord, Node: node, Pod: PodName(f.Name, ord)}
	}
	return out
}
