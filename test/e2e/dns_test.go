package e2e

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	flockv1alpha1 "flock.dev/flock/pkg/apis/flock/v1alpha1"
	"flock.dev/flock/test/cluster"
)

// dnsFollowTimeout bounds how long cluster DNS may lag behind a member's pod:
// the endpointslice controller publishes it, CoreDNS's informer picks it up
// (no cache plugin, so no TTL wait).
const dnsFollowTimeout = 30 * time.Second

// dnsPortName and dnsPort are the member container's port, so the headless
// Service has a named port and SRV records exist.
const (
	dnsPortName = "peer"
	dnsPort     = 7000
)

// TestDNS proves the stable network identity of members through the DNS
// server real clusters run: CoreDNS with its kubernetes plugin, reading the
// EndpointSlices that kube-controller-manager publishes for the Flock's
// headless Service, queried with a DNS client over UDP (TCP on truncation).
//
// Flock x in namespace ns has 3 Ready members. Another Flock x in a second
// namespace has 3 members with the same pod names that run but never turn
// Ready. For both: every member's A record is its pod IP under the name in
// status.members[].hostname, the PTR record of each pod IP is that name, and
// the SRV record of the named port lists every member. Not Ready members
// resolve (publishNotReadyAddresses), and no name of x in ns ever answers
// with an address of the other Flock. Deleting pod x-1 brings the member back
// on its node with a new pod IP, and A and PTR follow.
func TestDNS(t *testing.T) {
	if env.DNSAddr() == "" {
		t.Fatal("the local control plane runs no CoreDNS (cluster.Options.WithoutDNS?)")
	}
	r := &dnsResolver{addr: env.DNSAddr()}
	ns := newNamespace(t)
	otherNS := newNamespace(t)

	other := dnsFlock("x", otherNS)
	other.Spec.PodManagementPolicy = flockv1alpha1.ParallelPodManagement
	other.Spec.Template.Annotations = map[string]string{cluster.NeverReadyMarker: "true"}
	createFlock(t, other)
	createAvailable(t, dnsFlock("x", ns))

	mine := waitDNSMembers(t, ns, "x", true)
	theirs := waitDNSMembers(t, otherNS, "x", false)
	// Every answer about a name of x in ns is checked against the other
	// Flock's addresses, at every step below.
	r.forbid(ns, theirs)
	r.forbid(otherNS, mine)
	t.Logf("members of x in %s: %v", ns, mine)
	t.Logf("members of x in %s (never Ready): %v", otherNS, theirs)

	if !t.Run("headless Service and EndpointSlices publish every member with its hostname", func(t *testing.T) {
		for _, set := range []struct {
			ns      string
			members []dnsMember
		}{{ns, mine}, {otherNS, theirs}} {
			checkHeadlessService(t, set.ns, "x", set.members)
		}
	}) {
		return
	}

	if !t.Run("A, PTR and SRV of every member", func(t *testing.T) {
		checkMemberRecords(t, r, ns, mine)
	}) {
		return
	}

	if !t.Run("members that are not Ready resolve, in their own namespace only", func(t *testing.T) {
		checkMemberRecords(t, r, otherNS, theirs)
		// They were not Ready while they resolved, and still are not.
		for _, m := range theirs {
			pod, err := env.Kube.CoreV1().Pods(otherNS).Get(ctxFor(t), m.Pod, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if podReady(pod) {
				t.Errorf("pod %s/%s is Ready; the never-ready marker should keep it Running but not Ready", otherNS, m.Pod)
			}
		}
	}) {
		return
	}

	t.Run("a deleted member returns on its node with a new IP, and A and PTR follow", func(t *testing.T) {
		// kwok hands a freed pod IP out again, picked at random among the
		// free ones; free a few more so x-1 comes back with another IP.
		// Should it get the old one anyway, delete it again (bounded).
		freePodIPs(t, ns, 10)
		const attempts = 5
		for attempt := 1; ; attempt++ {
			before := mine[1]
			after := deleteMemberPod(t, ns, "x", before)
			mine[1] = after
			r.forbid(otherNS, mine)
			eventuallyRecords(t, r, fmt.Sprintf("A and PTR of the new %s (%s)", after.Pod, after.IP), func(ctx context.Context) error {
				return memberRecordsErr(ctx, r, ns, after)
			})
			if after.IP != before.IP {
				t.Logf("attempt %d: %s moved from %s to %s on node %s", attempt, after.Pod, before.IP, after.IP, after.Node)
				eventuallyRecords(t, r, "the old IP "+before.IP+" no longer names "+after.FQDN, func(ctx context.Context) error {
					names, in, err := r.lookupPTR(ctx, before.IP)
					if in != nil && in.Rcode == dns.RcodeNameError {
						return nil // NXDOMAIN: nothing has the old IP now
					}
					if err != nil {
						return err
					}
					if slices.Contains(names, after.FQDN+".") {
						return fmt.Errorf("PTR %s = %v", before.IP, names)
					}
					return nil
				})
				break
			}
			if attempt == attempts {
				t.Fatalf("%s came back with its old IP %s %d times in a row; kwok reuses freed IPs, so nothing here shows DNS following a new one", after.Pod, after.IP, attempts)
			}
			t.Logf("attempt %d: %s came back with its old IP %s (kwok reused it); deleting it again", attempt, after.Pod, after.IP)
		}
		// Everything else is unchanged, in both namespaces.
		checkMemberRecords(t, r, ns, mine)
		checkMemberRecords(t, r, otherNS, theirs)
	})
}

// dnsFlock is a 3-member Flock whose container has the named port.
func dnsFlock(name, namespace string) *flockv1alpha1.Flock {
	f := newFlock(name, namespace, 3)
	f.Spec.Template.Spec.Containers[0].Ports = []corev1.ContainerPort{{Name: dnsPortName, ContainerPort: dnsPort, Protocol: corev1.ProtocolTCP}}
	return f
}

// dnsMember is what DNS must say about one member.
type dnsMember struct {
	Pod  string
	UID  types.UID
	Node string
	IP   string
	// FQDN is status.members[].hostname, without the trailing dot.
	FQDN string
}

func (m dnsMember) String() string { return fmt.Sprintf("%s=%s@%s", m.FQDN, m.IP, m.Node) }

// memberFQDN is the name a member must have: <pod>.<service>.<ns>.svc.<domain>.
func memberFQDN(pod, service, ns string) string {
	return fmt.Sprintf("%s.%s.%s.svc.%s", pod, service, ns, cluster.ClusterDomain)
}

// waitDNSMembers waits until Flock ns/name lists 3 members whose pods run on
// their nodes with a pod IP (and are Ready, or not Ready, as ready says), and
// returns them. Each status.members[].hostname must be the member's FQDN.
func waitDNSMembers(t *testing.T, ns, name string, ready bool) []dnsMember {
	t.Helper()
	var out []dnsMember
	eventually(t, availableTimeout, fmt.Sprintf("3 members of %s/%s running with pod IPs (ready=%v)", ns, name, ready), func(ctx context.Context) error {
		ms, err := flockDNSMembers(ctx, ns, name, ready)
		if err != nil {
			return err
		}
		if len(ms) != 3 {
			return fmt.Errorf("%d members", len(ms))
		}
		out = ms
		return nil
	})
	return out
}

// flockDNSMembers reads Flock ns/name and its members' pods.
func flockDNSMembers(ctx context.Context, ns, name string, ready bool) ([]dnsMember, error) {
	f, err := env.Flock.FlockV1alpha1().Flocks(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	svc := name
	if f.Spec.ServiceName != "" {
		svc = f.Spec.ServiceName
	}
	var out []dnsMember
	for _, m := range f.Status.Members {
		want := memberFQDN(m.Pod, svc, ns)
		if m.Hostname != want {
			return nil, fmt.Errorf("status.members[%d].hostname = %q, want %q", m.Ordinal, m.Hostname, want)
		}
		if m.Pod != fmt.Sprintf("%s-%d", name, m.Ordinal) || int(m.Ordinal) != len(out) {
			return nil, fmt.Errorf("status.members[%d] = %+v, want pod %s-%d in ordinal order", len(out), m, name, len(out))
		}
		pod, err := env.Kube.CoreV1().Pods(ns).Get(ctx, m.Pod, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		switch {
		case pod.DeletionTimestamp != nil:
			return nil, fmt.Errorf("pod %s is being deleted", pod.Name)
		case pod.Spec.NodeName != m.Node:
			return nil, fmt.Errorf("pod %s runs on %q, its member on %q", pod.Name, pod.Spec.NodeName, m.Node)
		case pod.Status.Phase != corev1.PodRunning || pod.Status.PodIP == "":
			return nil, fmt.Errorf("pod %s is %s with IP %q", pod.Name, pod.Status.Phase, pod.Status.PodIP)
		case podReady(pod) != ready || m.Ready != ready:
			return nil, fmt.Errorf("pod %s Ready=%v (status says %v), want %v", pod.Name, podReady(pod), m.Ready, ready)
		case pod.Spec.Hostname != pod.Name || pod.Spec.Subdomain != svc:
			return nil, fmt.Errorf("pod %s has hostname %q, subdomain %q; want %q, %q", pod.Name, pod.Spec.Hostname, pod.Spec.Subdomain, pod.Name, svc)
		}
		out = append(out, dnsMember{Pod: pod.Name, UID: pod.UID, Node: m.Node, IP: pod.Status.PodIP, FQDN: m.Hostname})
	}
	return out, nil
}

// podReady reports whether a pod is Running with its Ready condition True.
func podReady(pod *corev1.Pod) bool {
	if pod.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// checkHeadlessService checks the Service the controller made for Flock
// ns/name, and that kube-controller-manager's EndpointSlices hold exactly the
// members, each with hostname = pod name (what CoreDNS turns into the A and
// PTR records).
func checkHeadlessService(t *testing.T, ns, name string, members []dnsMember) {
	t.Helper()
	svc, err := env.Kube.CoreV1().Services(ns).Get(ctxFor(t), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if svc.Spec.ClusterIP != corev1.ClusterIPNone || !svc.Spec.PublishNotReadyAddresses {
		t.Errorf("Service %s/%s: clusterIP %q, publishNotReadyAddresses %v; want None, true", ns, name, svc.Spec.ClusterIP, svc.Spec.PublishNotReadyAddresses)
	}
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Name != dnsPortName || svc.Spec.Ports[0].Port != dnsPort || svc.Spec.Ports[0].Protocol != corev1.ProtocolTCP {
		t.Errorf("Service %s/%s ports = %+v, want one TCP port %s %d", ns, name, svc.Spec.Ports, dnsPortName, dnsPort)
	}
	want := map[string]string{} // pod -> IP
	for _, m := range members {
		want[m.Pod] = m.IP
	}
	eventually(t, dnsFollowTimeout, fmt.Sprintf("EndpointSlices of %s/%s list the members with hostnames", ns, name), func(ctx context.Context) error {
		slices, err := env.Kube.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + name})
		if err != nil {
			return err
		}
		got := map[string]string{}
		for _, s := range slices.Items {
			for _, ep := range s.Endpoints {
				if ep.TargetRef == nil || ep.TargetRef.Kind != "Pod" || len(ep.Addresses) != 1 {
					return fmt.Errorf("endpoint %+v: want one address and a Pod targetRef", ep)
				}
				if ep.Hostname == nil || *ep.Hostname != ep.TargetRef.Name {
					return fmt.Errorf("endpoint of pod %s has hostname %v, want %q", ep.TargetRef.Name, ep.Hostname, ep.TargetRef.Name)
				}
				if prev, dup := got[ep.TargetRef.Name]; dup {
					return fmt.Errorf("pod %s listed twice (%s, %s)", ep.TargetRef.Name, prev, ep.Addresses[0])
				}
				got[ep.TargetRef.Name] = ep.Addresses[0]
			}
		}
		if !maps.Equal(got, want) {
			return fmt.Errorf("endpoints %v, want exactly %v", got, want)
		}
		return nil
	})
}

// checkMemberRecords checks, within dnsFollowTimeout, every record of the
// members of Flock x in ns.
func checkMemberRecords(t *testing.T, r *dnsResolver, ns string, members []dnsMember) {
	t.Helper()
	for _, m := range members {
		eventuallyRecords(t, r, "A and PTR of "+m.String(), func(ctx context.Context) error {
			return memberRecordsErr(ctx, r, ns, m)
		})
	}
	var ips, targets []string
	for _, m := range members {
		ips = append(ips, m.IP)
		targets = append(targets, m.FQDN+".")
	}
	slices.Sort(ips)
	slices.Sort(targets)
	service := fmt.Sprintf("x.%s.svc.%s", ns, cluster.ClusterDomain)
	eventuallyRecords(t, r, "A of the headless Service "+service, func(ctx context.Context) error {
		got, _, err := r.lookupA(ctx, service)
		if err != nil {
			return err
		}
		slices.Sort(got)
		if !slices.Equal(got, ips) {
			return fmt.Errorf("A %s = %v, want %v", service, got, ips)
		}
		return nil
	})
	srvName := fmt.Sprintf("_%s._tcp.%s", dnsPortName, service)
	eventuallyRecords(t, r, "SRV "+srvName, func(ctx context.Context) error {
		srvs, _, err := r.lookupSRV(ctx, srvName)
		if err != nil {
			return err
		}
		var got []string
		for _, s := range srvs {
			if s.Port != dnsPort {
				return fmt.Errorf("SRV %s: %s has port %d, want %d", srvName, s.Target, s.Port, dnsPort)
			}
			got = append(got, s.Target)
		}
		slices.Sort(got)
		if !slices.Equal(got, targets) {
			return fmt.Errorf("SRV %s targets = %v, want %v", srvName, got, targets)
		}
		return nil
	})
}

// memberRecordsErr checks that the member's name has exactly its pod IP as A
// record and that its pod IP's PTR record is exactly its name.
func memberRecordsErr(ctx context.Context, r *dnsResolver, ns string, m dnsMember) error {
	ips, _, err := r.lookupA(ctx, m.FQDN)
	if err != nil {
		return err
	}
	if !slices.Equal(ips, []string{m.IP}) {
		return fmt.Errorf("A %s = %v, want [%s]", m.FQDN, ips, m.IP)
	}
	names, _, err := r.lookupPTR(ctx, m.IP)
	if err != nil {
		return err
	}
	if !slices.Equal(names, []string{m.FQDN + "."}) {
		return fmt.Errorf("PTR %s = %v, want [%s.]", m.IP, names, m.FQDN)
	}
	return nil
}

// eventuallyRecords is eventually with dnsFollowTimeout that fails at once on
// a forbidden answer (an address of another namespace's Flock).
func eventuallyRecords(t *testing.T, r *dnsResolver, what string, f func(ctx context.Context) error) {
	t.Helper()
	eventually(t, dnsFollowTimeout, what, func(ctx context.Context) error {
		err := f(ctx)
		var fe *forbiddenAnswerError
		if errors.As(err, &fe) {
			t.Fatalf("%s: %v", what, err)
		}
		return err
	})
}

// freePodIPs creates n bare pods on the first node, waits for their IPs, and
// deletes them, so kwok has n more free IPs to hand out.
func freePodIPs(t *testing.T, ns string, n int) {
	t.Helper()
	ctx := ctxFor(t)
	node := env.NodeNames[0]
	var names []string
	for i := range n {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("ip-filler-%d", i), Namespace: ns},
			Spec: corev1.PodSpec{
				NodeName:   node,
				Containers: []corev1.Container{{Name: "c", Image: "busybox:1.36"}},
			},
		}
		if _, err := env.Kube.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		names = append(names, pod.Name)
	}
	eventually(t, availableTimeout, "filler pods have IPs", func(ctx context.Context) error {
		for _, name := range names {
			pod, err := env.Kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if pod.Status.PodIP == "" {
				return fmt.Errorf("pod %s has no IP yet", name)
			}
		}
		return nil
	})
	zero := int64(0)
	for _, name := range names {
		if err := env.Kube.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, availableTimeout, "filler pods gone", func(ctx context.Context) error {
		for _, name := range names {
			if _, err := env.Kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("pod %s still exists (%v)", name, err)
			}
		}
		return nil
	})
}

// deleteMemberPod deletes the member's pod with kubectl and waits until the
// member is back: a new pod with the same name on the same node, running
// with an IP, Ready, with the same status hostname.
func deleteMemberPod(t *testing.T, ns, name string, m dnsMember) dnsMember {
	t.Helper()
	kubectl(t, env.KubectlBuilt(), "delete", "pod", m.Pod, "-n", ns)
	var back dnsMember
	eventually(t, availableTimeout, fmt.Sprintf("%s/%s back on %s", ns, m.Pod, m.Node), func(ctx context.Context) error {
		ms, err := flockDNSMembers(ctx, ns, name, true)
		if err != nil {
			return err
		}
		for _, n := range ms {
			if n.Pod != m.Pod {
				continue
			}
			if n.UID == m.UID {
				return fmt.Errorf("pod %s is still the old one (uid %s)", n.Pod, n.UID)
			}
			if n.Node != m.Node || n.FQDN != m.FQDN {
				t.Fatalf("member %s came back as %v, want node %s and name %s", m.Pod, n, m.Node, m.FQDN)
			}
			back = n
			return nil
		}
		return fmt.Errorf("no member %s", m.Pod)
	})
	return back
}

// dnsResolver queries one DNS server, over UDP and over TCP when the answer
// is truncated, and refuses answers that name a forbidden address.
type dnsResolver struct {
	addr string
	// forbidden[ns] are addresses that no name in namespace ns may have.
	forbidden map[string]map[string]string // ns -> IP -> whose
}

// forbiddenAnswerError is an answer that leaks another Flock's member.
type forbiddenAnswerError struct{ msg string }

func (e *forbiddenAnswerError) Error() string { return e.msg }

// forbid records that no name in namespace ns may resolve to the members'
// addresses (replacing what was forbidden in ns before).
func (r *dnsResolver) forbid(ns string, members []dnsMember) {
	if r.forbidden == nil {
		r.forbidden = map[string]map[string]string{}
	}
	m := map[string]string{}
	for _, x := range members {
		m[x.IP] = x.FQDN
	}
	r.forbidden[ns] = m
}

// exchange sends one question and returns the answer; rcodes other than
// NOERROR are errors.
func (r *dnsResolver) exchange(ctx context.Context, name string, qtype uint16) (*dns.Msg, error) {
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(name), qtype)
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	in, _, err := (&dns.Client{Net: "udp"}).ExchangeContext(ctx, m, r.addr)
	if err == nil && in.Truncated {
		in, _, err = (&dns.Client{Net: "tcp"}).ExchangeContext(ctx, m, r.addr)
	}
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", dns.TypeToString[qtype], name, err)
	}
	if in.Rcode != dns.RcodeSuccess {
		return in, fmt.Errorf("%s %s: %s", dns.TypeToString[qtype], name, dns.RcodeToString[in.Rcode])
	}
	if !in.Authoritative {
		return in, fmt.Errorf("%s %s: answer is not authoritative", dns.TypeToString[qtype], name)
	}
	// Any address in the answer (A, or the A glue of SRV) about a name of
	// namespace ns must not be another namespace's member.
	for ns, bad := range r.forbidden {
		if !strings.HasSuffix(strings.TrimSuffix(strings.ToLower(name), "."), "."+ns+".svc."+cluster.ClusterDomain) {
			continue
		}
		for _, rr := range append(slices.Clone(in.Answer), in.Extra...) {
			if a, ok := rr.(*dns.A); ok {
				if whose, found := bad[a.A.String()]; found {
					return in, &forbiddenAnswerError{fmt.Sprintf("%s %s answered %s, the address of %s", dns.TypeToString[qtype], name, a.A, whose)}
				}
			}
		}
	}
	return in, nil
}

// lookupA returns the addresses of name's A records.
func (r *dnsResolver) lookupA(ctx context.Context, name string) ([]string, *dns.Msg, error) {
	in, err := r.exchange(ctx, name, dns.TypeA)
	if err != nil {
		return nil, in, err
	}
	var out []string
	for _, rr := range in.Answer {
		if a, ok := rr.(*dns.A); ok {
			out = append(out, a.A.String())
		}
	}
	return out, in, nil
}

// lookupPTR returns the names of ip's PTR records (fully qualified).
func (r *dnsResolver) lookupPTR(ctx context.Context, ip string) ([]string, *dns.Msg, error) {
	rev, err := dns.ReverseAddr(ip)
	if err != nil {
		return nil, nil, err
	}
	in, err := r.exchange(ctx, rev, dns.TypePTR)
	if err != nil {
		return nil, in, err
	}
	var out []string
	for _, rr := range in.Answer {
		if p, ok := rr.(*dns.PTR); ok {
			out = append(out, p.Ptr)
		}
	}
	return out, in, nil
}

// lookupSRV returns name's SRV records.
func (r *dnsResolver) lookupSRV(ctx context.Context, name string) ([]*dns.SRV, *dns.Msg, error) {
	in, err := r.exchange(ctx, name, dns.TypeSRV)
	if err != nil {
		return nil, in, err
	}
	var out []*dns.SRV
	for _, rr := range in.Answer {
		if s, ok := rr.(*dns.SRV); ok {
			out = append(out, s)
		}
	}
	return out, in, nil
}
