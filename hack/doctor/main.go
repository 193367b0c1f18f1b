// Command doctor (`make doctor`) checks that this machine has what building
// and testing Flock needs, prints each missing or too old prerequisite with
// the Debian package that provides it (or how else to get it), and exits 1
// when a required one is missing. `make test` and `.ci/run` run it first.
//
//	go run ./hack/doctor             check everything
//	go run ./hack/doctor -packages   print only the Debian packages of what is missing
//	go run ./hack/doctor -only NAME  check one prerequisite (e.g. -only kubectl)
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"flock.dev/flock/internal/syskubectl"
)

// prereq is one thing the build or the tests need.
type prereq struct {
	// name is what `-only` selects and what is printed.
	name string
	// usedBy says what needs it.
	usedBy string
	// debian is the Debian package that provides it ("" when Debian has
	// none that fits).
	debian string
	// otherwise says how to get it when the Debian package is not enough.
	otherwise string
	// optional prerequisites are reported but do not fail the check.
	optional bool
	// check returns what was found (a version or a path) and, when the
	// prerequisite is missing or too old, the problem.
	check func(e env) (found, problem string)
}

// env is what the checks look at: PATH, the bin directory of `make tools`,
// and a way to run a command. Tests replace it.
type env struct {
	path   string
	binDir string
	run    func(name string, args ...string) (string, error)
}

// lookPath finds name in e.path.
func (e env) lookPath(name string) string {
	for _, dir := range filepath.SplitList(e.path) {
		if dir == "" || !filepath.IsAbs(dir) {
			continue
		}
		p := filepath.Join(dir, name)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return p
		}
	}
	return ""
}

// command is a check that name is on PATH.
func command(name string) func(e env) (string, string) {
	return func(e env) (string, string) {
		if p := e.lookPath(name); p != "" {
			return p, ""
		}
		return "", name + " is not on PATH"
	}
}

// anyFile is a check that one of paths exists.
func anyFile(paths ...string) func(e env) (string, string) {
	return func(env) (string, string) {
		for _, p := range paths {
			if _, err := os.Stat(p); err == nil {
				return p, ""
			}
		}
		return "", strings.Join(paths, " and ") + ": none exists"
	}
}

// versionAtLeast is a check that `name args...` prints a version
// (major.minor) of at least want.
func versionAtLeast(name string, want [2]int, args ...string) func(e env) (string, string) {
	return func(e env) (string, string) {
		p := e.lookPath(name)
		if p == "" {
			return "", name + " is not on PATH"
		}
		out, err := e.run(p, args...)
		if err != nil {
			return p, fmt.Sprintf("%s %s failed: %v", p, strings.Join(args, " "), err)
		}
		got, ok := parseVersion(out)
		if !ok {
			return p, fmt.Sprintf("cannot read a version in %q", strings.TrimSpace(out))
		}
		found := fmt.Sprintf("%d.%d (%s)", got[0], got[1], p)
		if got[0] < want[0] || got[0] == want[0] && got[1] < want[1] {
			return found, fmt.Sprintf("%s is %d.%d; %d.%d or newer is needed", name, got[0], got[1], want[0], want[1])
		}
		return found, ""
	}
}

var versionRE = regexp.MustCompile(`(\d+)\.(\d+)`)

// parseVersion returns the first major.minor in s ("v20.11.1" -> 20, 11;
// "go version go1.26.8 linux/amd64" -> 1, 26).
func parseVersion(s string) ([2]int, bool) {
	m := versionRE.FindStringSubmatch(s)
	if m == nil {
		return [2]int{}, false
	}
	major, _ := strconv.Atoi(m[1])
	minor, _ := strconv.Atoi(m[2])
	return [2]int{major, minor}, true
}

// prereqs is every prerequisite, in the order they are printed.
var prereqs = []prereq{
	{name: "go", usedBy: "everything", check: versionAtLeast("go", [2]int{1, 26}, "env", "GOVERSION"),
		otherwise: "install Go 1.26 from https://go.dev/dl (Debian's golang is older)"},
	{name: "make", usedBy: "every make target", debian: "make", check: command("make")},
	{name: "git", usedBy: "make verify (gofmt over git ls-files), verify-codegen", debian: "git", check: command("git")},
	{name: "protoc", usedBy: "make update-codegen, verify-codegen (the protobuf code of the API types)", debian: "protobuf-compiler",
		check: command("protoc")},
	{name: "timeout", usedBy: ".ci/run", debian: "coreutils", check: command("timeout")},
	{name: "tar", usedBy: "the e2e log archive of .ci/run", debian: "tar", check: command("tar")},
	{name: "gzip", usedBy: "the e2e log archive of .ci/run", debian: "gzip", check: command("gzip")},
	{name: "haproxy", usedBy: "HA mode of the harness and local-up (FLOCK_REPLICAS=3) and its e2e test", debian: "haproxy",
		check: anyFile("/usr/sbin/haproxy", "/usr/bin/haproxy")},
	{name: "openssl", usedBy: "hack/gen-serving-cert.sh and its e2e test", debian: "openssl", check: command("openssl")},
	{name: "ca-certificates", usedBy: "downloads from the Go module proxy and npm", debian: "ca-certificates",
		check: func(env) (string, string) {
			const f = "/etc/ssl/certs/ca-certificates.crt"
			if st, err := os.Stat(f); err == nil && st.Size() > 0 {
				return f, ""
			}
			return "", f + " is missing"
		}},
	{name: "node", usedBy: "the @kubernetes/client-node e2e test (examples/node-client)", debian: "nodejs",
		otherwise: "Debian 12's nodejs is 18: use Debian 13's, or NodeSource's nodejs 20 or newer",
		check:     versionAtLeast("node", [2]int{20, 0}, "--version")},
	{name: "npm", usedBy: "the @kubernetes/client-node e2e test (examples/node-client)", debian: "npm", check: command("npm")},
	{name: "kubectl", usedBy: "the e2e version-skew checks (a second, older kubectl next to the built v1.37)",
		otherwise: "install a kubectl (v1.32 here), or run FLOCK_SKEW_KUBECTL=1 ./hack/build-tools.sh, " +
			"which builds _output/bin/" + syskubectl.SkewName + " for the tests to use",
		check: func(e env) (string, string) {
			if p := syskubectl.Find(e.path, e.binDir); p != "" {
				return p, ""
			}
			return "", "no kubectl on PATH other than the built " + filepath.Join(e.binDir, "kubectl") +
				", and no " + filepath.Join(e.binDir, syskubectl.SkewName)
		}},
	{name: "ip", usedBy: "the real nodes' bridges (make test-e2e-real, local-up)", debian: "iproute2", check: command("ip")},
	{name: "cni-plugins", usedBy: "the real nodes' pod network (bridge, host-local, loopback in /usr/lib/cni)",
		debian: "containernetworking-plugins", check: anyFile("/usr/lib/cni/bridge")},
	{name: "libseccomp", usedBy: "runc's seccomp support, linked statically by make tools", debian: "libseccomp-dev",
		check: anyFile("/usr/lib/x86_64-linux-gnu/libseccomp.a", "/usr/lib/aarch64-linux-gnu/libseccomp.a", "/usr/lib/libseccomp.a")},
	{name: "gcc", usedBy: "building runc (cgo) in make tools", debian: "gcc", check: command("gcc")},
	{name: "dig", usedBy: "trying local-up's DNS by hand (the README); no test needs it", debian: "dnsutils",
		optional: true, check: command("dig")},
}

// result is the outcome of one prerequisite's check.
type result struct {
	prereq
	found, problem string
}

// runChecks checks the prerequisites named in only (all when only is empty).
func runChecks(e env, only string) ([]result, error) {
	var out []result
	for _, p := range prereqs {
		if only != "" && p.name != only {
			continue
		}
		found, problem := p.check(e)
		out = append(out, result{prereq: p, found: found, problem: problem})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no prerequisite named %q", only)
	}
	return out, nil
}

// missingPackages returns the Debian packages of the failed checks, sorted
// and without repeats.
func missingPackages(rs []result) []string {
	var pkgs []string
	for _, r := range rs {
		if r.problem != "" && r.debian != "" && !slices.Contains(pkgs, r.debian) {
			pkgs = append(pkgs, r.debian)
		}
	}
	slices.Sort(pkgs)
	return pkgs
}

// report prints one line per prerequisite and, for each problem, how to fix
// it; it returns whether every required prerequisite is there.
func report(w io.Writer, rs []result) bool {
	ok := true
	for _, r := range rs {
		if r.problem == "" {
			fmt.Fprintf(w, "doctor: ok       %-16s %s\n", r.name, r.found)
			continue
		}
		status := "MISSING"
		if r.optional {
			status = "optional"
		} else {
			ok = false
		}
		fmt.Fprintf(w, "doctor: %-8s %-16s %s (needed by %s)\n", status, r.name, r.problem, r.usedBy)
		if r.debian != "" {
			fmt.Fprintf(w, "doctor:          %-16s Debian: apt-get install %s\n", "", r.debian)
		}
		if r.otherwise != "" {
			fmt.Fprintf(w, "doctor:          %-16s %s\n", "", r.otherwise)
		}
	}
	if pkgs := missingPackages(rs); len(pkgs) > 0 {
		fmt.Fprintf(w, "doctor: on Debian: apt-get install -y %s\n", strings.Join(pkgs, " "))
	}
	if !ok {
		fmt.Fprintln(w, "doctor: required prerequisites are missing (see above)")
	}
	return ok
}

func main() {
	packages := flag.Bool("packages", false, "print only the Debian packages of the missing prerequisites, space separated")
	only := flag.String("only", "", "check only this prerequisite (e.g. kubectl)")
	binDir := flag.String("bin-dir", "", "the bin directory of `make tools` (default $FLOCK_BIN, else _output/bin)")
	flag.Parse()
	if *binDir == "" {
		*binDir = os.Getenv("FLOCK_BIN")
	}
	if *binDir == "" {
		*binDir = filepath.Join("_output", "bin")
	}
	if abs, err := filepath.Abs(*binDir); err == nil {
		*binDir = abs
	}
	e := env{path: os.Getenv("PATH"), binDir: *binDir, run: func(name string, args ...string) (string, error) {
		out, err := exec.Command(name, args...).CombinedOutput()
		return string(out), err
	}}
	rs, err := runChecks(e, *only)
	if err != nil {
		fmt.Fprintln(os.Stderr, "doctor:", err)
		os.Exit(2)
	}
	if *packages {
		fmt.Println(strings.Join(missingPackages(rs), " "))
		return
	}
	if !report(os.Stdout, rs) {
		os.Exit(1)
	}
}
