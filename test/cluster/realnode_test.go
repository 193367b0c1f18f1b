package cluster

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestMachineStateDiff(t *testing.T) {
	before := MachineState{Mounts: []string{"/a"}, Bridges: []string{"eth-br"}, Sysctls: []string{"vm/overcommit_memory=0"}}
	after := MachineState{Mounts: []string{"/a", "/b"}, Sysctls: []string{"vm/overcommit_memory=1"}}
	got := after.Diff(before)
	want := []string{"mount added: /b", "bridge removed: eth-br", "sysctl added: vm/overcommit_memory=1", "sysctl removed: vm/overcommit_memory=0"}
	if !slices.Equal(got, want) {
		t.Errorf("Diff = %q, want %q", got, want)
	}
	if d := before.Diff(before); len(d) != 0 {
		t.Errorf("a state differs from itself: %q", d)
	}
}

func TestUnescapeMount(t *testing.T) {
	for in, want := range map[string]string{`/a\040b`: "/a b", "/plain": "/plain", `/tab\011x`: "/tab\tx"} {
		if got := unescapeMount(in); got != want {
			t.Errorf("unescapeMount(%q) = %q, want %q", in, got, want)
		}
	}
}

// The teardown removes exactly what appeared at the fixed paths: a path
// that did not exist goes entirely, new entries of one that did go, old
// entries stay.
func TestFixedPathsRestore(t *testing.T) {
	dir := t.TempDir()
	existing, absent := filepath.Join(dir, "existing"), filepath.Join(dir, "absent")
	if err := os.MkdirAll(filepath.Join(existing, "old"), 0o755); err != nil {
		t.Fatal(err)
	}
	saved := runtimeFixedPaths
	runtimeFixedPaths = []string{existing, absent}
	t.Cleanup(func() { runtimeFixedPaths = saved })

	st := snapshotFixedPaths()
	for _, p := range []string{filepath.Join(existing, "new", "sock"), filepath.Join(absent, "x", "y")} {
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.restore(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(absent); !os.IsNotExist(err) {
		t.Errorf("%s: %v, want it gone", absent, err)
	}
	if _, err := os.Stat(filepath.Join(existing, "new")); !os.IsNotExist(err) {
		t.Errorf("new entry: %v, want it gone", err)
	}
	if _, err := os.Stat(filepath.Join(existing, "old")); err != nil {
		t.Errorf("old entry: %v, want it kept", err)
	}
}

// The fixes of docs' real-node pitfalls stay in the rendered configuration.
func TestRealNodeConfigs(t *testing.T) {
	c := &Cluster{opts: Options{BinDir: "/bin-dir", WorkDir: "/work"}, PKI: &PKI{ClusterCA: &CA{CertFile: "/pki/ca.crt"}}}
	rn := &RealNode{Name: "real-1", Dir: "/work/real/real-1", BridgeIP: "10.88.1.1", CgroupRoot: "/flock-real-1", KubeletPort: 10250, ContainerdSocket: "/work/real/real-1/containerd.sock"}
	for _, want := range []string{"restrict_oom_score_adj = true", `sandbox = "` + PauseImage + `"`, `BinaryName = "/bin-dir/runc"`, "netns_mounts_under_state_dir = true", "io.containerd.internal.v1.opt"} {
		if cfg := c.containerdConfig(rn); !strings.Contains(cfg, want) {
			t.Errorf("containerd config lacks %q:\n%s", want, cfg)
		}
	}
	kc := c.kubeletConfig(rn, &KeyPair{CertFile: "/s.crt", KeyFile: "/s.key"}, 10248)
	for _, want := range []string{"failCgroupV1: false", "cgroupDriver: cgroupfs", "cgroupRoot: /flock-real-1", "address: 10.88.1.1", "readOnlyPort: 0",
		"makeIPTablesUtilChains: false", `resolvConf: ""`, "clusterDNS: [10.88.1.1]", "imageGCHighThresholdPercent: 100", "anonymous: {enabled: false}"} {
		if !strings.Contains(kc, want) {
			t.Errorf("kubelet config lacks %q:\n%s", want, kc)
		}
	}
}
