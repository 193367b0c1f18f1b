package flock

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// Flock is a set of stateful members in which member i always runs on node i.
// Each member is a pod named <flock>-<ordinal> with a stable DNS name (A and
// PTR records through a headless Service) and a data directory on its node.
// The API server refuses a Flock whose replicas exceed the eligible nodes.
type Flock struct {
	metav1.TypeMeta
	// Standard object metadata. The name is the prefix of every member's pod
	// name and DNS name, so it must be a DNS-1123 label of at most 58 characters.
	metav1.ObjectMeta

	// Spec is the desired state of the Flock: how many members, where they may
	// run, the pod template, and how members are updated and recovered.
	//
	// A pointer in this internal type only (v1alpha1 holds it inline), so
	// that the versions of a Flock the watch cache keeps share one spec
	// while only the status changes (pkg/registry/flock, shareUnchanged): held
	// inline it was three quarters of each version's own memory (issue 17).
	// Never nil in an object decoded or converted; code that builds one
	// sets it.
	Spec *FlockSpec

	// Status is the observed state of the Flock, written by the Flock controller.
	// status.members is the durable map from ordinal to node.
	Status FlockStatus
}

// PodManagementPolicyType says how the members of a Flock are created and removed.
type PodManagementPolicyType string

const (
	// OrderedReadyPodManagement creates members 0..n-1 one at a time, each
	// Running and Ready before the next, and removes them from the highest
	// ordinal down, one at a time.
	OrderedReadyPodManagement PodManagementPolicyType = "OrderedReady"
	// ParallelPodManagement creates and removes all members at once.
	ParallelPodManagement PodManagementPolicyType = "Parallel"
)

// FlockUpdateStrategyType is how template changes reach existing members.
type FlockUpdateStrategyType string

const (
	// RollingUpdateFlockStrategyType replaces members from the highest ordinal
	// down to the partition, each on its own node.
	RollingUpdateFlockStrategyType FlockUpdateStrategyType = "RollingUpdate"
	// OnDeleteFlockStrategyType replaces a member only when its pod is deleted.
	OnDeleteFlockStrategyType FlockUpdateStrategyType = "OnDelete"
)

// RetentionPolicyType says what happens to a member's data directory.
type RetentionPolicyType string

const (
	// RetainRetentionPolicy keeps the member's PersistentVolume, claim and
	// data directory, so a member that comes back finds its data.
	RetainRetentionPolicy RetentionPolicyType = "Retain"
	// DeleteRetentionPolicy removes the member's data directory (with a short
	// helper pod in the server's namespace) and then its claim and
	// PersistentVolume.
	DeleteRetentionPolicy RetentionPolicyType = "Delete"
)

// MemberRecoveryPolicyType says what happens to a member whose node is lost.
type MemberRecoveryPolicyType string

const (
	// WaitMemberRecovery keeps the member on its node until the node returns.
	WaitMemberRecovery MemberRecoveryPolicyType = "Wait"
	// ReassignMemberRecovery moves the member to another eligible node, with a
	// fresh data directory, once its node has been NotReady or gone for
	// afterSeconds.
	ReassignMemberRecovery MemberRecoveryPolicyType = "Reassign"
)

// DisruptionBudgetPolicyType says whether a Flock has a PodDisruptionBudget.
type DisruptionBudgetPolicyType string

const (
	// ManagedDisruptionBudget gives the Flock a PodDisruptionBudget it owns.
	ManagedDisruptionBudget DisruptionBudgetPolicyType = "Managed"
	// NoDisruptionBudget gives the Flock none.
	NoDisruptionBudget DisruptionBudgetPolicyType = "None"
)

// FlockSpec is the desired state of a Flock.
type FlockSpec struct {
	// Replicas is the number of members. It may not exceed the number of
	// eligible nodes (see placement); the API server refuses a Flock that the
	// cluster cannot hold. Defaults to 1.
	Replicas *int32

	// Selector is a label query over pods that must match the template's
	// labels. It selects the pods that belong to this Flock. Immutable.
	Selector *metav1.LabelSelector

	// ServiceName is the name of the headless Service that gives each member
	// its DNS name <pod>.<serviceName>.<namespace>.svc. The controller creates
	// the Service when it is absent. Defaults to the Flock's name. Immutable.
	ServiceName string

	// Placement chooses the nodes members may run on.
	Placement FlockPlacement

	// Storage describes the data directory each member gets on its node.
	Storage FlockStorage

	// PodManagementPolicy says how members are created and removed:
	// OrderedReady (the default) or Parallel. Immutable.
	PodManagementPolicy PodManagementPolicyType

	// UpdateStrategy says how a template change reaches existing members.
	// Defaults to RollingUpdate with partition 0 and maxUnavailable 1.
	UpdateStrategy FlockUpdateStrategy

	// MinReadySeconds is how long a member's pod must be Ready, with no
	// container crashing, before it counts as available. Defaults to 0.
	MinReadySeconds int32

	// MemberRecovery says what happens to a member whose node is NotReady or
	// deleted. Defaults to Wait.
	MemberRecovery MemberRecovery

	// DisruptionBudget says how many members voluntary disruptions may take
	// down at once, through a PodDisruptionBudget the Flock owns. Defaults to
	// policy Managed with maxUnavailable 1.
	DisruptionBudget FlockDisruptionBudget

	// RevisionHistoryLimit is the number of old template revisions kept.
	// Defaults to 10.
	RevisionHistoryLimit *int32

	// Template is the pod template of every member. The controller adds the
	// member's name, hostname, subdomain, labels, a required node affinity to
	// the member's node and the managed data volume. It may not use the host's
	// network, PID or IPC namespaces, or hostPath volumes.
	Template corev1.PodTemplateSpec
}

// FlockPlacement chooses the nodes members may run on.
type FlockPlacement struct {
	// NodeSelector restricts the eligible pool to nodes with these labels.
	// Empty means every node. A node is eligible when it matches, is not
	// cordoned, and the template tolerates all its NoSchedule and NoExecute
	// taints.
	NodeSelector map[string]string

	// Nodes is an optional explicit map from ordinal to node: member i runs on
	// nodes[i]. The first `replicas` entries must be distinct, existing and
	// eligible nodes.
	Nodes []string
}

// FlockStorage describes the data each member keeps: by default a directory
// on the member's node, delivered as a hostPath PersistentVolume pre-bound to
// a PersistentVolumeClaim; with ClaimTemplate, a claim from a StorageClass.
type FlockStorage struct {
	// VolumeName is the name of the volume the controller injects into each
	// member's pod: the member's PersistentVolumeClaim
	// <volumeName>-<flock>-<ordinal>. Containers mount it by this name. The
	// template may not define a volume of this name. Defaults to "data".
	// Immutable.
	VolumeName string

	// The Go field is Capacity, not Size: a field named Size would clash with
	// the Size method of the generated protobuf code.

	// Size is the capacity of each member's node-local PersistentVolume, a
	// quantity such as 10Gi. A hostPath directory is not limited to it; it is
	// what the PersistentVolume and claim report. Defaults to 1Gi when
	// claimTemplate is not set; not allowed with claimTemplate. Immutable.
	Capacity string

	// Mode is the permission bits of a member's node-local data directory,
	// from 0 to 0777 (0770 by default). The directory is owned by the
	// template's runAsUser and fsGroup (root when unset). Not allowed with
	// claimTemplate.
	Mode *int32

	// ClaimTemplate, when set, gives each member a PersistentVolumeClaim made
	// from it (as a StatefulSet's volumeClaimTemplates do) instead of a
	// directory on its node: the claim's StorageClass provisions the volume,
	// and a member follows its volume to whatever node that volume can be
	// used on. Mutually exclusive with size and mode. Immutable.
	ClaimTemplate *corev1.PersistentVolumeClaimTemplate

	// Retention says what happens to a member's data (its PersistentVolume,
	// claim and directory) when the Flock is deleted or scaled down.
	Retention RetentionPolicy
}

// RetentionPolicy says what happens to members' data directories.
type RetentionPolicy struct {
	// WhenDeleted applies when the Flock is deleted: Retain (the default) or
	// Delete.
	WhenDeleted RetentionPolicyType

	// WhenScaled applies to members removed by a scale down: Retain (the
	// default) or Delete.
	WhenScaled RetentionPolicyType
}

// FlockUpdateStrategy says how a template change reaches existing members.
type FlockUpdateStrategy struct {
	// Type is RollingUpdate (the default) or OnDelete.
	Type FlockUpdateStrategyType

	// RollingUpdate tunes the RollingUpdate strategy. Only valid with type
	// RollingUpdate.
	RollingUpdate *RollingUpdateFlockStrategy
}

// RollingUpdateFlockStrategy tunes a rolling update.
type RollingUpdateFlockStrategy struct {
	// Partition is the lowest ordinal that is updated: members with a lower
	// ordinal keep the old template. Defaults to 0; a partition at or above
	// replicas updates no member.
	Partition *int32

	// MaxUnavailable is how many members may be unavailable during the update,
	// as a number (at least 1) or a percentage of replicas. Defaults to 1.
	MaxUnavailable *intstr.IntOrString
}

// FlockDisruptionBudget configures the Flock's PodDisruptionBudget.
type FlockDisruptionBudget struct {
	// Policy is Managed (the default) or None.
	Policy DisruptionBudgetPolicyType

	// MaxUnavailable is the budget's maxUnavailable, a number (at least 1) or
	// a percentage of replicas. Defaults to 1 with Managed; not allowed with
	// None.
	MaxUnavailable *intstr.IntOrString
}

// MemberRecovery says what happens to a member whose node is lost.
type MemberRecovery struct {
	// Policy is Wait (the default: the member stays on its node until the node
	// returns) or Reassign (the member moves to another eligible node with a
	// fresh data directory after afterSeconds).
	Policy MemberRecoveryPolicyType

	// AfterSeconds is how long a node must be NotReady or gone before its
	// member is reassigned. Required and positive with policy Reassign; not
	// allowed with Wait.
	AfterSeconds *int32
}

// FlockStatus is the observed state of a Flock.
type FlockStatus struct {
	// ObservedGeneration is the most recent generation the controller acted on.
	ObservedGeneration int64

	// Replicas is the number of member pods that exist.
	Replicas int32

	// ReadyReplicas is the number of member pods that are Ready.
	ReadyReplicas int32

	// AvailableReplicas is the number of member pods Ready for at least
	// minReadySeconds.
	AvailableReplicas int32

	// CurrentReplicas is the number of member pods at currentRevision.
	CurrentReplicas int32

	// UpdatedReplicas is the number of member pods at updateRevision.
	UpdatedReplicas int32

	// CurrentRevision is the template revision of members not yet updated.
	CurrentRevision string

	// UpdateRevision is the revision of the current template.
	UpdateRevision string

	// Selector is spec.selector in label-query form, for the scale subresource
	// and the HorizontalPodAutoscaler.
	Selector string

	// Members is the durable map from ordinal to node. A member's node is
	// recorded here before its pod is created and never changes silently.
	Members []FlockMember

	// Conditions are the latest observations of the Flock's state: Available,
	// Progressing, and MembersBlocked when a member cannot run.
	Conditions []metav1.Condition
}

// FlockMember is one member of a Flock and the node it is assigned to.
type FlockMember struct {
	// Ordinal is the member's index, from 0 to replicas-1.
	Ordinal int32

	// Node is the name of the node this member is assigned to.
	Node string

	// Pod is the name of the member's pod, <flock>-<ordinal>.
	Pod string

	// Hostname is the member's fully qualified DNS name,
	// <pod>.<service>.<namespace>.svc.<cluster-domain>.
	Hostname string

	// Ready is true when the member's pod is Ready.
	Ready bool

	// Revision is the template revision of the member's pod.
	Revision string

	// PersistentVolume is the name of the PersistentVolume holding the
	// member's data: flock-<flock UID>-<ordinal> for node-local data, the
	// provisioned volume with a claim template (once it is bound).
	PersistentVolume string

	// Claim is the name of the member's PersistentVolumeClaim,
	// <volumeName>-<flock>-<ordinal>.
	Claim string

	// Message says why the member is not running, when it is not.
	Message string

	// NodeLostSince is when the member's node became NotReady or was first
	// found gone, while it is.
	NodeLostSince *metav1.Time

	// Move is a planned move of this member that the flocks/move
	// subresource accepted and the controller has not carried out yet.
	Move *FlockMemberMove
}

// FlockMemberMove is a planned move of a member, as accepted by the
// flocks/move subresource.
type FlockMemberMove struct {
	// Node is the node the member moves to.
	Node string

	// Force: the move does not wait for the other members to be available.
	Force bool

	// RequestedAt is when the move was accepted.
	RequestedAt metav1.Time
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// FlockMove asks to move one member of a Flock to another node on purpose:
// the body of a POST to the Flock's move subresource.
type FlockMove struct {
	metav1.TypeMeta
	// Standard object metadata. A name, when given, must be the Flock's.
	metav1.ObjectMeta

	// Ordinal is the member to move, from 0 to replicas-1.
	Ordinal int32

	// Node is the node to move the member to: existing, eligible for the
	// Flock and holding no other member of it.
	Node string

	// Force moves the member even while another member is unavailable.
	Force bool
}

// Condition types of a Flock.
const (
	// FlockAvailable is True when at least replicas members are available.
	FlockAvailable = "Available"
	// FlockProgressing is True while the controller creates, removes or
	// updates members.
	FlockProgressing = "Progressing"
	// FlockMembersBlocked is True when a member cannot run, for instance
	// because its node is cordoned, NotReady or gone.
	FlockMembersBlocked = "MembersBlocked"
	// FlockServiceReady is False when the headless Service cannot be used,
	// for instance because a Service of that name exists and is not the
	// Flock's.
	FlockServiceReady = "ServiceReady"
)

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// FlockList is a list of Flocks.
type FlockList struct {
	metav1.TypeMeta
	// Standard list metadata.
	metav1.ListMeta

	// Items is the list of Flocks.
	Items []Flock
}
