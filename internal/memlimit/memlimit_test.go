package memlimit

import (
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"testing"
)

func write(t *testing.T, root, rel, content string) {
	t.Helper()
	p := filepath.Join(root, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestCgroupLimit(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files map[string]string
		self  string
		want  int64
	}{
		{"v2 container (cgroup namespace)", map[string]string{"cgroup.controllers": "memory", "memory.max": "1073741824\n"},
			"0::/\n", 1 << 30},
		{"v2 no limit", map[string]string{"cgroup.controllers": "memory", "memory.max": "max\n"}, "0::/\n", 0},
		{"v2 the smallest of the path", map[string]string{
			"cgroup.controllers":                "memory",
			"kubepods.slice/memory.max":         "8589934592\n",
			"kubepods.slice/pod1/memory.max":    "536870912\n",
			"kubepods.slice/pod1/c1/memory.max": "max\n",
		}, "0::/kubepods.slice/pod1/c1\n", 512 << 20},
		{"v2 a parent limits", map[string]string{
			"cgroup.controllers":                "memory",
			"system.slice/memory.max":           "268435456\n",
			"system.slice/x.service/memory.max": "max\n",
		}, "0::/system.slice/x.service\n", 256 << 20},
		{"v1 memory controller", map[string]string{"memory/docker/abc/memory.limit_in_bytes": "314572800\n"},
			"12:cpu,cpuacct:/docker/abc\n11:memory:/docker/abc\n", 300 << 20},
		{"v1 unlimited", map[string]string{"memory/memory.limit_in_bytes": "9223372036854771712\n"}, "4:memory:/\n", 0},
		{"no cgroup file", map[string]string{}, "0::/\n", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			for rel, content := range tc.files {
				write(t, root, rel, content)
			}
			got, err := CgroupLimit(root, []byte(tc.self))
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("limit %d, want %d", got, tc.want)
			}
		})
	}
}

func TestCgroupLimitBadValue(t *testing.T) {
	root := t.TempDir()
	write(t, root, "cgroup.controllers", "memory")
	write(t, root, "memory.max", "lots\n")
	if _, err := CgroupLimit(root, []byte("0::/\n")); err == nil {
		t.Fatal("an unreadable memory.max gave no error")
	}
}

func TestSetLeavesGOMEMLIMITAlone(t *testing.T) {
	t.Setenv("GOMEMLIMIT", "100MiB")
	if soft, _, err := Set(0.9); soft != 0 || err != nil {
		t.Fatalf("Set with GOMEMLIMIT in the environment: soft limit %d, err %v", soft, err)
	}
	if soft, _, err := Set(0); soft != 0 || err != nil {
		t.Fatalf("Set(0): soft limit %d, err %v", soft, err)
	}
}

func TestSetFromSetsTheRuntimeLimit(t *testing.T) {
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1))
	root := t.TempDir()
	write(t, root, "cgroup.controllers", "memory")
	write(t, root, "memory.max", "1073741824\n")
	soft, cgroup, err := setFrom(root, []byte("0::/\n"), 0.9)
	if err != nil {
		t.Fatal(err)
	}
	if cgroup != 1<<30 || soft != int64(math.Floor(0.9*(1<<30))) {
		t.Fatalf("soft limit %d from cgroup limit %d", soft, cgroup)
	}
	if got := debug.SetMemoryLimit(-1); got != soft {
		t.Fatalf("the runtime's limit is %d, want %d", got, soft)
	}

	debug.SetMemoryLimit(math.MaxInt64)
	write(t, root, "memory.max", "max\n")
	if soft, _, err := setFrom(root, []byte("0::/\n"), 0.9); soft != 0 || err != nil {
		t.Fatalf("no cgroup limit: soft limit %d, err %v", soft, err)
	}
	if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
		t.Fatalf("without a cgroup limit the runtime's limit became %d", got)
	}
}
