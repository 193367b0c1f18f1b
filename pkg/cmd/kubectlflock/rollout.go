// `kubectl flock rollout status|history|undo|restart NAME`: what `kubectl
// rollout` does for a StatefulSet, which kubectl itself offers for its
// built-in kinds only. A Flock's template revisions are ControllerRevisions
// labelled flock.dev/name and controlled by the Flock; the controller
// renumbers a revision whose template comes back, so undo is a template
// update like any other (and passes the member dry-run like any other).
package kubectlflock

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/yaml"

	"flock.dev/flock/pkg/apis/flock/v1alpha1"
	flockcontroller "flock.dev/flock/pkg/controller/flock"
)

// restartedAtAnnotation is the template annotation `rollout restart` sets,
// the one kubectl sets on the built-in kinds.
const restartedAtAnnotation = "kubectl.kubernetes.io/restartedAt"

func newRolloutCommand(o *options) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "rollout",
		Short: "Follow, list, undo and restart a Flock's template rollouts, as kubectl rollout does for a StatefulSet",
		RunE: func(cmd *cobra.Command, _ []string) error {
			return cmd.Help()
		},
	}
	cmd.AddCommand(newRolloutStatusCommand(o), newRolloutHistoryCommand(o), newRolloutUndoCommand(o), newRolloutRestartCommand(o))
	return cmd
}

// flockName takes NAME, or TYPE/NAME as kubectl writes it (fl/web).
func flockName(arg string) (string, error) {
	typ, name, found := strings.Cut(arg, "/")
	if !found {
		return arg, nil
	}
	switch typ {
	case "fl", "flock", "flocks", "flock.flock.dev", "flocks.flock.dev":
		if name != "" {
			return name, nil
		}
	}
	return "", fmt.Errorf("%q is not a Flock: give NAME or flock/NAME", arg)
}

// flockClients resolves a Flock argument (flockName) and builds the clients.
func (o *options) flockClients(arg string) (*clients, string, error) {
	name, err := flockName(arg)
	if err != nil {
		return nil, "", err
	}
	c, err := o.clients()
	return c, name, err
}

func newRolloutStatusCommand(o *options) *cobra.Command {
	var (
		watchFlag bool
		timeout   time.Duration
	)
	cmd := &cobra.Command{
		Use:   "status NAME",
		Short: "Show a Flock's rollout, and wait until it is complete",
		Long: "Show whether Flock NAME's latest template has reached its members (RollingUpdate strategy): the " +
			"controller has seen the latest spec, every member is Ready, and every member from the partition up " +
			"runs the latest revision. With --watch (the default) wait until it has, printing each step; " +
			"--timeout bounds the wait (0: no bound). A halted rollout (Progressing False, RolloutHalted: a new " +
			"member pod never became Ready) is an error.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, name, err := o.flockClients(args[0])
			if err != nil {
				return err
			}
			return rolloutStatus(cmd.Context(), c, name, watchFlag, timeout, o.streams.Out)
		},
	}
	cmd.Flags().BoolVarP(&watchFlag, "watch", "w", true, "wait until the rollout is complete")
	cmd.Flags().DurationVar(&timeout, "timeout", 0, "how long to wait (0: no bound)")
	return cmd
}

// rolloutState says how far f's rollout is: a line to print, and whether it
// is complete. A Flock whose strategy is not RollingUpdate has no rollout to
// follow (an error, as kubectl gives for a StatefulSet).
func rolloutState(f *v1alpha1.Flock) (string, bool, error) {
	strategy := f.Spec.UpdateStrategy
	if strategy.Type != "" && strategy.Type != v1alpha1.RollingUpdateFlockStrategyType {
		return "", false, fmt.Errorf("rollout status needs the %s update strategy; Flock %s has %s (its members take the new template when they are deleted)",
			v1alpha1.RollingUpdateFlockStrategyType, f.Name, strategy.Type)
	}
	replicas := int32(1)
	if f.Spec.Replicas != nil {
		replicas = *f.Spec.Replicas
	}
	blocked := ""
	if c := meta.FindStatusCondition(f.Status.Conditions, v1alpha1.FlockMembersBlocked); c != nil && c.Status == metav1.ConditionTrue {
		blocked = fmt.Sprintf(" (%s: %s)", c.Reason, c.Message)
	}
	if f.Status.ObservedGeneration < f.Generation {
		return fmt.Sprintf("Waiting for the Flock's spec (generation %d) to be observed...", f.Generation), false, nil
	}
	// A rollout whose new pods never became Ready stops until the template
	// changes: an error, as kubectl gives for a Deployment past its
	// progress deadline.
	if c := meta.FindStatusCondition(f.Status.Conditions, v1alpha1.FlockProgressing); c != nil && c.Status == metav1.ConditionFalse && c.Reason == flockcontroller.ReasonRolloutHalted {
		return "", false, fmt.Errorf("rollout of Flock %s halted: %s", f.Name, c.Message)
	}
	if f.Status.ReadyReplicas < replicas {
		return fmt.Sprintf("Waiting for %d of %d members to be Ready...%s", replicas-f.Status.ReadyReplicas, replicas, blocked), false, nil
	}
	if f.Status.Replicas > replicas {
		return fmt.Sprintf("Waiting for the scale down: %d members, %d wanted...%s", f.Status.Replicas, replicas, blocked), false, nil
	}
	var partition int32
	if ru := strategy.RollingUpdate; ru != nil && ru.Partition != nil {
		partition = min(*ru.Partition, replicas)
	}
	if partition > 0 {
		if want := replicas - partition; f.Status.UpdatedReplicas < want {
			return fmt.Sprintf("Waiting for the partitioned rollout: %d of %d members from ordinal %d at revision %s...%s",
				f.Status.UpdatedReplicas, want, partition, f.Status.UpdateRevision, blocked), false, nil
		}
		return fmt.Sprintf("partitioned rollout complete: %d members from ordinal %d at revision %s",
			replicas-partition, partition, f.Status.UpdateRevision), true, nil
	}
	if f.Status.UpdateRevision != f.Status.CurrentRevision || f.Status.UpdatedReplicas < replicas {
		return fmt.Sprintf("Waiting for the rolling update: %d of %d members at revision %s...%s",
			f.Status.UpdatedReplicas, replicas, f.Status.UpdateRevision, blocked), false, nil
	}
	return fmt.Sprintf("rolling update complete: %d members at revision %s", replicas, f.Status.UpdateRevision), true, nil
}

// rolloutStatus prints name's rollout state; with watchFlag it follows the
// Flock (a watch of that one object) until the state is complete, printing
// each new line, or until timeout.
func rolloutStatus(ctx context.Context, c *clients, name string, watchFlag bool, timeout time.Duration, out io.Writer) error {
	flocks := c.flock.FlockV1alpha1().Flocks(c.namespace)
	f, err := flocks.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	line, done, err := rolloutState(f)
	if err != nil {
		return err
	}
	fmt.Fprintln(out, line)
	if done || !watchFlag {
		return nil
	}
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	selector := fields.OneTermEqualSelector("metadata.name", name).String()
	// The clientset says whether it serves watch lists (a fake does not).
	lw := cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			opts.FieldSelector = selector
			return flocks.List(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			opts.FieldSelector = selector
			return flocks.Watch(ctx, opts)
		},
	}, c.flock)
	last := line
	// Gone between the read above and the watch's list: no event would come.
	gone := func(store cache.Store) (bool, error) {
		if _, exists, err := store.GetByKey(c.namespace + "/" + name); err != nil || !exists {
			return false, fmt.Errorf("Flock %s was deleted", name)
		}
		return false, nil
	}
	_, err = watchtools.UntilWithSync(ctx, lw, &v1alpha1.Flock{}, gone, func(e watch.Event) (bool, error) {
		switch e.Type {
		case watch.Deleted:
			return false, fmt.Errorf("Flock %s was deleted", name)
		case watch.Added, watch.Modified:
			f, ok := e.Object.(*v1alpha1.Flock)
			if !ok {
				return false, nil
			}
			line, done, err := rolloutState(f)
			if err != nil {
				return false, err
			}
			if line != last {
				fmt.Fprintln(out, line)
				last = line
			}
			return done, nil
		}
		return false, nil
	})
	if ctx.Err() == context.DeadlineExceeded {
		return fmt.Errorf("timed out after %s waiting for the rollout of Flock %s: %s", timeout, name, last)
	}
	return err
}

// revisions returns the ControllerRevisions of f (labelled with its name,
// controlled by it, not being deleted), oldest revision number first.
func revisions(ctx context.Context, c *clients, f *v1alpha1.Flock) ([]appsv1.ControllerRevision, error) {
	list, err := c.kube.AppsV1().ControllerRevisions(f.Namespace).List(ctx, metav1.ListOptions{
		LabelSelector: labels.SelectorFromSet(labels.Set{v1alpha1.LabelFlockName: f.Name}).String(),
	})
	if err != nil {
		return nil, err
	}
	own := slices.DeleteFunc(list.Items, func(cr appsv1.ControllerRevision) bool {
		ref := metav1.GetControllerOfNoCopy(&cr)
		return ref == nil || ref.UID != f.UID || cr.DeletionTimestamp != nil
	})
	slices.SortFunc(own, func(a, b appsv1.ControllerRevision) int { return cmp.Compare(a.Revision, b.Revision) })
	return own, nil
}

func newRolloutHistoryCommand(o *options) *cobra.Command {
	var number int64
	cmd := &cobra.Command{
		Use:   "history NAME",
		Short: "List a Flock's template revisions, or show one",
		Long: "List the template revisions Flock NAME keeps (spec.revisionHistoryLimit old ones and the live ones), " +
			"oldest first, with their kubernetes.io/change-cause annotation (the Flock's, when the revision was " +
			"made). --revision=N prints revision N's pod template.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, name, err := o.flockClients(args[0])
			if err != nil {
				return err
			}
			return rolloutHistory(cmd.Context(), c, name, number, o.streams.Out)
		},
	}
	cmd.Flags().Int64Var(&number, "revision", 0, "print this revision's pod template")
	return cmd
}

func rolloutHistory(ctx context.Context, c *clients, name string, number int64, out io.Writer) error {
	f, err := c.flock.FlockV1alpha1().Flocks(c.namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	crs, err := revisions(ctx, c, f)
	if err != nil {
		return err
	}
	if number > 0 {
		cr, err := revisionNumbered(crs, f.Name, number)
		if err != nil {
			return err
		}
		tmpl, err := flockcontroller.TemplateOf(cr)
		if err != nil {
			return err
		}
		data, err := yaml.Marshal(tmpl)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "flock.flock.dev/%s with revision #%d (%s)\nPod Template:\n", f.Name, number, cr.Labels[v1alpha1.LabelRevision])
		for _, l := range strings.Split(strings.TrimRight(string(data), "\n"), "\n") {
			fmt.Fprintln(out, "  "+l)
		}
		return nil
	}
	fmt.Fprintf(out, "flock.flock.dev/%s\n", f.Name)
	w := tabwriter.NewWriter(out, 0, 8, 2, ' ', 0)
	fmt.Fprintln(w, "REVISION\tHASH\tMEMBERS\tCHANGE-CAUSE")
	at := map[string]int{}
	for _, m := range f.Status.Members {
		if m.Revision != "" {
			at[m.Revision]++
		}
	}
	for _, cr := range crs {
		hash := cr.Labels[v1alpha1.LabelRevision]
		cause := cr.Annotations[flockcontroller.ChangeCauseAnnotation]
		if cause == "" {
			cause = "<none>"
		}
		fmt.Fprintf(w, "%d\t%s\t%d\t%s\n", cr.Revision, hash, at[hash], cause)
	}
	return w.Flush()
}

// revisionNumbered returns the revision of crs numbered number, or an error
// that lists the numbers there are.
func revisionNumbered(crs []appsv1.ControllerRevision, name string, number int64) (*appsv1.ControllerRevision, error) {
	var have []string
	for i := range crs {
		if crs[i].Revision == number {
			return &crs[i], nil
		}
		have = append(have, strconv.FormatInt(crs[i].Revision, 10))
	}
	return nil, fmt.Errorf("Flock %s has no revision %d (it has %s)", name, number, strings.Join(have, ", "))
}

func newRolloutUndoCommand(o *options) *cobra.Command {
	var (
		to     int64
		dryRun string
	)
	cmd := &cobra.Command{
		Use:   "undo NAME",
		Short: "Put a Flock's template back to an earlier revision",
		Long: "Set Flock NAME's pod template to that of revision --to-revision (default: the revision before the " +
			"latest). It is a template update like any other: checked by the server's member dry-run, rolled out " +
			"by the update strategy, and the old revision becomes the latest. --dry-run=server has the server check it " +
			"(its admission, the member dry-run too) without making it; --dry-run=client only says what it would do.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			switch dryRun {
			case "none", "server", "client":
			default:
				return fmt.Errorf("--dry-run=%q: want none, server or client", dryRun)
			}
			c, name, err := o.flockClients(args[0])
			if err != nil {
				return err
			}
			return rolloutUndo(cmd.Context(), c, name, to, dryRun, o.streams.Out)
		},
	}
	cmd.Flags().Int64Var(&to, "to-revision", 0, "the revision to go back to (0: the one before the latest)")
	cmd.Flags().StringVar(&dryRun, "dry-run", "none", "none, server (the server checks the undo without making it; a bare --dry-run) or client (print what it would do)")
	cmd.Flags().Lookup("dry-run").NoOptDefVal = "server"
	return cmd
}

// undoTarget returns the revision undo goes to: number, or without one (0)
// the newest revision older than the newest.
func undoTarget(crs []appsv1.ControllerRevision, name string, number int64) (*appsv1.ControllerRevision, error) {
	if number > 0 {
		return revisionNumbered(crs, name, number)
	}
	if len(crs) < 2 {
		return nil, fmt.Errorf("Flock %s has no earlier revision to go back to", name)
	}
	return &crs[len(crs)-2], nil
}

// rolloutUndo puts name's template back to revision number (0: the one
// before the newest); dryRun is none, server or client.
func rolloutUndo(ctx context.Context, c *clients, name string, number int64, dryRun string, out io.Writer) error {
	flocks := c.flock.FlockV1alpha1().Flocks(c.namespace)
	var target int64
	skipped := false
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		f, err := flocks.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		crs, err := revisions(ctx, c, f)
		if err != nil {
			return err
		}
		cr, err := undoTarget(crs, name, number)
		if err != nil {
			return err
		}
		tmpl, err := flockcontroller.TemplateOf(cr)
		if err != nil {
			return err
		}
		target = cr.Revision
		if apiequality.Semantic.DeepEqual(&f.Spec.Template, tmpl) {
			skipped = true
			return nil
		}
		f.Spec.Template = *tmpl
		opts := metav1.UpdateOptions{FieldManager: fieldManager}
		if dryRun == "client" {
			return nil
		}
		if dryRun == "server" {
			opts.DryRun = []string{metav1.DryRunAll}
		}
		_, err = flocks.Update(ctx, f, opts)
		return err
	})
	if err != nil {
		return err
	}
	switch {
	case skipped:
		fmt.Fprintf(out, "flock.flock.dev/%s skipped rollback (its template is already revision %d's)\n", name, target)
	case dryRun != "none":
		fmt.Fprintf(out, "flock.flock.dev/%s rolled back to revision %d (%s dry run)\n", name, target, dryRun)
	default:
		fmt.Fprintf(out, "flock.flock.dev/%s rolled back to revision %d\n", name, target)
	}
	return nil
}

func newRolloutRestartCommand(o *options) *cobra.Command {
	return &cobra.Command{
		Use:   "restart NAME",
		Short: "Restart a Flock's members, one rollout of its template",
		Long: "Set the " + restartedAtAnnotation + " annotation of Flock NAME's pod template to now, as kubectl " +
			"rollout restart does for the built-in kinds: a new revision, rolled out by the update strategy " +
			"(RollingUpdate: member by member from the highest ordinal; OnDelete: as members are deleted). Each " +
			"member keeps its node and its data.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, name, err := o.flockClients(args[0])
			if err != nil {
				return err
			}
			patch, err := restartPatch(time.Now())
			if err != nil {
				return err
			}
			_, err = c.flock.FlockV1alpha1().Flocks(c.namespace).Patch(cmd.Context(), name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: fieldManager})
			if apierrors.IsNotFound(err) {
				return err
			}
			if err != nil {
				return fmt.Errorf("restarting Flock %s: %w", name, err)
			}
			fmt.Fprintf(o.streams.Out, "flock.flock.dev/%s restarted\n", name)
			return nil
		},
	}
}

// restartPatch is the merge patch that sets the template's restartedAt
// annotation to now.
func restartPatch(now time.Time) ([]byte, error) {
	return json.Marshal(map[string]any{"spec": map[string]any{"template": map[string]any{"metadata": map[string]any{
		"annotations": map[string]string{restartedAtAnnotation: now.Format(time.RFC3339)},
	}}}})
}
