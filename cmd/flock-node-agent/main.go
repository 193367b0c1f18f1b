// Command flock-node-agent is the Flock node agent: on each node it gives
// the node-local data directories of Flock members on that node their
// owner and mode, in place of a prepare helper pod per member (see package
// flock.dev/flock/pkg/nodeagent for the protocol with the controller).
//
// It is deployed as a DaemonSet in the Flock server's namespace, its pods
// labelled flock.dev/component=node-agent. The node's data root is mounted
// as a hostPath at the same path (--data-root), so that the paths in the
// volumes mean the same inside and out. It runs as root with only the
// capabilities CAP_CHOWN and CAP_FOWNER, and learns its node from NODE_NAME,
// set from the downward API (fieldRef spec.nodeName).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"flock.dev/flock/pkg/nodeagent"
)

func main() {
	var (
		opts       nodeagent.Options
		kubeconfig string
		qps        float64
		burst      int
	)
	klog.InitFlags(nil)
	flag.StringVar(&opts.NodeName, "node-name", os.Getenv("NODE_NAME"), "name of the node the agent runs on (default $NODE_NAME)")
	flag.StringVar(&opts.DataRoot, "data-root", "", "the node's data root, mounted at the same path (required, absolute)")
	flag.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig file (default: the in-cluster configuration)")
	flag.Float64Var(&qps, "kube-api-qps", 20, "queries per second to the Kubernetes API server")
	flag.IntVar(&burst, "kube-api-burst", 40, "burst of queries to the Kubernetes API server")
	flag.IntVar(&opts.Workers, "workers", nodeagent.DefaultWorkers, "volumes prepared at once")
	flag.DurationVar(&opts.MarkWait, "mark-wait", nodeagent.DefaultMarkWait, "at most how long after a volume was made the agent's mark waits for the PersistentVolume controller to take the volume up (its first phase), so that the mark does not make that controller's phase write fail; the directory is prepared at once, and the Flock controller's --node-agent-grace counts from that phase (negative: no wait)")
	flag.BoolVar(&opts.AnyNode, "simulate-any-node", false, "simulators only: prepare the pending volumes of every node, as one process on the host standing in for the agents of kwok nodes (whose directories are all on this host); never on a real node")
	flag.Parse()

	switch {
	case flag.NArg() > 0:
		usage("unexpected arguments %q", flag.Args())
	case opts.NodeName == "":
		usage("--node-name (or NODE_NAME) is required")
	case opts.DataRoot == "":
		usage("--data-root is required")
	case !filepath.IsAbs(opts.DataRoot) || filepath.Clean(opts.DataRoot) == "/":
		usage("--data-root %q must be an absolute path below /", opts.DataRoot)
	case opts.Workers < 1:
		usage("--workers must be at least 1")
	case qps <= 0 || burst < 1:
		usage("--kube-api-qps and --kube-api-burst must be positive")
	}
	opts.DataRoot = filepath.Clean(opts.DataRoot)

	var config *rest.Config
	var err error
	if kubeconfig != "" {
		config, err = clientcmd.BuildConfigFromFlags("", kubeconfig)
	} else {
		config, err = rest.InClusterConfig()
	}
	if err != nil {
		fail(err, "Loading the Kubernetes client configuration failed")
	}
	config.QPS, config.Burst = float32(qps), burst
	config.UserAgent = "flock-node-agent/" + opts.NodeName
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		fail(err, "Making the Kubernetes client failed")
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	logger := klog.Background().WithName("flock-node-agent")
	ctx = klog.NewContext(ctx, logger)
	logger.Info("Starting", "node", opts.NodeName, "dataRoot", opts.DataRoot, "workers", opts.Workers,
		"kubeconfig", kubeconfig, "qps", qps, "burst", burst)
	if err := nodeagent.Run(ctx, client, opts); err != nil {
		fail(err, "Node agent failed")
	}
	klog.Flush()
}

// usage reports a bad command line and exits with status 2, as flag does.
func usage(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "flock-node-agent: "+format+" (see -help)\n", args...)
	os.Exit(2)
}

// fail logs err and exits with status 1.
func fail(err error, msg string) {
	klog.ErrorS(err, msg)
	klog.FlushAndExit(klog.ExitFlushTimeout, 1)
}
