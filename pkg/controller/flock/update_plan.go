// File update_plan.go: the update plan of a sync (which revision new pods get, the rolling
// front, the partition and budget), the rollout summary and halted
// rollouts. Pure.

package flock

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	"flock.dev/flock/pkg/apis/flock/v1alpha1"
)

// updatePlan is what one sync knows about a Flock's revisions: which
// revision new pods get, and how a rolling update proceeds.
type updatePlan struct {
	// Strategy is spec.updateStrategy.type (RollingUpdate when empty).
	Strategy v1alpha1.FlockUpdateStrategyType
	// Partition is the lowest ordinal a rolling update replaces, within
	// [0, replicas].
	Partition int32
	// MaxUnavailable is how many members may be unavailable while pods
	// are replaced (at least 1).
	MaxUnavailable int
	// Update is the revision of the Flock's template; Current the revision
	// of members not yet updated (status.currentRevision, or Update).
	Update, Current string
	// CurrentTemplate is Current's template when it differs from Update
	// and its ControllerRevision could be read; nil otherwise, and then
	// every pod is created from the Flock's template.
	CurrentTemplate *corev1.PodTemplateSpec
	// Front is the rolling update's front: members at ordinals >= Front are
	// created at Update, those below it (whose turn has not come) at
	// Current. See rollingFront.
	Front int32
}

// newUpdatePlan returns the update plan of Flock f, whose pods by ordinal
// are pods.
func newUpdatePlan(f *v1alpha1.Flock, pods map[int32]*corev1.Pod, update, current string, currentTemplate *corev1.PodTemplateSpec) updatePlan {
	replicas := replicasOf(f)
	p := updatePlan{
		Strategy:       f.Spec.UpdateStrategy.Type,
		Partition:      partitionOf(f),
		MaxUnavailable: maxUnavailableOf(f),
		Update:         update,
		Current:        current,
	}
	if p.Strategy == "" {
		p.Strategy = v1alpha1.RollingUpdateFlockStrategyType
	}
	if current == "" {
		p.Current = update
	}
	if p.Current != update {
		p.CurrentTemplate = currentTemplate
	}
	p.Front = rollingFront(pods, replicas, p.Partition, update)
	return p
}

// templateFor returns the template and revision of a new pod for member
// ordinal. OnDelete and members at or above the rolling front get the
// Flock's template; a member below the front (a pod deleted while a
// rolling update has not reached it, or below the partition) comes back at
// the current revision, so a template that is still being rolled out (and
// may be broken) reaches members only in rollout order.
func (p updatePlan) templateFor(f *v1alpha1.Flock, ordinal int32) (*corev1.PodTemplateSpec, string) {
	if p.Strategy == v1alpha1.RollingUpdateFlockStrategyType && ordinal < p.Front && p.CurrentTemplate != nil {
		return p.CurrentTemplate, p.Current
	}
	return &f.Spec.Template, p.Update
}

// rollingFront returns the lowest ordinal o >= partition such that every
// member from o up to replicas-1 has no pod, a terminating one, or one at
// the update revision: the members a rolling update has reached (or would
// reach next, if their pods were there). It is replicas when the top member
// still runs an earlier revision.
func rollingFront(pods map[int32]*corev1.Pod, replicas, partition int32, update string) int32 {
	front := replicas
	for o := replicas - 1; o >= partition; o-- {
		pod := pods[o]
		if pod != nil && !isTerminating(pod) && podRevision(pod) != update {
			break
		}
		front = o
	}
	return front
}

// haltedPod returns the pod a rolling update of Flock f is halted on: the
// highest member at or above the partition whose pod runs the update
// revision and is not Ready, and either shows a failure (a container
// crash-looping or failing to start, or the pod Failed) or has not become
// Ready within haltAfter of its creation. why says which. When no pod is
// halted yet, recheck is how long until one would be (0: none pending). A
// Flock without a rollout in progress (currentRevision == update) or with
// OnDelete has no halted pod.
func haltedPod(f *v1alpha1.Flock, pods map[int32]*corev1.Pod, update, current string, haltAfter time.Duration, now time.Time) (pod *corev1.Pod, why string, recheck time.Duration) {
	if f.Spec.UpdateStrategy.Type == v1alpha1.OnDeleteFlockStrategyType || current == "" || current == update {
		return nil, "", 0
	}
	for ord := replicasOf(f) - 1; ord >= partitionOf(f); ord-- {
		p := pods[ord]
		if p == nil || isTerminating(p) || podRevision(p) != update || isRunningAndReady(p) {
			continue
		}
		if why := podFailure(p); why != "" {
			return p, why, 0
		}
		age := now.Sub(p.CreationTimestamp.Time)
		if age >= haltAfter {
			why := fmt.Sprintf("it has not become Ready within %s of its creation", haltAfter)
			if c := podReadyCondition(p); c != nil && (c.Message != "" || c.Reason != "") {
				detail := c.Message
				if detail == "" {
					detail = c.Reason
				}
				why += " (" + detail + ")"
			}
			return p, why, 0
		}
		if d := haltAfter - age; recheck == 0 || d < recheck {
			recheck = d
		}
	}
	return nil, "", recheck
}

// rollout describes a template update for the Progressing condition.
type rollout struct {
	// active: a rolling update has members at or above the partition left
	// to update or to become available.
	active bool
	// message says how far it is, or, when not active, which members stay
	// at an earlier revision (below the partition, or OnDelete); "" when
	// every member runs the update revision.
	message string
}

// rolloutSummary describes the update of Flock f from revision current to
// update, given its pods by ordinal.
func rolloutSummary(f *v1alpha1.Flock, pods map[int32]*corev1.Pod, update, current string, minReady int32, now time.Time) rollout {
	if current == update {
		return rollout{}
	}
	replicas := replicasOf(f)
	var outdated []int32
	for ord := range replicas {
		if pod := pods[ord]; pod != nil && podRevision(pod) != update {
			outdated = append(outdated, ord)
		}
	}
	if f.Spec.UpdateStrategy.Type == v1alpha1.OnDeleteFlockStrategyType {
		if len(outdated) == 0 {
			return rollout{}
		}
		return rollout{message: fmt.Sprintf("members %v run an earlier revision than %s and are updated when their pods are deleted (updateStrategy OnDelete)", outdated, update)}
	}
	partition := partitionOf(f)
	var done, todo int32
	for ord := partition; ord < replicas; ord++ {
		todo++
		if pod := pods[ord]; pod != nil && podRevision(pod) == update && isAvailable(pod, minReady, now) {
			done++
		}
	}
	if done < todo {
		msg := fmt.Sprintf("rolling update to revision %s: %d of %d members updated", update, done, todo)
		if partition > 0 {
			msg += fmt.Sprintf(" (partition %d)", partition)
		}
		return rollout{active: true, message: msg}
	}
	if len(outdated) > 0 {
		return rollout{message: fmt.Sprintf("members %v below partition %d stay at revision %s", outdated, partition, current)}
	}
	return rollout{}
}
