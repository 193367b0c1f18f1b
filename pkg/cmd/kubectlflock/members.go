// `kubectl flock members NAME` and `kubectl flock where NODE`: one row per
// member, from the Flock's status, its pods and its nodes.
package kubectlflock

import (
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
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"

	"flock.dev/flock/pkg/apis/flock/v1alpha1"
)

// MemberRow is one member as `members` prints it; -o json prints a list of them.
type MemberRow struct {
	Namespace string `json:"namespace"`
	Flock     string `json:"flock"`
	Ordinal   int32  `json:"ordinal"`
	Node      string `json:"node"`
	// Zone is the node's topology.kubernetes.io/zone label, empty when the
	// node has none or cannot be read.
	Zone  string `json:"zone,omitempty"`
	Pod   string `json:"pod,omitempty"`
	IP    string `json:"ip,omitempty"`
	Ready bool   `json:"ready"`
	// Revision is the member's template revision.
	Revision string `json:"revision,omitempty"`
	// Data is where the member's data lives: its claim and volume.
	Data     string `json:"data,omitempty"`
	Hostname string `json:"hostname,omitempty"`
	Message  string `json:"message,omitempty"`
	// Created is the pod's creation time; the table prints it as an age.
	Created *metav1.Time `json:"created,omitempty"`
}

// memberRows builds the rows of f's recorded members, in ordinal order, from
// its pods (by name) and its nodes (by name); either may lack an entry.
func memberRows(f *v1alpha1.Flock, pods map[string]*corev1.Pod, nodes map[string]*corev1.Node) []MemberRow {
	rows := make([]MemberRow, 0, len(f.Status.Members))
	for _, m := range f.Status.Members {
		r := MemberRow{
			Namespace: f.Namespace, Flock: f.Name, Ordinal: m.Ordinal, Node: m.Node, Pod: m.Pod,
			Ready: m.Ready, Revision: m.Revision, Data: dataLocation(m), Hostname: m.Hostname, Message: m.Message,
		}
		if n := nodes[m.Node]; n != nil {
			r.Zone = n.Labels[corev1.LabelTopologyZone]
		}
		if p := pods[m.Pod]; p != nil && m.Pod != "" {
			r.IP = p.Status.PodIP
			created := p.CreationTimestamp
			r.Created = &created
		}
		rows = append(rows, r)
	}
	sortRows(rows)
	return rows
}

// sortRows orders rows by namespace, Flock and ordinal.
func sortRows(rows []MemberRow) {
	slices.SortFunc(rows, func(a, b MemberRow) int {
		if c := strings.Compare(a.Namespace, b.Namespace); c != 0 {
			return c
		}
		if c := strings.Compare(a.Flock, b.Flock); c != 0 {
			return c
		}
		return int(a.Ordinal) - int(b.Ordinal)
	})
}

// dataLocation names where a member's data lives: its claim and volume.
func dataLocation(m v1alpha1.FlockMember) string {
	var parts []string
	if m.Claim != "" {
		parts = append(parts, "pvc/"+m.Claim)
	}
	if m.PersistentVolume != "" {
		parts = append(parts, "pv/"+m.PersistentVolume)
	}
	return strings.Join(parts, ",")
}

// printRows writes rows as a table (wide adds the hostname and the message;
// withFlock adds the namespace and the Flock) or, for output "json", as JSON.
func printRows(w io.Writer, rows []MemberRow, output string, withFlock bool, now time.Time) error {
	switch output {
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "    ")
		return enc.Encode(rows)
	case "", "wide":
	default:
		return fmt.Errorf("--output %q is not supported; use wide or json", output)
	}
	wide := output == "wide"
	tw := tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
	header := []string{"ORDINAL", "NODE", "ZONE", "POD", "IP", "READY", "REVISION", "DATA", "AGE"}
	if withFlock {
		header = append([]string{"NAMESPACE", "FLOCK"}, header...)
	}
	if wide {
		header = append(header, "HOSTNAME", "MESSAGE")
	}
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, r := range rows {
		age := "<none>"
		if r.Created != nil {
			age = duration.HumanDuration(now.Sub(r.Created.Time))
		}
		cols := []string{strconv.Itoa(int(r.Ordinal)), none(r.Node), none(r.Zone), none(r.Pod), none(r.IP),
			strconv.FormatBool(r.Ready), none(r.Revision), none(r.Data), age}
		if withFlock {
			cols = append([]string{r.Namespace, r.Flock}, cols...)
		}
		if wide {
			cols = append(cols, none(r.Hostname), none(r.Message))
		}
		fmt.Fprintln(tw, strings.Join(cols, "\t"))
	}
	return tw.Flush()
}

// none prints an empty value as kubectl does.
func none(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}

// lookups fetches the pods of f's members and their nodes. A node the caller
// may not read only leaves its zone empty.
func lookups(ctx context.Context, c *clients, flocks []v1alpha1.Flock) (map[string]*corev1.Pod, map[string]*corev1.Node, error) {
	pods := map[string]*corev1.Pod{}
	nodes := map[string]*corev1.Node{}
	for _, f := range flocks {
		for _, m := range f.Status.Members {
			if m.Pod != "" {
				p, err := c.kube.CoreV1().Pods(f.Namespace).Get(ctx, m.Pod, metav1.GetOptions{})
				switch {
				case err == nil:
					pods[podKey(f.Namespace, m.Pod)] = p
				case !apierrors.IsNotFound(err):
					return nil, nil, err
				}
			}
			if _, seen := nodes[m.Node]; m.Node != "" && !seen {
				n, err := c.kube.CoreV1().Nodes().Get(ctx, m.Node, metav1.GetOptions{})
				if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsForbidden(err) {
					return nil, nil, err
				}
				if err != nil {
					n = nil
				}
				nodes[m.Node] = n
			}
		}
	}
	return pods, nodes, nil
}

// podKey keys pods of several namespaces.
func podKey(ns, name string) string { return ns + "/" + name }

// podsOf is the pods of namespace ns from pods keyed by podKey, by name.
func podsOf(pods map[string]*corev1.Pod, ns string) map[string]*corev1.Pod {
	out := map[string]*corev1.Pod{}
	for k, p := range pods {
		if strings.HasPrefix(k, ns+"/") {
			out[p.Name] = p
		}
	}
	return out
}

func newMembersCommand(o *options) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "members NAME",
		Short: "List a Flock's members: ordinal, node, zone, pod, IP, ready, revision, data, age",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.clients()
			if err != nil {
				return err
			}
			f, err := c.flock.FlockV1alpha1().Flocks(c.namespace).Get(cmd.Context(), args[0], metav1.GetOptions{})
			if err != nil {
				return err
			}
			pods, nodes, err := lookups(cmd.Context(), c, []v1alpha1.Flock{*f})
			if err != nil {
				return err
			}
			return printRows(o.streams.Out, memberRows(f, podsOf(pods, f.Namespace), nodes), output, false, time.Now())
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "output format: wide or json")
	return cmd
}

func newWhereCommand(o *options) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "where NODE",
		Short: "List the Flock members that live on a node (every namespace, unless --namespace is given)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.clients()
			if err != nil {
				return err
			}
			ns := metav1.NamespaceAll
			if o.configFlags.Namespace != nil && *o.configFlags.Namespace != "" {
				ns = c.namespace
			}
			list, err := c.flock.FlockV1alpha1().Flocks(ns).List(cmd.Context(), metav1.ListOptions{})
			if err != nil {
				return err
			}
			flocks := onNode(list.Items, args[0])
			pods, nodes, err := lookups(cmd.Context(), c, flocks)
			if err != nil {
				return err
			}
			var rows []MemberRow
			for i := range flocks {
				rows = append(rows, memberRows(&flocks[i], podsOf(pods, flocks[i].Namespace), nodes)...)
			}
			sortRows(rows)
			if len(rows) == 0 && output != "json" {
				fmt.Fprintf(o.streams.ErrOut, "No Flock members on node %s.\n", args[0])
				return nil
			}
			if rows == nil {
				rows = []MemberRow{}
			}
			return printRows(o.streams.Out, rows, output, true, time.Now())
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "output format: wide or json")
	return cmd
}

// onNode returns copies of the Flocks that have members on node, each with
// only those members in its status.
func onNode(flocks []v1alpha1.Flock, node string) []v1alpha1.Flock {
	var out []v1alpha1.Flock
	for _, f := range flocks {
		var members []v1alpha1.FlockMember
		for _, m := range f.Status.Members {
			if m.Node == node {
				members = append(members, m)
			}
		}
		if len(members) > 0 {
			f := *f.DeepCopy()
			f.Status.Members = members
			out = append(out, f)
		}
	}
	return out
}
