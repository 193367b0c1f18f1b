// File options.go: the controller's Options: their defaults and their validation (the one
// place flock-apiserver's flags are checked against), and the field manager.

package flock

import (
	"fmt"
	"path"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"

	utilerrors "k8s.io/apimachinery/pkg/util/errors"
)

// Options configure the controller.
type Options struct {
	// ClusterDomain is the cluster's DNS domain, for members' FQDNs
	// (default "cluster.local").
	ClusterDomain string
	// DataRoot is the absolute host directory under which members' data
	// directories are made: <DataRoot>/<namespace>/<flock>-<uid8> (default
	// "/var/lib/flock").
	DataRoot string
	// CleanupImage is the image of the helper pods that prepare a member's
	// data directory (owner and mode) and remove it under the Delete
	// retention policy (default "busybox:1.36"; pin it by digest). It needs
	// sh, chmod, chown and rm.
	CleanupImage string
	// HelperNamespace is the namespace of the helper pods: the server's own
	// (default "flock-system"). It must allow hostPath volumes.
	HelperNamespace string
	// RolloutHaltAfter is how long a pod of a rolling update's new revision
	// may stay not Ready before the rollout is reported halted (condition
	// Progressing False, reason RolloutHalted, and an event); a pod whose
	// containers crash or cannot start halts it at once (default 30s).
	RolloutHaltAfter time.Duration
	// Workers is the number of Flocks synced in parallel when Run is given
	// no positive number (default 1).
	Workers int
	// MemberParallelism is how many members of one Parallel Flock a sync
	// writes for at the same time, and how many members' pods and data
	// the cleanup of any Flock deletes at the same time (a Flock deleted,
	// or scaled down, under a Delete retention policy); each member's
	// writes in order (default DefaultMemberParallelism; 1: one member
	// after another).
	MemberParallelism int
	// NodeAgentGrace is how long a member's new data directory waits for
	// the node agent of its node (pkg/nodeagent), when one is Ready there,
	// from its volume's first phase (agentGraceStart), before a prepare
	// helper pod does the work instead (default
	// DefaultNodeAgentGrace).
	NodeAgentGrace time.Duration
}

// Complete returns o with defaults filled in, or an error when a value is
// invalid.
func (o Options) Complete() (Options, error) {
	if o.ClusterDomain == "" {
		o.ClusterDomain = DefaultClusterDomain
	}
	if o.DataRoot == "" {
		o.DataRoot = DefaultDataRoot
	}
	if o.Workers <= 0 {
		o.Workers = 1
	}
	if o.MemberParallelism <= 0 {
		o.MemberParallelism = DefaultMemberParallelism
	}
	if o.CleanupImage == "" {
		o.CleanupImage = DefaultCleanupImage
	}
	if o.RolloutHaltAfter <= 0 {
		o.RolloutHaltAfter = DefaultRolloutHaltAfter
	}
	if o.HelperNamespace == "" {
		o.HelperNamespace = DefaultHelperNamespace
	}
	if o.NodeAgentGrace <= 0 {
		o.NodeAgentGrace = DefaultNodeAgentGrace
	}
	return o, o.Validate()
}

// Validate returns every problem of o at once, each naming the
// flock-apiserver flag that sets the option. flock-apiserver calls it before
// it starts anything; Complete calls it after filling in the defaults.
func (o Options) Validate() error {
	var errs []error
	if !path.IsAbs(o.DataRoot) || path.Clean(o.DataRoot) != o.DataRoot || o.DataRoot == "/" {
		errs = append(errs, fmt.Errorf("--data-root must be a clean absolute path other than /, got %q", o.DataRoot))
	}
	if msgs := validation.IsDNS1123Subdomain(o.ClusterDomain); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("--cluster-domain %q: %s", o.ClusterDomain, strings.Join(msgs, "; ")))
	}
	if o.CleanupImage == "" {
		errs = append(errs, fmt.Errorf("--helper-image is required"))
	}
	if msgs := validation.IsDNS1123Label(o.HelperNamespace); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("--helper-namespace %q: %s", o.HelperNamespace, strings.Join(msgs, "; ")))
	}
	if o.RolloutHaltAfter <= 0 {
		errs = append(errs, fmt.Errorf("--rollout-halt-after must be positive, got %s", o.RolloutHaltAfter))
	}
	if o.Workers < 1 {
		errs = append(errs, fmt.Errorf("--workers must be at least 1, got %d", o.Workers))
	}
	if o.MemberParallelism < 1 {
		errs = append(errs, fmt.Errorf("--member-parallelism must be at least 1, got %d", o.MemberParallelism))
	}
	if o.NodeAgentGrace <= 0 {
		errs = append(errs, fmt.Errorf("--node-agent-grace must be positive, got %s", o.NodeAgentGrace))
	}
	return utilerrors.NewAggregate(errs)
}

// Defaults of Options and names the controller uses.
const (
	// DefaultClusterDomain is the DNS domain of the cluster when
	// Options.ClusterDomain is empty.
	DefaultClusterDomain = "cluster.local"
	// DefaultDataRoot is the host directory under which member data lives
	// when Options.DataRoot is empty.
	DefaultDataRoot = "/var/lib/flock"
	// FieldManager is the field manager of every write of the controller.
	FieldManager = "flock-controller"
	// DefaultCleanupImage is the image of data-cleanup helper pods when
	// Options.CleanupImage is empty.
	DefaultCleanupImage = "busybox:1.36"
	// DefaultRolloutHaltAfter is Options.RolloutHaltAfter when unset.
	DefaultRolloutHaltAfter = 30 * time.Second
	// DefaultMemberParallelism is Options.MemberParallelism when unset.
	DefaultMemberParallelism = 8
	// DefaultNodeAgentGrace is Options.NodeAgentGrace when unset: long
	// enough for an agent that is behind, short enough that a member
	// whose agent is stuck still starts soon.
	DefaultNodeAgentGrace = 15 * time.Second
)
