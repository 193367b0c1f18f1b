package server

// backup.go: `flock-apiserver backup` and `flock-apiserver restore`, the
// Flocks of the server's etcd written to a file and put back as they were
// stored, with their UIDs (pkg/etcd/backup.go says why that matters).

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"

	"flock.dev/flock/pkg/etcd"
)

// etcdClientOptions are the flags that reach the server's etcd.
type etcdClientOptions struct {
	servers                   []string
	caFile, certFile, keyFile string
	prefix                    string
	namespace                 string
	file                      string
	timeout                   time.Duration
}

func (o *etcdClientOptions) addFlags(fs *pflag.FlagSet, fileUsage string) {
	o.addEtcdFlags(fs)
	fs.StringVar(&o.namespace, "namespace", "", "only the Flocks of this namespace (default: every namespace)")
	fs.StringVar(&o.file, "file", "-", fileUsage)
}

// addEtcdFlags adds the flags that reach the etcd and bound the command.
func (o *etcdClientOptions) addEtcdFlags(fs *pflag.FlagSet) {
	fs.StringSliceVar(&o.servers, "etcd-servers", []string{fmt.Sprintf("http://127.0.0.1:%d", defaultEmbeddedEtcdClientPort)},
		"the server's etcd: its embedded member's loopback client URL (run this beside the server, e.g. with kubectl exec), or the external etcd of its --etcd-servers")
	fs.StringVar(&o.caFile, "etcd-cafile", "", "CA bundle of the etcd's serving certificate (an https etcd)")
	fs.StringVar(&o.certFile, "etcd-certfile", "", "client certificate for the etcd")
	fs.StringVar(&o.keyFile, "etcd-keyfile", "", "key of --etcd-certfile")
	fs.StringVar(&o.prefix, "etcd-prefix", defaultEtcdPathPrefix, "the prefix the server stores its objects under (its --etcd-prefix)")
	fs.DurationVar(&o.timeout, "timeout", 2*time.Minute, "give up after this long")
}

func (o *etcdClientOptions) client() (*clientv3.Client, error) {
	var tlsConfig *tls.Config
	if o.certFile != "" || o.caFile != "" || anyHTTPS(o.servers) {
		info := transport.TLSInfo{CertFile: o.certFile, KeyFile: o.keyFile, TrustedCAFile: o.caFile}
		var err error
		if tlsConfig, err = info.ClientConfig(); err != nil {
			return nil, fmt.Errorf("etcd client TLS: %w", err)
		}
	}
	return clientv3.New(clientv3.Config{Endpoints: o.servers, DialTimeout: 10 * time.Second, TLS: tlsConfig})
}

func anyHTTPS(servers []string) bool {
	for _, s := range servers {
		if strings.HasPrefix(s, "https://") {
			return true
		}
	}
	return false
}

// plainHelp gives a subcommand cobra's own help and usage: the server's,
// which its children would inherit, list the server's flags.
func plainHelp(c *cobra.Command) *cobra.Command {
	c.SetUsageFunc(func(c *cobra.Command) error {
		fmt.Fprintf(c.OutOrStderr(), "Usage:\n  %s\n\nFlags:\n%s", c.UseLine(), c.LocalFlags().FlagUsages())
		return nil
	})
	c.SetHelpFunc(func(c *cobra.Command, _ []string) {
		fmt.Fprintf(c.OutOrStdout(), "%s\n\n", strings.TrimSpace(c.Long))
		_ = c.Usage()
	})
	return c
}

// newBackupCommand returns `flock-apiserver backup`.
func newBackupCommand() *cobra.Command {
	o := &etcdClientOptions{}
	cmd := &cobra.Command{
		Use:   "backup [--file FILE] [--namespace NS]",
		Short: "Write the Flocks stored in the server's etcd to a file, as they are stored",
		Long: `backup writes every Flock stored in flock-apiserver's etcd, read at one revision, to
--file (standard output by default): one JSON line per stored object, as the server
stored it, its UID included. "flock-apiserver restore" puts them back.

A member's data is keyed by its Flock's UID, and a Flock made again from its YAML gets
a new UID and new, empty data; a Flock put back by restore keeps its UID and finds the
PersistentVolumes its members kept (whenDeleted/whenScaled: Retain).

The stored objects are written as they are: compressed (--storage-compression) and, with
encryption at rest, encrypted. Keep the file as safely as the etcd's own backups.`,
		Args:         cobra.NoArgs,
		SilenceUsage: true,
		RunE: func(c *cobra.Command, _ []string) error {
			return o.backup(c.Context(), c.OutOrStdout(), c.ErrOrStderr())
		},
	}
	o.addFlags(cmd.Flags(), `where to write the backup ("-": standard output)`)
	return plainHelp(cmd)
}

// newRestoreCommand returns `flock-apiserver restore`.
func newRestoreCommand() *cobra.Command {
	o := &etcdClientOptions{}
	cmd := &cobra.Command{
		Use:   "restore [--file FILE] [--namespace NS]",
		Short: "Put back the Flocks of a backup that the server's etcd does not hold",
		Long: `restore reads a backup written by "flock-apiserver backup" from --file (standard input by
default), checks all of it, then puts back each Flock the etcd does not hold, as it was
stored: its UID, spec and status. A Flock the etcd holds (one never deleted, or one made
again since, with another UID) is left as it is and listed. A running server serves the
Flocks put back at once, and its controller makes their members again, on the nodes
their status names, with the data their retained PersistentVolumes keep.

Restore into the etcd of a server with the same --etcd-prefix and, with encryption at
rest, the same keys. The namespaces must exist: the controller deletes a Flock whose
namespace is gone.`,
		Args:         cobra.NoArgs,
		SilenceUsage: true,
		RunE: func(c *cobra.Command, _ []string) error {
			return o.restore(c.Context(), c.InOrStdin(), c.OutOrStdout())
		},
	}
	o.addFlags(cmd.Flags(), `the backup to read ("-": standard input)`)
	return plainHelp(cmd)
}

// withClient calls f with a client of the etcd, within the command's
// --timeout.
func (o *etcdClientOptions) withClient(ctx context.Context, f func(context.Context, *clientv3.Client) error) error {
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	c, err := o.client()
	if err != nil {
		return err
	}
	defer c.Close()
	return f(ctx, c)
}

func (o *etcdClientOptions) backup(ctx context.Context, stdout, stderr io.Writer) error {
	return o.withClient(ctx, func(ctx context.Context, c *clientv3.Client) error {
		w, where := stdout, "standard output"
		var f *os.File
		var err error
		if o.file != "-" {
			if f, err = os.OpenFile(o.file, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600); err != nil {
				return err
			}
			w, where = f, o.file
		}
		h, n, err := etcd.Backup(ctx, c, o.prefix, o.namespace, w, time.Now())
		if f != nil {
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				_ = os.Remove(o.file)
			}
		}
		if err != nil {
			return err
		}
		noun := "Flocks"
		if n == 1 {
			noun = "Flock"
		}
		fmt.Fprintf(stderr, "wrote %d %s (etcd revision %d, prefix %s) to %s\n", n, noun, h.Revision, h.Prefix, where)
		return nil
	})
}

func (o *etcdClientOptions) restore(ctx context.Context, stdin io.Reader, stdout io.Writer) error {
	r := stdin
	if o.file != "-" {
		f, err := os.Open(o.file)
		if err != nil {
			return err
		}
		defer f.Close()
		r = f
	}
	return o.withClient(ctx, func(ctx context.Context, c *clientv3.Client) error {
		res, err := etcd.Restore(ctx, c, o.prefix, o.namespace, r)
		for _, k := range res.Restored {
			fmt.Fprintf(stdout, "restored %s\n", objectOfKey(o.prefix, k))
		}
		for _, k := range res.Present {
			fmt.Fprintf(stdout, "left as it is (the etcd holds it) %s\n", objectOfKey(o.prefix, k))
		}
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%d restored, %d left as they are (backup of %s, etcd revision %d)\n",
			len(res.Restored), len(res.Present), res.Header.Time.Format(time.RFC3339), res.Header.Revision)
		return nil
	})
}

// objectOfKey names the object a key holds: <resource>/<namespace>/<name>.
func objectOfKey(prefix, key string) string {
	rest := strings.TrimPrefix(key, strings.TrimSuffix(prefix, "/")+"/")
	if parts := strings.Split(rest, "/"); len(parts) >= 3 {
		return strings.Join(parts[len(parts)-3:], "/")
	}
	return rest
}
