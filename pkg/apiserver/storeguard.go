package apiserver

// storeguard.go: flock-apiserver does not serve a store that lost its
// Flocks while their members run. Each member's pod, claim and Service name
// their Flock as owner; kube-controller-manager's garbage collector asks
// this server for the owner, and deletes the member when the answer is
// NotFound. A server started on an etcd that lost its data would answer
// NotFound for every Flock, and the collector would take every member down
// in tens of seconds (the fault suite measured 10-37 s). The guard answers
// 503 instead, which the collector retries, until a backup is restored or
// an operator accepts the empty store.
//
// A store whose Flocks were all deleted is not a lost one: a server marks
// its store once it serves it (pkg/etcd/storemark.go), and a marked store
// is served even when it holds no Flock.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/endpoints/handlers/responsewriters"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/server/healthz"
	"k8s.io/client-go/kubernetes"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"

	"flock.dev/flock/pkg/apis/flock"
	"flock.dev/flock/pkg/apis/flock/v1alpha1"
	flockcontroller "flock.dev/flock/pkg/controller/flock"
	"flock.dev/flock/pkg/etcd"
)

// StoreGuardInterval is how often a refusing guard looks again (a restore,
// an accept-empty-store, the members gone).
const StoreGuardInterval = 5 * time.Second

// storeGuardLogEvery is how often a refusing guard repeats its log line.
const storeGuardLogEvery = time.Minute

// dependentsPage is the page size of the guard's lists of member pods and claims.
var dependentsPage int64 = 500

// StoreGuard decides whether flock-apiserver serves Flocks from its store;
// until it does, every request for a Flock (and its subresources) gets 503
// and the guard's readyz check fails with the reason.
type StoreGuard struct {
	kv       clientv3.KV
	prefix   string
	core     kubernetes.Interface
	interval time.Duration
	now      func() time.Time

	// refusal is why Flocks are not served; nil once they are.
	refusal atomic.Pointer[string]
	// logged and loggedAt are the loop's last log line and its time.
	logged   string
	loggedAt time.Time
}

// NewStoreGuard returns a guard over the store under prefix in kv; core
// (nil when there is no core cluster) is where members' pods and claims
// are looked for. It refuses until its first Check.
func NewStoreGuard(kv clientv3.KV, prefix string, core kubernetes.Interface) *StoreGuard {
	registerStoreGuardMetrics()
	g := &StoreGuard{kv: kv, prefix: prefix, core: core, interval: StoreGuardInterval, now: time.Now}
	g.refuse("flock-apiserver has not yet checked that its store did not lose its Flocks")
	return g
}

func (g *StoreGuard) refuse(why string) {
	g.refusal.Store(&why)
	storeGuardRefusing.Set(1)
}

// Refusal returns why Flocks are not served, or "" when they are.
func (g *StoreGuard) Refusal() string {
	if r := g.refusal.Load(); r != nil {
		return *r
	}
	return ""
}

// Check decides once, and opens the guard when the store may be served
// (it then marks the store). It returns what it found, for the log.
func (g *StoreGuard) Check(ctx context.Context) (string, error) {
	state, err := etcd.ReadStoreState(ctx, g.kv, g.prefix)
	if err != nil {
		return "", err
	}
	var reason string
	switch {
	case state.Mark != nil:
		g.open()
		return fmt.Sprintf("the store was marked as served at %s (%s)", state.Mark.Time.Format(time.RFC3339), state.Mark.Reason), nil
	case state.Objects:
		reason = "the store holds Flocks"
	case g.core == nil:
		reason = "no core cluster"
	default:
		pods, claims, example, err := g.dependents(ctx)
		if err != nil {
			return "", err
		}
		if pods+claims > 0 {
			g.refuse(fmt.Sprintf("flock-apiserver refuses to serve Flocks: its store (etcd prefix %s) holds none and has no mark of ever being served, so it lost its data or is new, "+
				"while %d pods and %d PersistentVolumeClaims in the cluster belong to Flocks (%s). Served, it would answer NotFound for their Flocks and the garbage collector would delete them. "+
				"Restore the Flocks from a backup (flock-apiserver restore), or accept the empty store (flock-apiserver accept-empty-store)",
				g.prefix, pods, claims, example))
			return g.Refusal(), nil
		}
		reason = "no pod or claim in the cluster belongs to a Flock"
	}
	if _, err := etcd.MarkStore(ctx, g.kv, g.prefix, etcd.StoreMark{Time: g.now().UTC(), Reason: "served: " + reason}); err != nil {
		return "", err
	}
	g.open()
	return reason, nil
}

func (g *StoreGuard) open() {
	g.refusal.Store(nil)
	storeGuardRefusing.Set(0)
}

// dependents counts the pods and claims that name a Flock as their owner,
// and names one of them.
func (g *StoreGuard) dependents(ctx context.Context) (pods, claims int, example string, err error) {
	pods, example, err = countOwned(ctx, "pod", func(opts metav1.ListOptions) (runtime.Object, error) {
		return g.core.CoreV1().Pods(metav1.NamespaceAll).List(ctx, opts)
	})
	if err != nil {
		return 0, 0, "", err
	}
	var claimExample string
	claims, claimExample, err = countOwned(ctx, "PersistentVolumeClaim", func(opts metav1.ListOptions) (runtime.Object, error) {
		return g.core.CoreV1().PersistentVolumeClaims(metav1.NamespaceAll).List(ctx, opts)
	})
	if example == "" {
		example = claimExample
	}
	return pods, claims, example, err
}

// countOwned pages through list (of the objects labelled as members) and
// counts those a Flock owns, naming the first.
func countOwned(ctx context.Context, kind string, list func(metav1.ListOptions) (runtime.Object, error)) (int, string, error) {
	opts := metav1.ListOptions{LabelSelector: v1alpha1.LabelFlockName, Limit: dependentsPage}
	n, example := 0, ""
	for {
		obj, err := list(opts)
		if err != nil {
			return 0, "", fmt.Errorf("listing member %ss: %w", kind, err)
		}
		items, err := meta.ExtractList(obj)
		if err != nil {
			return 0, "", err
		}
		for _, item := range items {
			m, err := meta.Accessor(item)
			if err != nil {
				return 0, "", err
			}
			for _, ref := range m.GetOwnerReferences() {
				if flockcontroller.IsFlockRef(&ref) {
					if n++; example == "" {
						example = fmt.Sprintf("%s %s/%s of Flock %s/%s, UID %s", kind, m.GetNamespace(), m.GetName(), m.GetNamespace(), ref.Name, ref.UID)
					}
					break
				}
			}
		}
		la, err := meta.ListAccessor(obj)
		if err != nil {
			return 0, "", err
		}
		if opts.Continue = la.GetContinue(); opts.Continue == "" || ctx.Err() != nil {
			return n, example, ctx.Err()
		}
	}
}

// Run checks every interval until the guard opens or ctx is done.
func (g *StoreGuard) Run(ctx context.Context) {
	for !g.Step(ctx) {
		select {
		case <-ctx.Done():
			return
		case <-time.After(g.interval):
		}
	}
}

// Step checks once, logs what it found (a refusal as an error, again each
// minute while it lasts) and reports whether Flocks are served.
func (g *StoreGuard) Step(ctx context.Context) bool {
	if g.Refusal() == "" {
		return true
	}
	logger := klog.FromContext(ctx).WithName("store-guard")
	found, err := g.Check(ctx)
	switch {
	case err != nil:
		g.log(logger, "Could not check the store; Flocks stay refused", err)
	case g.Refusal() == "":
		logger.Info("Serving Flocks", "because", found)
		return true
	default:
		g.log(logger, found, nil)
	}
	return false
}

func (g *StoreGuard) log(logger klog.Logger, msg string, err error) {
	text := msg
	if err != nil {
		text += ": " + err.Error()
	}
	if now := g.now(); text != g.logged || now.Sub(g.loggedAt) >= storeGuardLogEvery {
		g.logged, g.loggedAt = text, now
		logger.Error(err, msg, "prefix", g.prefix)
	}
}

// ReadyzCheck fails while Flocks are refused, with the reason.
func (g *StoreGuard) ReadyzCheck() healthz.HealthChecker {
	return healthz.NamedCheck("flock-store", func(*http.Request) error {
		if r := g.Refusal(); r != "" {
			return errors.New(r)
		}
		return nil
	})
}

// Wrap answers a request for a Flock (or a subresource) with 503 and the
// reason while the guard refuses; other requests (discovery, OpenAPI,
// health) pass. It runs after the handler chain's filters, so the
// requester was authenticated and authorized.
func (g *StoreGuard) Wrap(next http.Handler) http.Handler {
	gv := schema.GroupVersion{Group: flock.GroupName, Version: "v1alpha1"}
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if r := g.Refusal(); r != "" {
			if info, ok := genericapirequest.RequestInfoFrom(req.Context()); ok && info.IsResourceRequest && info.APIGroup == flock.GroupName {
				storeGuardRefused.Inc()
				w.Header().Set("Retry-After", strconv.Itoa(int(g.interval/time.Second)))
				err := apierrors.NewServiceUnavailable(r)
				responsewriters.ErrorNegotiated(err, Codecs, gv, w, req)
				return
			}
		}
		next.ServeHTTP(w, req)
	})
}

var (
	storeGuardRefusing = metrics.NewGauge(&metrics.GaugeOpts{
		Name:           "flock_apiserver_store_guard_refusing",
		Help:           "1 while flock-apiserver refuses to serve Flocks because its store holds none, has no mark of being served, and pods or claims of Flocks exist (see /readyz?verbose); else 0.",
		StabilityLevel: metrics.ALPHA,
	})
	storeGuardRefused = metrics.NewCounter(&metrics.CounterOpts{
		Name:           "flock_apiserver_store_guard_refused_requests_total",
		Help:           "Requests for Flocks answered 503 because the store guard refused to serve the store.",
		StabilityLevel: metrics.ALPHA,
	})
	storeGuardMetricsOnce atomic.Bool
)

func registerStoreGuardMetrics() {
	if storeGuardMetricsOnce.CompareAndSwap(false, true) {
		legacyregistry.MustRegister(storeGuardRefusing, storeGuardRefused)
	}
}
