package cluster

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"k8s.io/client-go/kubernetes"

	flockclient "flock.dev/flock/pkg/generated/clientset/versioned"
)

// Etcd is an etcd server the harness started.
type Etcd struct {
	*Process
	// URL is the client URL, http://127.0.0.1:<port>.
	URL string
}

// DataDir is the etcd's data directory.
func (e *Etcd) DataDir() string { return flagValue(e.Args, "--data-dir") }

// startEtcd starts kube-apiserver's etcd.
func (c *Cluster) startEtcd(ctx context.Context) error {
	e, err := c.runEtcd(ctx, "etcd", c.path("etcd"), c.Ports.Etcd, c.Ports.EtcdPeer)
	if err != nil {
		return err
	}
	c.EtcdURL = e.URL
	return nil
}

// StartEtcd starts another single-member etcd (e.g. an external store shared
// by several flock-apiservers). It is stopped by Down, or earlier by its
// Process's Stop.
func (c *Cluster) StartEtcd(ctx context.Context, name string) (*Etcd, error) {
	ports, err := FreePorts(2)
	if err != nil {
		return nil, err
	}
	return c.runEtcd(ctx, name, c.path("extra", name), ports[0], ports[1])
}

func (c *Cluster) runEtcd(ctx context.Context, name, dataDir string, clientPort, peerPort int) (*Etcd, error) {
	clientURL := "http://127.0.0.1:" + strconv.Itoa(clientPort)
	peerURL := "http://127.0.0.1:" + strconv.Itoa(peerPort)
	args := []string{
		"--name=" + name,
		"--data-dir=" + dataDir,
		"--listen-client-urls=" + clientURL,
		"--advertise-client-urls=" + clientURL,
		"--listen-peer-urls=" + peerURL,
		"--initial-advertise-peer-urls=" + peerURL,
		"--initial-cluster=" + name + "=" + peerURL,
		"--unsafe-no-fsync",
		"--log-level=warn",
	}
	p, err := c.start(ctx, name, "etcd", args, nil)
	if err != nil {
		return nil, err
	}
	client := &http.Client{Timeout: 2 * time.Second}
	if err := c.waitFor(ctx, p, name, func(ctx context.Context) (bool, error) {
		return httpOK(ctx, client, clientURL+"/health")
	}); err != nil {
		return nil, err
	}
	return &Etcd{Process: p, URL: clientURL}, nil
}

func (c *Cluster) startKubeAPIServer(ctx context.Context) error {
	pki := c.PKI
	args := []string{
		"--etcd-servers=" + c.EtcdURL,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(c.Ports.KubeAPIServer),
		"--tls-cert-file=" + pki.KubeAPIServer.CertFile,
		"--tls-private-key-file=" + pki.KubeAPIServer.KeyFile,
		"--client-ca-file=" + pki.ClusterCA.CertFile,
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + pki.ServiceAccountPubFile,
		"--service-account-signing-key-file=" + pki.ServiceAccountKeyFile,
		"--service-cluster-ip-range=" + ServiceCIDR,
		"--authorization-mode=Node,RBAC",
		"--allow-privileged=true",
		// The aggregation layer: kube-apiserver proxies to flock-apiserver
		// with a client certificate from a CA of its own and the user in
		// X-Remote-* headers.
		"--requestheader-client-ca-file=" + pki.FrontProxyCA.CertFile,
		"--requestheader-allowed-names=" + FrontProxyClientName,
		"--requestheader-username-headers=X-Remote-User",
		"--requestheader-group-headers=X-Remote-Group",
		"--requestheader-extra-headers-prefix=X-Remote-Extra-",
		"--requestheader-uid-headers=X-Remote-Uid",
		"--proxy-client-cert-file=" + pki.FrontProxyClient.CertFile,
		"--proxy-client-key-file=" + pki.FrontProxyClient.KeyFile,
		// logs, exec and port-forward reach real nodes' kubelets at their
		// InternalIP (the node's bridge address) with a client certificate,
		// and their serving certificates are checked against the cluster CA.
		"--kubelet-client-certificate=" + pki.KubeletClient.CertFile,
		"--kubelet-client-key=" + pki.KubeletClient.KeyFile,
		"--kubelet-certificate-authority=" + pki.ClusterCA.CertFile,
		"--kubelet-preferred-address-types=InternalIP,Hostname",
		// Nothing runs at the advertised address but kube-apiserver itself;
		// the APIService reaches flock-apiserver through an ExternalName
		// Service, so aggregator routing stays off.
		"--endpoint-reconciler-type=none",
	}
	args = append(args, c.opts.KubeAPIServerArgs...)
	p, err := c.start(ctx, "kube-apiserver", "kube-apiserver", args, nil)
	if err != nil {
		return err
	}
	c.RESTConfig = c.adminRESTConfig(c.KubeAPIServerURL)
	if c.Kube, err = kubernetes.NewForConfig(c.RESTConfig); err != nil {
		return err
	}
	if c.Flock, err = flockclient.NewForConfig(c.RESTConfig); err != nil {
		return err
	}
	c.KubeconfigPath = c.path("kubeconfig")
	if err := writeKubeconfig(c.KubeconfigPath, c.KubeAPIServerURL, pki.ClusterCA.CertPEM(),
		kubeconfigUser{name: "admin", certPEM: pki.Admin.CertPEM, keyPEM: pki.Admin.KeyPEM}); err != nil {
		return err
	}
	client, err := c.HTTPClient(pki.Admin)
	if err != nil {
		return err
	}
	return c.waitFor(ctx, p, "kube-apiserver /readyz", func(ctx context.Context) (bool, error) {
		return httpOK(ctx, client, c.KubeAPIServerURL+"/readyz")
	})
}

// startControllers starts kube-controller-manager, kube-scheduler and kwok
// and waits until the first two are healthy.
func (c *Cluster) startControllers(ctx context.Context) error {
	pki := c.PKI
	kc := c.KubeconfigPath
	common := []string{
		"--kubeconfig=" + kc,
		"--authentication-kubeconfig=" + kc,
		"--authorization-kubeconfig=" + kc,
		"--bind-address=127.0.0.1",
		"--leader-elect=false",
	}
	kcmArgs := append(append([]string{}, common...),
		"--secure-port="+strconv.Itoa(c.Ports.ControllerManager),
		"--tls-cert-file="+pki.ControllerManager.CertFile,
		"--tls-private-key-file="+pki.ControllerManager.KeyFile,
		// Every controller enabled by default, among them garbagecollector,
		// namespace, endpointslice, nodelifecycle, podgc, statefulset,
		// serviceaccount, serviceaccount-token, replicaset, deployment, job.
		"--controllers=*",
		"--use-service-account-credentials=true",
		"--service-account-private-key-file="+pki.ServiceAccountKeyFile,
		"--root-ca-file="+pki.ClusterCA.CertFile,
		"--cluster-signing-cert-file="+pki.ClusterCA.CertFile,
		"--cluster-signing-key-file="+pki.ClusterCA.KeyFile,
		"--allocate-node-cidrs=false",
		"--kube-api-qps=100",
		"--kube-api-burst=200",
	)
	kcmArgs = append(kcmArgs, c.opts.ControllerManagerArgs...)
	kcm, err := c.start(ctx, "kube-controller-manager", "kube-controller-manager", kcmArgs, nil)
	if err != nil {
		return err
	}
	schedArgs := append(append([]string{}, common...),
		"--secure-port="+strconv.Itoa(c.Ports.Scheduler),
		"--tls-cert-file="+pki.Scheduler.CertFile,
		"--tls-private-key-file="+pki.Scheduler.KeyFile,
	)
	schedArgs = append(schedArgs, c.opts.SchedulerArgs...)
	sched, err := c.start(ctx, "kube-scheduler", "kube-scheduler", schedArgs, nil)
	if err != nil {
		return err
	}
	kwokArgs := []string{
		"--kubeconfig=" + kc,
		"--config=" + filepath.Join(c.opts.RepoRoot, "hack", "kwok", "stages.yaml"),
		"--manage-all-nodes=false",
		"--manage-nodes-with-annotation-selector=" + KwokNodeAnnotation + "=fake",
		"--node-lease-duration-seconds=40",
		"--cidr=" + PodCIDR,
	}
	kwokArgs = append(kwokArgs, c.opts.KwokArgs...)
	// HOME keeps kwok from reading a user's ~/.kwok/kwok.yaml.
	if err := os.MkdirAll(c.path("kwok"), 0o755); err != nil {
		return err
	}
	if _, err := c.start(ctx, "kwok", "kwok", kwokArgs, []string{"HOME=" + c.path("kwok")}); err != nil {
		return err
	}
	client, err := c.HTTPClient(nil)
	if err != nil {
		return err
	}
	for _, w := range []struct {
		p    *Process
		port int
	}{{kcm, c.Ports.ControllerManager}, {sched, c.Ports.Scheduler}} {
		url := fmt.Sprintf("https://127.0.0.1:%d/healthz", w.port)
		if err := c.waitFor(ctx, w.p, w.p.Name+" /healthz", func(ctx context.Context) (bool, error) {
			return httpOK(ctx, client, url)
		}); err != nil {
			return err
		}
	}
	return nil
}
