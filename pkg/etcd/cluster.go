// This file makes the embedded member one of a cluster formed by several
// flock-apiserver replicas: static bootstrap from stable member names, peer
// and client traffic over TLS, a restart with data rejoins as is, and a
// member whose data is gone is removed and re-added through the membership
// API of the running cluster.

package etcd

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"k8s.io/klog/v2"
)

// TLSFiles are the PEM files of one side of a member's TLS: its certificate
// and key, and the CA its peers' (or clients') certificates must chain to.
type TLSFiles struct {
	CertFile, KeyFile, TrustedCAFile string
}

// ClusterConfig makes an embedded member one of a cluster.
type ClusterConfig struct {
	// Name is this member's stable name, one of InitialCluster's.
	Name string
	// InitialCluster maps every member's name to its peer URL: the static
	// bootstrap of the cluster, identical on every member.
	InitialCluster map[string]string
	// ClientURL is this member's client URL: it listens on its port (on its
	// host when that is an IP address, on every address otherwise) and
	// advertises it.
	ClientURL string
	// ClusterClientURLs are the client URLs of the members, asked for the
	// membership when this member starts without data.
	ClusterClientURLs []string
	// Peer is the TLS of peer traffic; Client that of client traffic. Client's
	// certificate is also the one this member's own clients present.
	Peer, Client TLSFiles
	// Token tells this cluster from others during bootstrap.
	Token string
}

// membershipTimeout bounds the wait for the running cluster's answer when a
// member starts without data; no answer means the cluster is being
// bootstrapped.
const membershipTimeout = 5 * time.Second

// reconfigTimeout bounds the removal and addition of this member: etcd
// refuses a reconfiguration while a member it needs has not been connected
// for its health interval (5 s), such as one that just restarted.
const reconfigTimeout = 30 * time.Second

// retryUnhealthy calls op until it succeeds, fails otherwise than with
// etcd's "unhealthy cluster", or ctx ends.
func retryUnhealthy(ctx context.Context, op func(context.Context) error) error {
	for {
		err := op(ctx)
		if !errors.Is(err, rpctypes.ErrUnhealthy) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(time.Second):
		}
	}
}

// ParseInitialCluster parses "name=https://peer:port,..." into a map.
func ParseInitialCluster(s string) (map[string]string, error) {
	m := map[string]string{}
	for entry := range strings.SplitSeq(s, ",") {
		name, u, ok := strings.Cut(strings.TrimSpace(entry), "=")
		if !ok || name == "" || u == "" {
			return nil, fmt.Errorf("entry %q is not name=peerURL", entry)
		}
		if _, dup := m[name]; dup {
			return nil, fmt.Errorf("member name %q appears twice", name)
		}
		m[name] = u
	}
	return m, nil
}

// String is the etcd form of the initial cluster, sorted by name.
func initialClusterString(m map[string]string) string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	parts := make([]string, 0, len(names))
	for _, n := range names {
		parts = append(parts, n+"="+m[n])
	}
	return strings.Join(parts, ",")
}

// listenURL is where a member listens for an advertised URL: the host when it
// is an IP address, every address otherwise (a DNS name of the pod).
func listenURL(u *url.URL) url.URL {
	l := *u
	if net.ParseIP(u.Hostname()) == nil {
		l.Host = net.JoinHostPort("0.0.0.0", u.Port())
	}
	return l
}

// hasData reports whether dataDir holds a member's write-ahead log.
func hasData(dataDir string) bool {
	entries, err := os.ReadDir(filepath.Join(dataDir, "member", "wal"))
	return err == nil && len(entries) > 0
}

// apply fills cfg for this member; without data it first asks the running
// cluster, if there is one, and repairs this member's membership.
func (c *ClusterConfig) apply(ctx context.Context, dataDir string, cfg *embed.Config) error {
	peer, ok := c.InitialCluster[c.Name]
	if !ok {
		return fmt.Errorf("member %q is not in the initial cluster %s", c.Name, initialClusterString(c.InitialCluster))
	}
	peerURL, err := url.Parse(peer)
	if err != nil {
		return fmt.Errorf("peer URL of %q: %w", c.Name, err)
	}
	clientURL, err := url.Parse(c.ClientURL)
	if err != nil {
		return fmt.Errorf("client URL: %w", err)
	}
	cfg.Name = c.Name
	cfg.ListenPeerUrls = []url.URL{listenURL(peerURL)}
	cfg.AdvertisePeerUrls = []url.URL{*peerURL}
	cfg.ListenClientUrls = []url.URL{listenURL(clientURL)}
	cfg.AdvertiseClientUrls = []url.URL{*clientURL}
	cfg.PeerTLSInfo = transport.TLSInfo{CertFile: c.Peer.CertFile, KeyFile: c.Peer.KeyFile, TrustedCAFile: c.Peer.TrustedCAFile, ClientCertAuth: true}
	cfg.ClientTLSInfo = transport.TLSInfo{CertFile: c.Client.CertFile, KeyFile: c.Client.KeyFile, TrustedCAFile: c.Client.TrustedCAFile, ClientCertAuth: true}
	cfg.InitialClusterToken = c.Token
	cfg.InitialCluster = initialClusterString(c.InitialCluster)
	cfg.ClusterState = embed.ClusterStateFlagNew
	if hasData(dataDir) {
		// The data says which cluster this member belongs to; the
		// bootstrap flags are not read.
		return nil
	}
	members, err := c.repairMembership(ctx, peer)
	if err != nil {
		return err
	}
	if members != nil {
		cfg.ClusterState = embed.ClusterStateFlagExisting
		cfg.InitialCluster = initialClusterString(members)
	}
	return nil
}

// repairMembership runs when this member has no data. If no cluster answers,
// the cluster is being bootstrapped: it returns nil. Otherwise it returns
// the cluster's members (name to peer URL) to join as an existing member,
// after removing and re-adding this member if it had served before (its data
// is gone, so its old identity must not come back).
func (c *ClusterConfig) repairMembership(ctx context.Context, peer string) (map[string]string, error) {
	logger := klog.FromContext(ctx)
	tlsInfo := transport.TLSInfo{CertFile: c.Client.CertFile, KeyFile: c.Client.KeyFile, TrustedCAFile: c.Client.TrustedCAFile}
	tlsConfig, err := tlsInfo.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("client TLS: %w", err)
	}
	var others []string
	for _, u := range c.ClusterClientURLs {
		if u != c.ClientURL {
			others = append(others, u)
		}
	}
	if len(others) == 0 {
		return nil, nil
	}
	client, err := clientv3.New(clientv3.Config{Endpoints: others, TLS: tlsConfig, DialTimeout: membershipTimeout, Logger: nil})
	if err != nil {
		return nil, fmt.Errorf("client of the cluster: %w", err)
	}
	defer client.Close()

	listCtx, cancel := context.WithTimeout(ctx, membershipTimeout)
	list, err := client.MemberList(listCtx)
	cancel()
	if err != nil {
		logger.Info("No running etcd cluster answers; bootstrapping", "endpoints", others, "err", err.Error())
		return nil, nil
	}
	var self *etcdserverpb.Member
	for _, m := range list.Members {
		for _, p := range m.PeerURLs {
			if p == peer {
				self = m
			}
		}
	}
	opCtx, cancel := context.WithTimeout(ctx, reconfigTimeout)
	defer cancel()
	switch {
	case self != nil && self.Name == "":
		// Known to the cluster but never started (a late member of the
		// bootstrap, or one added before): join as it is.
		logger.Info("Joining the running etcd cluster", "name", c.Name)
	default:
		if self != nil {
			logger.Info("This member has no data but served before: removing it from the etcd cluster to add it again",
				"name", c.Name, "memberID", fmt.Sprintf("%x", self.ID))
			if err := retryUnhealthy(opCtx, func(ctx context.Context) error {
				_, err := client.MemberRemove(ctx, self.ID)
				return err
			}); err != nil {
				return nil, fmt.Errorf("removing the old member %s (%x): %w", c.Name, self.ID, err)
			}
		}
		var added *clientv3.MemberAddResponse
		if err := retryUnhealthy(opCtx, func(ctx context.Context) (err error) {
			added, err = client.MemberAdd(ctx, []string{peer})
			return err
		}); err != nil {
			return nil, fmt.Errorf("adding member %s (%s): %w", c.Name, peer, err)
		}
		logger.Info("Added this member to the etcd cluster", "name", c.Name, "memberID", fmt.Sprintf("%x", added.Member.ID))
		list = &clientv3.MemberListResponse{Members: added.Members}
	}
	return c.memberNames(list.Members, peer), nil
}

// memberNames names the cluster's members by peer URL: this member by its
// name, a member of the static bootstrap by its bootstrap name, any other by
// its own name (or ID while it has none).
func (c *ClusterConfig) memberNames(members []*etcdserverpb.Member, self string) map[string]string {
	byPeer := map[string]string{}
	for name, p := range c.InitialCluster {
		byPeer[p] = name
	}
	out := map[string]string{}
	for _, m := range members {
		if len(m.PeerURLs) == 0 {
			continue
		}
		p := m.PeerURLs[0]
		name, ok := byPeer[p]
		switch {
		case p == self:
			name = c.Name
		case ok:
		case m.Name != "":
			name = m.Name
		default:
			name = fmt.Sprintf("%x", m.ID)
		}
		out[name] = p
	}
	return out
}
