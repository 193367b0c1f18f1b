// `kubectl flock move NAME ORDINAL [--to NODE] [--force] [--wait]` and
// `kubectl flock drain-node NODE [--dry-run] [--force]`: planned member
// moves through the Flock's move subresource (the generated client's Move).
package kubectlflock

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"flock.dev/flock/pkg/apis/flock/v1alpha1"
	flockcontroller "flock.dev/flock/pkg/controller/flock"
	"flock.dev/flock/pkg/placement"
)

// fieldManager is the field manager of the plugin's writes.
const fieldManager = "kubectl-flock"

// moveFlags are the flags of move and drain-node.
type moveFlags struct {
	force   bool
	timeout time.Duration
}

func (m *moveFlags) add(cmd *cobra.Command) {
	cmd.Flags().BoolVar(&m.force, "force", false, "move even while another member of the Flock is unavailable")
	cmd.Flags().DurationVar(&m.timeout, "timeout", 5*time.Minute, "how long to wait for each moved member to be Ready on its new node")
}

func newMoveCommand(o *options) *cobra.Command {
	var (
		flags moveFlags
		to    string
		wait  bool
	)
	cmd := &cobra.Command{
		Use:   "move NAME ORDINAL [--to NODE]",
		Short: "Move a member of a Flock to another node, with a fresh data directory there",
		Long: "Move member ORDINAL of Flock NAME to node NODE (without --to: the node a new member would get, " +
			"eligible, free of the Flock's members, zones spread, least used). The server refuses a node that is " +
			"not eligible or holds another member. The member's pod is deleted gracefully and starts on the new node " +
			"with a fresh data directory, once every other member is available (unless --force).",
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			ord, err := strconv.ParseInt(args[1], 10, 32)
			if err != nil || ord < 0 {
				return fmt.Errorf("ORDINAL %q is not a member ordinal (a number from 0)", args[1])
			}
			c, err := o.clients()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			f, err := c.flock.FlockV1alpha1().Flocks(c.namespace).Get(ctx, args[0], metav1.GetOptions{})
			if err != nil {
				return err
			}
			if to == "" {
				if to, err = pickTarget(ctx, c, f, int32(ord)); err != nil {
					return err
				}
			}
			step := moveStep{flock: f, ordinal: int32(ord), from: memberNode(f, int32(ord)), to: to}
			if err := step.request(ctx, c, flags.force, false); err != nil {
				return err
			}
			fmt.Fprintf(o.streams.Out, "flock.flock.dev/%s: member %d moves from node %s to node %s\n", f.Name, ord, step.from, to)
			if !wait {
				return nil
			}
			return step.await(ctx, c, o.streams.Out, flags.timeout)
		},
	}
	cmd.Flags().StringVar(&to, "to", "", "the node to move the member to (default: chosen as for a new member)")
	cmd.Flags().BoolVar(&wait, "wait", false, "wait until the member is Ready on its new node")
	flags.add(cmd)
	return cmd
}

func newDrainNodeCommand(o *options) *cobra.Command {
	var (
		flags  moveFlags
		dryRun bool
	)
	cmd := &cobra.Command{
		Use:   "drain-node NODE",
		Short: "Move every Flock member off a node, one at a time, each Ready on its new node before the next",
		Long: "Move every member of every Flock (every namespace, unless --namespace is given) that lives on NODE to " +
			"another node, chosen per member as for a new member (eligible, free of its Flock's members, zones spread, " +
			"least used), one at a time: each moved member is Ready on its new node before the next move is asked. " +
			"--dry-run asks the server to check each move without making it. The node is not cordoned: " +
			"`kubectl cordon NODE` keeps new members off it.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.clients()
			if err != nil {
				return err
			}
			ctx, node, out := cmd.Context(), args[0], o.streams.Out
			ns := metav1.NamespaceAll
			if o.configFlags.Namespace != nil && *o.configFlags.Namespace != "" {
				ns = c.namespace
			}
			list, err := c.flock.FlockV1alpha1().Flocks(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return err
			}
			var steps []moveStep
			for _, f := range onNode(list.Items, node) {
				for _, m := range f.Status.Members {
					steps = append(steps, moveStep{flock: &f, ordinal: m.Ordinal, from: node})
				}
			}
			if len(steps) == 0 {
				fmt.Fprintf(out, "No Flock members on node %s.\n", node)
				return nil
			}
			suffix := ""
			if dryRun {
				suffix = " (server dry run)"
			}
			for i := range steps {
				s := &steps[i]
				// The Flock as it is now: earlier moves changed usage.
				f, err := c.flock.FlockV1alpha1().Flocks(s.flock.Namespace).Get(ctx, s.flock.Name, metav1.GetOptions{})
				if err != nil {
					return err
				}
				s.flock = f
				if memberNode(f, s.ordinal) != node {
					fmt.Fprintf(out, "[%d/%d] %s/%s member %d: no longer on node %s, skipped\n", i+1, len(steps), f.Namespace, f.Name, s.ordinal, node)
					continue
				}
				if s.to, err = pickTarget(ctx, c, f, s.ordinal); err != nil {
					return fmt.Errorf("%s/%s member %d: %w", f.Namespace, f.Name, s.ordinal, err)
				}
				if err := s.request(ctx, c, flags.force, dryRun); err != nil {
					return fmt.Errorf("%s/%s member %d: %w", f.Namespace, f.Name, s.ordinal, err)
				}
				fmt.Fprintf(out, "[%d/%d] %s/%s member %d: moving from node %s to node %s%s\n", i+1, len(steps), f.Namespace, f.Name, s.ordinal, node, s.to, suffix)
				if dryRun {
					continue
				}
				if err := s.await(ctx, c, out, flags.timeout); err != nil {
					return err
				}
			}
			if !dryRun {
				fmt.Fprintf(out, "node %s drained: %d member(s) moved\n", node, len(steps))
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "only print the moves, each checked by the server (dry run), without making them")
	flags.add(cmd)
	return cmd
}

// moveStep is one member move.
type moveStep struct {
	flock    *v1alpha1.Flock
	ordinal  int32
	from, to string
}

// request POSTs the move to the Flock's move subresource (dryRun: checked,
// not recorded).
func (s *moveStep) request(ctx context.Context, c *clients, force, dryRun bool) error {
	opts := metav1.CreateOptions{FieldManager: fieldManager}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	_, err := c.flock.FlockV1alpha1().Flocks(s.flock.Namespace).Move(ctx, s.flock.Name,
		&v1alpha1.FlockMove{Ordinal: s.ordinal, Node: s.to, Force: force}, opts)
	return err
}

// await waits, polling every second up to timeout, until the member is
// recorded on its target, its move is done and its pod runs Ready there. A
// move the controller canceled (recorded node unchanged, no move pending)
// is an error.
func (s *moveStep) await(ctx context.Context, c *clients, out io.Writer, timeout time.Duration) error {
	ns, name := s.flock.Namespace, s.flock.Name
	var state string
	err := wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		f, err := c.flock.FlockV1alpha1().Flocks(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		i := slices.IndexFunc(f.Status.Members, func(m v1alpha1.FlockMember) bool { return m.Ordinal == s.ordinal })
		if i < 0 {
			return false, fmt.Errorf("%s/%s member %d is gone from status", ns, name, s.ordinal)
		}
		m := f.Status.Members[i]
		next := ""
		switch {
		case m.Move != nil:
			next = "waiting for the controller (the other members must be available)"
		case m.Node != s.to:
			return false, fmt.Errorf("%s/%s member %d was not moved to node %s (it is on node %s): see `kubectl describe flock %s` for a MoveCanceled event",
				ns, name, s.ordinal, s.to, m.Node, name)
		default:
			pod, err := c.kube.CoreV1().Pods(ns).Get(ctx, flockcontroller.PodName(name, s.ordinal), metav1.GetOptions{})
			// m.Ready is the controller's reading of the pod's Ready
			// condition; the pod must also be the one on the new node.
			if err == nil && pod.DeletionTimestamp == nil && pod.Spec.NodeName == s.to && m.Ready {
				fmt.Fprintf(out, "    %s/%s member %d is Ready on node %s\n", ns, name, s.ordinal, s.to)
				return true, nil
			}
			next = "waiting for pod " + flockcontroller.PodName(name, s.ordinal) + " to be Ready on node " + s.to
		}
		if next != state {
			fmt.Fprintf(out, "    %s\n", next)
			state = next
		}
		return false, nil
	})
	if err != nil && ctx.Err() == nil && wait.Interrupted(err) {
		return fmt.Errorf("%s/%s member %d: not Ready on node %s after %s", ns, name, s.ordinal, s.to, timeout)
	}
	return err
}

// memberNode returns the recorded node of member ordinal of f ("" when
// none).
func memberNode(f *v1alpha1.Flock, ordinal int32) string {
	for _, m := range f.Status.Members {
		if m.Ordinal == ordinal {
			return m.Node
		}
	}
	return ""
}

// pickTarget chooses the node member ordinal of f moves to, by the rule the
// controller places new members with (placement.Relocate): among the Ready
// nodes, eligible for f, free of f's members, zones spread, the least used
// by all Flocks' members.
func pickTarget(ctx context.Context, c *clients, f *v1alpha1.Flock, ordinal int32) (string, error) {
	nodeList, err := c.kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return "", fmt.Errorf("listing nodes to choose a target (or give one with --to): %w", err)
	}
	flocks, err := c.flock.FlockV1alpha1().Flocks(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return "", fmt.Errorf("listing Flocks to count members per node (or give a target with --to): %w", err)
	}
	var ready []*corev1.Node
	for i := range nodeList.Items {
		if n := &nodeList.Items[i]; placement.IsReady(n) {
			ready = append(ready, n)
		}
	}
	usage := map[string]int{}
	for _, other := range flocks.Items {
		if other.UID == f.UID {
			continue
		}
		for _, m := range other.Status.Members {
			usage[m.Node]++
		}
	}
	existing := map[int32]string{}
	for _, m := range f.Status.Members {
		existing[m.Ordinal] = m.Node
		usage[m.Node]++
		if m.Move != nil && m.Ordinal != ordinal {
			// Another member's target is as good as taken.
			existing[-1-m.Ordinal] = m.Move.Node
		}
	}
	if _, ok := existing[ordinal]; !ok {
		return "", fmt.Errorf("member %d of %s/%s has no node yet", ordinal, f.Namespace, f.Name)
	}
	to, ok := placement.Relocate(ready, placement.RequirementFromFlock(f), existing, ordinal, usage)
	if !ok {
		return "", fmt.Errorf("no Ready node is eligible for %s/%s and free of its members", f.Namespace, f.Name)
	}
	return to, nil
}
