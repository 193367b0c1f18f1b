package e2e

// kubectl parity (issue 7): every verb a user runs against a built-in kind
// works against Flocks, with the built v1.37 kubectl and the system's (v1.32).
// Each check asserts what kubectl printed or the object it left behind.
// TestKubectlCRUD, TestKubectlScale, TestServerSideApplyConflict,
// TestExplain, TestAPIResources and TestRBAC (other files) cover create, the
// default table, merge and JSON patches, -w with jsonpath, scale through the
// subresource, SSA conflicts and `auth can-i` per role.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	flockv1alpha1 "flock.dev/flock/pkg/apis/flock/v1alpha1"
	"flock.dev/flock/test/cluster"
)

// get: the table with -o wide, every output format, labels, label and field
// selectors.
func TestKubectlGetOutputs(t *testing.T) {
	ns := newNamespace(t)
	web := createAvailable(t, withFlockLabels(newFlock("web", ns, 2), "tier", "db", "team", "blue"))
	createFlock(t, withFlockLabels(newFlock("cache", ns, 1), "tier", "cache"))
	webNodes := strings.Join(memberNodes(web), ",")

	forEachKubectl(t, func(t *testing.T, k cluster.Kubectl) {
		// -o wide: SERVICE and NODES (member nodes in ordinal order).
		header, rows := splitTable(t, kubectl(t, k, "get", "fl", "web", "-n", ns, "-o", "wide"))
		if got := strings.Join(header, " "); got != "NAME READY AGE SERVICE NODES" {
			t.Errorf("-o wide header = %q", got)
		}
		if len(rows) != 1 || len(rows[0]) != 5 || rows[0][0] != "web" || rows[0][1] != "2/2" || rows[0][3] != "web" || rows[0][4] != webNodes {
			t.Errorf("-o wide rows = %q, want web 2/2 <age> web %s", rows, webNodes)
		}

		// -o yaml and -o json decode to the full object, status included.
		for _, format := range []string{"yaml", "json"} {
			var f flockv1alpha1.Flock
			if err := yaml.Unmarshal([]byte(kubectl(t, k, "get", "fl", "web", "-n", ns, "-o", format)), &f); err != nil {
				t.Fatalf("-o %s: %v", format, err)
			}
			if f.APIVersion != "flock.dev/v1alpha1" || f.Kind != "Flock" || f.UID != web.UID ||
				*f.Spec.Replicas != 2 || f.Spec.ServiceName != "web" || f.Labels["tier"] != "db" ||
				!slices.Equal(memberNodes(&f), memberNodes(web)) || meta.FindStatusCondition(f.Status.Conditions, "Available") == nil {
				t.Errorf("-o %s decoded to %s %s uid=%s spec=%+v labels=%v members=%v", format, f.APIVersion, f.Kind, f.UID, f.Spec, f.Labels, f.Status.Members)
			}
		}

		// -o jsonpath over status.
		if got := kubectl(t, k, "get", "fl", "web", "-n", ns, "-o", `jsonpath={range .status.members[*]}{.ordinal}={.node}{" "}{end}`); strings.TrimSpace(got) != fmt.Sprintf("0=%s 1=%s", web.Status.Members[0].Node, web.Status.Members[1].Node) {
			t.Errorf("-o jsonpath members = %q", got)
		}

		// -o custom-columns, sorted by name.
		header, rows = splitTable(t, kubectl(t, k, "get", "fl", "-n", ns, "--sort-by=.metadata.name",
			"-o", "custom-columns=NAME:.metadata.name,REPLICAS:.spec.replicas,SERVICE:.spec.serviceName,TIER:.metadata.labels.tier"))
		want := [][]string{{"cache", "1", "cache", "cache"}, {"web", "2", "web", "db"}}
		if strings.Join(header, " ") != "NAME REPLICAS SERVICE TIER" || fmt.Sprint(rows) != fmt.Sprint(want) {
			t.Errorf("-o custom-columns = %q %q, want %q", header, rows, want)
		}

		// -o name.
		if got := kubectl(t, k, "get", "fl", "-n", ns, "-o", "name"); got != "flock.flock.dev/cache\nflock.flock.dev/web\n" {
			t.Errorf("-o name = %q", got)
		}

		// --show-labels adds a LABELS column.
		header, rows = splitTable(t, kubectl(t, k, "get", "fl", "web", "-n", ns, "--show-labels"))
		if header[len(header)-1] != "LABELS" || len(rows) != 1 || rows[0][len(rows[0])-1] != "team=blue,tier=db" {
			t.Errorf("--show-labels: header %q rows %q", header, rows)
		}

		// -l: equality, set-based and negated selectors.
		for sel, want := range map[string]string{
			"tier=db":             "flock.flock.dev/web\n",
			"tier in (db,cache)":  "flock.flock.dev/cache\nflock.flock.dev/web\n",
			"tier!=db":            "flock.flock.dev/cache\n",
			"team":                "flock.flock.dev/web\n",
			"tier=db,team=yellow": "",
		} {
			if got := kubectl(t, k, "get", "fl", "-n", ns, "-l", sel, "-o", "name"); got != want {
				t.Errorf("-l %q = %q, want %q", sel, got, want)
			}
		}

		// --field-selector on metadata.name and, across namespaces,
		// metadata.namespace.
		if got := kubectl(t, k, "get", "fl", "-n", ns, "--field-selector", "metadata.name=cache", "-o", "name"); got != "flock.flock.dev/cache\n" {
			t.Errorf("--field-selector metadata.name=cache = %q", got)
		}
		if got := kubectl(t, k, "get", "fl", "-n", ns, "--field-selector", "metadata.name!=cache", "-o", "name"); got != "flock.flock.dev/web\n" {
			t.Errorf("--field-selector metadata.name!=cache = %q", got)
		}
		if got := kubectl(t, k, "get", "fl", "-A", "--field-selector", "metadata.namespace="+ns, "-o", `jsonpath={range .items[*]}{.metadata.namespace}/{.metadata.name} {end}`); got != ns+"/cache "+ns+"/web " {
			t.Errorf("-A --field-selector metadata.namespace = %q", got)
		}
		// An unsupported field is refused with the supported ones named.
		res := kubectlFails(t, k, "", "get", "fl", "-n", ns, "--field-selector", "spec.replicas=2")
		if !strings.Contains(res.Stderr, `"spec.replicas" is not a known field selector`) || !strings.Contains(res.Stderr, "metadata.name") {
			t.Errorf("unsupported field selector: %s", res.Stderr)
		}
	})
}

// get -w with the server's table: a new Flock appears and its READY column
// follows the controller.
func TestKubectlGetWatchTable(t *testing.T) {
	forEachKubectl(t, func(t *testing.T, k cluster.Kubectl) {
		ns := newNamespace(t)
		ctx, cancel := context.WithTimeout(t.Context(), 2*availableTimeout)
		defer cancel()
		// -v=6 logs each request once its response arrives, the watch too.
		cmd := env.KubectlCommand(ctx, k, "get", "flocks", "-n", ns, "-w", "-v=6")
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		stderr, err := cmd.StderrPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { cancel(); _ = cmd.Wait() }()
		lr := newLineReader(stdout)
		// Wait until the watch is established, so the Flock is seen as a
		// watch event (one created before would only be listed).
		newLineReader(stderr).waitFor(t, regexp.MustCompile(`/flocks\?[^ "]*watch=true[^ "]*"?\s+(status=")?200 OK`), 30*time.Second)
		createFlock(t, newFlock("watched", ns, 2))
		lr.waitFor(t, regexp.MustCompile(`^NAME\s+READY\s+AGE$`), 30*time.Second)
		lr.waitFor(t, regexp.MustCompile(`^watched\s+0/2\s`), 30*time.Second)
		lr.waitFor(t, regexp.MustCompile(`^watched\s+2/2\s`), availableTimeout)
	})
}

// describe: the spec, every member with ordinal, node, pod and readiness,
// the conditions and the controller's events.
func TestKubectlDescribe(t *testing.T) {
	ns := newNamespace(t)
	f := createAvailable(t, newFlock("described", ns, 2))
	// Events are recorded asynchronously: wait for the controller's, then
	// describe.
	eventually(t, 30*time.Second, "the controller's events about the Flock", func(ctx context.Context) error {
		evs, err := env.Kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.uid=" + string(f.UID)})
		if err != nil {
			return err
		}
		reasons := map[string]int{}
		for _, e := range evs.Items {
			reasons[e.Reason]++
		}
		if reasons["MemberPlaced"] < 1 || reasons["SuccessfulCreate"] < 3 {
			return fmt.Errorf("events so far: %v", reasons)
		}
		return nil
	})
	forEachKubectl(t, func(t *testing.T, k cluster.Kubectl) {
		out := kubectl(t, k, "describe", "flock", "described", "-n", ns)
		must := []string{
			`(?m)^Name:\s+described$`,
			`(?m)^Namespace:\s+` + ns + `$`,
			`(?m)^Kind:\s+Flock$`,
			`(?m)^Spec:$`,
			`(?m)^\s+Replicas:\s+2$`,
			`(?m)^\s+Service Name:\s+described$`,
			`(?m)^\s+Pod Management Policy:\s+OrderedReady$`,
			`(?m)^\s+Members:$`,
			`(?m)^\s+Conditions:$`,
			`(?m)^\s+Ready Replicas:\s+2$`,
			`(?m)^Events:$`,
		}
		for _, m := range f.Status.Members {
			// The generic describer prints each member as a block of its
			// fields, in alphabetical order.
			must = append(must, fmt.Sprintf(`(?m)^\s+Hostname:\s+%s\n\s+Node:\s+%s\n\s+Ordinal:\s+%d\n(\s+Persistent Volume:\s+\S+\n)?\s+Pod:\s+%s\n\s+Ready:\s+true$`,
				regexp.QuoteMeta(m.Hostname), regexp.QuoteMeta(m.Node), m.Ordinal, regexp.QuoteMeta(m.Pod)))
			// One MemberPlaced event names every member placed at once.
			must = append(must, fmt.Sprintf(`(?m)^\s+Normal\s+MemberPlaced\s+.*member %d \(pod %s\) placed on node %s(;|$)`, m.Ordinal, m.Pod, m.Node))
			must = append(must, fmt.Sprintf(`(?m)^\s+Normal\s+SuccessfulCreate\s+.*created Pod %s for member %d on node %s\b`, m.Pod, m.Ordinal, m.Node))
		}
		// The Available condition: its message, reason, status and type.
		must = append(must, `(?m)^\s+Message:\s+2 of 2 members available\n(\s+Observed Generation:\s+1\n)?\s+Reason:\s+\w+\n\s+Status:\s+True\n\s+Type:\s+Available$`)
		for _, re := range must {
			if !regexp.MustCompile(re).MatchString(out) {
				t.Errorf("describe lacks %s", re)
			}
		}
		if t.Failed() {
			t.Logf("describe output:\n%s", out)
		}
	})
}

// explain --recursive: the whole schema, spec and status, with required
// fields marked.
func TestKubectlExplainRecursive(t *testing.T) {
	waitFlockOpenAPI(t)
	forEachKubectl(t, func(t *testing.T, k cluster.Kubectl) {
		fields := explainFields(t, kubectl(t, k, "explain", "flocks", "--recursive"))
		for _, path := range []string{
			"spec.replicas <integer>",
			"spec.selector <LabelSelector> -required-",
			"spec.selector.matchLabels <map[string]string>",
			"spec.serviceName <string>",
			"spec.placement.nodeSelector <map[string]string>",
			"spec.placement.nodes <[]string>",
			"spec.storage.volumeName <string>",
			"spec.storage.retention.whenDeleted <string>",
			"spec.storage.retention.whenScaled <string>",
			"spec.podManagementPolicy <string>",
			"spec.updateStrategy.type <string>",
			"spec.updateStrategy.rollingUpdate.partition <integer>",
			"spec.updateStrategy.rollingUpdate.maxUnavailable <IntOrString>",
			"spec.minReadySeconds <integer>",
			"spec.memberRecovery.policy <string>",
			"spec.memberRecovery.afterSeconds <integer>",
			"spec.revisionHistoryLimit <integer>",
			"spec.template <PodTemplateSpec> -required-",
			"spec.template.spec.containers.image <string>",
			"status.observedGeneration <integer>",
			"status.readyReplicas <integer>",
			"status.selector <string>",
			"status.members <[]FlockMember>",
			"status.members.ordinal <integer> -required-",
			"status.members.node <string> -required-",
			"status.members.pod <string>",
			"status.members.hostname <string>",
			"status.members.ready <boolean>",
			"status.conditions.type <string> -required-",
			"metadata.name <string>",
		} {
			if !fields[path] {
				t.Errorf("explain flocks --recursive lacks %q", path)
			}
		}
		// A leaf's documentation, with its enum.
		out := strings.Join(strings.Fields(kubectl(t, k, "explain", "fl.spec.storage.retention.whenDeleted")), " ")
		for _, want := range []string{
			"FIELD: whenDeleted <string>",
			"ENUM: Delete Retain",
			"WhenDeleted applies when the Flock is deleted: Retain (the default) or Delete.",
			"removes the member's data directory (with a short helper pod in the server's namespace) and then its claim and PersistentVolume",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("explain fl.spec.storage.retention.whenDeleted lacks %q:\n%s", want, out)
			}
		}
	})
}

// explainFields turns `kubectl explain --recursive` output into a set of
// "dotted.path <type>[ -required-]" entries.
func explainFields(t *testing.T, out string) map[string]bool {
	t.Helper()
	_, body, ok := strings.Cut(out, "\nFIELDS:\n")
	if !ok {
		t.Fatalf("no FIELDS section in:\n%s", out)
	}
	fields := map[string]bool{}
	var stack []string
	for _, line := range strings.Split(body, "\n") {
		trimmed := strings.TrimLeft(line, " ")
		name, rest, ok := strings.Cut(trimmed, "\t")
		if !ok || strings.HasSuffix(name, ":") {
			continue // blank, or an "enum:" line
		}
		depth := (len(line)-len(trimmed))/2 - 1
		if depth < 0 || depth > len(stack) {
			t.Fatalf("unexpected indentation in explain output: %q", line)
		}
		stack = append(stack[:depth], name)
		fields[strings.Join(stack, ".")+" "+strings.TrimSpace(rest)] = true
	}
	if len(fields) < 100 {
		t.Fatalf("only %d fields parsed from explain --recursive", len(fields))
	}
	return fields
}

// apply: client-side (three-way merge with last-applied) and server-side
// (field ownership), creating, changing, and removing fields.
func TestKubectlApply(t *testing.T) {
	forEachKubectl(t, func(t *testing.T, k cluster.Kubectl) {
		ns := newNamespace(t)
		base := flockManifest("applied", ns, 1)
		withLabel := strings.Replace(base, "  namespace: "+ns+"\n", "  namespace: "+ns+"\n  labels:\n    tier: db\n", 1)
		if withLabel == base {
			t.Fatal("could not add a label to the manifest")
		}

		// Client-side.
		if out := kubectlInput(t, k, withLabel, "apply", "-f", "-"); out != "flock.flock.dev/applied created\n" {
			t.Errorf("first apply printed %q", out)
		}
		f := getFlock(t, ns, "applied")
		if f.Labels["tier"] != "db" || !strings.Contains(f.Annotations["kubectl.kubernetes.io/last-applied-configuration"], `"tier":"db"`) {
			t.Errorf("after create: labels %v, annotations %v", f.Labels, f.Annotations)
		}
		if out := kubectlInput(t, k, withLabel, "apply", "-f", "-"); out != "flock.flock.dev/applied unchanged\n" {
			t.Errorf("re-apply printed %q", out)
		}
		// A label set by someone else survives; the one removed from the
		// manifest goes (three-way merge).
		kubectl(t, k, "label", "fl", "applied", "-n", ns, "owner=ops")
		scaled := strings.Replace(strings.Replace(withLabel, "replicas: 1", "replicas: 2", 1), "tier: db", "team: red", 1)
		if out := kubectlInput(t, k, scaled, "apply", "-f", "-"); out != "flock.flock.dev/applied configured\n" {
			t.Errorf("changed apply printed %q", out)
		}
		f = getFlock(t, ns, "applied")
		if *f.Spec.Replicas != 2 || f.Generation != 2 || fmt.Sprint(f.Labels) != "map[owner:ops team:red]" {
			t.Errorf("after client-side apply: replicas %d, labels %v, generation %d; want 2, owner=ops and team=red, 2", *f.Spec.Replicas, f.Labels, f.Generation)
		}

		// Server-side, by another manager, on a second Flock.
		ssa := strings.ReplaceAll(withLabel, "applied", "ssa")
		if out := kubectlInput(t, k, ssa, "apply", "--server-side", "--field-manager=e2e-ssa", "-f", "-"); out != "flock.flock.dev/ssa serverside-applied\n" {
			t.Errorf("server-side apply printed %q", out)
		}
		f = getFlock(t, ns, "ssa")
		var owned string
		for _, mf := range f.ManagedFields {
			if mf.Manager == "e2e-ssa" && mf.Operation == metav1.ManagedFieldsOperationApply && mf.FieldsV1 != nil {
				owned = string(mf.FieldsV1.Raw)
			}
		}
		for _, field := range []string{`"f:replicas"`, `"f:tier"`, `"f:template"`, `"f:selector"`} {
			if !strings.Contains(owned, field) {
				t.Errorf("e2e-ssa does not own %s: %s", field, owned)
			}
		}
		if _, ok := f.Annotations["kubectl.kubernetes.io/last-applied-configuration"]; ok {
			t.Error("server-side apply left a last-applied annotation")
		}
		// Dropping a field from the applied configuration removes it.
		if out := kubectlInput(t, k, strings.ReplaceAll(scaled, "applied", "ssa"), "apply", "--server-side", "--field-manager=e2e-ssa", "-f", "-"); out != "flock.flock.dev/ssa serverside-applied\n" {
			t.Errorf("second server-side apply printed %q", out)
		}
		f = getFlock(t, ns, "ssa")
		if *f.Spec.Replicas != 2 || fmt.Sprint(f.Labels) != "map[team:red]" {
			t.Errorf("after the second server-side apply: replicas %d, labels %v; want 2 and only team=red", *f.Spec.Replicas, f.Labels)
		}
	})
}

// diff: exit 1 and a unified diff of what would change; exit 0 and nothing
// when the manifest matches (client-side and server-side).
func TestKubectlDiff(t *testing.T) {
	forEachKubectl(t, func(t *testing.T, k cluster.Kubectl) {
		ns := newNamespace(t)
		// One Flock applied client-side and diffed client-side, one applied
		// and diffed server-side.
		for _, mode := range [][]string{nil, {"--server-side"}} {
			name := "diffed-csa"
			if mode != nil {
				name = "diffed-ssa"
			}
			manifest := flockManifest(name, ns, 1)
			kubectlInput(t, k, manifest, append([]string{"apply", "-f", "-"}, mode...)...)
			// Diff once the controller's status writes are done: one
			// between kubectl's read of the live object and its dry run
			// would show as a resourceVersion change.
			waitFlockAvailable(t, ns, name)
			args := append([]string{"diff", "-f", "-"}, mode...)
			if out := kubectlInput(t, k, manifest, args...); out != "" {
				t.Errorf("kubectl %v of the live manifest printed %q", args, out)
			}
			changed := strings.Replace(manifest, "image: busybox:1.36", "image: busybox:1.37", 1)
			res := kubectlFails(t, k, changed, args...)
			if res.ExitCode != 1 {
				t.Errorf("kubectl %v: exit %d, want 1 (differences found); stderr %s", args, res.ExitCode, res.Stderr)
			}
			for _, re := range []string{
				`(?m)^\+\+\+ .*flock\.dev\.v1alpha1\.Flock\.` + ns + `\.` + name + `\s`,
				`(?m)^-\s+image: busybox:1\.36$`,
				`(?m)^\+\s+image: busybox:1\.37$`,
				`(?m)^-\s+generation: 1$`,
				`(?m)^\+\s+generation: 2$`,
			} {
				if !regexp.MustCompile(re).MatchString(res.Stdout) {
					t.Errorf("kubectl %v output lacks %s:\n%s", args, re, res.Stdout)
				}
			}
			if got := getFlock(t, ns, name).Spec.Template.Spec.Containers[0].Image; got != "busybox:1.36" {
				t.Errorf("diff changed the object: image %s", got)
			}
		}
	})
}

// edit with a scripted EDITOR.
func TestKubectlEdit(t *testing.T) {
	editor := filepath.Join(t.TempDir(), "editor.sh")
	script := "#!/bin/sh\n" +
		"# kubectl edit runs $EDITOR <file>: change replicas, add a label.\n" +
		"sed -i -e 's/^  replicas: 1$/  replicas: 2/' -e 's/^  labels:$/  labels:\\n    edited: \"yes\"/' \"$1\"\n"
	if err := os.WriteFile(editor, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	forEachKubectl(t, func(t *testing.T, k cluster.Kubectl) {
		ns := newNamespace(t)
		createFlock(t, withFlockLabels(newFlock("edited", ns, 1), "tier", "db"))
		res, err := kubectlWithEnv(t, k, []string{"EDITOR=" + editor}, "", "edit", "fl", "edited", "-n", ns)
		if err != nil {
			t.Fatal(err)
		}
		if res.Stdout != "flock.flock.dev/edited edited\n" {
			t.Errorf("edit printed %q (stderr %q)", res.Stdout, res.Stderr)
		}
		f := getFlock(t, ns, "edited")
		if *f.Spec.Replicas != 2 || f.Labels["edited"] != "yes" || f.Labels["tier"] != "db" || f.Generation != 2 {
			t.Errorf("after edit: replicas %d labels %v generation %d", *f.Spec.Replicas, f.Labels, f.Generation)
		}
		// The same edit again changes nothing. Wait for the status to
		// follow the scale first: the editor's pattern also matches a
		// status.replicas of 1, and kubectl counts a change it sends to
		// status (which the server ignores) as an edit.
		waitFlockAvailable(t, ns, "edited")
		res, err = kubectlWithEnv(t, k, []string{"EDITOR=" + editor}, "", "edit", "fl", "edited", "-n", ns)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(res.Stderr, "Edit cancelled, no changes made.") {
			t.Errorf("no-op edit: stdout %q stderr %q", res.Stdout, res.Stderr)
		}
	})
}

// patch --type=strategic: the pod template's containers merge by name, and
// on the status subresource members merge by ordinal (patchMergeKey), where
// a JSON merge patch replaces the whole list.
func TestKubectlPatchStrategic(t *testing.T) {
	ns := newNamespace(t)
	f := createAvailable(t, newFlock("patched", ns, 2))
	forEachKubectl(t, func(t *testing.T, k cluster.Kubectl) {
		// Spec: change one container's image, keep its command; add a
		// second container.
		out := kubectl(t, k, "patch", "fl", "patched", "-n", ns, "--type=strategic", "--dry-run=server", "-o", "json",
			"-p", `{"spec":{"template":{"spec":{"containers":[{"name":"app","image":"busybox:1.37"},{"name":"side","image":"busybox:1.36"}]}}}}`)
		var got flockv1alpha1.Flock
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			t.Fatal(err)
		}
		cs := got.Spec.Template.Spec.Containers
		if len(cs) != 2 || cs[0].Name != "app" || cs[0].Image != "busybox:1.37" || strings.Join(cs[0].Command, " ") != "sleep infinity" || cs[1].Name != "side" {
			t.Errorf("strategic patch of containers gave %+v", cs)
		}

		// Status: one member's message, merged by ordinal. Member 0 keeps
		// its node and pod and does not get the message (its own message
		// is the controller's and may change meanwhile).
		out = kubectl(t, k, "patch", "fl", "patched", "-n", ns, "--subresource=status", "--type=strategic", "--dry-run=server", "-o", "json",
			"-p", `{"status":{"members":[{"ordinal":1,"message":"maintenance window"}]}}`)
		got = flockv1alpha1.Flock{}
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			t.Fatal(err)
		}
		ms := got.Status.Members
		if len(ms) != 2 || ms[0].Node != f.Status.Members[0].Node || ms[0].Pod != f.Status.Members[0].Pod || ms[0].Message == "maintenance window" || ms[1].Node != f.Status.Members[1].Node ||
			ms[1].Pod != f.Status.Members[1].Pod || ms[1].Message != "maintenance window" {
			t.Errorf("strategic status patch: members = %+v, want member 1 with a message and both kept", ms)
		}

		// The same list in a JSON merge patch replaces every member.
		out = kubectl(t, k, "patch", "fl", "patched", "-n", ns, "--subresource=status", "--type=merge", "--dry-run=server", "-o", "json",
			"-p", fmt.Sprintf(`{"status":{"members":[{"ordinal":1,"node":%q,"message":"maintenance window"}]}}`, f.Status.Members[1].Node))
		got = flockv1alpha1.Flock{}
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			t.Fatal(err)
		}
		if len(got.Status.Members) != 1 || got.Status.Members[0].Ordinal != 1 {
			t.Errorf("merge status patch: members = %+v, want only member 1", got.Status.Members)
		}

		// A real (not dry-run) strategic patch of the main resource.
		out = kubectl(t, k, "patch", "fl", "patched", "-n", ns, "--type=strategic",
			"-p", `{"metadata":{"annotations":{"patched-by":"`+k.Name+`"}},"spec":{"template":{"metadata":{"labels":{"role":"db"}}}}}`)
		if out != "flock.flock.dev/patched patched\n" {
			t.Errorf("strategic patch printed %q", out)
		}
		live := getFlock(t, ns, "patched")
		if live.Annotations["patched-by"] != k.Name || live.Spec.Template.Labels["role"] != "db" || live.Spec.Template.Labels["app"] != "patched" {
			t.Errorf("after strategic patch: annotations %v template labels %v", live.Annotations, live.Spec.Template.Labels)
		}
	})
}

// label and annotate: add, refuse to overwrite without --overwrite,
// overwrite, remove, and select with -l / --all.
func TestKubectlLabelAnnotate(t *testing.T) {
	forEachKubectl(t, func(t *testing.T, k cluster.Kubectl) {
		ns := newNamespace(t)
		createFlock(t, newFlock("a", ns, 1))
		createFlock(t, newFlock("b", ns, 1))
		for _, c := range []struct{ verb, key, noun string }{{"label", "tier", "labeled"}, {"annotate", "note", "annotated"}} {
			if out := kubectl(t, k, c.verb, "fl", "a", "-n", ns, c.key+"=one"); out != "flock.flock.dev/a "+c.noun+"\n" {
				t.Errorf("%s printed %q", c.verb, out)
			}
			res := kubectlFails(t, k, "", c.verb, "fl", "a", "-n", ns, c.key+"=two")
			if !strings.Contains(res.Stderr, "already has a value (one)") || !strings.Contains(res.Stderr, "--overwrite") {
				t.Errorf("%s without --overwrite: %s", c.verb, res.Stderr)
			}
			kubectl(t, k, c.verb, "fl", "a", "-n", ns, "--overwrite", c.key+"=two")
			// Every Flock in the namespace.
			if out := kubectl(t, k, c.verb, "fl", "--all", "-n", ns, "--overwrite", "all="+c.verb); out != "flock.flock.dev/a "+c.noun+"\nflock.flock.dev/b "+c.noun+"\n" {
				t.Errorf("%s --all printed %q", c.verb, out)
			}
		}
		a, b := getFlock(t, ns, "a"), getFlock(t, ns, "b")
		if a.Labels["tier"] != "two" || a.Annotations["note"] != "two" || a.Labels["all"] != "label" || b.Annotations["all"] != "annotate" {
			t.Errorf("a: labels %v annotations %v; b: annotations %v", a.Labels, a.Annotations, b.Annotations)
		}
		if out := kubectl(t, k, "get", "fl", "-n", ns, "-l", "tier=two", "-o", "name"); out != "flock.flock.dev/a\n" {
			t.Errorf("-l tier=two = %q", out)
		}
		// Removal with key-.
		kubectl(t, k, "label", "fl", "a", "-n", ns, "tier-")
		kubectl(t, k, "annotate", "fl", "a", "-n", ns, "note-")
		a = getFlock(t, ns, "a")
		if _, ok := a.Labels["tier"]; ok {
			t.Errorf("label tier not removed: %v", a.Labels)
		}
		if _, ok := a.Annotations["note"]; ok {
			t.Errorf("annotation note not removed: %v", a.Annotations)
		}
		// Labels and annotations are metadata: no new generation.
		if a.Generation != 1 {
			t.Errorf("generation = %d after label/annotate, want 1", a.Generation)
		}
	})
}

// scale: the controller follows, each member on its own node; scaling past
// the eligible nodes is refused with both numbers.
func TestKubectlScaleMembers(t *testing.T) {
	ns := newNamespace(t)
	createAvailable(t, newFlock("grown", ns, 1))
	k := env.KubectlBuilt()
	if out := kubectl(t, k, "scale", "fl", "grown", "-n", ns, "--replicas=3"); out != "flock.flock.dev/grown scaled\n" {
		t.Errorf("scale printed %q", out)
	}
	f := waitFlockAvailable(t, ns, "grown")
	nodes := memberNodes(f)
	if len(nodes) != 3 || len(slices.Compact(slices.Sorted(slices.Values(nodes)))) != 3 {
		t.Errorf("members after scale to 3 are on %v, want three distinct nodes", nodes)
	}
	forEachKubectl(t, func(t *testing.T, k cluster.Kubectl) {
		res := kubectlFails(t, k, "", "scale", "fl", "grown", "-n", ns, fmt.Sprintf("--replicas=%d", len(env.NodeNames)+50))
		if !strings.Contains(res.Stderr, fmt.Sprint(len(env.NodeNames)+50)) || !strings.Contains(res.Stderr, "eligible") {
			t.Errorf("scale past the eligible nodes: %s", res.Stderr)
		}
	})
	if got := *getFlock(t, ns, "grown").Spec.Replicas; got != 3 {
		t.Errorf("replicas = %d after a refused scale, want 3", got)
	}
}

// wait --for=condition=Available, --for=jsonpath, and --for=delete while a
// finalizer holds the Flock.
func TestKubectlWait(t *testing.T) {
	forEachKubectl(t, func(t *testing.T, k cluster.Kubectl) {
		ns := newNamespace(t)
		createFlock(t, newFlock("awaited", ns, 2))
		out := kubectl(t, k, "wait", "fl/awaited", "-n", ns, "--for=condition=Available", "--timeout=90s")
		if out != "flock.flock.dev/awaited condition met\n" {
			t.Errorf("wait --for=condition=Available printed %q", out)
		}
		if err := flockAvailableErr(getFlock(t, ns, "awaited")); err != nil {
			t.Errorf("wait returned but the Flock is not Available: %v", err)
		}
		if out := kubectl(t, k, "wait", "fl/awaited", "-n", ns, "--for=jsonpath={.status.readyReplicas}=2", "--timeout=30s"); out != "flock.flock.dev/awaited condition met\n" {
			t.Errorf("wait --for=jsonpath printed %q", out)
		}
		// A condition that does not hold times out.
		res := kubectlFails(t, k, "", "wait", "fl/awaited", "-n", ns, "--for=condition=MembersBlocked", "--timeout=2s")
		if !strings.Contains(res.Stderr, "timed out waiting for the condition") {
			t.Errorf("wait for a false condition: %s", res.Stderr)
		}

		// --for=delete: hold the Flock with a finalizer, delete it, and
		// wait; it returns only when the finalizer is removed.
		kubectl(t, k, "patch", "fl", "awaited", "-n", ns, "--type=merge", "-p", `{"metadata":{"finalizers":["e2e.flock.dev/hold"]}}`)
		kubectl(t, k, "delete", "fl", "awaited", "-n", ns, "--wait=false")
		ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
		defer cancel()
		cmd := env.KubectlCommand(ctx, k, "wait", "fl/awaited", "-n", ns, "--for=delete", "--timeout=50s")
		var buf strings.Builder
		cmd.Stdout = &buf
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			t.Fatalf("wait --for=delete returned while a finalizer holds the Flock: %v %q", err, buf.String())
		case <-time.After(2 * time.Second):
		}
		kubectl(t, k, "patch", "fl", "awaited", "-n", ns, "--type=json", "-p", `[{"op":"remove","path":"/metadata/finalizers"}]`)
		select {
		case err := <-done:
			if err != nil || !strings.Contains(buf.String(), "flock.flock.dev/awaited condition met") {
				t.Errorf("wait --for=delete: %v %q", err, buf.String())
			}
		case <-ctx.Done():
			t.Fatal("wait --for=delete did not return after the finalizer was removed")
		}
		if _, err := env.Flock.FlockV1alpha1().Flocks(ns).Get(ctxFor(t), "awaited", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("after wait --for=delete: get = %v, want NotFound", err)
		}
	})
}

// delete --cascade=orphan leaves the members and the Service without owner;
// --cascade=foreground keeps the Flock until its members are gone.
func TestKubectlDeleteCascade(t *testing.T) {
	forEachKubectl(t, func(t *testing.T, k cluster.Kubectl) {
		ns := newNamespace(t)
		createAvailable(t, newFlock("orphaner", ns, 1))
		createAvailable(t, newFlock("fore", ns, 1))

		out := kubectl(t, k, "delete", "fl", "orphaner", "-n", ns, "--cascade=orphan", "--wait=false")
		if !strings.HasPrefix(out, `flock.flock.dev "orphaner" deleted`) {
			t.Errorf("delete --cascade=orphan printed %q", out)
		}
		// The garbage collector removes the orphan finalizer. It discovers
		// new API groups every 30s, so right after flock-apiserver was
		// registered this can take that long.
		eventually(t, 2*time.Minute, "orphaned Flock gone", func(ctx context.Context) error {
			_, err := env.Flock.FlockV1alpha1().Flocks(ns).Get(ctx, "orphaner", metav1.GetOptions{})
			if !apierrors.IsNotFound(err) {
				return fmt.Errorf("get: %v", err)
			}
			return nil
		})
		pod, err := env.Kube.CoreV1().Pods(ns).Get(ctxFor(t), "orphaner-0", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("orphaned pod: %v", err)
		}
		svc, err := env.Kube.CoreV1().Services(ns).Get(ctxFor(t), "orphaner", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("orphaned Service: %v", err)
		}
		if pod.DeletionTimestamp != nil || len(pod.OwnerReferences) != 0 || len(svc.OwnerReferences) != 0 {
			t.Errorf("after --cascade=orphan: pod deleting=%v owners=%v, Service owners=%v; want both kept without owners",
				pod.DeletionTimestamp != nil, pod.OwnerReferences, svc.OwnerReferences)
		}

		// Foreground: a finalizer on the member pod keeps it, and so the
		// Flock, until it is removed.
		if _, err := env.Kube.CoreV1().Pods(ns).Patch(ctxFor(t), "fore-0", types.MergePatchType,
			[]byte(`{"metadata":{"finalizers":["e2e.flock.dev/hold"]}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		kubectl(t, k, "delete", "fl", "fore", "-n", ns, "--cascade=foreground", "--wait=false")
		eventually(t, 30*time.Second, "member pod of a foreground-deleted Flock terminating", func(ctx context.Context) error {
			p, err := env.Kube.CoreV1().Pods(ns).Get(ctx, "fore-0", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if p.DeletionTimestamp == nil {
				return fmt.Errorf("pod fore-0 not being deleted")
			}
			return nil
		})
		f := getFlock(t, ns, "fore")
		if f.DeletionTimestamp == nil || !slices.Contains(f.Finalizers, metav1.FinalizerDeleteDependents) {
			t.Errorf("Flock during foreground deletion: deletionTimestamp %v finalizers %v", f.DeletionTimestamp, f.Finalizers)
		}
		if _, err := env.Kube.CoreV1().Pods(ns).Patch(ctxFor(t), "fore-0", types.JSONPatchType,
			[]byte(`[{"op":"remove","path":"/metadata/finalizers"}]`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		if out := kubectl(t, k, "wait", "fl/fore", "-n", ns, "--for=delete", "--timeout=50s"); out != "" && !strings.Contains(out, "condition met") {
			t.Errorf("wait --for=delete printed %q", out)
		}
		if _, err := env.Kube.CoreV1().Pods(ns).Get(ctxFor(t), "fore-0", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("member pod after the foreground deletion finished: %v, want NotFound", err)
		}
	})
}

// auth can-i --list shows the Flock resources the aggregated edit role
// grants; the status subresource stays the controller's.
func TestKubectlAuthCanI(t *testing.T) {
	ns := newNamespace(t)
	if _, err := env.Kube.RbacV1().RoleBindings(ns).Create(ctxFor(t), roleBinding("dev-edit", "edit", "dev"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	forEachKubectl(t, func(t *testing.T, k cluster.Kubectl) {
		var rows map[string]string
		eventually(t, 60*time.Second, "edit role lists flocks", func(ctx context.Context) error {
			res, err := env.Kubectl(ctx, k, "auth", "can-i", "--list", "-n", ns, "--as=dev")
			if err != nil {
				return err
			}
			rows = map[string]string{}
			// Resources  Non-Resource URLs  Resource Names  [verb verb ...]
			for _, l := range strings.Split(res.Stdout, "\n") {
				f := strings.Fields(l)
				if i := strings.LastIndex(l, "["); len(f) > 0 && strings.HasPrefix(f[0], "flocks.flock.dev") && i > 0 {
					rows[f[0]] = l[i:]
				}
			}
			if rows["flocks.flock.dev"] == "" {
				return fmt.Errorf("no flocks.flock.dev row in:\n%s", res.Stdout)
			}
			return nil
		})
		for _, r := range []string{"flocks.flock.dev", "flocks.flock.dev/scale"} {
			for _, verb := range []string{"create", "delete", "get", "list", "patch", "update", "watch"} {
				if !strings.Contains(rows[r], verb) {
					t.Errorf("can-i --list: %s verbs %s lack %s", r, rows[r], verb)
				}
			}
		}
		if got := strings.TrimSpace(kubectlOut(t, k, "auth", "can-i", "patch", "flocks", "--subresource=scale", "-n", ns, "--as=dev")); got != "yes" {
			t.Errorf("can-i patch flocks --subresource=scale = %q", got)
		}
		if got := strings.TrimSpace(kubectlOut(t, k, "auth", "can-i", "update", "flocks", "--subresource=status", "-n", ns, "--as=dev")); got != "no" {
			t.Errorf("can-i update flocks --subresource=status = %q, want no", got)
		}
	})
}

// api-resources selects Flocks by category and by group.
func TestKubectlAPIResourcesCategories(t *testing.T) {
	forEachKubectl(t, func(t *testing.T, k cluster.Kubectl) {
		all := kubectl(t, k, "api-resources", "--categories=all", "-o", "name")
		names := strings.Fields(all)
		if !slices.Contains(names, "flocks.flock.dev") || !slices.Contains(names, "statefulsets.apps") {
			t.Errorf("api-resources --categories=all = %v, want flocks.flock.dev among the built-in workloads", names)
		}
		_, rows := splitTable(t, kubectl(t, k, "api-resources", "--api-group=flock.dev", "--categories=all"))
		if len(rows) != 1 || strings.Join(rows[0], " ") != "flocks fl flock.dev/v1alpha1 true Flock" {
			t.Errorf("api-resources --api-group=flock.dev --categories=all rows = %q", rows)
		}
		if out := kubectl(t, k, "api-resources", "--api-group=flock.dev", "--categories=nope", "-o", "name"); strings.TrimSpace(out) != "" {
			t.Errorf("api-resources with an unknown category = %q", out)
		}
	})
}

// --dry-run=server runs validation and admission but stores nothing.
func TestKubectlDryRunServer(t *testing.T) {
	forEachKubectl(t, func(t *testing.T, k cluster.Kubectl) {
		ns := newNamespace(t)
		for _, args := range [][]string{{"create"}, {"apply"}, {"apply", "--server-side"}} {
			out := kubectlInput(t, k, flockManifest("dry", ns, 1), append(args, "-f", "-", "--dry-run=server", "-o", "json")...)
			var f flockv1alpha1.Flock
			if err := json.Unmarshal([]byte(out), &f); err != nil {
				t.Fatalf("%v --dry-run=server -o json: %v", args, err)
			}
			// Defaults and server-set fields are in the answer ...
			if f.Spec.ServiceName != "dry" || f.Generation != 1 || f.CreationTimestamp.IsZero() || f.Spec.Storage.VolumeName != "data" {
				t.Errorf("%v --dry-run=server answered spec %+v generation %d", args, f.Spec, f.Generation)
			}
			// ... but nothing was stored.
			if _, err := env.Flock.FlockV1alpha1().Flocks(ns).Get(ctxFor(t), "dry", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Fatalf("%v --dry-run=server stored the Flock (get: %v)", args, err)
			}
		}
		if out := kubectlInput(t, k, flockManifest("dry", ns, 1), "create", "-f", "-", "--dry-run=server"); out != "flock.flock.dev/dry created (server dry run)\n" {
			t.Errorf("create --dry-run=server printed %q", out)
		}
		// Admission runs on a dry run: too many replicas are refused.
		res := kubectlFails(t, k, flockManifest("dry", ns, 50), "create", "-f", "-", "--dry-run=server")
		if !strings.Contains(res.Stderr, "spec.replicas") || !strings.Contains(res.Stderr, "50") || !strings.Contains(res.Stderr, "eligible") {
			t.Errorf("dry-run of 50 replicas: %s", res.Stderr)
		}
		// Delete and scale dry runs leave the object as it was.
		createFlock(t, newFlock("kept", ns, 1))
		if out := kubectl(t, k, "scale", "fl", "kept", "-n", ns, "--replicas=2", "--dry-run=server"); !strings.Contains(out, "flock.flock.dev/kept scaled (server dry run)") {
			t.Errorf("scale --dry-run=server printed %q", out)
		}
		if out := kubectl(t, k, "delete", "fl", "kept", "-n", ns, "--dry-run=server"); !regexp.MustCompile(`^flock\.flock\.dev "kept" deleted( from \S+ namespace)? \(server dry run\)\n$`).MatchString(out) {
			t.Errorf("delete --dry-run=server printed %q", out)
		}
		if f := getFlock(t, ns, "kept"); f.DeletionTimestamp != nil || *f.Spec.Replicas != 1 {
			t.Errorf("after dry runs: deleting=%v replicas=%d", f.DeletionTimestamp != nil, *f.Spec.Replicas)
		}
	})
}

// --validate=strict: an unknown field is an error naming the field (server-
// side field validation); --validate=warn stores the object and warns.
func TestKubectlValidateStrict(t *testing.T) {
	forEachKubectl(t, func(t *testing.T, k cluster.Kubectl) {
		ns := newNamespace(t)
		typo := strings.Replace(flockManifest("typo", ns, 1), "  replicas: 1\n", "  replicas: 1\n  replica: 2\n", 1)
		typo = strings.Replace(typo, "      - name: app\n", "      - name: app\n        imagePullPolice: Always\n", 1)
		for _, args := range [][]string{{"create"}, {"apply"}} {
			res := kubectlFails(t, k, typo, append(args, "--validate=strict", "-f", "-")...)
			for _, want := range []string{"strict decoding error", `unknown field "spec.replica"`, `unknown field "spec.template.spec.containers[0].imagePullPolice"`} {
				if !strings.Contains(res.Stderr, want) {
					t.Errorf("%v --validate=strict: want %q in:\n%s", args, want, res.Stderr)
				}
			}
		}
		// Server-side apply: 422 naming each field (k8s.io/apiserver alone
		// answers 500 here, for built-in kinds too), whatever the
		// validation level, as the apply cannot be made.
		for _, validate := range []string{"strict", "ignore"} {
			res := kubectlFails(t, k, typo, "apply", "--server-side", "--validate="+validate, "-f", "-")
			for _, want := range []string{`The Flock "typo" is invalid`, "spec.replica: Invalid value: field not declared in schema"} {
				if !strings.Contains(res.Stderr, want) {
					t.Errorf("apply --server-side --validate=%s: want %q in:\n%s", validate, want, res.Stderr)
				}
			}
		}
		if _, err := env.Flock.FlockV1alpha1().Flocks(ns).Get(ctxFor(t), "typo", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Fatalf("a strictly refused Flock was stored (get: %v)", err)
		}
		// --validate=warn: stored, with a warning per unknown field.
		r, err := env.KubectlInput(ctxFor(t), k, typo, "create", "--validate=warn", "-f", "-")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(r.Stderr, `Warning: unknown field "spec.replica"`) || r.Stdout != "flock.flock.dev/typo created\n" {
			t.Errorf("--validate=warn: stdout %q stderr %q", r.Stdout, r.Stderr)
		}
		if *getFlock(t, ns, "typo").Spec.Replicas != 1 {
			t.Error("the unknown field changed replicas")
		}
	})
}

// getFlock reads a Flock through kube-apiserver, failing the test on error.
func getFlock(t *testing.T, ns, name string) *flockv1alpha1.Flock {
	t.Helper()
	f, err := env.Flock.FlockV1alpha1().Flocks(ns).Get(ctxFor(t), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get Flock %s/%s: %v", ns, name, err)
	}
	return f
}

// kubectlOut runs k and returns stdout whatever the exit code (for
// `auth can-i`, which exits 1 for "no").
func kubectlOut(t *testing.T, k cluster.Kubectl, args ...string) string {
	t.Helper()
	res, err := env.Kubectl(ctxFor(t), k, args...)
	if res == nil {
		t.Fatal(err)
	}
	return res.Stdout
}

// roleBinding binds ClusterRole role to user in a namespace.
func roleBinding(name, role, user string) *rbacv1.RoleBinding {
	return &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	}
}
