package server

import (
	"fmt"

	"github.com/spf13/pflag"
	"net"
	"strings"
	"testing"
	"time"
)

func TestOptionsValidate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*Options)
		errs   []string // substrings that must all appear; none means valid
	}{
		{"defaults", func(*Options) {}, nil},
		{"external etcd", func(o *Options) {
			o.RecommendedOptions.Etcd.StorageConfig.Transport.ServerList = []string{"http://127.0.0.1:2379"}
			o.EmbeddedEtcd.DataDir = "" // unused with external etcd
		}, nil},
		{"embedded without data dir", func(o *Options) { o.EmbeddedEtcd.DataDir = "" }, []string{"--embedded-etcd-data-dir is required"}},
		{"same etcd ports", func(o *Options) { o.EmbeddedEtcd.PeerPort = o.EmbeddedEtcd.ClientPort }, []string{"must differ"}},
		{"bad port", func(o *Options) { o.EmbeddedEtcd.ClientPort = 70000 }, []string{"--embedded-etcd-client-port must be between 1 and 65535"}},
		{"no defrag", func(o *Options) { o.EmbeddedEtcd.DefragInterval = 0 }, nil},
		{"storage uncompressed", func(o *Options) { o.StorageCompression = "none" }, nil},
		{"unknown storage compression", func(o *Options) { o.StorageCompression = "gzip" }, []string{`--storage-compression must be one of zstd, none, got "gzip"`}},
		{"no soft memory limit", func(o *Options) { o.MemoryLimitRatio = 0 }, nil},
		{"memory limit ratio over 1", func(o *Options) { o.MemoryLimitRatio = 1.5 }, []string{"--memory-limit-ratio must be between 0 (none) and 1, got 1.5"}},
		{"negative defrag interval", func(o *Options) { o.EmbeddedEtcd.DefragInterval = -time.Second }, []string{"--embedded-etcd-defrag-interval must be 0 (never) or positive, got -1s"}},
		{"relative data root", func(o *Options) { o.DataRoot = "var/lib/flock" }, []string{"--data-root must be a clean absolute path"}},
		{"data root escaping", func(o *Options) { o.DataRoot = "/var/../etc" }, []string{"--data-root"}},
		{"data root /", func(o *Options) { o.DataRoot = "/" }, []string{"--data-root"}},
		{"bad cluster domain", func(o *Options) { o.ClusterDomain = "Cluster_Local" }, []string{"--cluster-domain"}},
		{"unknown controller", func(o *Options) { o.Controllers = []string{"statefulset"} }, []string{`unknown controller "statefulset"`}},
		{"zero workers", func(o *Options) { o.Workers = 0 }, []string{"--workers must be at least 1"}},
		{"zero member parallelism", func(o *Options) { o.MemberParallelism = 0 }, []string{"--member-parallelism must be at least 1"}},
		{"bad qps", func(o *Options) { o.KubeAPIQPS = 0 }, []string{"--kube-api-qps"}},
		{"lease shorter than renew", func(o *Options) { o.LeaderElection.LeaseDuration.Duration = 5 * time.Second }, []string{"lease-duration > renew-deadline"}},
		{"no leader election needs no lease", func(o *Options) {
			o.LeaderElection.LeaderElect = false
			o.LeaderElection.ResourceName = ""
		}, nil},
		{"empty helper image", func(o *Options) { o.HelperImage = "" }, []string{"--helper-image is required"}},
		{"helper namespace not a name", func(o *Options) { o.HelperNamespace = "Flock System" }, []string{`--helper-namespace "Flock System"`}},
		{"zero rollout halt", func(o *Options) { o.RolloutHaltAfter = 0 }, []string{"--rollout-halt-after must be positive"}},
		{"embedded cluster", withCluster(func(*Options) {}), nil},
		{"cluster of one", withCluster(func(o *Options) {
			o.EmbeddedEtcd.InitialCluster = "flock-0=https://a:2380"
			o.EmbeddedEtcd.Name = "flock-0"
		}), nil},
		{"cluster of two", withCluster(func(o *Options) {
			o.EmbeddedEtcd.InitialCluster = "flock-0=https://a:2380,flock-1=https://b:2380"
		}), []string{"--embedded-etcd-initial-cluster must list an odd number of members, at most 7", "got 2"}},
		{"cluster of nine", withCluster(func(o *Options) {
			var entries []string
			for i := range 9 {
				entries = append(entries, fmt.Sprintf("flock-%d=https://h%d:2380", i, i))
			}
			o.EmbeddedEtcd.InitialCluster = strings.Join(entries, ",")
		}), []string{"at most 7", "got 9"}},
		{"cluster entry without URL", withCluster(func(o *Options) { o.EmbeddedEtcd.InitialCluster = "flock-0" }), []string{`--embedded-etcd-initial-cluster: entry "flock-0" is not name=peerURL`}},
		{"cluster name twice", withCluster(func(o *Options) {
			o.EmbeddedEtcd.InitialCluster = "flock-0=https://a:2380,flock-0=https://b:2380,flock-2=https://c:2380"
		}), []string{`member name "flock-0" appears twice`}},
		{"plain http peer", withCluster(func(o *Options) {
			o.EmbeddedEtcd.InitialCluster = "flock-0=http://a:2380,flock-1=https://b:2380,flock-2=https://c:2380"
		}), []string{`peer URL of "flock-0": "http://a:2380" must be https://host:port`}},
		{"bad member name", withCluster(func(o *Options) {
			o.EmbeddedEtcd.InitialCluster = "Flock_0=https://a:2380,flock-1=https://b:2380,flock-2=https://c:2380"
			o.EmbeddedEtcd.Name = "flock-1"
		}), []string{`member name "Flock_0"`}},
		{"no member name", withCluster(func(o *Options) { o.EmbeddedEtcd.Name = "" }), []string{"--embedded-etcd-name is required"}},
		{"name not in cluster", withCluster(func(o *Options) { o.EmbeddedEtcd.Name = "flock-9" }), []string{`--embedded-etcd-name "flock-9" is not a member`}},
		{"client URL without port", withCluster(func(o *Options) { o.EmbeddedEtcd.ClientURL = "https://a" }), []string{`--embedded-etcd-client-url: "https://a" must be https://host:port`}},
		{"no cluster client URLs", withCluster(func(o *Options) { o.EmbeddedEtcd.ClusterClientURLs = nil }), []string{"--embedded-etcd-cluster-client-urls is required"}},
		{"bad cluster client URL", withCluster(func(o *Options) { o.EmbeddedEtcd.ClusterClientURLs = []string{"http://a:2379"} }), []string{"--embedded-etcd-cluster-client-urls"}},
		{"no TLS", withCluster(func(o *Options) { o.EmbeddedEtcd.PeerKeyFile = ""; o.EmbeddedEtcd.ClientTrustedCAFile = "" }),
			[]string{"--embedded-etcd-peer-key-file is required", "--embedded-etcd-client-trusted-ca-file is required"}},
		{"empty token", withCluster(func(o *Options) { o.EmbeddedEtcd.Token = "" }), []string{"--embedded-etcd-initial-cluster-token"}},
		{"cluster and external etcd", withCluster(func(o *Options) {
			o.RecommendedOptions.Etcd.StorageConfig.Transport.ServerList = []string{"https://etcd:2379"}
		}), []string{"--embedded-etcd-initial-cluster and --etcd-servers exclude each other"}},
		{"several errors at once", func(o *Options) { o.Workers = 0; o.HelperImage = "" }, []string{"--workers", "--helper-image"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := NewOptions()
			tc.mutate(o)
			if err := o.Complete(); err != nil {
				t.Fatal(err)
			}
			err := o.Validate()
			if len(tc.errs) == 0 {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("want errors %q, got none", tc.errs)
			}
			for _, want := range tc.errs {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not contain %q", err, want)
				}
			}
		})
	}
}

// withCluster sets valid cluster-mode flags, then applies mutate.
func withCluster(mutate func(*Options)) func(*Options) {
	return func(o *Options) {
		e := &o.EmbeddedEtcd
		e.InitialCluster = "flock-0=https://flock-0.flock-etcd:2380,flock-1=https://flock-1.flock-etcd:2380,flock-2=https://flock-2.flock-etcd:2380"
		e.Name = "flock-1"
		e.ClientURL = "https://flock-1.flock-etcd:2379"
		e.ClusterClientURLs = []string{"https://flock-0.flock-etcd:2379", "https://flock-1.flock-etcd:2379", "https://flock-2.flock-etcd:2379"}
		e.PeerCertFile, e.PeerKeyFile, e.PeerTrustedCAFile = "/tls/peer.crt", "/tls/peer.key", "/tls/ca.crt"
		e.ClientCertFile, e.ClientKeyFile, e.ClientTrustedCAFile = "/tls/client.crt", "/tls/client.key", "/tls/ca.crt"
		mutate(o)
	}
}

// TestClusterModeStoresThroughLocalMember: in cluster mode Flocks are stored
// through this member's client URL, over TLS with the client certificate.
func TestClusterModeStoresThroughLocalMember(t *testing.T) {
	o := NewOptions()
	withCluster(func(*Options) {})(o)
	if err := o.Complete(); err != nil {
		t.Fatal(err)
	}
	tr := o.RecommendedOptions.Etcd.StorageConfig.Transport
	if len(tr.ServerList) != 1 || tr.ServerList[0] != "https://flock-1.flock-etcd:2379" {
		t.Errorf("servers %v, want this member's client URL only", tr.ServerList)
	}
	if tr.CertFile != "/tls/client.crt" || tr.KeyFile != "/tls/client.key" || tr.TrustedCAFile != "/tls/ca.crt" {
		t.Errorf("client TLS %q %q %q", tr.CertFile, tr.KeyFile, tr.TrustedCAFile)
	}
	c, err := o.embeddedEtcdConfig()
	if err != nil {
		t.Fatal(err)
	}
	if c.Cluster == nil || c.Cluster.Name != "flock-1" || len(c.Cluster.InitialCluster) != 3 || c.Cluster.Peer.CertFile != "/tls/peer.crt" {
		t.Errorf("member config %+v", c.Cluster)
	}
}

func TestControllerEnabled(t *testing.T) {
	for _, tc := range []struct {
		controllers []string
		want        bool
	}{
		{[]string{"*"}, true},
		{[]string{"flock"}, true},
		{[]string{"-flock"}, false},
		{[]string{"*", "-flock"}, false},
		{[]string{}, false},
	} {
		o := NewOptions()
		o.Controllers = tc.controllers
		if got := o.ControllerEnabled(ControllerFlock); got != tc.want {
			t.Errorf("--controllers=%v: enabled=%v, want %v", tc.controllers, got, tc.want)
		}
	}
}

func TestStandaloneIsExplicit(t *testing.T) {
	o := NewOptions()
	if err := o.Complete(); err != nil {
		t.Fatal(err)
	}
	if o.RecommendedOptions.Authentication == nil || o.RecommendedOptions.Authorization == nil || o.RecommendedOptions.Admission == nil {
		t.Fatal("delegated authn/authz and admission must be on by default")
	}
	o = NewOptions()
	o.Standalone = true
	if err := o.Complete(); err != nil {
		t.Fatal(err)
	}
	if o.RecommendedOptions.Authentication != nil || o.ControllerEnabled(ControllerFlock) {
		t.Fatal("standalone must turn off authn and the controller")
	}
}

func TestHelpMentionsFlockFlags(t *testing.T) {
	fss := NewOptions().Flags()
	var names []string
	for _, fs := range fss.FlagSets {
		fs.VisitAll(func(f *pflag.Flag) { names = append(names, f.Name) })
	}
	all := strings.Join(names, " ")
	for _, want := range []string{"etcd-servers", "embedded-etcd-data-dir", "data-root", "allow-host-access", "cluster-domain",
		"controllers", "workers", "kube-api-qps", "leader-elect", "helper-image", "helper-namespace", "kubeconfig", "authentication-kubeconfig", "secure-port"} {
		if !strings.Contains(" "+all+" ", " "+want+" ") {
			t.Errorf("flag --%s missing", want)
		}
	}
}

// Standalone allows every request: it is refused unless bound to loopback.
func TestStandaloneNeedsLoopback(t *testing.T) {
	for _, tc := range []struct {
		bind    string
		refused bool
	}{{"0.0.0.0", true}, {"10.1.2.3", true}, {"127.0.0.1", false}, {"::1", false}} {
		o := NewOptions()
		o.Standalone = true
		o.RecommendedOptions.SecureServing.BindAddress = net.ParseIP(tc.bind)
		if err := o.Complete(); err != nil {
			t.Fatal(err)
		}
		err := o.Validate()
		got := err != nil && strings.Contains(err.Error(), "--insecure-standalone-for-tests allows every request: it needs --bind-address on loopback")
		if got != tc.refused {
			t.Errorf("--bind-address=%s: refused=%v, want %v (%v)", tc.bind, got, tc.refused, err)
		}
	}
}

// The server compacts its etcd every minute unless told otherwise.
func TestCompactionIntervalDefaultsToAMinute(t *testing.T) {
	for args, want := range map[string]time.Duration{"": time.Minute, "--etcd-compaction-interval=5m": 5 * time.Minute} {
		o := NewOptions()
		fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
		for _, f := range o.Flags().FlagSets {
			fs.AddFlagSet(f)
		}
		if err := fs.Parse(strings.Fields(args)); err != nil {
			t.Fatal(err)
		}
		if got := o.RecommendedOptions.Etcd.StorageConfig.CompactionInterval; got != want {
			t.Errorf("%q: compaction interval %v, want %v", args, got, want)
		}
	}
}
