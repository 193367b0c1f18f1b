package cluster

import (
	"fmt"
	"io"
	"net"
	"strconv"
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
