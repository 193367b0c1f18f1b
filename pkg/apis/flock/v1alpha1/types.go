package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// +genclient
// +genclient:method=GetScale,verb=get,subresource=scale,result=k8s.io/api/autoscaling/v1.Scale
// +genclient:method=UpdateScale,verb=update,subresource=scale,input=k8s.io/api/autoscaling/v1.Scale,result=k8s.io/api/autoscaling/v1.Scale
// +genclient:method=Move,verb=create,subresource=move,input=FlockMove,result=Flock
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// Flock is a set of stateful members in which member i always runs on node i.
// Each member is a pod named <flock>-<ordinal> with a stable DNS name (A and
// PTR records through a headless Service) and a data directory on its node.
// The API server refuses a Flock whose replicas exceed the eligible nodes.
type Flock struct {
	metav1.TypeMeta `json:",inline"`
	// Standard object metadata. The name is the prefix of every member's pod
	// name and DNS name, so it must be a DNS-1123 label of at most 58 characters.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty" protobuf:"bytes,1,opt,name=metadata"`

	// Spec is the desired state of the Flock: how many members, where they may
	// run, the pod template, and how members are updated and recovered.
	// +optional
	Spec FlockSpec `json:"spec,omitempty" protobuf:"bytes,2,opt,name=spec"`

	// Status is the observed state of the Flock, written by the Flock controller.
	// status.members is the durable map from ordinal to node.
	// +optional
	Status FlockStatus `json:"status,omitempty" protobuf:"bytes,3,opt,name=status"`
}

// PodManagementPolicyType says how the members of a Flock are created and removed.
// +enum
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
// +enum
type FlockUpdateStrategyType string

const (
	// RollingUpdateFlockStrategyType replaces members from the highest ordinal
	// down to the partition, each on its own node.
	RollingUpdateFlockStrategyType FlockUpdateStrategyType = "RollingUpdate"
	// OnDeleteFlockStrategyType replaces a member only when its pod is deleted.
	OnDeleteFlockStrategyType FlockUpdateStrategyType = "OnDelete"
)

// RetentionPolicyType says what happens to a member's data directory.
// +enum
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
// +enum
type MemberRecoveryPolicyType string

const (
	// WaitMemberRecovery keeps the member on its node until the node returns.
	WaitMemberRecovery MemberRecoveryPolicyType = "Wait"
	// ReassignMemberRecovery moves the member to another eligible node, with a
	// fresh data directory, once its node has been NotReady or gone for
	// afterSeconds and is known to be down: its Node object is deleted or
	// tainted node.kubernetes.io/out-of-service. A node that is only NotReady
	// may be partitioned and still run the member, so the member waits.
	ReassignMemberRecovery MemberRecoveryPolicyType = "Reassign"
)

// DisruptionBudgetPolicyType says whether a Flock has a PodDisruptionBudget.
// +enum
type DisruptionBudgetPolicyType string

const (
	// ManagedDisruptionBudget gives the Flock a PodDisruptionBudget it owns,
	// named after it, over its member pods, made once the Flock has a member
	// pod (status.replicas above 0) and kept from then on.
	ManagedDisruptionBudget DisruptionBudgetPolicyType = "Managed"
	// NoDisruptionBudget gives the Flock none (and removes the one it owned).
	NoDisruptionBudget DisruptionBudgetPolicyType = "None"
)

// FlockSpec is the desired state of a Flock.
type FlockSpec struct {
	// Replicas is the number of members. It may not exceed the number of
	// eligible nodes (see placement); the API server refuses a Flock that the
	// cluster cannot hold. At most 500: status records every member, and a
	// larger Flock's status (measured, with the longest names and its
	// managedFields) could pass etcd's 1.5 MiB object limit. Defaults to 1.
	// +optional
	Replicas *int32 `json:"replicas,omitempty" protobuf:"varint,1,opt,name=replicas"`

	// Selector is a label query over pods that must match the template's
	// labels. It selects the pods that belong to this Flock. Immutable.
	Selector *metav1.LabelSelector `json:"selector" protobuf:"bytes,2,opt,name=selector"`

	// ServiceName is the name of the headless Service that gives each member
	// its DNS name <pod>.<serviceName>.<namespace>.svc. The controller creates
	// the Service when it is absent. Defaults to the Flock's name. Immutable.
	// +optional
	ServiceName string `json:"serviceName,omitempty" protobuf:"bytes,3,opt,name=serviceName"`

	// Placement chooses the nodes members may run on.
	// +optional
	Placement FlockPlacement `json:"placement,omitempty" protobuf:"bytes,4,opt,name=placement"`

	// Storage describes the data directory each member gets on its node.
	// +optional
	Storage FlockStorage `json:"storage,omitempty" protobuf:"bytes,5,opt,name=storage"`

	// PodManagementPolicy says how members are created and removed:
	// OrderedReady (the default) or Parallel. Immutable.
	// +optional
	PodManagementPolicy PodManagementPolicyType `json:"podManagementPolicy,omitempty" protobuf:"bytes,6,opt,name=podManagementPolicy,casttype=PodManagementPolicyType"`

	// UpdateStrategy says how a template change reaches existing members.
	// Defaults to RollingUpdate with partition 0 and maxUnavailable 1.
	// +optional
	UpdateStrategy FlockUpdateStrategy `json:"updateStrategy,omitempty" protobuf:"bytes,7,opt,name=updateStrategy"`

	// MinReadySeconds is how long a member's pod must be Ready, with no
	// container crashing, before it counts as available. Defaults to 0.
	// +optional
	MinReadySeconds int32 `json:"minReadySeconds,omitempty" protobuf:"varint,8,opt,name=minReadySeconds"`

	// MemberRecovery says what happens to a member whose node is NotReady or
	// deleted. Defaults to Wait.
	// +optional
	MemberRecovery MemberRecovery `json:"memberRecovery,omitempty" protobuf:"bytes,9,opt,name=memberRecovery"`

	// DisruptionBudget says how many members voluntary disruptions (kubectl
	// drain, evictions) may take down at once, through a PodDisruptionBudget
	// the Flock owns. Defaults to policy Managed with maxUnavailable 1.
	// +optional
	DisruptionBudget FlockDisruptionBudget `json:"disruptionBudget,omitempty" protobuf:"bytes,10,opt,name=disruptionBudget"`

	// RevisionHistoryLimit is the number of old template revisions kept.
	// Defaults to 10.
	// +optional
	RevisionHistoryLimit *int32 `json:"revisionHistoryLimit,omitempty" protobuf:"varint,11,opt,name=revisionHistoryLimit"`

	// Template is the pod template of every member. The controller adds the
	// member's name, hostname, subdomain, labels, a required node affinity to
	// the member's node and the managed data volume. It may not use the host's
	// network, PID or IPC namespaces, or hostPath volumes.
	Template corev1.PodTemplateSpec `json:"template" protobuf:"bytes,12,opt,name=template"`
}

// FlockPlacement chooses the nodes members may run on.
type FlockPlacement struct {
	// NodeSelector restricts the eligible pool to nodes with these labels.
	// Empty means every node. A node is eligible when it matches, is not
	// cordoned, and the template tolerates all its NoSchedule and NoExecute
	// taints.
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty" protobuf:"bytes,1,rep,name=nodeSelector"`

	// Nodes is an optional explicit map from ordinal to node: member i runs on
	// nodes[i]. The first `replicas` entries must be distinct, existing and
	// eligible nodes.
	// +optional
	// +listType=atomic
	Nodes []string `json:"nodes,omitempty" protobuf:"bytes,2,rep,name=nodes"`
}

// FlockStorage describes the data each member keeps: by default a directory
// on the member's node, delivered as a hostPath PersistentVolume pre-bound to
// a PersistentVolumeClaim; with claimTemplate, a claim from a StorageClass.
type FlockStorage struct {
	// VolumeName is the name of the volume the controller injects into each
	// member's pod: the member's PersistentVolumeClaim
	// <volumeName>-<flock>-<ordinal>. Containers mount it by this name. The
	// template may not define a volume of this name. Defaults to "data".
	// Immutable.
	// +optional
	VolumeName string `json:"volumeName,omitempty" protobuf:"bytes,1,opt,name=volumeName"`

	// The Go field is Capacity, not Size: a field named Size would clash with
	// the Size method of the generated protobuf code.

	// Size is the capacity of each member's node-local PersistentVolume, a
	// quantity such as 10Gi. A hostPath directory is not limited to it; it is
	// what the PersistentVolume and claim report. Defaults to 1Gi when
	// claimTemplate is not set; not allowed with claimTemplate. Immutable.
	// +optional
	Capacity string `json:"size,omitempty" protobuf:"bytes,2,opt,name=size"`

	// Mode is the permission bits of a member's node-local data directory,
	// from 0 to 0777 (0770 by default; YAML accepts octal, JSON needs
	// decimal). The directory is owned by the template's runAsUser and
	// fsGroup (root when unset). Not allowed with claimTemplate.
	// +optional
	Mode *int32 `json:"mode,omitempty" protobuf:"varint,3,opt,name=mode"`

	// ClaimTemplate, when set, gives each member a PersistentVolumeClaim made
	// from it (as a StatefulSet's volumeClaimTemplates do) instead of a
	// directory on its node: the claim's StorageClass provisions the volume,
	// and a member follows its volume to whatever node that volume can be
	// used on. Mutually exclusive with size and mode. Immutable.
	// +optional
	ClaimTemplate *corev1.PersistentVolumeClaimTemplate `json:"claimTemplate,omitempty" protobuf:"bytes,4,opt,name=claimTemplate"`

	// Retention says what happens to a member's data (its PersistentVolume,
	// claim and directory) when the Flock is deleted or scaled down.
	// +optional
	Retention RetentionPolicy `json:"retention,omitempty" protobuf:"bytes,5,opt,name=retention"`
}

// RetentionPolicy says what happens to members' data directories.
type RetentionPolicy struct {
	// WhenDeleted applies when the Flock is deleted: Retain (the default) or
	// Delete.
	// +optional
	WhenDeleted RetentionPolicyType `json:"whenDeleted,omitempty" protobuf:"bytes,1,opt,name=whenDeleted,casttype=RetentionPolicyType"`

	// WhenScaled applies to members removed by a scale down: Retain (the
	// default) or Delete.
	// +optional
	WhenScaled RetentionPolicyType `json:"whenScaled,omitempty" protobuf:"bytes,2,opt,name=whenScaled,casttype=RetentionPolicyType"`
}

// FlockUpdateStrategy says how a template change reaches existing members.
type FlockUpdateStrategy struct {
	// Type is RollingUpdate (the default) or OnDelete.
	// +optional
	Type FlockUpdateStrategyType `json:"type,omitempty" protobuf:"bytes,1,opt,name=type,casttype=FlockUpdateStrategyType"`

	// RollingUpdate tunes the RollingUpdate strategy. Only valid with type
	// RollingUpdate.
	// +optional
	RollingUpdate *RollingUpdateFlockStrategy `json:"rollingUpdate,omitempty" protobuf:"bytes,2,opt,name=rollingUpdate"`
}

// RollingUpdateFlockStrategy tunes a rolling update.
type RollingUpdateFlockStrategy struct {
	// Partition is the lowest ordinal that is updated: members with a lower
	// ordinal keep the old template. Defaults to 0; a partition at or above
	// replicas updates no member.
	// +optional
	Partition *int32 `json:"partition,omitempty" protobuf:"varint,1,opt,name=partition"`

	// MaxUnavailable is how many members may be unavailable during the update,
	// as a number (at least 1) or a percentage of replicas. Defaults to 1.
	// +optional
	MaxUnavailable *intstr.IntOrString `json:"maxUnavailable,omitempty" protobuf:"bytes,2,opt,name=maxUnavailable"`
}

// FlockDisruptionBudget configures the Flock's PodDisruptionBudget.
type FlockDisruptionBudget struct {
	// Policy is Managed (the default: the Flock owns a PodDisruptionBudget
	// named after it, from its first member pod on) or None (no budget; an
	// owned one is deleted).
	// +optional
	Policy DisruptionBudgetPolicyType `json:"policy,omitempty" protobuf:"bytes,1,opt,name=policy,casttype=DisruptionBudgetPolicyType"`

	// MaxUnavailable is the budget's maxUnavailable: how many members an
	// eviction may leave unavailable, as a number (at least 1) or a
	// percentage of replicas. Defaults to 1 with policy Managed; not allowed
	// with None.
	// +optional
	MaxUnavailable *intstr.IntOrString `json:"maxUnavailable,omitempty" protobuf:"bytes,2,opt,name=maxUnavailable"`
}

// MemberRecovery says what happens to a member whose node is lost.
type MemberRecovery struct {
	// Policy is Wait (the default: the member stays on its node until the node
	// returns) or Reassign (the member moves to another eligible node with a
	// fresh data directory after afterSeconds, once its node is deleted or
	// tainted node.kubernetes.io/out-of-service; a node that is only NotReady
	// may still run the member, so it waits).
	// +optional
	Policy MemberRecoveryPolicyType `json:"policy,omitempty" protobuf:"bytes,1,opt,name=policy,casttype=MemberRecoveryPolicyType"`

	// AfterSeconds is how long a node must be NotReady or gone before its
	// member is reassigned. Required and positive with policy Reassign; not
	// allowed with Wait.
	// +optional
	AfterSeconds *int32 `json:"afterSeconds,omitempty" protobuf:"varint,2,opt,name=afterSeconds"`
}

// FlockStatus is the observed state of a Flock.
type FlockStatus struct {
	// ObservedGeneration is the most recent generation the controller acted on.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty" protobuf:"varint,1,opt,name=observedGeneration"`

	// Replicas is the number of member pods that exist.
	// +optional
	Replicas int32 `json:"replicas" protobuf:"varint,2,opt,name=replicas"`

	// ReadyReplicas is the number of member pods that are Ready.
	// +optional
	ReadyReplicas int32 `json:"readyReplicas,omitempty" protobuf:"varint,3,opt,name=readyReplicas"`

	// AvailableReplicas is the number of member pods Ready for at least
	// minReadySeconds.
	// +optional
	AvailableReplicas int32 `json:"availableReplicas,omitempty" protobuf:"varint,4,opt,name=availableReplicas"`

	// CurrentReplicas is the number of member pods at currentRevision.
	// +optional
	CurrentReplicas int32 `json:"currentReplicas,omitempty" protobuf:"varint,5,opt,name=currentReplicas"`

	// UpdatedReplicas is the number of member pods at updateRevision.
	// +optional
	UpdatedReplicas int32 `json:"updatedReplicas,omitempty" protobuf:"varint,6,opt,name=updatedReplicas"`

	// CurrentRevision is the template revision of members not yet updated.
	// +optional
	CurrentRevision string `json:"currentRevision,omitempty" protobuf:"bytes,7,opt,name=currentRevision"`

	// UpdateRevision is the revision of the current template.
	// +optional
	UpdateRevision string `json:"updateRevision,omitempty" protobuf:"bytes,8,opt,name=updateRevision"`

	// Selector is spec.selector in label-query form, for the scale subresource
	// and the HorizontalPodAutoscaler.
	// +optional
	Selector string `json:"selector,omitempty" protobuf:"bytes,9,opt,name=selector"`

	// Members is the durable map from ordinal to node. A member's node is
	// recorded here before its pod is created and never changes silently.
	// +optional
	// +listType=map
	// +listMapKey=ordinal
	// +patchMergeKey=ordinal
	// +patchStrategy=merge
	Members []FlockMember `json:"members,omitempty" patchStrategy:"merge" patchMergeKey:"ordinal" protobuf:"bytes,10,rep,name=members"`

	// Conditions are the latest observations of the Flock's state: Available,
	// Progressing, and MembersBlocked when a member cannot run.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +patchMergeKey=type
	// +patchStrategy=merge
	Conditions []metav1.Condition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type" protobuf:"bytes,11,rep,name=conditions"`
}

// FlockMember is one member of a Flock and the node it is assigned to.
type FlockMember struct {
	// Ordinal is the member's index, from 0 to replicas-1.
	Ordinal int32 `json:"ordinal" protobuf:"varint,1,opt,name=ordinal"`

	// Node is the name of the node this member is assigned to.
	Node string `json:"node" protobuf:"bytes,2,opt,name=node"`

	// Pod is the name of the member's pod, <flock>-<ordinal>.
	// +optional
	Pod string `json:"pod,omitempty" protobuf:"bytes,3,opt,name=pod"`

	// Hostname is the member's fully qualified DNS name,
	// <pod>.<service>.<namespace>.svc.<cluster-domain>.
	// +optional
	Hostname string `json:"hostname,omitempty" protobuf:"bytes,4,opt,name=hostname"`

	// Ready is true when the member's pod is Ready.
	// +optional
	Ready bool `json:"ready" protobuf:"varint,5,opt,name=ready"`

	// Revision is the template revision of the member's pod.
	// +optional
	Revision string `json:"revision,omitempty" protobuf:"bytes,6,opt,name=revision"`

	// PersistentVolume is the name of the PersistentVolume holding the
	// member's data: flock-<flock UID>-<ordinal> for node-local data, the
	// provisioned volume with a claim template (once it is bound).
	// +optional
	PersistentVolume string `json:"persistentVolume,omitempty" protobuf:"bytes,7,opt,name=persistentVolume"`

	// Claim is the name of the member's PersistentVolumeClaim,
	// <volumeName>-<flock>-<ordinal>.
	// +optional
	Claim string `json:"claim,omitempty" protobuf:"bytes,8,opt,name=claim"`

	// Message says why the member is not running, when it is not.
	// +optional
	Message string `json:"message,omitempty" protobuf:"bytes,9,opt,name=message"`

	// NodeLostSince is when the member's node became NotReady or was first
	// found gone, while it is; memberRecovery's afterSeconds count from it,
	// so a restarted controller neither shortens nor lengthens the wait.
	// +optional
	NodeLostSince *metav1.Time `json:"nodeLostSince,omitempty" protobuf:"bytes,10,opt,name=nodeLostSince"`

	// Move is a planned move of this member that the flocks/move
	// subresource accepted and the controller has not carried out yet.
	// Kept here, so it survives a restart of the controller; the
	// controller clears it when the member moves (event MemberMoved) or
	// when the move can no longer be made (event MoveCanceled).
	// +optional
	Move *FlockMemberMove `json:"move,omitempty" protobuf:"bytes,11,opt,name=move"`
}

// FlockMemberMove is a planned move of a member, as accepted by the
// flocks/move subresource.
type FlockMemberMove struct {
	// Node is the node the member moves to.
	Node string `json:"node" protobuf:"bytes,1,opt,name=node"`

	// Force: the move does not wait for the other members to be available.
	// +optional
	Force bool `json:"force,omitempty" protobuf:"varint,2,opt,name=force"`

	// RequestedAt is when the move was accepted.
	// +optional
	RequestedAt metav1.Time `json:"requestedAt,omitempty" protobuf:"bytes,3,opt,name=requestedAt"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// FlockMove asks to move one member of a Flock to another node on purpose:
// POST it to the Flock's move subresource (flocks/NAME/move), as an Eviction
// is POSTed to pods/NAME/eviction. A subresource rather than an edit of the
// Flock, because a move is an action with a 422 answer now (the target is
// not eligible, or holds another member), not a desired state: kubectl and
// the generated clientset (FlockInterface.Move) call it like any create.
//
// An accepted move is recorded in status.members[ordinal].move. The
// controller then, once every other member is available (or at once with
// force), records the target as the member's node, deletes the member's pod
// gracefully and starts it on the target with a fresh data directory; the
// old data follows spec.storage.retention.whenScaled (Retain keeps the
// directory on the old node, Delete removes it). Event MemberMoved says
// from where to where.
type FlockMove struct {
	metav1.TypeMeta `json:",inline"`
	// Standard object metadata. A name, when given, must be the Flock's.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty" protobuf:"bytes,1,opt,name=metadata"`

	// Ordinal is the member to move, from 0 to replicas-1.
	Ordinal int32 `json:"ordinal" protobuf:"varint,2,opt,name=ordinal"`

	// Node is the node to move the member to. It must exist, be eligible
	// for the Flock (nodeSelector, not cordoned, taints tolerated, as for
	// placement) and hold no other member of the Flock.
	Node string `json:"node" protobuf:"bytes,3,opt,name=node"`

	// Force moves the member even while another member is unavailable
	// (by default a move waits for all other members to be available, as
	// a rolling update does).
	// +optional
	Force bool `json:"force,omitempty" protobuf:"varint,4,opt,name=force"`
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
	metav1.TypeMeta `json:",inline"`
	// Standard list metadata.
	// +optional
	metav1.ListMeta `json:"metadata,omitempty" protobuf:"bytes,1,opt,name=metadata"`

	// Items is the list of Flocks.
	Items []Flock `json:"items" protobuf:"bytes,2,rep,name=items"`
}
