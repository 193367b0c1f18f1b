package cluster

import (
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
)

// Ports are the loopback TCP ports of a local control plane (DNS is UDP and
// TCP). Zero means "any free port"; Up fills every field in (DNS stays zero
// WithoutDNS).
type Ports struct {
	Etcd              int
	EtcdPeer          int
	KubeAPIServer     int
	ControllerManager int
	Scheduler         int
	FlockAPIServer    int
	FlockEtcd         int
	FlockEtcdPeer     int
	// DNS is CoreDNS's port, for UDP and TCP.
	DNS int
}

// named lists the ports with their component names, in a fixed order.
func (p *Ports) named() []namedPort {
	return []namedPort{
		{name: "etcd client", port: &p.Etcd},
		{name: "etcd peer", port: &p.EtcdPeer},
		{name: "kube-apiserver", port: &p.KubeAPIServer},
		{name: "kube-controller-manager", port: &p.ControllerManager},
		{name: "kube-scheduler", port: &p.Scheduler},
		{name: "flock-apiserver", port: &p.FlockAPIServer},
		{name: "flock-apiserver embedded etcd client", port: &p.FlockEtcd},
		{name: "flock-apiserver embedded etcd peer", port: &p.FlockEtcdPeer},
		{name: "coredns", port: &p.DNS, udp: true},
	}
}

type namedPort struct {
	name string
	port *int
	udp  bool // UDP as well as TCP
}

// PortInUseError says which component's fixed port is taken.
type PortInUseError struct {
	Name string
	Port int
	Err  error
}

func (e *PortInUseError) Error() string {
	return fmt.Sprintf("port %d for %s is already in use on 127.0.0.1 (is another control plane running? choose another port or stop it): %v", e.Port, e.Name, e.Err)
}

func (e *PortInUseError) Unwrap() error { return e.Err }

// allocatePorts checks that every fixed port is free and picks a free port for
// every zero one. All listeners stay open until every port is chosen, so the
// chosen ports are distinct.
func allocatePorts(ports []namedPort) error {
	var held []io.Closer
	defer func() {
		for _, l := range held {
			l.Close()
		}
	}()
	for _, np := range ports {
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(*np.port))
		if *np.port == 0 {
			// A port below the kernel's ephemeral range: a port picked
			// there could be taken by some client's outgoing connection in
			// the seconds before its component binds it.
			if l, u := listenBelowEphemeral(np.udp); l != nil {
				held = append(held, l)
				if u != nil {
					held = append(held, u)
				}
				*np.port = l.Addr().(*net.TCPAddr).Port
				continue
			}
		}
		if *np.port != 0 || !np.udp {
			l, err := net.Listen("tcp", addr)
			if err == nil {
				held = append(held, l)
				if np.udp {
					var u net.PacketConn
					if u, err = net.ListenPacket("udp", addr); err == nil {
						held = append(held, u)
					}
				}
			}
			if err != nil {
				if *np.port != 0 {
					return &PortInUseError{Name: np.name, Port: *np.port, Err: err}
				}
				return fmt.Errorf("no free port on 127.0.0.1 for %s: %w", np.name, err)
			}
			*np.port = l.Addr().(*net.TCPAddr).Port
			continue
		}
		// A free UDP port whose TCP twin is free too; the TCP listeners of
		// the misses stay held until the end, so they are not picked again.
		var err error
		for range 20 {
			var l net.Listener
			if l, err = net.Listen("tcp", addr); err != nil {
				break
			}
			held = append(held, l)
			port := l.Addr().(*net.TCPAddr).Port
			var u net.PacketConn
			if u, err = net.ListenPacket("udp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port))); err == nil {
				held = append(held, u)
				*np.port = port
				break
			}
		}
		if *np.port == 0 {
			return fmt.Errorf("no free UDP and TCP port on 127.0.0.1 for %s: %w", np.name, err)
		}
	}
	return nil
}

// FreePorts returns n distinct free loopback ports, e.g. for an extra
// flock-apiserver or etcd in a test.
func FreePorts(n int) ([]int, error) {
	out := make([]int, n)
	nps := make([]namedPort, n)
	for i := range out {
		nps[i] = namedPort{name: fmt.Sprintf("port %d", i), port: &out[i]}
	}
	return out, allocatePorts(nps)
}

// picker hands out candidate ports from the window just below the ephemeral
// range, in order from a random start, so one process (many clusters in one
// test binary) does not pick the same port twice until the window wraps and
// two processes rarely start on the same ports.
var picker struct {
	once     sync.Once
	lo, size int
	next     int
	mu       sync.Mutex
}

// pickWindow is how many ports below the ephemeral range are used.
const pickWindow = 12000

func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 0
	}
	lo, err := strconv.Atoi(f[0])
	if err != nil {
		return 0
	}
	return lo
}

// listenBelowEphemeral listens on a free loopback TCP port (and UDP on the
// same port when udp) below the ephemeral range; nil when none is found
// there (then the caller lets the kernel choose).
func listenBelowEphemeral(udp bool) (net.Listener, net.PacketConn) {
	picker.once.Do(func() {
		hi := ephemeralLow()
		lo := max(hi-pickWindow, 1024)
		if hi-lo < 1000 {
			return
		}
		picker.lo, picker.size = lo, hi-lo
		picker.next = rand.IntN(picker.size)
	})
	if picker.size == 0 {
		return nil, nil
	}
	for range 200 {
		picker.mu.Lock()
		port := picker.lo + picker.next
		picker.next = (picker.next + 1) % picker.size
		picker.mu.Unlock()
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		l, err := net.Listen("tcp", addr)
		if err != nil {
			continue
		}
		if !udp {
			return l, nil
		}
		u, err := net.ListenPacket("udp", addr)
		if err != nil {
			l.Close()
			continue
		}
		return l, u
	}
	return nil, nil
}

// FreeLoopbackPort returns a TCP port on 127.0.0.1 that was free a moment
// ago (another process may take it before the caller listens).
func FreeLoopbackPort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
