package main

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// fakeMachine is a PATH directory with executables named in tools and a
// run function that prints versions[name] for them.
func fakeMachine(t *testing.T, tools []string, versions map[string]string) env {
	t.Helper()
	dir := t.TempDir()
	for _, name := range tools {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return env{path: dir, binDir: filepath.Join(t.TempDir(), "bin"), run: func(name string, args ...string) (string, error) {
		v, ok := versions[filepath.Base(name)]
		if !ok {
			return "", errors.New("exit status 1")
		}
		return v, nil
	}}
}

func byName(rs []result) map[string]result {
	m := map[string]result{}
	for _, r := range rs {
		m[r.name] = r
	}
	return m
}

func TestDoctorReportsWhatIsMissing(t *testing.T) {
	e := fakeMachine(t, []string{"go", "make", "git", "timeout", "tar", "gzip", "openssl", "node"},
		map[string]string{"go": "go1.26.8\n", "node": "v18.19.0\n"})
	rs, err := runChecks(e, "")
	if err != nil {
		t.Fatal(err)
	}
	got := byName(rs)
	for name, wantProblem := range map[string]string{
		"go":      "",
		"make":    "",
		"node":    "node is 18.19; 20.0 or newer is needed",
		"npm":     "npm is not on PATH",
		"kubectl": "no kubectl on PATH other than the built",
		"dig":     "dig is not on PATH",
	} {
		r, ok := got[name]
		if !ok {
			t.Errorf("no check named %s", name)
			continue
		}
		if wantProblem == "" && r.problem != "" || !strings.Contains(r.problem, wantProblem) {
			t.Errorf("%s: problem %q, want %q", name, r.problem, wantProblem)
		}
	}
	pkgs := missingPackages(rs)
	for _, want := range []string{"dnsutils", "nodejs", "npm", "iproute2", "gcc"} {
		if !slices.Contains(pkgs, want) {
			t.Errorf("missing packages %q, want %s among them", pkgs, want)
		}
	}

	var out strings.Builder
	if report(&out, rs) {
		t.Errorf("report says all is well with node 18 and no npm:\n%s", out.String())
	}
	for _, want := range []string{
		"MISSING  node             node is 18.19; 20.0 or newer is needed",
		"Debian 12's nodejs is 18",
		"FLOCK_SKEW_KUBECTL=1 ./hack/build-tools.sh",
		"optional dig",
		"apt-get install -y ",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
}

func TestDoctorAllPresent(t *testing.T) {
	e := fakeMachine(t, []string{"go", "make", "git", "protoc", "timeout", "tar", "gzip", "openssl", "node", "npm", "kubectl", "ip", "gcc"},
		map[string]string{"go": "go1.27.0\n", "node": "v20.0.1\n"})
	rs, err := runChecks(e, "")
	if err != nil {
		t.Fatal(err)
	}
	// ca-certificates, cni-plugins, libseccomp and haproxy read the real
	// files (a machine without them fails only the report); dig is optional.
	realFiles := []string{"ca-certificates", "cni-plugins", "libseccomp", "haproxy"}
	for _, r := range rs {
		if r.problem != "" && !slices.Contains(realFiles, r.name) && r.name != "dig" {
			t.Errorf("%s: unexpected problem %q", r.name, r.problem)
		}
	}
	var out strings.Builder
	realOK := true
	for _, r := range rs {
		realOK = realOK && (r.problem == "" || !slices.Contains(realFiles, r.name))
	}
	if realOK && !report(&out, rs) {
		t.Errorf("report fails with everything required present:\n%s", out.String())
	}
}

func TestDoctorOnly(t *testing.T) {
	e := fakeMachine(t, nil, nil)
	rs, err := runChecks(e, "kubectl")
	if err != nil || len(rs) != 1 || rs[0].name != "kubectl" || rs[0].problem == "" {
		t.Errorf("-only kubectl on an empty machine: %+v, %v", rs, err)
	}
	// The skew kubectl in the bin directory is enough.
	if err := os.MkdirAll(e.binDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(e.binDir, "kubectl-1.32"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if rs, _ := runChecks(e, "kubectl"); rs[0].problem != "" {
		t.Errorf("kubectl with _output/bin/kubectl-1.32: %q", rs[0].problem)
	}
	if _, err := runChecks(e, "nosuch"); err == nil {
		t.Error("-only nosuch: no error")
	}
}

func TestParseVersion(t *testing.T) {
	for in, want := range map[string][2]int{
		"v20.11.1\n": {20, 11},
		"go1.26.8":   {1, 26},
		"v8.0":       {8, 0},
	} {
		if got, ok := parseVersion(in); !ok || got != want {
			t.Errorf("parseVersion(%q) = %v, %v; want %v", in, got, ok, want)
		}
	}
	if _, ok := parseVersion("unknown"); ok {
		t.Error(`parseVersion("unknown") ok`)
	}
}
