package cluster

import (
	"errors"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
)

func TestReverseZones(t *testing.T) {
	for _, tc := range []struct {
		cidr string
		want []string
	}{
		{"10.244.0.0/16", []string{"244.10.in-addr.arpa"}},
		{"10.244.7.9/16", []string{"244.10.in-addr.arpa"}}, // host bits are ignored
		{"10.0.0.0/24", []string{"0.0.10.in-addr.arpa"}},
		{"10.0.0.0/8", []string{"10.in-addr.arpa"}},
		{"192.168.4.0/23", []string{"4.168.192.in-addr.arpa", "5.168.192.in-addr.arpa"}},
		{"10.1.2.3/32", []string{"3.2.1.10.in-addr.arpa"}},
	} {
		got, err := ReverseZones(tc.cidr)
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("ReverseZones(%q) = %v, %v; want %v", tc.cidr, got, err, tc.want)
		}
	}
	got, err := ReverseZones("172.16.0.0/12")
	if err != nil || len(got) != 16 || got[0] != "16.172.in-addr.arpa" || got[15] != "31.172.in-addr.arpa" {
		t.Errorf("ReverseZones(172.16.0.0/12) = %v, %v; want 16.172 ... 31.172", got, err)
	}
	for _, bad := range []string{"fd00::/64", "10.0.0.0/4", "10.244.0.0", "nonsense"} {
		if z, err := ReverseZones(bad); err == nil {
			t.Errorf("ReverseZones(%q) = %v, want an error", bad, z)
		}
	}
}

func TestDNSZones(t *testing.T) {
	want := []string{"cluster.local", "244.10.in-addr.arpa", "0.0.10.in-addr.arpa", "88.10.in-addr.arpa"}
	if got := DNSZones(); !slices.Equal(got, want) {
		t.Errorf("DNSZones() = %v, want %v (cluster domain, pod CIDR %s, service CIDR %s, real nodes' CIDR %s)", got, want, PodCIDR, ServiceCIDR, RealNodeCIDR)
	}
}

func TestCorefile(t *testing.T) {
	zones := []string{"cluster.local", "244.10.in-addr.arpa"}
	cf := corefile("127.0.0.1", 10053, "/work/coredns/kubeconfig", zones)
	var header string
	for _, l := range strings.Split(cf, "\n") {
		if l != "" && !strings.HasPrefix(l, "#") {
			header = l
			break
		}
	}
	if want := "cluster.local:10053 244.10.in-addr.arpa:10053 {"; header != want {
		t.Errorf("server block = %q, want %q\n%s", header, want, cf)
	}
	for _, want := range []string{
		"bind 127.0.0.1\n",
		"kubernetes cluster.local 244.10.in-addr.arpa {\n",
		"kubeconfig /work/coredns/kubeconfig flock-local\n",
		"pods disabled\n",
	} {
		if !strings.Contains(cf, want) {
			t.Errorf("Corefile lacks %q:\n%s", want, cf)
		}
	}
	// No network here: nothing may be forwarded upstream, and a cache would
	// delay answers after a pod changes.
	for _, bad := range []string{"forward", "cache", "fallthrough"} {
		if strings.Contains(cf, bad) {
			t.Errorf("Corefile has %q:\n%s", bad, cf)
		}
	}
	if strings.Count(cf, "{") != strings.Count(cf, "}") {
		t.Errorf("unbalanced braces:\n%s", cf)
	}
}

func TestAllocateDNSPort(t *testing.T) {
	// A fixed DNS port whose UDP side is taken is refused by name.
	busy, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	busyPort := busy.LocalAddr().(*net.UDPAddr).Port
	p := Ports{DNS: busyPort}
	err = allocatePorts(p.named())
	var inUse *PortInUseError
	if !errors.As(err, &inUse) || inUse.Name != "coredns" || inUse.Port != busyPort {
		t.Fatalf("allocatePorts with a busy UDP DNS port: err = %v, want *PortInUseError for coredns port %d", err, busyPort)
	}

	// A free one is free for UDP and TCP, and distinct from the others.
	for range 5 {
		var q Ports
		if err := allocatePorts(q.named()); err != nil {
			t.Fatal(err)
		}
		for _, np := range q.named() {
			if np.port != &q.DNS && *np.port == q.DNS {
				t.Fatalf("DNS port %d is also %s's", q.DNS, np.name)
			}
		}
		addr := "127.0.0.1:" + strconv.Itoa(q.DNS)
		u, err := net.ListenPacket("udp", addr)
		if err != nil {
			t.Fatalf("UDP %s not free after allocation: %v", addr, err)
		}
		l, err := net.Listen("tcp", addr)
		if err != nil {
			u.Close()
			t.Fatalf("TCP %s not free after allocation: %v", addr, err)
		}
		u.Close()
		l.Close()
	}
}
