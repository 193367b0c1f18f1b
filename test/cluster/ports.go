package cluster

import (
	"fmt"
	"net"
	"strconv"
)

// Ports are the loopback TCP ports of a local control plane. Zero means "any
// free port"; Up fills every field in.
type Ports struct {
	Etcd              int
	EtcdPeer          int
	KubeAPIServer     int
	ControllerManager int
	Scheduler         int
	FlockAPIServer    int
	FlockEtcd         int
	FlockEtcdPeer     int
}

// named lists the ports with their component names, in a fixed order.
func (p *Ports) named() []namedPort {
	return []namedPort{
		{"etcd client", &p.Etcd},
		{"etcd peer", &p.EtcdPeer},
		{"kube-apiserver", &p.KubeAPIServer},
		{"kube-controller-manager", &p.ControllerManager},
		{"kube-scheduler", &p.Scheduler},
		{"flock-apiserver", &p.FlockAPIServer},
		{"flock-apiserver embedded etcd client", &p.FlockEtcd},
		{"flock-apiserver embedded etcd peer", &p.FlockEtcdPeer},
	}
}

type namedPort struct {
	name string
	port *int
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
	var listeners []net.Listener
	defer func() {
		for _, l := range listeners {
			l.Close()
		}
	}()
	for _, np := range ports {
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(*np.port))
		l, err := net.Listen("tcp", addr)
		if err != nil {
			if *np.port != 0 {
				return &PortInUseError{Name: np.name, Port: *np.port, Err: err}
			}
			return fmt.Errorf("no free port on 127.0.0.1 for %s: %w", np.name, err)
		}
		listeners = append(listeners, l)
		*np.port = l.Addr().(*net.TCPAddr).Port
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
