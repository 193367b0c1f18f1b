package e2e

// Issue 14, fuzzed templates: Flocks whose pod template is filled by a
// fuzzer go through kube-apiserver into a namespace enforcing Pod Security
// baseline. The API never answers 5xx, and every Flock it stores has a member
// pod (built by the controller's NewMemberPod) that kube-apiserver accepts.

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sort"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/randfill"

	"flock.dev/flock/pkg/apis/flock/v1alpha1"
	flockcontroller "flock.dev/flock/pkg/controller/flock"
)

const (
	// podFuzzSeed makes the fuzzed templates the same on every run.
	podFuzzSeed = 20261130
	// podFuzzFlocks is how many fuzzed Flocks are sent.
	podFuzzFlocks = 200
	// podFuzzBound bounds the sending in time.
	podFuzzBound = 90 * time.Second
	// podFuzzNode is the node member 0 is placed on when its pod is checked.
	podFuzzNode = "node-0"
)

// podTemplateFuzzer returns a randfill filler for the container fields a
// template author writes (resources, probes, securityContext, env, ports),
// with strings, numbers and quantities kept small so most of what it makes
// is plausible and some of it is refused.
func podTemplateFuzzer(seed int64) *randfill.Filler {
	words := []string{"a", "app", "x1", "data", "ALL", "NET_ADMIN", "CHOWN", "RuntimeDefault", "Localhost", "Unconfined", "Default", "/", "/healthz", "tcp", "UDP", "TCP", "10%", "-1", ""}
	return randfill.NewWithSeed(seed).NilChance(0.5).NumElements(0, 2).MaxDepth(6).Funcs(
		func(s *string, c randfill.Continue) {
			if c.Intn(3) == 0 {
				*s = fmt.Sprintf("v%d", c.Intn(1000))
				return
			}
			*s = words[c.Intn(len(words))]
		},
		func(p *corev1.ProcMountType, c randfill.Continue) {
			*p = corev1.ProcMountType(words[c.Intn(len(words))])
		},
		func(p *corev1.SeccompProfileType, c randfill.Continue) {
			*p = corev1.SeccompProfileType(words[c.Intn(len(words))])
		},
		func(p *corev1.AppArmorProfileType, c randfill.Continue) {
			*p = corev1.AppArmorProfileType(words[c.Intn(len(words))])
		},
		func(p *corev1.Capability, c randfill.Continue) { *p = corev1.Capability(words[c.Intn(len(words))]) },
		func(p *corev1.Protocol, c randfill.Continue) { *p = corev1.Protocol(words[c.Intn(len(words))]) },
		func(p *corev1.URIScheme, c randfill.Continue) {
			*p = []corev1.URIScheme{corev1.URISchemeHTTP, corev1.URISchemeHTTPS, "ftp"}[c.Intn(3)]
		},
		func(w **corev1.WindowsSecurityContextOptions, c randfill.Continue) {}, // Linux nodes only
		func(i *int32, c randfill.Continue) { *i = int32(c.Intn(120)) - 10 },
		func(i *int64, c randfill.Continue) { *i = int64(c.Intn(70000)) - 10 },
		func(q *resource.Quantity, c randfill.Continue) {
			*q = *resource.NewMilliQuantity(int64(c.Intn(4000)), resource.DecimalSI)
		},
		func(l *corev1.ResourceList, c randfill.Continue) {
			*l = corev1.ResourceList{}
			for _, n := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage, "example.com/gpu"} {
				if c.Intn(2) == 0 {
					var q resource.Quantity
					c.Fill(&q)
					(*l)[n] = q
				}
			}
		},
		func(v *intstr.IntOrString, c randfill.Continue) {
			if c.Bool() {
				*v = intstr.FromInt32(int32(c.Intn(70000)))
			} else {
				var s string
				c.Fill(&s)
				*v = intstr.FromString(s)
			}
		},
		func(h *corev1.ProbeHandler, c randfill.Continue) {
			// Mostly one handler, as a probe must have; sometimes none or two.
			*h = corev1.ProbeHandler{}
			switch c.Intn(6) {
			case 0:
				c.Fill(&h.Exec)
			case 1:
				c.Fill(&h.HTTPGet)
			case 2:
				c.Fill(&h.TCPSocket)
			case 3:
				c.Fill(&h.GRPC)
			case 4:
				c.FillNoCustom(h)
			}
		},
	)
}

// fuzzedFlock is a one-replica Flock whose container app has, each with
// chance 1/3, fuzzed resources, probes, securityContext, env and ports, and
// whose pod has a fuzzed securityContext; r picks the fields, f fills them.
// Requests above their limit and host ports are mostly cleared, so most
// templates are plausible.
func fuzzedFlock(f *randfill.Filler, r *rand.Rand, i int, ns string) *v1alpha1.Flock {
	fl := newFlock(fmt.Sprintf("fz-%03d", i), ns, 1)
	c := &fl.Spec.Template.Spec.Containers[0]
	maybe := func(fill func()) {
		if r.IntN(3) == 0 {
			fill()
		}
	}
	maybe(func() {
		f.Fill(&c.Resources.Requests)
		f.Fill(&c.Resources.Limits)
		for n, lim := range c.Resources.Limits {
			if req, ok := c.Resources.Requests[n]; ok && req.Cmp(lim) > 0 && r.IntN(4) != 0 {
				c.Resources.Limits[n] = req
			}
		}
	})
	maybe(func() { f.Fill(&c.LivenessProbe) })
	maybe(func() { f.Fill(&c.ReadinessProbe) })
	maybe(func() { f.Fill(&c.StartupProbe) })
	maybe(func() { f.Fill(&c.SecurityContext) })
	maybe(func() { f.Fill(&c.Env) })
	maybe(func() {
		f.Fill(&c.Ports)
		for j := range c.Ports {
			if r.IntN(8) != 0 {
				c.Ports[j].HostPort = 0
			}
		}
	})
	maybe(func() { f.Fill(&fl.Spec.Template.Spec.SecurityContext) })
	return fl
}

// TestFuzzedTemplatesNeverStoredInvalid sends podFuzzFlocks Flocks with
// fuzzed pod templates to a Pod Security baseline namespace: no answer is a
// 5xx, and member 0's pod of every stored Flock passes a dry-run create at
// kube-apiserver.
func TestFuzzedTemplatesNeverStoredInvalid(t *testing.T) {
	ns := labeledNamespace(t, map[string]string{
		"pod-security.kubernetes.io/enforce": "baseline",
	})
	fz := podTemplateFuzzer(podFuzzSeed)
	pick := rand.New(rand.NewPCG(podFuzzSeed, 1))
	deadline := time.Now().Add(podFuzzBound)
	codes := map[int]int{}
	sent, stored, podChecked := 0, 0, 0
	for i := range podFuzzFlocks {
		if time.Now().After(deadline) {
			t.Errorf("sent only %d of %d fuzzed Flocks within %v", sent, podFuzzFlocks, podFuzzBound)
			break
		}
		fl := fuzzedFlock(fz, pick, i, ns)
		sent++
		out, err := env.Flock.FlockV1alpha1().Flocks(ns).Create(ctxFor(t), fl, metav1.CreateOptions{})
		if err != nil {
			status, ok := err.(apierrors.APIStatus)
			if !ok {
				t.Errorf("Flock %d: not an API status: %v\n%s", i, err, asJSON(fl))
				continue
			}
			code := int(status.Status().Code)
			codes[code]++
			if code >= 500 || code == 0 {
				t.Errorf("Flock %d: answered %d: %v\n%s", i, code, err, asJSON(fl))
			}
			continue
		}
		codes[201]++
		stored++
		m := v1alpha1.FlockMember{Ordinal: 0, Node: podFuzzNode}
		pod := flockcontroller.NewMemberPod(out, m, flockcontroller.Revision(&out.Spec.Template))
		if _, err := env.Kube.CoreV1().Pods(ns).Create(ctxFor(t), pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
			t.Errorf("stored Flock %s: kube-apiserver refuses its member 0 pod: %v\n%s", out.Name, err, asJSON(out))
			continue
		}
		podChecked++
	}
	keys := make([]int, 0, len(codes))
	for k := range codes {
		keys = append(keys, k)
	}
	sort.Ints(keys)
	summary := ""
	for _, k := range keys {
		summary += fmt.Sprintf(" %d:%d", k, codes[k])
	}
	t.Logf("fuzzed Flocks: sent %d, stored %d, member pods accepted %d; by code:%s", sent, stored, podChecked, summary)
	// The fuzzer must exercise both sides, or the test proves nothing.
	if stored == 0 || stored == sent {
		t.Errorf("stored %d of %d: the fuzzer must make both accepted and refused templates", stored, sent)
	}
}

// asJSON is v as indented JSON, for failure messages.
func asJSON(v any) string {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err.Error()
	}
	return string(b)
}
