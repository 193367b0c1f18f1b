// Package syskubectl finds the second kubectl the tests drive next to the
// v1.37 one `make tools` builds: the system's kubectl (an older version, for
// the version-skew checks), or else the kubectl-1.32 that
// `FLOCK_SKEW_KUBECTL=1 ./hack/build-tools.sh` builds into the bin directory.
// The e2e harness (test/cluster) and `make doctor` (hack/doctor) both use it,
// so they never disagree about which kubectl that is.
package syskubectl

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
)

// SkewName is the file name, in the bin directory, of the older kubectl that
// `FLOCK_SKEW_KUBECTL=1 ./hack/build-tools.sh` builds.
const SkewName = "kubectl-1.32"

// Find returns the second kubectl: the first `kubectl` in the directories of
// pathList (a PATH value) that is not the built one, binDir/kubectl (neither
// that file through a symlink nor a copy of it); else binDir/SkewName when it
// exists; else "". Every PATH entry is looked at, not only the first kubectl,
// so a shell that put binDir first on PATH (as local-up's banner suggests)
// still finds the system's kubectl behind it. Relative PATH entries are
// skipped, as os/exec does.
func Find(pathList, binDir string) string {
	built := filepath.Join(binDir, "kubectl")
	for _, dir := range filepath.SplitList(pathList) {
		if dir == "" || !filepath.IsAbs(dir) {
			continue
		}
		p := filepath.Join(dir, "kubectl")
		if !executable(p) || sameBinary(p, built) {
			continue
		}
		return p
	}
	if p := filepath.Join(binDir, SkewName); executable(p) {
		return p
	}
	return ""
}

// executable reports whether p (after symlinks) is a regular file with an
// execute bit set.
func executable(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0
}

// sameBinary reports whether a and b are the same file (through symlinks or
// hard links) or files with the same content.
func sameBinary(a, b string) bool {
	sa, err := os.Stat(a)
	if err != nil {
		return false
	}
	sb, err := os.Stat(b)
	if err != nil {
		return false
	}
	if os.SameFile(sa, sb) {
		return true
	}
	if sa.Size() != sb.Size() {
		return false
	}
	fa, err := os.Open(a)
	if err != nil {
		return false
	}
	defer fa.Close()
	fb, err := os.Open(b)
	if err != nil {
		return false
	}
	defer fb.Close()
	bufA, bufB := make([]byte, 1<<20), make([]byte, 1<<20)
	for {
		na, errA := io.ReadFull(fa, bufA)
		nb, errB := io.ReadFull(fb, bufB)
		if na != nb || !bytes.Equal(bufA[:na], bufB[:nb]) {
			return false
		}
		if errA != nil || errB != nil {
			// Both ended at the same length (sizes are equal) or failed.
			return (errA == io.EOF || errA == io.ErrUnexpectedEOF) && (errB == io.EOF || errB == io.ErrUnexpectedEOF)
		}
	}
}
