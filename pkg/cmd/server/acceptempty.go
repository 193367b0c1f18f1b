package server

// acceptempty.go: `flock-apiserver accept-empty-store`, the operator's word
// that a store without Flocks is to be served although pods and claims of
// Flocks exist (pkg/apiserver/storeguard.go).

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	clientv3 "go.etcd.io/etcd/client/v3"

	"flock.dev/flock/pkg/apiserver"
	"flock.dev/flock/pkg/etcd"
)

// newAcceptEmptyStoreCommand returns `flock-apiserver accept-empty-store`.
func newAcceptEmptyStoreCommand() *cobra.Command {
	o := &etcdClientOptions{}
	cmd := &cobra.Command{
		Use:   "accept-empty-store",
		Short: "Let the servers serve a store that lost its Flocks; the garbage collector then deletes their members",
		Long: `accept-empty-store marks flock-apiserver's store as served. A server refuses to serve
Flocks (503, and its /readyz check flock-store fails) from a store that holds none and has
no such mark while pods or claims of Flocks exist in the cluster: the store lost its data,
and served, it would answer NotFound for those Flocks, and kube-controller-manager's
garbage collector would delete their members' pods and claims.

Restore the Flocks from a backup ("flock-apiserver restore") if there is one: the members
then run on untouched. Run this only to give the Flocks up: running servers serve the
empty store within seconds, the garbage collector deletes the members' pods, claims and
Services, and their PersistentVolumes stay as their retention policy says (Released
under Retain). A Flock restored later finds those volumes again.`,
		Args:         cobra.NoArgs,
		SilenceUsage: true,
		RunE: func(c *cobra.Command, _ []string) error {
			return o.acceptEmptyStore(c.Context(), c.OutOrStdout())
		},
	}
	o.addEtcdFlags(cmd.Flags())
	return plainHelp(cmd)
}

func (o *etcdClientOptions) acceptEmptyStore(ctx context.Context, stdout io.Writer) error {
	return o.withClient(ctx, func(ctx context.Context, c *clientv3.Client) error {
		state, err := etcd.ReadStoreState(ctx, c, o.prefix)
		if err != nil {
			return err
		}
		if state.Mark != nil {
			fmt.Fprintf(stdout, "the store under %s is marked as served already (%s, %s): nothing to do\n", o.prefix, state.Mark.Time.Format(time.RFC3339), state.Mark.Reason)
			return nil
		}
		if state.Objects {
			fmt.Fprintf(stdout, "the store under %s holds Flocks; a server marks it when it serves it: nothing to do\n", o.prefix)
			return nil
		}
		if _, err := etcd.MarkStore(ctx, c, o.prefix, etcd.StoreMark{Time: time.Now().UTC(), Reason: "accepted empty (flock-apiserver accept-empty-store)"}); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "marked the store under %s as served: servers serve it within %s, and the garbage collector then deletes the members of the Flocks it lacks\n", o.prefix, apiserver.StoreGuardInterval)
		return nil
	})
}
