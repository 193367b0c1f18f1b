// File cleanup.go: data cleanup under the Delete retention policies: reads what
// planCleanup (plan_cleanup.go) decides from, writes its plan, and says when the
// data-cleanup finalizer may go.

package flock

import (
	"context"
	"maps"
	"slices"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
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
//
// It reads what the decision needs (retained volumes, the pods using the
// claims), planCleanup decides, and it writes the plan.
func (fc *defaultFlockControl) syncCleanup(ctx context.Context, f *v1alpha1.Flock, members map[int32]v1alpha1.FlockMember, pods map[int32]*corev1.Pod, nodes map[string]*corev1.Node, now time.Time) (cleanupOutcome, error) {
	out := cleanupOutcome{pending: map[int32]bool{}, done: map[int32]string{}, messages: map[int32]string{}}
	scope := cleanupScopeOf(f)
	if !scope.active {
		return out, nil
	}
	var errs []error
	var reads *sharedReads
	if scope.all && !usesClaimTemplate(f) {
		// Members a scale down left with their data (whenScaled: Retain)
		// are no longer in status; their volumes say where they were. They
		// are listed from the API server: a volume made just before the
		// deletion may not be in the cache yet (the fault suite saw one
		// left behind after kube-apiserver restarted). The members'
		// removals look their volumes up in this list (sharedReads).
		vols, err := fc.data.data.ListVolumesLive(ctx, labels.SelectorFromSet(labels.Set{LabelFlockUID: string(f.UID)}))
		if err != nil {
			errs = append(errs, err)
		} else {
			reads = newSharedReads(vols)
		}
		members = withRetainedMembers(f, members, vols, nodes)
	}
	users, err := fc.claimUsers(ctx, f, cleanupTargets(f, scope, members), pods, now)
	if err != nil {
		errs = append(errs, err)
	}
	plan := planCleanup(cleanupInput{flock: f, members: members, pods: pods, nodes: nodes, claimUsers: users,
		dataDir: MemberDataDir(fc.opts.DataRoot, f)})

	if plan.orphaned {
		fc.event(f, corev1.EventTypeNormal, "DataCleanupSkipped",
			"the Flock is deleted with orphaned dependents: its pods keep running, so their data is kept")
	}
	// While the Flock is deleted, its member pods go first. The members'
	// writes and reads are sent at once, as their creates are
	// (eachMember): one after another, a 500-member Flock's deletion took
	// syncs of up to 31 s, most of it round trips.
	deleted := make([]error, len(plan.deletions))
	fc.eachMember(len(plan.deletions), func(i int) {
		d := plan.deletions[i]
		deleted[i] = fc.deletePod(ctx, f, d.pod, d.why, d.force)
	})
	errs = append(errs, deleted...)
	out.pending, out.messages = plan.pending, plan.messages
	states, removeErrs := make([]removeState, len(plan.remove)), make([]error, len(plan.remove))
	fc.eachMember(len(plan.remove), func(i int) {
		m := plan.remove[i]
		states[i], removeErrs[i] = fc.data.remove(ctx, f, m, nodes[m.Node], now, reads)
	})
	errs = append(errs, removeErrs...)
	for i, m := range plan.remove {
		ord, st := m.Ordinal, states[i]
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

	// Helpers no step needs any more go; before the finalizer goes, they
	// are listed from the API server (deleteHelpers' live).
	errs = append(errs, fc.data.sweepHelpers(ctx, f, helperNeeded(f, pods, out.pending)))
	// Any error (a volume list that failed among them) keeps the finalizer.
	out.complete = f.DeletionTimestamp != nil && len(out.pending) == 0 && utilerrors.NewAggregate(errs) == nil
	if out.complete {
		if err := fc.data.deleteHelpers(ctx, f, -1, "", true); err != nil {
			errs = append(errs, err)
			out.complete = false
		}
	}
	if len(out.pending) > 0 && out.requeue == 0 {
		// The helper pods' events bring the next sync; should one be lost
		// (the fault suite saw a deletion held after kube's etcd
		// restarted), the cleanup is looked at again anyway.
		out.requeue = cleanupRecheck
	}
	return out, utilerrors.NewAggregate(errs)
}

// claimUsers returns, by claim name, the pods of f's namespace that mount
// the claim of a target without a pod of its own and have not terminated
// (sorted). A target's own pod that this controller created and the cache
// does not show yet counts as a user. It lists pods only when there is
// such a target.
func (fc *defaultFlockControl) claimUsers(ctx context.Context, f *v1alpha1.Flock, targets []v1alpha1.FlockMember, pods map[int32]*corev1.Pod, now time.Time) (map[string][]string, error) {
	claims := map[string]bool{}
	users := map[string][]string{}
	for _, m := range targets {
		if pods[m.Ordinal] != nil {
			continue
		}
		claim := ClaimName(f, m.Ordinal)
		claims[claim] = true
		if _, ok := fc.podAwaited(ctx, f, m.Ordinal, now); ok {
			users[claim] = append(users[claim], PodName(f.Name, m.Ordinal))
		}
	}
	if len(claims) == 0 {
		return users, nil
	}
	all, err := fc.members.ListPods(f.Namespace, labels.Everything())
	if err != nil {
		return nil, err
	}
	for _, pod := range all {
		if isTerminal(pod) {
			continue
		}
		for _, v := range pod.Spec.Volumes {
			if v.PersistentVolumeClaim != nil && claims[v.PersistentVolumeClaim.ClaimName] && !slices.Contains(users[v.PersistentVolumeClaim.ClaimName], pod.Name) {
				users[v.PersistentVolumeClaim.ClaimName] = append(users[v.PersistentVolumeClaim.ClaimName], pod.Name)
			}
		}
	}
	for _, names := range users {
		slices.Sort(names)
	}
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
		ord, node := volumeOrdinalNode(f, pv, nodes)
		if _, ok := out[ord]; ok || node == "" {
			continue
		}
		out[ord] = v1alpha1.FlockMember{Ordinal: ord, Node: node, Pod: PodName(f.Name, ord)}
	}
	return out
}

// volumeOrdinalNode returns the ordinal of f whose node-local volume pv is
// and the node that holds it: the node whose hostname the volume names, or
// that hostname when no such node exists. node is "" when pv is not such a
// volume of f.
func volumeOrdinalNode(f *v1alpha1.Flock, pv *corev1.PersistentVolume, nodes map[string]*corev1.Node) (ord int32, node string) {
	ord64, err := strconv.ParseInt(pv.Labels[v1alpha1.LabelOrdinal], 10, 32)
	ord = int32(ord64)
	if err != nil || ord < 0 || pv.Name != PersistentVolumeName(f.UID, ord) {
		return 0, ""
	}
	node = volumeHostname(pv)
	for _, n := range nodes {
		if volumeOnNode(pv, NodeHostname(n)) {
			return ord, n.Name
		}
	}
	return ord, node
}

// volumeGoing reports whether a member's volume is being deleted or its
// directory was removed: no member goes back to it.
func volumeGoing(pv *corev1.PersistentVolume) bool {
	return pv.DeletionTimestamp != nil || pv.Annotations[AnnotationRemoved] == "true"
}
