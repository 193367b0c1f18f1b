// File cleanup.go: data cleanup under the Delete retention policies: helper pods per
// member, and when the data-cleanup finalizer may go.

package flock

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"

	"flock.dev/flock/pkg/apis/flock/v1alpha1"
	"flock.dev/flock/pkg/placement"
)

// cleanupRetryDelay is how long a failed cleanup helper is kept (for
// kubectl describe) before it is replaced by a new attempt.
const cleanupRetryDelay = 10 * time.Second

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
	// finished are helper pods to delete once the status is written.
	finished []*corev1.Pod
	// requeue, when positive, asks for another sync (a failed helper is
	// retried after cleanupRetryDelay).
	requeue time.Duration
	// complete is set for a Flock being deleted when nothing is left to
	// clean: the finalizer may go once finished helpers are deleted.
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

// syncCleanup removes the data directories that the retention policies
// say to remove, with one helper pod per member (NewCleanupPod):
//   - whenScaled: Delete: members removed by a scale down, once their pods
//     are gone;
//   - whenDeleted: Delete: every member of a Flock being deleted, once the
//     member pods (which this deletes itself: the garbage collector leaves
//     them while the finalizer holds the Flock) are gone.
//
// A member waiting for its cleanup stays in status, so the work survives a
// restart. A member whose node is gone is skipped with an event. A Flock
// deleted with orphaned dependents keeps all its data: its pods live on.
// Helpers that no cleanup needs any more are deleted, except one a member
// scaled back up waits for (the member starts once it is done). Nothing is
// done for a Flock being deleted that does not carry the finalizer. In a
// namespace being deleted no helper can start: the cleanup is skipped with
// an event, so that the Flock, and the namespace, can go.
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
			"the Flock is deleted with orphaned dependents: its pods keep running, so their data directories are kept")
	}
	path := DataPath(fc.opts.DataRoot, f.Namespace, f.Name)
	var errs []error

	all, err := fc.members.ListPods(f.Namespace, labels.SelectorFromSet(labels.Set{LabelCleanupOf: f.Name}))
	if err != nil {
		return out, err
	}
	// A helper is known by its label and name, not by its ownerReference
	// (which anyone may have removed): whoever made it, it works on this
	// Flock's data directory.
	helpers := map[string]*corev1.Pod{}
	for _, h := range all {
		helpers[h.Name] = h
	}

	// While the Flock is deleted, its member pods go first.
	if cleanAll {
		for _, ord := range sortedOrdinals(pods) {
			pod := pods[ord]
			force := mustForceDelete(pod, nodes)
			switch {
			case isTerminating(pod) && force:
				errs = append(errs, fc.deletePod(ctx, f, pod, "the Flock is deleted", true))
			case !isTerminating(pod):
				errs = append(errs, fc.deletePod(ctx, f, pod, "the Flock is deleted; its data directories are removed next", force))
			}
		}
	}

	seen := map[string]bool{}
	for _, m := range sortedMembers(members) {
		if !need(m) {
			continue
		}
		ord := m.Ordinal
		name := CleanupPodName(f.Name, ord)
		seen[name] = true
		out.pending[ord] = true
		if pod := pods[ord]; pod != nil {
			out.messages[ord] = fmt.Sprintf("data directory %s on node %s is removed once pod %s is gone", path, m.Node, pod.Name)
			continue
		}
		h := helpers[name]
		node := nodes[m.Node]
		switch {
		case h != nil && h.Spec.NodeName == m.Node && h.Status.Phase == corev1.PodSucceeded:
			delete(out.pending, ord)
			out.done[ord] = m.Node
			out.finished = append(out.finished, h)
			fc.event(f, corev1.EventTypeNormal, "DataCleanupDone", "removed data directory %s of member %d on node %s", path, ord, m.Node)
		case node == nil:
			if h != nil && !isTerminating(h) {
				errs = append(errs, fc.removePod(ctx, h, true))
			}
			delete(out.pending, ord)
			out.done[ord] = m.Node
			fc.event(f, corev1.EventTypeWarning, "DataCleanupSkipped",
				"node %s of member %d is gone: its data directory %s there is not removed", m.Node, ord, path)
		case h == nil:
			// Any pod still using the directory there (a member pod
			// orphaned or released, say) is waited for.
			users, err := fc.podsUsingData(f, m.Node, path)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if len(users) > 0 {
				out.messages[ord] = fmt.Sprintf("data directory %s on node %s is removed once pod %s, which uses it, is gone",
					path, m.Node, strings.Join(users, ", "))
				continue
			}
			err = fc.members.CreatePod(ctx, NewCleanupPod(f, m, fc.opts.CleanupImage, fc.opts.DataRoot))
			switch {
			case err == nil:
				fc.event(f, corev1.EventTypeNormal, "DataCleanupStarted",
					"removing data directory %s of member %d on node %s with pod %s", path, ord, m.Node, name)
			case apierrors.IsAlreadyExists(err):
				// The cache is behind; the pod's event brings us back.
			case apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause):
				// No pod can start in a namespace being deleted: waiting would
				// hold the Flock, and so the namespace, forever.
				delete(out.pending, ord)
				out.done[ord] = m.Node
				fc.event(f, corev1.EventTypeWarning, "DataCleanupSkipped",
					"namespace %s is being deleted, so no cleanup pod can run: data directory %s of member %d on node %s is not removed",
					f.Namespace, path, ord, m.Node)
				continue
			default:
				fc.event(f, corev1.EventTypeWarning, "FailedCreate", "create cleanup Pod %s on node %s failed: %v", name, m.Node, err)
				errs = append(errs, fmt.Errorf("creating cleanup pod %s/%s: %w", f.Namespace, name, err))
			}
			out.messages[ord] = fmt.Sprintf("removing data directory %s on node %s (pod %s)", path, m.Node, name)
		case h.Spec.NodeName != m.Node:
			// A helper left from an earlier assignment of this ordinal.
			if !isTerminating(h) {
				errs = append(errs, fc.removePod(ctx, h, nodes[h.Spec.NodeName] == nil))
			}
			out.messages[ord] = fmt.Sprintf("data directory %s on node %s is removed once pod %s (for node %s) is gone", path, m.Node, name, h.Spec.NodeName)
		case isTerminating(h):
			out.messages[ord] = fmt.Sprintf("removing data directory %s on node %s: pod %s is terminating", path, m.Node, name)
		case h.Status.Phase == corev1.PodFailed:
			retryAt := helperFinishedAt(h).Add(cleanupRetryDelay)
			if wait := retryAt.Sub(now); wait > 0 {
				out.requeue = wait
				out.messages[ord] = fmt.Sprintf("pod %s failed to remove data directory %s on node %s (%s); retrying at %s",
					name, path, m.Node, podFailureSummary(h), retryAt.UTC().Format(time.RFC3339))
				continue
			}
			fc.event(f, corev1.EventTypeWarning, "DataCleanupFailed",
				"pod %s failed to remove data directory %s of member %d on node %s (%s); retrying", name, path, ord, m.Node, podFailureSummary(h))
			errs = append(errs, fc.removePod(ctx, h, false))
			out.messages[ord] = fmt.Sprintf("removing data directory %s on node %s: retrying after a failure", path, m.Node)
		default:
			msg := fmt.Sprintf("removing data directory %s on node %s (pod %s is %s)", path, m.Node, name, h.Status.Phase)
			if !placement.IsReady(node) {
				msg += "; the node is NotReady"
			}
			out.messages[ord] = msg
		}
	}

	// Helpers no cleanup needs.
	names := make([]string, 0, len(helpers))
	for name := range helpers {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		h := helpers[name]
		if seen[name] {
			continue
		}
		gone := nodes[h.Spec.NodeName] == nil
		if isTerminating(h) {
			if gone {
				errs = append(errs, fc.removePod(ctx, h, true))
			}
			continue
		}
		if ord, ok := cleanupOrdinal(f.Name, name); ok && !deleting && !gone && !isTerminal(h) {
			if m, ok := members[ord]; ok && ord < replicas && m.Node == h.Spec.NodeName {
				continue // a member scaled back up waits for it to finish
			}
		}
		errs = append(errs, fc.removePod(ctx, h, gone))
	}
	out.complete = deleting && len(out.pending) == 0
	return out, utilerrors.NewAggregate(errs)
}

// podsUsingData returns the names of the pods in f's namespace, cleanup
// helpers aside, that are on or pinned to node, mount the host directory
// path and have not terminated.
func (fc *defaultFlockControl) podsUsingData(f *v1alpha1.Flock, node, path string) ([]string, error) {
	pods, err := fc.members.ListPods(f.Namespace, labels.Everything())
	if err != nil {
		return nil, err
	}
	var users []string
	for _, pod := range pods {
		if _, helper := pod.Labels[LabelCleanupOf]; helper || isTerminal(pod) || PinnedNode(pod) != node {
			continue
		}
		if slices.ContainsFunc(pod.Spec.Volumes, func(v corev1.Volume) bool { return v.HostPath != nil && v.HostPath.Path == path }) {
			users = append(users, pod.Name)
		}
	}
	slices.Sort(users)
	return users, nil
}
