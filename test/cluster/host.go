package cluster

// What a real node changes on the machine, and how the harness puts it back:
// a snapshot of the machine's state (processes of the runtime binaries,
// mounts, bridges, top-level cgroups, network namespaces, the sysctls kubelet
// and CNI could change, the fixed paths kubelet and containerd use outside
// their roots), its diff, and the low-level steps of the teardown.

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
)

// cgroupV1Root is where this machine kind mounts its cgroup hierarchies.
const cgroupV1Root = "/sys/fs/cgroup"

// watchedSysctls are the settings a real node could change: forwarding (a
// CNI bridge with isGateway), the kernel tunables kubelet sets at start
// (vm.overcommit_memory, vm.panic_on_oom, kernel.panic, kernel.panic_on_oops,
// kernel.keys.root_max*), and what kube-proxy-like set-ups touch.
var watchedSysctls = []string{
	"net/ipv4/ip_forward",
	"net/ipv4/conf/all/forwarding",
	"net/ipv6/conf/all/forwarding",
	"net/ipv4/conf/all/route_localnet",
	"net/bridge/bridge-nf-call-iptables",
	"vm/overcommit_memory",
	"vm/panic_on_oom",
	"kernel/panic",
	"kernel/panic_on_oops",
	"kernel/keys/root_maxkeys",
	"kernel/keys/root_maxbytes",
}

// kubeletTunables are the sysctls kubelet sets once when it starts (unless
// protectKernelDefaults, which then refuses to start on this machine).
var kubeletTunables = []string{
	"vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic", "kernel/panic_on_oops",
	"kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes",
}

// runtimeFixedPaths are directories kubelet, containerd and CNI create at
// fixed paths whatever their configured roots: the device-plugin socket
// directory, container log links, the libcni result cache, shim sockets.
var runtimeFixedPaths = []string{
	"/var/lib/kubelet",
	"/var/log/containers",
	"/var/log/pods",
	"/var/lib/cni",
	"/run/containerd",
	"/run/netns",
	"/var/run/netns",
	"/opt/containerd",
	"/var/lib/containerd",
	"/etc/cni",
	"/etc/cdi",
	"/var/run/cdi",
	"/var/run/nri",
}

// runtimeBinaries are the programs a real node runs; a process running one
// of them from BinDir after the teardown is a leftover.
var runtimeBinaries = []string{"kubelet", "containerd", "containerd-shim-runc-v2", "runc", "flock-test", "ctr"}

// MachineState is what a real node may change on the machine.
type MachineState struct {
	// Processes are "pid exe" of processes running a runtime binary.
	Processes []string
	// Mounts are the mount points in /proc/self/mountinfo.
	Mounts []string
	// Bridges are the bridge interfaces.
	Bridges []string
	// Cgroups are the top-level cgroups, "hierarchy/name".
	Cgroups []string
	// Sysctls are "name=value" of watchedSysctls.
	Sysctls []string
	// Paths are the runtimeFixedPaths that exist, with their entries.
	Paths []string
}

// SnapshotMachine records the machine's state; binDir is where the runtime
// binaries come from.
func SnapshotMachine(binDir string) MachineState {
	var s MachineState
	bins := map[string]bool{}
	for _, b := range runtimeBinaries {
		bins[filepath.Join(binDir, b)] = true
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/exe")
	for _, p := range procs {
		exe, err := os.Readlink(p)
		if err == nil && bins[strings.TrimSuffix(exe, " (deleted)")] {
			s.Processes = append(s.Processes, strings.TrimSuffix(strings.TrimPrefix(p, "/proc/"), "/exe")+" "+exe)
		}
	}
	s.Mounts = mountPoints()
	if links, err := os.ReadDir("/sys/class/net"); err == nil {
		for _, l := range links {
			if _, err := os.Stat(filepath.Join("/sys/class/net", l.Name(), "bridge")); err == nil {
				s.Bridges = append(s.Bridges, l.Name())
			}
		}
	}
	for _, h := range cgroupHierarchies() {
		entries, _ := os.ReadDir(filepath.Join(cgroupV1Root, h))
		for _, e := range entries {
			if e.IsDir() {
				s.Cgroups = append(s.Cgroups, h+"/"+e.Name())
			}
		}
	}
	for _, name := range watchedSysctls {
		if v, err := os.ReadFile(filepath.Join("/proc/sys", name)); err == nil {
			s.Sysctls = append(s.Sysctls, name+"="+strings.TrimSpace(string(v)))
		}
	}
	for _, p := range runtimeFixedPaths {
		s.Paths = append(s.Paths, pathEntries(p)...)
	}
	for _, l := range []*[]string{&s.Processes, &s.Mounts, &s.Bridges, &s.Cgroups, &s.Sysctls, &s.Paths} {
		slices.Sort(*l)
	}
	return s
}

// Diff lists what differs from before to s, e.g. "mount added: /x".
func (s MachineState) Diff(before MachineState) []string {
	var out []string
	cmp := func(what string, old, cur []string) {
		for _, v := range cur {
			if !slices.Contains(old, v) {
				out = append(out, what+" added: "+v)
			}
		}
		for _, v := range old {
			if !slices.Contains(cur, v) {
				out = append(out, what+" removed: "+v)
			}
		}
	}
	cmp("process", before.Processes, s.Processes)
	cmp("mount", before.Mounts, s.Mounts)
	cmp("bridge", before.Bridges, s.Bridges)
	cmp("cgroup", before.Cgroups, s.Cgroups)
	cmp("sysctl", before.Sysctls, s.Sysctls)
	cmp("path", before.Paths, s.Paths)
	return out
}

// pathEntries lists p and its entries (two levels), or nothing when p is absent.
func pathEntries(p string) []string {
	if _, err := os.Lstat(p); err != nil {
		return nil
	}
	out := []string{p}
	entries, _ := os.ReadDir(p)
	for _, e := range entries {
		sub := filepath.Join(p, e.Name())
		out = append(out, sub)
		if e.IsDir() {
			subs, _ := os.ReadDir(sub)
			for _, s := range subs {
				out = append(out, filepath.Join(sub, s.Name()))
			}
		}
	}
	return out
}

// mountPoints lists the mount points of this mount namespace.
func mountPoints() []string {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	var out []string
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 {
			out = append(out, unescapeMount(f[4]))
		}
	}
	return out
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a blank, ...).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			var v byte
			if _, err := fmt.Sscanf(s[i+1:i+4], "%03o", &v); err == nil {
				b.WriteByte(v)
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// unmountUnder detaches every mount at or below dir, deepest first.
func unmountUnder(dir string) error {
	var under []string
	for _, m := range mountPoints() {
		if m == dir || strings.HasPrefix(m, dir+"/") {
			under = append(under, m)
		}
	}
	// Deeper (longer) paths first; a path mounted twice is unmounted twice.
	slices.SortStableFunc(under, func(a, b string) int { return len(b) - len(a) })
	var errs []error
	for _, m := range under {
		if err := syscall.Unmount(m, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOENT) {
			errs = append(errs, fmt.Errorf("unmount %s: %w", m, err))
		}
	}
	return errors.Join(errs...)
}

// cgroupHierarchies lists the mounted cgroup v1 hierarchies (and the v2
// "unified" one of a hybrid set-up) under cgroupV1Root.
func cgroupHierarchies() []string {
	var out []string
	for _, line := range strings.Split(readString("/proc/self/mountinfo"), "\n") {
		f := strings.Fields(line)
		if len(f) < 10 {
			continue
		}
		sep := slices.Index(f, "-")
		if sep < 0 || sep+1 >= len(f) || !strings.HasPrefix(f[sep+1], "cgroup") {
			continue
		}
		if rel, ok := strings.CutPrefix(f[4], cgroupV1Root+"/"); ok && !strings.Contains(rel, "/") {
			out = append(out, rel)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// makeCgroup creates cgroup name (e.g. "flock-real-1") in every hierarchy;
// each new cpuset gets its parent's cpus and mems, so tasks can join it.
func makeCgroup(name string) error {
	for _, h := range cgroupHierarchies() {
		dir := filepath.Join(cgroupV1Root, h)
		for _, part := range strings.Split(name, "/") {
			parent := dir
			dir = filepath.Join(dir, part)
			if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
				return fmt.Errorf("create cgroup %s: %w", dir, err)
			}
			if h != "cpuset" {
				continue
			}
			for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
				if strings.TrimSpace(readString(filepath.Join(dir, f))) == "" {
					if err := os.WriteFile(filepath.Join(dir, f), []byte(readString(filepath.Join(parent, f))), 0o644); err != nil {
						return fmt.Errorf("set %s of %s: %w", f, dir, err)
					}
				}
			}
		}
	}
	return nil
}

// removeCgroup removes cgroup name and every cgroup below it from every
// hierarchy, deepest first. A cgroup that still has tasks cannot go.
func removeCgroup(name string) error {
	var errs []error
	for _, h := range cgroupHierarchies() {
		root := filepath.Join(cgroupV1Root, h, name)
		if _, err := os.Stat(root); err != nil {
			continue
		}
		var dirs []string
		_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		slices.SortStableFunc(dirs, func(a, b string) int { return len(b) - len(a) })
		for _, d := range dirs {
			if err := syscall.Rmdir(d); err != nil && !errors.Is(err, syscall.ENOENT) {
				errs = append(errs, fmt.Errorf("remove cgroup %s (tasks: %s): %w", d, strings.Join(strings.Fields(readString(filepath.Join(d, "tasks"))), " "), err))
			}
		}
	}
	return errors.Join(errs...)
}

// readSysctls returns the current values of names ("vm/overcommit_memory").
func readSysctls(names []string) map[string]string {
	out := map[string]string{}
	for _, n := range names {
		if v, err := os.ReadFile(filepath.Join("/proc/sys", n)); err == nil {
			out[n] = strings.TrimSpace(string(v))
		}
	}
	return out
}

// writeSysctls restores values read by readSysctls where they changed.
func writeSysctls(values map[string]string) error {
	var errs []error
	for n, v := range values {
		p := filepath.Join("/proc/sys", n)
		if strings.TrimSpace(readString(p)) == v {
			continue
		}
		if err := os.WriteFile(p, []byte(v), 0o644); err != nil {
			errs = append(errs, fmt.Errorf("restore sysctl %s=%s: %w", n, v, err))
		}
	}
	return errors.Join(errs...)
}

// fixedPathState records which runtimeFixedPaths exist and their entries,
// so the teardown removes exactly what appeared since.
type fixedPathState map[string][]string

func snapshotFixedPaths() fixedPathState {
	st := fixedPathState{}
	for _, p := range runtimeFixedPaths {
		if _, err := os.Lstat(p); err != nil {
			continue
		}
		entries, _ := os.ReadDir(p)
		names := []string{}
		for _, e := range entries {
			names = append(names, e.Name())
		}
		st[p] = names
	}
	return st
}

// restore removes the fixed paths that did not exist at the snapshot and the
// entries that appeared in those that did (after unmounting anything there).
func (st fixedPathState) restore() error {
	var errs []error
	for _, p := range runtimeFixedPaths {
		before, existed := st[p]
		if !existed {
			if _, err := os.Lstat(p); err == nil {
				errs = append(errs, unmountUnder(p), os.RemoveAll(p))
			}
			continue
		}
		entries, _ := os.ReadDir(p)
		for _, e := range entries {
			if !slices.Contains(before, e.Name()) {
				sub := filepath.Join(p, e.Name())
				errs = append(errs, unmountUnder(sub), os.RemoveAll(sub))
			}
		}
	}
	return errors.Join(errs...)
}

// ipCmd runs `ip args...`.
func ipCmd(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

func readString(p string) string {
	data, _ := os.ReadFile(p)
	return string(data)
}
