// Package memlimit gives the Go runtime a soft memory limit from the memory
// limit of the cgroup flock-apiserver runs in, as a share of it. Without one
// the Go GC knows no limit: the heap may grow to twice the live heap before a
// collection, and a container whose limit lies in between is OOM-killed
// although its live data fit (issue 17 measured the resident set rising by
// 100 MiB at an idle informer resync, the live heap unchanged). With a soft
// limit below the cgroup's, the GC collects harder as the limit nears instead.
package memlimit

import (
	"bufio"
	"bytes"
	"fmt"
	"math"
	"os"
	"path"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
)

// unlimited is the value from which a cgroup v1 limit means none (the
// kernel reports "no limit" as a page-rounded maximum int64).
const unlimited = int64(1) << 62

// Set sets the runtime's soft memory limit to ratio of the memory limit of
// this process's cgroup, and returns the limit set and the cgroup limit it
// came from. It sets nothing (0, 0, nil) when ratio is 0, when GOMEMLIMIT is
// set (the environment wins), or when no cgroup limit applies.
func Set(ratio float64) (soft, cgroup int64, err error) {
	if ratio <= 0 || os.Getenv("GOMEMLIMIT") != "" {
		return 0, 0, nil
	}
	self, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return 0, 0, fmt.Errorf("reading /proc/self/cgroup: %w", err)
	}
	return setFrom("/sys/fs/cgroup", self, ratio)
}

// setFrom is Set with the cgroup filesystem at root and /proc/self/cgroup's
// content given.
func setFrom(root string, self []byte, ratio float64) (soft, cgroup int64, err error) {
	cgroup, err = CgroupLimit(root, self)
	if err != nil || cgroup == 0 {
		return 0, 0, err
	}
	soft = int64(math.Floor(float64(cgroup) * ratio))
	debug.SetMemoryLimit(soft)
	return soft, cgroup, nil
}

// CgroupLimit returns the memory limit that applies to the cgroup that
// procSelfCgroup (the content of /proc/self/cgroup) names, under the cgroup
// filesystem mounted at root: the smallest limit of the cgroup and its
// ancestors, 0 when none has one. It reads cgroup v2 (memory.max) and,
// failing that, cgroup v1's memory controller (memory.limit_in_bytes).
func CgroupLimit(root string, procSelfCgroup []byte) (int64, error) {
	var v2, v1 string
	sc := bufio.NewScanner(bytes.NewReader(procSelfCgroup))
	for sc.Scan() {
		// hierarchy-ID:controllers:path
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		switch {
		case parts[0] == "0" && parts[1] == "":
			v2 = parts[2]
		case slices.Contains(strings.Split(parts[1], ","), "memory"):
			v1 = parts[2]
		}
	}
	if v2 != "" {
		if _, err := os.Stat(filepath.Join(root, "cgroup.controllers")); err == nil {
			return smallest(root, v2, "memory.max")
		}
	}
	if v1 != "" {
		return smallest(filepath.Join(root, "memory"), v1, "memory.limit_in_bytes")
	}
	return 0, nil
}

// smallest returns the smallest limit in file among the cgroup dir (below
// base) and its ancestors; a cgroup whose file is missing (not mounted at
// that level, as inside a container's cgroup namespace) has none.
func smallest(base, dir, file string) (int64, error) {
	var limit int64
	for d := path.Clean("/" + dir); ; d = path.Dir(d) {
		data, err := os.ReadFile(filepath.Join(base, d, file))
		if err == nil {
			s := strings.TrimSpace(string(data))
			if s != "max" {
				v, err := strconv.ParseInt(s, 10, 64)
				if err != nil {
					return 0, fmt.Errorf("%s: %w", filepath.Join(base, d, file), err)
				}
				if v > 0 && v < unlimited && (limit == 0 || v < limit) {
					limit = v
				}
			}
		} else if !os.IsNotExist(err) {
			return 0, err
		}
		if d == "/" {
			return limit, nil
		}
	}
}
