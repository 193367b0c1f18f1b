// Package kubectlflock is the `kubectl flock` plugin (cmd/kubectl-flock): the
// day-two views of Flocks an operator wants, through the generated clientset
// and kubectl's own kubeconfig, context and namespace flags
// (k8s.io/cli-runtime genericclioptions), so they behave as in kubectl.
//
//	kubectl flock members NAME [-o wide|json]   one row per member
//	kubectl flock where NODE                    the members that live on a node
//	kubectl flock move NAME ORDINAL [--to NODE] move one member (flocks/move)
//	kubectl flock drain-node NODE [--dry-run]   move every member off a node
//	kubectl flock rollout status|history|undo|restart NAME
//	                                            kubectl rollout, for a Flock
package kubectlflock

import (
	"fmt"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes"

	flockclient "flock.dev/flock/pkg/generated/clientset/versioned"
)

// options carries the flags every subcommand shares and the clients built
// from them.
type options struct {
	configFlags *genericclioptions.ConfigFlags
	streams     genericiooptions.IOStreams
}

// clients are what a subcommand talks to.
type clients struct {
	flock     flockclient.Interface
	kube      kubernetes.Interface
	namespace string
}

// clients builds the clientsets and resolves the namespace (--namespace, else
// the kubeconfig context's, else "default"), as kubectl does.
func (o *options) clients() (*clients, error) {
	cfg, err := o.configFlags.ToRESTConfig()
	if err != nil {
		return nil, err
	}
	ns, _, err := o.configFlags.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return nil, err
	}
	fc, err := flockclient.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	kc, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &clients{flock: fc, kube: kc, namespace: ns}, nil
}

// NewCommand returns the `kubectl flock` command writing to streams.
func NewCommand(streams genericiooptions.IOStreams) *cobra.Command {
	o := &options{configFlags: genericclioptions.NewConfigFlags(true), streams: streams}
	cmd := &cobra.Command{
		Use:           "kubectl-flock",
		Short:         "Day-two operations on Flocks: members, where, move, drain-node, rollout",
		SilenceUsage:  true,
		SilenceErrors: true,
		Annotations:   map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl flock"},
		RunE: func(cmd *cobra.Command, _ []string) error {
			return cmd.Help()
		},
	}
	cmd.SetOut(streams.Out)
	cmd.SetErr(streams.ErrOut)
	o.configFlags.AddFlags(cmd.PersistentFlags())
	cmd.AddCommand(newMembersCommand(o), newWhereCommand(o), newMoveCommand(o), newDrainNodeCommand(o), newRolloutCommand(o))
	return cmd
}

// Execute runs the command and prints an error the way kubectl does.
func Execute(cmd *cobra.Command) int {
	if err := cmd.Execute(); err != nil {
		fmt.Fprintln(cmd.ErrOrStderr(), "error:", err)
		return 1
	}
	return 0
}
