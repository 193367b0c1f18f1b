package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/miekg/dns"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Cluster DNS: CoreDNS with its kubernetes plugin, as in a real cluster.
const (
	// ClusterDomain is the DNS domain of the local cluster.
	ClusterDomain = "cluster.local"
	// CoreDNSNamespace and CoreDNSServiceAccount are the identity CoreDNS
	// reads kube-apiserver with; ClusterRole CoreDNSClusterRole grants it
	// what the kubernetes plugin watches (like kubeadm's system:coredns).
	CoreDNSNamespace      = "kube-system"
	CoreDNSServiceAccount = "coredns"
	CoreDNSClusterRole    = "flock-local:coredns"
	// coreDNSTokenSeconds is the lifetime of CoreDNS's ServiceAccount token.
	coreDNSTokenSeconds = 7 * 24 * 3600
)

// DNSZones are the zones CoreDNS serves: the cluster domain and the reverse
// zones of the pod (kwok and real nodes) and service CIDRs. Names outside them are not served
// (REFUSED): there is no upstream resolver on this machine.
func DNSZones() []string {
	zones := []string{ClusterDomain}
	for _, cidr := range []string{PodCIDR, ServiceCIDR, RealNodeCIDR} {
		rz, err := ReverseZones(cidr)
		if err != nil {
			panic(err) // constants
		}
		zones = append(zones, rz...)
	}
	return zones
}

// ReverseZones returns the in-addr.arpa zones that cover an IPv4 CIDR: one
// zone when the prefix length is a multiple of 8 (10.244.0.0/16 →
// 244.10.in-addr.arpa), otherwise one per address block of the next octet
// boundary (10.0.0.0/23 → 0.0.10.in-addr.arpa and 1.0.10.in-addr.arpa).
func ReverseZones(cidr string) ([]string, error) {
	p, err := netip.ParsePrefix(cidr)
	if err != nil {
		return nil, err
	}
	if !p.Addr().Is4() {
		return nil, fmt.Errorf("%s: only IPv4 CIDRs are supported", cidr)
	}
	if p.Bits() < 8 {
		return nil, fmt.Errorf("%s: a prefix shorter than /8 is not supported", cidr)
	}
	p = p.Masked()
	octets := (p.Bits() + 7) / 8
	count := 1 << (octets*8 - p.Bits())
	base := p.Addr().As4()
	zones := make([]string, 0, count)
	for i := range count {
		a := base
		a[octets-1] += byte(i)
		labels := make([]string, 0, octets+1)
		for j := octets - 1; j >= 0; j-- {
			labels = append(labels, strconv.Itoa(int(a[j])))
		}
		zones = append(zones, strings.Join(labels, ".")+".in-addr.arpa")
	}
	return zones, nil
}

// corefile renders the Corefile: one server block on bind:port for the
// zones, answered by the kubernetes plugin from kube-apiserver through
// kubeconfig. Pod records (a-b-c-d.ns.pod) are disabled, as their only use is
// certificates for IPs; members are found through their headless Service.
// There is no cache plugin, so answers follow the API at once.
//
// Unlike kubeadm's Corefile there is no `fallthrough in-addr.arpa ip6.arpa`:
// it hands reverse names the plugin does not know to the next plugin (an
// upstream forward), and with none, CoreDNS answers SERVFAIL ("no next plugin
// found") instead of an authoritative NXDOMAIN. Serving only the reverse
// zones of the cluster's CIDRs gives NXDOMAIN for an unknown pod IP and
// REFUSED for every other reverse zone.
func corefile(bind string, port int, kubeconfig string, zones []string) string {
	var b strings.Builder
	b.WriteString("# Written by the local control plane (flock.dev/flock/test/cluster).\n")
	for i, z := range zones {
		if i > 0 {
			b.WriteString(" ")
		}
		fmt.Fprintf(&b, "%s:%d", z, port)
	}
	fmt.Fprintf(&b, ` {
    bind %s
    errors
    log
    kubernetes %s {
        kubeconfig %s flock-local
        pods disabled
        ttl 5
    }
}
`, bind, strings.Join(zones, " "), kubeconfig)
	return b.String()
}

// DNSAddr is CoreDNS's address, 127.0.0.1:<port> (UDP and TCP); empty when
// the cluster runs WithoutDNS.
func (c *Cluster) DNSAddr() string {
	if c.opts.WithoutDNS || c.Ports.DNS == 0 {
		return ""
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(c.Ports.DNS))
}

// startCoreDNS grants CoreDNS's ServiceAccount what the kubernetes plugin
// reads, writes its kubeconfig and Corefile, starts it and waits until it
// answers for the kubernetes Service over UDP and TCP.
func (c *Cluster) startCoreDNS(ctx context.Context) error {
	if err := c.applyCoreDNSRBAC(ctx); err != nil {
		return err
	}
	dir := c.path("coredns")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	exp := int64(coreDNSTokenSeconds)
	tr, err := c.Kube.CoreV1().ServiceAccounts(CoreDNSNamespace).CreateToken(ctx, CoreDNSServiceAccount,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &exp}}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("request a token for ServiceAccount %s/%s: %w", CoreDNSNamespace, CoreDNSServiceAccount, err)
	}
	kubeconfig := c.path("coredns", "kubeconfig")
	if err := writeKubeconfig(kubeconfig, c.KubeAPIServerURL, c.PKI.ClusterCA.CertPEM(), kubeconfigUser{
		name: "system:serviceaccount:" + CoreDNSNamespace + ":" + CoreDNSServiceAccount, token: tr.Status.Token,
	}); err != nil {
		return err
	}
	conf := c.path("coredns", "Corefile")
	if err := os.WriteFile(conf, []byte(corefile("127.0.0.1", c.Ports.DNS, kubeconfig, DNSZones())), 0o644); err != nil {
		return err
	}
	p, err := c.start(ctx, "coredns", "coredns", []string{"-conf", conf}, nil)
	if err != nil {
		return err
	}
	addr := c.DNSAddr()
	want := "kubernetes.default.svc." + ClusterDomain + "."
	for _, network := range []string{"udp", "tcp"} {
		if err := c.waitFor(ctx, p, "coredns ("+network+" "+addr+") answering for "+want, func(ctx context.Context) (bool, error) {
			ips, err := queryA(ctx, network, addr, want)
			if err != nil {
				return false, err
			}
			return len(ips) > 0, nil
		}); err != nil {
			return err
		}
	}
	return nil
}

// queryA asks addr for the A records of name and returns the addresses; an
// answer other than NOERROR is an error.
func queryA(ctx context.Context, network, addr, name string) ([]string, error) {
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(name), dns.TypeA)
	cl := &dns.Client{Net: network, Timeout: 2 * time.Second}
	r, _, err := cl.ExchangeContext(ctx, m, addr)
	if err != nil {
		return nil, err
	}
	if r.Rcode != dns.RcodeSuccess {
		return nil, fmt.Errorf("%s A: %s", name, dns.RcodeToString[r.Rcode])
	}
	var ips []string
	for _, rr := range r.Answer {
		if a, ok := rr.(*dns.A); ok {
			ips = append(ips, a.A.String())
		}
	}
	if len(ips) == 0 {
		return nil, fmt.Errorf("%s A: no address in the answer", name)
	}
	return ips, nil
}

// applyCoreDNSRBAC creates CoreDNS's ServiceAccount, ClusterRole and binding.
func (c *Cluster) applyCoreDNSRBAC(ctx context.Context) error {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: CoreDNSServiceAccount, Namespace: CoreDNSNamespace}}
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: CoreDNSClusterRole},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"endpoints", "services", "pods", "namespaces"}, Verbs: []string{"list", "watch"}},
			{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"list", "watch"}},
		},
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: CoreDNSClusterRole},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: CoreDNSClusterRole},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: CoreDNSServiceAccount, Namespace: CoreDNSNamespace}},
	}
	var errs []error
	if _, err := c.Kube.CoreV1().ServiceAccounts(CoreDNSNamespace).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		errs = append(errs, err)
	}
	if _, err := c.Kube.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		errs = append(errs, err)
	}
	if _, err := c.Kube.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("CoreDNS RBAC: %w", err)
	}
	return nil
}
