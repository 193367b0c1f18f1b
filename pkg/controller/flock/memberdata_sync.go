package flock

// memberdata_sync.go keeps members' data objects: before a member's pod is
// created, its PersistentVolume (node-local data), its claim, and its
// prepared directory (the removal under the Delete retention policy is in
// memberdata_remove.go, running helper pods in memberdata_helpers.go). Every
// step is idempotent by name and checked by UID, so a restart between any
// two of them leaves no orphan and no duplicate; an object of the expected
// name that belongs to something else blocks the member and is never
// adopted or changed.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"flock.dev/flock/pkg/apis/flock/v1alpha1"
	"flock.dev/flock/pkg/nodeagent"
)

// Reasons of MembersBlocked for members' data.
const (
	// ReasonDataConflict: a PersistentVolume or claim of the member's name
	// belongs to something else.
	ReasonDataConflict = "DataConflict"
	// ReasonDataPreparing: the member's volume, claim or directory is being
	// made.
	ReasonDataPreparing = "DataPreparing"
)

// helperRetryDelay is how long a failed helper pod is kept (for kubectl
// describe) before it is replaced by a new attempt.
const helperRetryDelay = 10 * time.Second

// dataSyncer makes and removes members' data objects.
type dataSyncer struct {
	data  DataControl
	pods  MemberControl
	event func(f *v1alpha1.Flock, eventType, reason, format string, args ...any)
	// nodeByName returns a node from the cache, nil when it is not
	// there (nil: no node is known).
	nodeByName func(name string) *corev1.Node
	// dataRoot, helperNamespace and helperImage are the controller's
	// options.
	dataRoot, helperNamespace, helperImage string
	// agentGrace is Options.NodeAgentGrace: how long a new volume's
	// directory is left to a Ready node agent (0: never).
	agentGrace time.Duration
	// prepared remembers the volumes marked prepared until the cache
	// shows it.
	prepared preparedMarks
}

// dataState is where a member's data stands.
type dataState struct {
	// ready: the member's pod may be created.
	ready bool
	// volume and claim are the names to record in status ("" when not
	// known yet).
	volume, claim string
	// blocked says why the member cannot start yet (nil when ready).
	blocked *blockage
	// requeue, when positive, asks for another sync.
	requeue time.Duration
	// after, when set on a ready state, is work that waits for nothing of
	// the member: the deletion of its finished prepare helper. The caller
	// runs it once the member's pod is created, so that the deletion's
	// round trip is not on the way to the pod (issue 17).
	after func(context.Context) error
}

// runAfter runs st.after, if any, and returns err joined with its error.
func (st dataState) runAfter(ctx context.Context, err error) error {
	if st.after == nil {
		return err
	}
	return errors.Join(err, st.after(ctx))
}

// waiting is a dataState for a member whose data is being made.
func waiting(volume, claim, format string, args ...any) dataState {
	return dataState{volume: volume, claim: claim, blocked: &blockage{ReasonDataPreparing, fmt.Sprintf(format, args...)}}
}

// conflicting is a dataState for a member blocked by a foreign object.
func conflicting(ord int32, why string) dataState {
	return dataState{blocked: &blockage{ReasonDataConflict, fmt.Sprintf("member %d cannot start: %s; it is left as it is, delete or rename it to let the member start", ord, why)}}
}

// ensure makes member m's data ready for its pod: for node-local data the
// PersistentVolume on m's node, the pre-bound claim and the prepared
// directory; with a claim template, the claim. node is m's node (nil when
// it is gone).
func (d *dataSyncer) ensure(ctx context.Context, f *v1alpha1.Flock, m v1alpha1.FlockMember, node *corev1.Node, now time.Time) (st dataState, err error) {
	// The prepare helper's deletion (prepare's after) waits for the pod
	// only when the member is ready for it; otherwise it runs now.
	var after func(context.Context) error
	defer func() {
		if after == nil {
			return
		}
		if st.ready {
			st.after = after
			return
		}
		err = errors.Join(err, after(ctx))
	}()
	if usesClaimTemplate(f) {
		st, _, err := d.ensureClaim(ctx, f, m.Ordinal, "", true)
		return st, err
	}
	logger := klog.FromContext(ctx)
	ord := m.Ordinal
	pvName, claimName := PersistentVolumeName(f.UID, ord), ClaimName(f, ord)

	// A member scaled back up while its data was being removed waits for
	// the removal to end, then gets fresh data.
	if h, err := d.pods.GetPod(d.helperNamespace, HelperPodName(HelperCleanup, f.UID, ord)); err == nil {
		if !helperFinished(h) {
			return dataState{blocked: &blockage{ReasonDataCleanup, fmt.Sprintf(
				"member %d waits for helper pod %s/%s to finish removing its data directory on node %s", ord, h.Namespace, h.Name, h.Spec.NodeName)}}, nil
		}
		if pv, err := d.data.GetVolume(pvName); err == nil && volumeConflict(f, ord, pv) == "" && pv.DeletionTimestamp == nil {
			if st, err := d.replaceVolume(ctx, f, m, pv, "its data directory was removed"); err != nil {
				return st, err
			}
		}
		return waiting("", "", "member %d: its data directory was removed; fresh data is made", ord), d.deleteHelpers(ctx, f, ord, HelperCleanup, false)
	} else if !apierrors.IsNotFound(err) {
		return dataState{}, err
	}

	pv, err := d.data.GetVolume(pvName)
	if apierrors.IsNotFound(err) {
		if node == nil {
			return waiting("", "", "member %d waits for node %s, which is gone, to make its PersistentVolume", ord, m.Node), nil
		}
		// The claim first: the volume is made bound to its UID, so that
		// the binding can be completed here (completeBind). One event
		// (VolumeCreated) tells of both.
		st, claim, err := d.ensureClaim(ctx, f, ord, pvName, false)
		if claim == nil || err != nil {
			return st, err
		}
		made := NewMemberVolume(f, m, NodeHostname(node), d.dataRoot, claim.UID)
		switch err := d.data.CreateVolume(ctx, made); {
		case apierrors.IsAlreadyExists(err):
			// Made by an earlier sync that the cache does not show yet:
			// told then, not again.
		case err != nil:
			d.event(f, corev1.EventTypeWarning, "FailedCreate", "create PersistentVolume %s for member %d (claim %s) failed: %v", pvName, ord, claimName, err)
			return waiting("", "", "creating PersistentVolume %s failed", pvName), fmt.Errorf("creating PersistentVolume %s: %w", pvName, err)
		default:
			logger.V(2).Info("Created member volume", "persistentVolume", pvName, "node", m.Node)
			d.event(f, corev1.EventTypeNormal, "VolumeCreated", "created PersistentVolume %s for member %d on node %s (%s), bound to its claim %s",
				pvName, ord, m.Node, MemberDataDir(d.dataRoot, f), claimName)
		}
		// Read again: when the cache is behind, the volume's event brings
		// the next sync; the helper that prepares the directory starts at
		// once all the same (the volume that records the directory exists),
		// unless the node's agent is left to do it.
		// The member is reported as prepare reports it, so that the
		// volume and claim reaching the cache change nothing in the
		// Flock's status: no status write per step (issue 17).
		if pv, err = d.data.GetVolume(pvName); err != nil {
			if st, ok := d.awaitNodeAgent(ctx, f, m, made, now); ok {
				return st, nil
			}
			_, st, err := d.runHelper(ctx, f, m, HelperPrepare, now)
			st.volume, st.claim = pvName, claimName
			if st.blocked == nil {
				st.blocked = preparingBlockage(d.dataRoot, f, m)
			}
			return st, err
		}
	} else if err != nil {
		return dataState{}, err
	}
	if why := volumeConflict(f, ord, pv); why != "" {
		return conflicting(ord, why), nil
	}
	if pv.DeletionTimestamp != nil {
		return waiting(pvName, "", "member %d waits for its old PersistentVolume %s to be deleted", ord, pvName), nil
	}
	if pv.Annotations[AnnotationRemoved] == "true" {
		// Scaled back up while its data was being removed: the directory
		// is gone, so are the volume and claim, and fresh ones are made.
		return d.replaceVolume(ctx, f, m, pv, "its data directory was removed")
	}
	if node != nil && !volumeOnNode(pv, NodeHostname(node)) {
		// The member is recorded on another node than its volume's:
		// reassigned off a lost node, or placed while its volume's node
		// was gone (placement keeps a member whose volume's node exists
		// for that node). Its old volume and claim go, fresh ones are made
		// on its node; the old directory follows whenScaled
		// (memberdata_move.go).
		if st, wait, err := d.removeLeftData(ctx, f, m, pv, now); wait || err != nil {
			return st, err
		}
		return d.replaceVolume(ctx, f, m, pv, "it is on node "+m.Node+", not on its volume's node")
	}

	// The directory is prepared while the volume and claim are bound: the
	// helper needs neither. A claim of the member's name that is not its
	// own blocks it first.
	if claim, err := d.data.GetClaim(f.Namespace, claimName); err == nil {
		if why := claimConflict(f, ord, claim); why != "" {
			return conflicting(ord, why), nil
		}
	}
	prepared := d.isPrepared(pv)
	var preparing dataState
	if prepared {
		// A prepare helper still there (its deletion failed, or the mark
		// came from the node agent while it ran) goes as a finished one
		// would: after the member's pod, or now.
		if _, err := d.pods.GetPod(d.helperNamespace, HelperPodName(HelperPrepare, f.UID, ord)); err == nil {
			after = func(ctx context.Context) error { return d.deleteHelpers(ctx, f, ord, HelperPrepare, false) }
		}
	} else {
		if preparing, err = d.prepare(ctx, f, m, pv, now); err != nil || preparing.ready {
			prepared = preparing.ready
		}
		after, preparing.after = preparing.after, nil
		if err != nil {
			return preparing, err
		}
	}

	st, claim, err := d.ensureClaim(ctx, f, ord, pvName, true)
	if claim == nil || err != nil {
		st.volume = pvName
		return waitingFor(preparing, st), err
	}
	if ref := pv.Spec.ClaimRef; ref != nil && ref.UID != "" && ref.UID != claim.UID {
		// A retained volume whose claim was deleted and made again: it is
		// reserved for the claim by name only once more, so it binds.
		upd := pv.DeepCopy()
		upd.Spec.ClaimRef.UID, upd.Spec.ClaimRef.ResourceVersion = "", ""
		if err := d.data.UpdateVolume(ctx, upd); err != nil {
			return waiting(pvName, claimName, "releasing PersistentVolume %s for claim %s failed", pvName, claimName),
				fmt.Errorf("releasing PersistentVolume %s for claim %s: %w", pvName, claimName, err)
		}
		d.event(f, corev1.EventTypeNormal, "VolumeReleased", "PersistentVolume %s of member %d is reserved for its new claim %s", pvName, ord, claimName)
	}
	switch {
	case claimBound(claim, pvName):
	case bindable(pv, claim):
		if claim, err = d.completeBind(ctx, claim, pv); apierrors.IsConflict(err) {
			// Written in between, most often by the PersistentVolume
			// controller finishing the same binding: the claim's event
			// brings the next sync, which reads it again.
			return waitingFor(preparing, waiting(pvName, claimName, "member %d: claim %s changed while its binding was completed; it is read again", ord, claimName)), nil
		} else if err != nil {
			return waitingFor(preparing, waiting(pvName, claimName, "binding claim %s to PersistentVolume %s failed", claimName, pvName)),
				fmt.Errorf("binding claim %s/%s to PersistentVolume %s: %w", f.Namespace, claimName, pvName, err)
		}
		logger.V(2).Info("Bound member claim", "claim", klog.KObj(claim), "persistentVolume", pvName)
	case pv.Status.Phase == corev1.VolumePending && pv.Spec.ClaimRef.UID == claim.UID:
		return waitingFor(preparing, waiting(pvName, claimName, "%s", awaitingVolumePhase(ord, pvName))), nil
	}
	if !prepared {
		return preparing, nil
	}
	if !claimBound(claim, pvName) {
		// The scheduler refuses a pod whose claim is not bound yet, and
		// tries it again only after a backoff: the pod waits for the bind.
		return waiting(pvName, claimName, "member %d waits for its claim %s to be bound to PersistentVolume %s", ord, claimName, pvName), nil
	}
	return dataState{ready: true, volume: pvName, claim: claimName}, nil
}

// annBindCompleted is the annotation with which the PersistentVolume
// controller, and kube-scheduler's volume binding, tell a claim whose
// binding is complete.
const annBindCompleted = "pv.kubernetes.io/bind-completed"

// claimBound reports whether claim is Bound to volume pvName.
func claimBound(claim *corev1.PersistentVolumeClaim, pvName string) bool {
	return claim.Status.Phase == corev1.ClaimBound && claim.Spec.VolumeName == pvName && metav1.HasAnnotation(claim.ObjectMeta, annBindCompleted)
}

// bindable reports whether completeBind may finish the binding of claim to
// pv: the volume was made bound to this claim (its claimRef carries the
// claim's UID, from the start: the claim is made first) and the
// PersistentVolume controller has taken it up (its phase Bound, which that
// controller writes once it has seen the volume and the claim naming each
// other).
func bindable(pv *corev1.PersistentVolume, claim *corev1.PersistentVolumeClaim) bool {
	ref := pv.Spec.ClaimRef
	return ref != nil && ref.UID == claim.UID && ref.Name == claim.Name && ref.Namespace == claim.Namespace &&
		pv.Status.Phase == corev1.VolumeBound && pv.DeletionTimestamp == nil && claim.DeletionTimestamp == nil
}

// completeBind does for a member's claim what the PersistentVolume
// controller would do last: it marks the claim's binding complete and its
// phase Bound, with the volume's access modes and capacity. That controller
// binds claims one at a time with several writes each (at 1,000 x 3 members
// it was the members' bottleneck, 4.6-6 claims a second); here it is done
// by the Flock's own sync, in parallel across Flocks.
//
// Only once bindable: that controller marks a claim Lost when it finds the
// binding complete but does not hold the volume, or holds it bound to
// another claim UID (syncBoundClaim). The volume's phase Bound is written by
// that controller from its own cache, after it saw the volume with this
// claim's UID (which the volume carried from its creation), so it holds the
// volume as this claim's. Afterwards it finds the binding complete and
// writes nothing.
//
// One write: the claim's status subresource keeps changes to its metadata
// (kube-apiserver's status strategy for claims resets only the spec), so
// the annotation goes with the phase. Should a server drop it there, the
// annotation follows in an update of its own.
// It returns the claim as written.
func (d *dataSyncer) completeBind(ctx context.Context, claim *corev1.PersistentVolumeClaim, pv *corev1.PersistentVolume) (*corev1.PersistentVolumeClaim, error) {
	upd := claim.DeepCopy()
	if upd.Status.Phase != corev1.ClaimBound {
		metav1.SetMetaDataAnnotation(&upd.ObjectMeta, annBindCompleted, "yes")
		upd.Status.Phase = corev1.ClaimBound
		upd.Status.AccessModes = slices.Clone(pv.Spec.AccessModes)
		upd.Status.Capacity = pv.Spec.Capacity.DeepCopy()
		written, err := d.data.UpdateClaimStatus(ctx, upd)
		if err != nil {
			return claim, err
		}
		upd = written.DeepCopy()
	}
	if metav1.HasAnnotation(upd.ObjectMeta, annBindCompleted) {
		return upd, nil
	}
	metav1.SetMetaDataAnnotation(&upd.ObjectMeta, annBindCompleted, "yes")
	written, err := d.data.UpdateClaim(ctx, upd)
	if err != nil {
		return claim, err
	}
	return written, nil
}

// waitingFor returns preparing, the state of a directory being prepared,
// when it says why the member waits (a failed helper, with its retry), and
// otherwise st.
func waitingFor(preparing, st dataState) dataState {
	if preparing.blocked != nil {
		preparing.volume = st.volume
		return preparing
	}
	return st
}

// ensureClaim creates member ord's claim when it is absent (asking for
// volume, for node-local data; an event tells of it when announce is set)
// and checks it otherwise. It returns the claim when it is there and the
// member's (with a ready state: a claim from a template is provisioned when
// the member's pod is scheduled, or at once), and nil with why not.
func (d *dataSyncer) ensureClaim(ctx context.Context, f *v1alpha1.Flock, ord int32, volume string, announce bool) (dataState, *corev1.PersistentVolumeClaim, error) {
	name := ClaimName(f, ord)
	claim, err := d.data.GetClaim(f.Namespace, name)
	if apierrors.IsNotFound(err) {
		created, err := d.data.CreateClaim(ctx, NewMemberClaim(f, ord, volume))
		if err != nil && !apierrors.IsAlreadyExists(err) {
			st := waiting(volume, "", "creating claim %s failed", name)
			if failureToTell(ctx, err, f) {
				d.event(f, corev1.EventTypeWarning, "FailedCreate", "create PersistentVolumeClaim %s for member %d failed: %v", name, ord, err)
				if b := refusal(ord, "claim "+name, err); b != nil {
					// A quota on claims or storage, or a policy.
					st.blocked = b
				}
			}
			return st, nil, fmt.Errorf("creating claim %s/%s: %w", f.Namespace, name, err)
		}
		if err == nil {
			klog.FromContext(ctx).V(2).Info("Created member claim", "claim", klog.KRef(f.Namespace, name), "volume", volume)
			if announce {
				d.event(f, corev1.EventTypeNormal, "ClaimCreated", "created PersistentVolumeClaim %s for member %d", name, ord)
			}
			claim = created // the cache may not have it yet
		} else if claim, err = d.data.GetClaim(f.Namespace, name); err != nil {
			return waiting(volume, name, "member %d: claim %s exists", ord, name), nil, nil
		}
	} else if err != nil {
		return dataState{}, nil, err
	}
	if why := claimConflict(f, ord, claim); why != "" {
		return conflicting(ord, why), nil, nil
	}
	if claim.DeletionTimestamp != nil {
		return waiting(volume, name, "member %d waits for its old claim %s to be deleted", ord, name), nil, nil
	}
	return dataState{ready: true, volume: claim.Spec.VolumeName, claim: name}, claim, nil
}

// volumeOnNode reports whether pv's node affinity names hostname.
func volumeOnNode(pv *corev1.PersistentVolume, hostname string) bool {
	na := pv.Spec.NodeAffinity
	if na == nil || na.Required == nil {
		return false
	}
	for _, term := range na.Required.NodeSelectorTerms {
		for _, r := range term.MatchExpressions {
			if r.Key == hostnameLabel && r.Operator == corev1.NodeSelectorOpIn && slices.Contains(r.Values, hostname) {
				return true
			}
		}
	}
	return false
}

// replaceVolume deletes member m's claim and its PersistentVolume (why says
// why), so that fresh ones are made: after a reassignment off a lost node,
// or when the directory was removed. An old directory on a lost node stays
// there.
func (d *dataSyncer) replaceVolume(ctx context.Context, f *v1alpha1.Flock, m v1alpha1.FlockMember, pv *corev1.PersistentVolume, why string) (dataState, error) {
	claimName := ClaimName(f, m.Ordinal)
	claim, err := d.data.GetClaim(f.Namespace, claimName)
	if err == nil && claimConflict(f, m.Ordinal, claim) == "" && claim.DeletionTimestamp == nil {
		if err := d.data.DeleteClaim(ctx, claim); err != nil {
			return dataState{}, fmt.Errorf("deleting claim %s/%s: %w", f.Namespace, claimName, err)
		}
	} else if err != nil && !apierrors.IsNotFound(err) {
		return dataState{}, err
	}
	if err := d.data.DeleteVolume(ctx, pv); err != nil {
		return dataState{}, fmt.Errorf("deleting PersistentVolume %s: %w", pv.Name, err)
	}
	d.event(f, corev1.EventTypeNormal, "VolumeReplaced",
		"member %d: %s, so its PersistentVolume %s and claim %s are deleted and made again on node %s", m.Ordinal, why, pv.Name, claimName, m.Node)
	return waiting("", "", "member %d: %s; its volume is made again on node %s", m.Ordinal, why, m.Node), nil
}

// prepare runs the helper that gives member m's directory its owner and
// mode, and marks the volume prepared once it succeeded.
func (d *dataSyncer) prepare(ctx context.Context, f *v1alpha1.Flock, m v1alpha1.FlockMember, pv *corev1.PersistentVolume, now time.Time) (dataState, error) {
	ord := m.Ordinal
	claimName := ClaimName(f, ord)
	dir := MemberDataDir(d.dataRoot, f)
	if st, ok := d.awaitNodeAgent(ctx, f, m, pv, now); ok {
		return st, nil
	}
	done, st, err := d.runHelper(ctx, f, m, HelperPrepare, now)
	if !done {
		st.volume, st.claim = pv.Name, claimName
		if st.blocked == nil {
			st.blocked = preparingBlockage(d.dataRoot, f, m)
		}
		return st, err
	}
	if err := d.data.AnnotateVolume(ctx, pv, AnnotationPrepared, "true"); err != nil {
		return waiting(pv.Name, claimName, "recording that %s is prepared failed", dir), fmt.Errorf("marking PersistentVolume %s prepared: %w", pv.Name, err)
	}
	d.prepared.mark(pv.UID, now)
	uid, gid := dataOwner(f)
	d.event(f, corev1.EventTypeNormal, "DataPrepared", "prepared data directory %s of member %d on node %s (owner %d:%d, mode %o)",
		dir, ord, m.Node, uid, gid, storageMode(f))
	// The volume is marked first: a volume without the mark counts as
	// never used (neverUsed), so no member pod may mount it before. The
	// finished helper can go after the pod is created.
	return dataState{ready: true, volume: pv.Name, claim: claimName, after: func(ctx context.Context) error {
		return d.deleteHelpers(ctx, f, ord, HelperPrepare, false)
	}}, nil
}

// awaitNodeAgent reports whether member m's directory is left to the node
// agent of its node (pkg/nodeagent) for now, and the state to report then:
// pv asks that agent, a Ready agent pod runs on the node, no prepare helper
// was started for the member, and pv is still Pending or got its first
// phase less than agentGrace ago (agentGraceStart). The member then waits
// as for a helper; the agent's mark on the volume brings the next sync,
// and the end of the grace one more, after which a helper pod does the
// work (with a warning event, once: the helper exists from then on).
func (d *dataSyncer) awaitNodeAgent(ctx context.Context, f *v1alpha1.Flock, m v1alpha1.FlockMember, pv *corev1.PersistentVolume, now time.Time) (dataState, bool) {
	if d.agentGrace <= 0 || !nodeagent.HasRequest(pv, m.Node) {
		return dataState{}, false
	}
	if _, err := d.pods.GetPod(d.helperNamespace, HelperPodName(HelperPrepare, f.UID, m.Ordinal)); !apierrors.IsNotFound(err) {
		return dataState{}, false
	}
	agents, err := d.pods.ListNodeAgentPods(d.helperNamespace, m.Node)
	i := slices.IndexFunc(agents, isRunningAndReady)
	if err != nil || i < 0 {
		return dataState{}, false
	}
	start, ok := agentGraceStart(pv, now)
	if !ok {
		// The agent marks a volume once it has its first phase, and the
		// member waits for that phase in any case (bindable): no timer,
		// the phase's update brings the next sync.
		return dataState{volume: pv.Name, claim: ClaimName(f, m.Ordinal), blocked: &blockage{ReasonDataPreparing, fmt.Sprintf(
			"%s; the node agent on node %s prepares its data directory %s",
			awaitingVolumePhase(m.Ordinal, pv.Name), m.Node, MemberDataDir(d.dataRoot, f))}}, true
	}
	left := start.Add(d.agentGrace).Sub(now)
	if left <= 0 {
		d.event(f, corev1.EventTypeWarning, "NodeAgentSlow", "node agent %s/%s on node %s did not prepare data directory %s of member %d within %s; a helper pod prepares it",
			agents[i].Namespace, agents[i].Name, m.Node, MemberDataDir(d.dataRoot, f), m.Ordinal, d.agentGrace)
		return dataState{}, false
	}
	klog.FromContext(ctx).V(4).Info("Member data directory left to the node agent", "persistentVolume", pv.Name, "agent", klog.KObj(agents[i]), "grace", left)
	return dataState{volume: pv.Name, claim: ClaimName(f, m.Ordinal), requeue: left, blocked: preparingBlockage(d.dataRoot, f, m)}, true
}

// awaitingVolumePhase says that member ord waits for the PersistentVolume
// controller to give its volume pvName a phase.
func awaitingVolumePhase(ord int32, pvName string) string {
	return fmt.Sprintf("member %d waits for the PersistentVolume controller to take up volume %s", ord, pvName)
}

// agentGraceStart returns when the node agent's grace for pv's directory
// began, and false while the volume has no phase other than Pending. The
// agent marks a volume only once kube-controller-manager's PersistentVolume
// controller has given it its first phase (a mark in between would make
// that controller's phase write fail with a conflict, and the volume wait
// for its next try; pkg/nodeagent), so the grace counts from that phase:
// its last transition, or, without one, the volume's creation (a volume
// not yet written has neither: it is new).
func agentGraceStart(pv *corev1.PersistentVolume, now time.Time) (time.Time, bool) {
	switch pv.Status.Phase {
	case "", corev1.VolumePending:
		return time.Time{}, false
	}
	if t := pv.Status.LastPhaseTransitionTime; t != nil && !t.IsZero() {
		return t.Time, true
	}
	if !pv.CreationTimestamp.IsZero() {
		return pv.CreationTimestamp.Time, true
	}
	return now, true
}

// preparingBlockage is why member m waits while its data directory is
// prepared.
func preparingBlockage(dataRoot string, f *v1alpha1.Flock, m v1alpha1.FlockMember) *blockage {
	return &blockage{ReasonDataPreparing, fmt.Sprintf("member %d waits for its data directory %s on node %s to be prepared",
		m.Ordinal, MemberDataDir(dataRoot, f), m.Node)}
}

// isPrepared reports whether pv's directory is prepared: its annotation
// says so, or this controller wrote that annotation and its cache does not
// show it yet. Without the second, a sync between the helper's deletion and
// the volume's update reaching the cache would run the helper again.
func (d *dataSyncer) isPrepared(pv *corev1.PersistentVolume) bool {
	if pv.Annotations[AnnotationPrepared] == "true" {
		d.prepared.forget(pv.UID)
		return true
	}
	return d.prepared.marked(pv.UID)
}

// preparedMarks are the volumes this controller marked prepared whose
// annotation its cache may not show yet, by UID, with when they were
// marked. A mark older than preparedMarkTTL is dropped (the cache has long
// caught up, or the volume is gone).
type preparedMarks struct {
	mu    sync.Mutex
	marks map[types.UID]time.Time
}

// preparedMarkTTL bounds how long a mark is kept.
const preparedMarkTTL = 10 * time.Minute

func (p *preparedMarks) mark(uid types.UID, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.marks == nil {
		p.marks = map[types.UID]time.Time{}
	}
	for u, at := range p.marks {
		if now.Sub(at) > preparedMarkTTL {
			delete(p.marks, u)
		}
	}
	p.marks[uid] = now
}

func (p *preparedMarks) marked(uid types.UID) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, ok := p.marks[uid]
	return ok
}

func (p *preparedMarks) forget(uid types.UID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.marks, uid)
}
