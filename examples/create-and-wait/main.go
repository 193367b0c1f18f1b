// Command create-and-wait shows Flock's generated Go client from another
// program: it creates (server-side applies) a Flock with the typed apply
// configurations, then follows it with a shared informer and its lister until
// condition Available is True, and prints the members. It exits 0 when the
// Flock is Available, 1 when it is not within --timeout or the API refuses it,
// and 2 on a usage error.
//
//	go run ./examples/create-and-wait --kubeconfig=$KUBECONFIG --namespace=default --name=demo --replicas=2
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"

	flockv1alpha1 "flock.dev/flock/pkg/apis/flock/v1alpha1"
	flockac "flock.dev/flock/pkg/generated/applyconfiguration/flock/v1alpha1"
	"flock.dev/flock/pkg/generated/clientset/versioned"
	"flock.dev/flock/pkg/generated/informers/externalversions"
)

// fieldManager owns the fields this program applies.
const fieldManager = "create-and-wait"

type options struct {
	kubeconfig string
	namespace  string
	name       string
	replicas   int
	image      string
	timeout    time.Duration
}

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	var o options
	fs := flag.NewFlagSet("create-and-wait", flag.ContinueOnError)
	fs.StringVar(&o.kubeconfig, "kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig of the cluster (default $KUBECONFIG, then the usual loading rules)")
	fs.StringVar(&o.namespace, "namespace", "default", "namespace of the Flock")
	fs.StringVar(&o.name, "name", "demo", "name of the Flock")
	fs.IntVar(&o.replicas, "replicas", 1, "number of members")
	fs.StringVar(&o.image, "image", "busybox:1.36", "image of the members' container")
	fs.DurationVar(&o.timeout, "timeout", 2*time.Minute, "how long to wait for condition Available=True")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if o.replicas < 1 || o.name == "" || o.namespace == "" || o.timeout <= 0 {
		fmt.Fprintln(os.Stderr, "create-and-wait: --name and --namespace must be set, --replicas and --timeout positive")
		return 2
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()

	f, err := createAndWait(ctx, o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "create-and-wait:", err)
		return 1
	}
	fmt.Printf("flock %s/%s is Available: %d/%d members ready\n", f.Namespace, f.Name, f.Status.ReadyReplicas, desiredReplicas(f))
	for _, m := range f.Status.Members {
		fmt.Printf("member %d: pod %s on node %s (%s) ready=%t\n", m.Ordinal, m.Pod, m.Node, m.Hostname, m.Ready)
	}
	return 0
}

func createAndWait(ctx context.Context, o options) (*flockv1alpha1.Flock, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = o.kubeconfig
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, nil).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("load kubeconfig: %w", err)
	}
	cfg.UserAgent = fieldManager
	client, err := versioned.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}

	// Create with server-side apply: running the program twice is harmless,
	// and the Flock's fields are owned by this field manager.
	podLabels := map[string]string{"app": o.name}
	desired := flockac.Flock(o.name, o.namespace).
		WithLabels(map[string]string{"app.kubernetes.io/managed-by": fieldManager}).
		WithSpec(flockac.FlockSpec().
			WithReplicas(int32(o.replicas)).
			WithSelector(metav1ac.LabelSelector().WithMatchLabels(podLabels)).
			WithTemplate(corev1ac.PodTemplateSpec().
				WithLabels(podLabels).
				WithSpec(corev1ac.PodSpec().WithContainers(corev1ac.Container().
					WithName("app").
					WithImage(o.image).
					WithCommand("sleep", "infinity")))))
	applied, err := client.FlockV1alpha1().Flocks(o.namespace).Apply(ctx, desired, metav1.ApplyOptions{FieldManager: fieldManager, Force: true})
	if err != nil {
		return nil, fmt.Errorf("apply Flock %s/%s: %w", o.namespace, o.name, err)
	}
	fmt.Printf("flock %s/%s applied (uid %s, generation %d); waiting up to %s for Available\n",
		applied.Namespace, applied.Name, applied.UID, applied.Generation, o.timeout)

	// An informer on just this Flock; every change wakes the wait loop, which
	// reads the lister (the informer's cache).
	factory := externalversions.NewSharedInformerFactoryWithOptions(client, 0,
		externalversions.WithNamespace(o.namespace),
		externalversions.WithTweakListOptions(func(lo *metav1.ListOptions) {
			lo.FieldSelector = fields.OneTermEqualSelector("metadata.name", o.name).String()
		}))
	informer := factory.Flock().V1alpha1().Flocks()
	changed := make(chan struct{}, 1)
	poke := func() {
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	if _, err := informer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { poke() },
		UpdateFunc: func(any, any) { poke() },
		DeleteFunc: func(any) { poke() },
	}); err != nil {
		return nil, err
	}
	lister := informer.Lister()
	// Stop the informer before waiting for it to shut down (deferred calls
	// run last-in first-out).
	informerCtx, stopInformer := context.WithCancel(ctx)
	factory.Start(informerCtx.Done())
	defer factory.Shutdown()
	defer stopInformer()
	if !cache.WaitForCacheSync(ctx.Done(), informer.Informer().HasSynced) {
		return nil, fmt.Errorf("the Flock informer did not sync: %w", context.Cause(ctx))
	}

	var last string
	for {
		flocks, err := lister.Flocks(o.namespace).List(labels.Everything())
		if err != nil {
			return nil, err
		}
		var f *flockv1alpha1.Flock
		for _, candidate := range flocks {
			if candidate.Name == o.name {
				f = candidate
			}
		}
		switch {
		case f == nil:
			last = "the Flock is gone"
		case f.UID != applied.UID:
			return nil, fmt.Errorf("flock %s/%s was replaced (uid %s, applied %s)", o.namespace, o.name, f.UID, applied.UID)
		default:
			available := findCondition(f.Status.Conditions, flockv1alpha1.FlockAvailable)
			if available != nil && available.Status == metav1.ConditionTrue && f.Status.ObservedGeneration >= applied.Generation {
				return f.DeepCopy(), nil
			}
			if s := describe(f); s != last {
				last = s
				fmt.Println("waiting:", s)
			}
		}
		select {
		case <-changed:
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return nil, fmt.Errorf("flock %s/%s not Available within %s; last seen: %s", o.namespace, o.name, o.timeout, last)
			}
			return nil, ctx.Err()
		}
	}
}

// findCondition returns the condition of type t, or nil.
func findCondition(conds []metav1.Condition, t string) *metav1.Condition {
	for i := range conds {
		if conds[i].Type == t {
			return &conds[i]
		}
	}
	return nil
}

// describe summarises a Flock's progress in one line.
func describe(f *flockv1alpha1.Flock) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d/%d members ready", f.Status.ReadyReplicas, desiredReplicas(f))
	for _, c := range f.Status.Conditions {
		fmt.Fprintf(&b, "; %s=%s", c.Type, c.Status)
		if c.Message != "" {
			fmt.Fprintf(&b, " (%s)", c.Message)
		}
	}
	return b.String()
}

// desiredReplicas is spec.replicas (the server defaults it to 1).
func desiredReplicas(f *flockv1alpha1.Flock) int32 {
	if f.Spec.Replicas == nil {
		return 1
	}
	return *f.Spec.Replicas
}
