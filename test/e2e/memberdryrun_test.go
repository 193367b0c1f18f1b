package e2e

// Issue 14 end to end: a Flock never gets around the cluster's rules. The
// FlockMemberDryRun admission plugin dry-runs member 0's pod against the real
// kube-apiserver, so Pod Security, pod validation, LimitRanges and
// ResourceQuota refuse the Flock at `kubectl apply` with the cluster's own
// message, and nothing is stored; reserved label keys are refused by
// validation.

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flockv1alpha1 "flock.dev/flock/pkg/apis/flock/v1alpha1"
	"flock.dev/flock/test/cluster"
)

// dryRunManifest is a one-replica Flock with YAML lines added to its pod
// spec and its container (see flockManifestWith).
func dryRunManifest(name, ns, podExtra, containerExtra string) string {
	return flockManifestWith(name, ns, 1, podExtra, containerExtra)
}

// labeledNamespace is newNamespace with labels.
func labeledNamespace(t *testing.T, labels map[string]string) string {
	t.Helper()
	ns := newNamespace(t)
	n, err := env.Kube.CoreV1().Namespaces().Get(ctxFor(t), ns, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n.Labels = labels
	if _, err := env.Kube.CoreV1().Namespaces().Update(ctxFor(t), n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	return ns
}

// expectNotStored fails unless Flock ns/name does not exist.
func expectNotStored(t *testing.T, ns, name string) {
	t.Helper()
	if _, err := env.Flock.FlockV1alpha1().Flocks(ns).Get(ctxFor(t), name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("refused Flock %s/%s was stored (get: %v)", ns, name, err)
	}
}

// expectStderr fails unless stderr contains every string of want.
func expectStderr(t *testing.T, res *cluster.KubectlResult, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(res.Stderr, w) {
			t.Errorf("kubectl printed:\n%s\nwant it to contain:\n%s", res.Stderr, w)
		}
	}
}

// podSecurityCases are templates Pod Security baseline refuses, with the
// detail of the cluster's message.
var podSecurityCases = []struct {
	name, podExtra, containerExtra, detail string
}{
	{"privileged", "", "        securityContext:\n          privileged: true\n",
		`privileged (container "app" must not set securityContext.privileged=true)`},
	{"hostnetwork", "      hostNetwork: true\n", "",
		`host namespaces (hostNetwork=true)`},
	{"sysadmin", "", "        securityContext:\n          capabilities:\n            add: [SYS_ADMIN]\n",
		`non-default capabilities (container "app" must not include "SYS_ADMIN" in securityContext.capabilities.add)`},
	// Pod validation allows Unmasked only with hostUsers: false.
	{"unmasked", "      hostUsers: false\n", "        securityContext:\n          procMount: Unmasked\n",
		`procMount (container "app" must not set securityContext.procMount to "Unmasked")`},
}

// In a namespace enforcing baseline, a privileged template, hostNetwork,
// added SYS_ADMIN and procMount Unmasked are each refused at kubectl apply
// with the Pod Security message (403) and nothing is stored; in a privileged
// namespace that warns at baseline, the same Flocks are accepted and kubectl
// prints the cluster's warning.
//
// flock-apiserver runs with --allow-host-access here, so that hostNetwork
// reaches the cluster's rules instead of Flock's own denylist. The baseline
// namespace pins enforce-version v1.34: from v1.35 on, baseline allows any
// procMount in a pod with hostUsers: false, and the Flock then follows the
// cluster (accepted), which the privileged namespace shows.
func TestMemberDryRunPodSecurity(t *testing.T) {
	args := flockArgs()
	if _, err := env.RestartFlockAPIServer(ctxFor(t), append(slices.Clone(args), "--allow-host-access")); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*callTimeout)
		defer cancel()
		if _, err := env.RestartFlockAPIServer(ctx, args); err != nil {
			t.Errorf("restore flock-apiserver's flags: %v", err)
		}
	})

	forEachKubectl(t, func(t *testing.T, k cluster.Kubectl) {
		baseline := labeledNamespace(t, map[string]string{
			"pod-security.kubernetes.io/enforce":         "baseline",
			"pod-security.kubernetes.io/enforce-version": "v1.34",
		})
		privileged := labeledNamespace(t, map[string]string{
			"pod-security.kubernetes.io/enforce": "privileged",
			"pod-security.kubernetes.io/warn":    "baseline",
		})
		for _, tc := range podSecurityCases {
			name := "psa-" + tc.name
			res := kubectlFails(t, k, dryRunManifest(name, baseline, tc.podExtra, tc.containerExtra), "apply", "-f", "-")
			expectStderr(t, res, "(Forbidden)", fmt.Sprintf(`flocks.flock.dev %q is forbidden`, name),
				`violates PodSecurity "baseline:v1.34": `+tc.detail)
			expectNotStored(t, baseline, name)

			out := kubectlInputStderr(t, k, dryRunManifest(name, privileged, tc.podExtra, tc.containerExtra), "apply", "-f", "-")
			if !strings.Contains(out.Stdout, "flock.flock.dev/"+name+" created") {
				t.Errorf("apply in the privileged namespace printed %q", out.Stdout)
			}
			if tc.name != "unmasked" && !strings.Contains(out.Stderr, `Warning: would violate PodSecurity "baseline:latest": `+tc.detail) {
				t.Errorf("apply in a namespace that warns at baseline printed on stderr:\n%s\nwant the Pod Security warning: %s", out.Stderr, tc.detail)
			}
			ctlDeleteFlock(t, privileged, name, false)
		}
	})
}

// kubectlInputStderr is kubectlInput returning stdout and stderr.
func kubectlInputStderr(t *testing.T, k cluster.Kubectl, stdin string, args ...string) *cluster.KubectlResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
	defer cancel()
	res, err := env.KubectlInput(ctx, k, stdin, args...)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// The cluster's other rules on pods answer at apply time too: a cpu request
// above its limit and a probe without a handler (pod validation, 422 under
// spec.template), a LimitRange the first member would break and a
// ResourceQuota it would exceed (403). kube-apiserver evaluates ResourceQuota
// on a dry-run create (it only skips charging it), against one pod: the
// member pod, not replicas times it. Nothing is stored.
func TestMemberDryRunClusterRules(t *testing.T) {
	forEachKubectl(t, func(t *testing.T, k cluster.Kubectl) {
		ns := newNamespace(t)

		res := kubectlFails(t, k, dryRunManifest("cpu", ns, "", "        resources:\n          requests: {cpu: \"2\"}\n          limits: {cpu: \"1\"}\n"), "apply", "-f", "-")
		expectStderr(t, res, `The Flock "cpu" is invalid: spec.template.spec.containers[0].resources.requests: Invalid value: "2": must be less than or equal to cpu limit of 1`)
		expectNotStored(t, ns, "cpu")

		res = kubectlFails(t, k, dryRunManifest("probe", ns, "", "        readinessProbe:\n          periodSeconds: 5\n"), "apply", "-f", "-")
		expectStderr(t, res, `The Flock "probe" is invalid: spec.template.spec.containers[0].readinessProbe: Required value: must specify a handler type`)
		expectNotStored(t, ns, "probe")

		limits := &corev1.LimitRange{
			ObjectMeta: metav1.ObjectMeta{Name: "small", Namespace: ns},
			Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{{
				Type: corev1.LimitTypeContainer,
				Max:  corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")},
			}}},
		}
		if _, err := env.Kube.CoreV1().LimitRanges(ns).Create(ctxFor(t), limits, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		res = kubectlFails(t, k, dryRunManifest("big", ns, "", "        resources:\n          limits: {cpu: \"1\"}\n"), "apply", "-f", "-")
		expectStderr(t, res, "(Forbidden)", `flocks.flock.dev "big" is forbidden: the cluster refuses its member pod big-0: pods "big-0" is forbidden: maximum cpu usage per Container is 500m, but limit is 1`)
		expectNotStored(t, ns, "big")
		if err := env.Kube.CoreV1().LimitRanges(ns).Delete(ctxFor(t), "small", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}

		quota := &corev1.ResourceQuota{
			ObjectMeta: metav1.ObjectMeta{Name: "tight", Namespace: ns},
			Spec:       corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourceRequestsCPU: resource.MustParse("100m")}},
		}
		if _, err := env.Kube.CoreV1().ResourceQuotas(ns).Create(ctxFor(t), quota, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitQuotaStatus(t, ns, "tight")
		res = kubectlFails(t, k, dryRunManifest("quota", ns, "", "        resources:\n          requests: {cpu: 200m}\n"), "apply", "-f", "-")
		expectStderr(t, res, "(Forbidden)", `pods "quota-0" is forbidden: exceeded quota: tight, requested: requests.cpu=200m, used: requests.cpu=0, limited: requests.cpu=100m`)
		expectNotStored(t, ns, "quota")
		// Within the quota: accepted.
		out := kubectlInput(t, k, dryRunManifest("quota", ns, "", "        resources:\n          requests: {cpu: 50m}\n"), "apply", "-f", "-")
		if !strings.Contains(out, "flock.flock.dev/quota created") {
			t.Errorf("apply within the quota printed %q", out)
		}
		ctlDeleteFlock(t, ns, "quota", false)
	})
}

// The dry-run at admission checks one member pod against ResourceQuota, not
// replicas of them: a Flock of 3 in a namespace whose quota allows 2 pods is
// stored, and its third pod is refused when the controller creates it.
// MembersBlocked then says which member and why (reason FailedCreate, the
// quota's own message), as a ReplicaSet's ReplicaFailure condition does;
// once the quota allows it, a retry creates the pod and the Flock becomes
// Available.
func TestRefusedMemberPodBlocksItsMember(t *testing.T) {
	// OrderedReady (the default): q-0 and q-1 take the quota, q-2 is
	// refused.
	ns, quota := quotaNamespace(t, corev1.ResourceList{corev1.ResourcePods: resource.MustParse("2")})
	createFlock(t, newFlock("q", ns, 3))
	waitRefusedMember(t, ns, "q", 2, `member 2 cannot start: creating pod q-2 on node `,
		`was refused: pods "q-2" is forbidden: exceeded quota: quota, requested: pods=1, used: pods=2, limited: pods=2`)
	quota.Spec.Hard[corev1.ResourcePods] = resource.MustParse("3")
	if _, err := env.Kube.CoreV1().ResourceQuotas(ns).Update(ctxFor(t), quota, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The controller retries the create with its back-off; no event of
	// the quota's brings it sooner.
	got := waitFlockAvailable(t, ns, "q")
	if c := meta.FindStatusCondition(got.Status.Conditions, flockv1alpha1.FlockMembersBlocked); c == nil || c.Status != metav1.ConditionFalse {
		t.Errorf("MembersBlocked %+v once every pod was created", c)
	}

	// The same for a member's claim: a quota of one claim lets member 0
	// have its data, and refuses member 1's claim.
	ns, _ = quotaNamespace(t, corev1.ResourceList{corev1.ResourcePersistentVolumeClaims: resource.MustParse("1")})
	createFlock(t, newFlock("c", ns, 2))
	waitRefusedMember(t, ns, "c", 1, `member 1 cannot start: creating claim data-c-1 was refused: persistentvolumeclaims "data-c-1" is forbidden: `+
		`exceeded quota: quota, requested: persistentvolumeclaims=1, used: persistentvolumeclaims=1, limited: persistentvolumeclaims=1`, "")
}

// A ResourceQuota on the number of Flocks (count/flocks.flock.dev) holds as
// it does for built-in kinds and CRDs. kube-apiserver does not enforce quota
// on what it proxies to an aggregated server, so flock-apiserver runs
// ResourceQuota admission itself: the Flock past the quota is refused (403)
// with the quota's message and not stored. (Giving the count back when a
// Flock is deleted is kube-controller-manager's, from its watch of Flocks or
// its full resync, as for any resource.)
func TestFlockCountQuota(t *testing.T) {
	const count = corev1.ResourceName("count/flocks.flock.dev")
	ns, quota := quotaNamespace(t, corev1.ResourceList{count: resource.MustParse("1")})
	// kube-controller-manager counts Flocks in a quota once it has
	// discovered flock.dev (it looks every 30 s), for a quota made after
	// that, or at its next full resync (5 minutes); until then admission
	// refuses, as it does for any resource whose usage is unknown. Right
	// after the cluster came up, a quota made too early is made again.
	made := time.Now()
	eventually(t, 3*time.Minute, "the quota counting Flocks", func(ctx context.Context) error {
		q, err := env.Kube.CoreV1().ResourceQuotas(ns).Get(ctx, "quota", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if used, ok := q.Status.Used[count]; ok && used.IsZero() {
			return nil
		}
		if time.Since(made) > 15*time.Second {
			if err := env.Kube.CoreV1().ResourceQuotas(ns).Delete(ctx, "quota", metav1.DeleteOptions{}); err != nil {
				return err
			}
			if _, err := env.Kube.CoreV1().ResourceQuotas(ns).Create(ctx, quota, metav1.CreateOptions{}); err != nil {
				return err
			}
			made = time.Now()
		}
		return fmt.Errorf("status.used %v", q.Status.Used)
	})
	k := env.KubectlBuilt()
	kubectlInput(t, k, dryRunManifest("one", ns, "", ""), "apply", "-f", "-")
	res := kubectlFails(t, k, dryRunManifest("two", ns, "", ""), "apply", "-f", "-")
	expectStderr(t, res, "(Forbidden)", `flocks.flock.dev "two" is forbidden: exceeded quota: quota, requested: count/flocks.flock.dev=1, used: count/flocks.flock.dev=1, limited: count/flocks.flock.dev=1`)
	expectNotStored(t, ns, "two")

}

// quotaNamespace returns a new namespace with a ResourceQuota "quota" of
// hard, once kube-controller-manager has given the quota its first status
// (quota admission needs it), and the quota.
func quotaNamespace(t *testing.T, hard corev1.ResourceList) (string, *corev1.ResourceQuota) {
	t.Helper()
	ns := newNamespace(t)
	quota := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "quota", Namespace: ns}, Spec: corev1.ResourceQuotaSpec{Hard: hard}}
	if _, err := env.Kube.CoreV1().ResourceQuotas(ns).Create(ctxFor(t), quota, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitQuotaStatus(t, ns, "quota")
	return ns, quota
}

// waitQuotaStatus waits for ResourceQuota ns/name's first status from
// kube-controller-manager: quota admission needs it.
func waitQuotaStatus(t *testing.T, ns, name string) {
	t.Helper()
	eventually(t, 30*time.Second, "quota status", func(ctx context.Context) error {
		q, err := env.Kube.CoreV1().ResourceQuotas(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if len(q.Status.Hard) == 0 {
			return fmt.Errorf("no status.hard yet")
		}
		return nil
	})
}

// waitRefusedMember waits until Flock ns/name has ready members up to the
// refused one, and MembersBlocked says, with reason FailedCreate, that it is
// refused: its message holds want and then wantToo.
func waitRefusedMember(t *testing.T, ns, name string, refused int32, want, wantToo string) {
	t.Helper()
	eventually(t, 90*time.Second, "the refused member blocked, with the cluster's message", func(ctx context.Context) error {
		got, err := env.Flock.FlockV1alpha1().Flocks(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		c := meta.FindStatusCondition(got.Status.Conditions, flockv1alpha1.FlockMembersBlocked)
		if c == nil || c.Status != metav1.ConditionTrue || c.Reason != "FailedCreate" || !strings.Contains(c.Message, want) || !strings.Contains(c.Message, wantToo) {
			return fmt.Errorf("MembersBlocked %+v, want reason FailedCreate and %q ... %q", c, want, wantToo)
		}
		if got.Status.ReadyReplicas != refused {
			return fmt.Errorf("readyReplicas %d, want the %d before the refused member", got.Status.ReadyReplicas, refused)
		}
		return nil
	})
}

// flock.dev/name in the selector or in the template labels is refused (422)
// with one message per key; nothing is stored.
func TestReservedLabelsRefused(t *testing.T) {
	forEachKubectl(t, func(t *testing.T, k cluster.Kubectl) {
		ns := newNamespace(t)
		m := strings.Replace(dryRunManifest("resv", ns, "", ""), "    matchLabels:\n      app: resv\n",
			"    matchLabels:\n      app: resv\n      flock.dev/name: other\n", 1)
		m = strings.Replace(m, "      labels:\n        app: resv\n", "      labels:\n        app: resv\n        flock.dev/name: other\n", 1)
		res := kubectlFails(t, k, m, "apply", "-f", "-")
		expectStderr(t, res, `The Flock "resv" is invalid: `,
			`spec.selector.matchLabels[flock.dev/name]: Invalid value: "flock.dev/name": reserved`,
			`spec.template.metadata.labels[flock.dev/name]: Invalid value: "flock.dev/name": reserved`)
		expectNotStored(t, ns, "resv")

		m = strings.Replace(dryRunManifest("resv", ns, "", ""), "      labels:\n        app: resv\n", "      labels:\n        app: resv\n        flock.dev/name: other\n", 1)
		res = kubectlFails(t, k, m, "apply", "-f", "-")
		expectStderr(t, res, `The Flock "resv" is invalid: spec.template.metadata.labels[flock.dev/name]: Invalid value: "flock.dev/name": reserved`)
		expectNotStored(t, ns, "resv")
	})
}

// What the dry-run costs a create, measured (not asserted): server-side
// dry-run creates of Flocks through kube-apiserver, each with a template of
// its own (every one a dry-run of its member pod) against the same number
// with one template (after the first, answered from the cache, i.e. the
// create path without the dry-run). Reported with t.Log.
func TestMemberDryRunCost(t *testing.T) {
	ns := newNamespace(t)
	const n = 30
	create := func(name, value string) time.Duration {
		f := newFlock(name, ns, 1)
		f.Spec.Template.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "V", Value: value}}
		start := time.Now()
		if _, err := env.Flock.FlockV1alpha1().Flocks(ns).Create(ctxFor(t), f, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
			t.Fatal(err)
		}
		return time.Since(start)
	}
	create("warm", "warm")
	var miss, hit []time.Duration
	for i := range n {
		miss = append(miss, create("cost", fmt.Sprint(i)))
		hit = append(hit, create("cost", "same"))
	}
	median := func(d []time.Duration) time.Duration {
		sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
		return d[len(d)/2]
	}
	mMiss, mHit := median(miss), median(hit)
	t.Logf("Flock create (dryRun=All, through kube-apiserver), median of %d: with the member pod dry-run %v, answered from the cache %v: the dry-run adds %v (%.2fx)",
		n, mMiss, mHit, mMiss-mHit, float64(mMiss)/float64(mHit))
	if got, err := env.Flock.FlockV1alpha1().Flocks(ns).List(ctxFor(t), metav1.ListOptions{}); err != nil || len(got.Items) != 0 {
		t.Errorf("dry-run creates stored Flocks: %v %v", got, err)
	}
}

// restrictedPod and restrictedContainer make a template Pod Security
// restricted allows.
const (
	restrictedPod       = "      securityContext:\n        runAsNonRoot: true\n        runAsUser: 65532\n        seccompProfile:\n          type: RuntimeDefault\n"
	restrictedContainer = "        securityContext:\n          allowPrivilegeEscalation: false\n          capabilities:\n            drop: [ALL]\n"
)

// A compliant Flock in a namespace enforcing restricted is accepted without
// a warning and runs: its member pods, data volume included, pass the
// cluster's rules when the controller creates them, not only in the dry-run.
func TestMemberDryRunRestrictedRuns(t *testing.T) {
	ns := labeledNamespace(t, map[string]string{
		"pod-security.kubernetes.io/enforce": "restricted",
		"pod-security.kubernetes.io/warn":    "restricted",
	})
	forEachKubectl(t, func(t *testing.T, k cluster.Kubectl) {
		name := "strict-" + k.Name
		res := kubectlInputStderr(t, k, flockManifestWith(name, ns, 2, restrictedPod, restrictedContainer), "apply", "-f", "-")
		if !strings.Contains(res.Stdout, "flock.flock.dev/"+name+" created") || strings.Contains(res.Stderr, "Warning") {
			t.Errorf("apply in the restricted namespace printed %q, stderr %q", res.Stdout, res.Stderr)
		}
		waitFlockAvailable(t, ns, name)
		ctlDeleteFlock(t, ns, name, false)
	})
}

// An update that changes the template is dry-run too: in a namespace
// enforcing baseline, turning a running Flock's container privileged is
// refused at apply with the Pod Security message and the stored Flock keeps
// its template; a scale (no template change) is not dry-run and passes.
func TestMemberDryRunOnUpdate(t *testing.T) {
	ns := labeledNamespace(t, map[string]string{"pod-security.kubernetes.io/enforce": "baseline"})
	forEachKubectl(t, func(t *testing.T, k cluster.Kubectl) {
		name := "upd-" + k.Name
		kubectlInput(t, k, flockManifestWith(name, ns, 1, "", ""), "apply", "-f", "-")
		before := waitFlockAvailable(t, ns, name)

		res := kubectlFails(t, k, flockManifestWith(name, ns, 1, "", "        securityContext:\n          privileged: true\n"), "apply", "-f", "-")
		expectStderr(t, res, "(Forbidden)", fmt.Sprintf(`flocks.flock.dev %q is forbidden`, name),
			`violates PodSecurity "baseline:latest": privileged (container "app" must not set securityContext.privileged=true)`)
		after, err := env.Flock.FlockV1alpha1().Flocks(ns).Get(ctxFor(t), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if after.Generation != before.Generation || after.Spec.Template.Spec.Containers[0].SecurityContext != nil {
			t.Errorf("after a refused update: generation %d -> %d, securityContext %+v; want the stored Flock unchanged",
				before.Generation, after.Generation, after.Spec.Template.Spec.Containers[0].SecurityContext)
		}
		if out := kubectl(t, k, "scale", "fl/"+name, "-n", ns, "--replicas=2"); !strings.Contains(out, "scaled") {
			t.Errorf("scale printed %q", out)
		}
		ctlDeleteFlock(t, ns, name, false)
	})
}
