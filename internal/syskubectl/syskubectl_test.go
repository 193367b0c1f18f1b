package syskubectl

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeExe writes an executable file with content at dir/name.
func writeExe(t *testing.T, dir, name, content string) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestFind(t *testing.T) {
	root := t.TempDir()
	bin := filepath.Join(root, "_output", "bin")
	built := writeExe(t, bin, "kubectl", "#!/bin/sh\necho built v1.37\n")

	// Directories a PATH may hold, each with a different kind of kubectl.
	symlinked := filepath.Join(root, "symlinked") // a symlink to the built one
	if err := os.MkdirAll(symlinked, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(built, filepath.Join(symlinked, "kubectl")); err != nil {
		t.Fatal(err)
	}
	copied := filepath.Join(root, "copied") // a copy of the built one
	writeExe(t, copied, "kubectl", "#!/bin/sh\necho built v1.37\n")
	notExe := filepath.Join(root, "notexe") // not executable
	if err := os.MkdirAll(notExe, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(notExe, "kubectl"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	dirNamed := filepath.Join(root, "dirnamed") // a directory named kubectl
	if err := os.MkdirAll(filepath.Join(dirNamed, "kubectl"), 0o755); err != nil {
		t.Fatal(err)
	}
	sameSize := filepath.Join(root, "samesize") // same size, other content
	sys1 := writeExe(t, sameSize, "kubectl", "#!/bin/sh\necho other v1.32\n")
	system := filepath.Join(root, "system")
	sys2 := writeExe(t, system, "kubectl", "#!/bin/sh\necho system v1.32 (a longer file)\n")
	empty := filepath.Join(root, "empty")
	if err := os.MkdirAll(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	if len("#!/bin/sh\necho other v1.32\n") != len("#!/bin/sh\necho built v1.37\n") {
		t.Fatal("test setup: the same-size kubectl must have the built one's size")
	}

	path := func(dirs ...string) string { return strings.Join(dirs, string(os.PathListSeparator)) }
	for _, tc := range []struct {
		name, path string
		skew       bool // binDir holds kubectl-1.32
		want       string
	}{
		{name: "built dir first, system behind it", path: path(bin, system), want: sys2},
		{name: "only the built one", path: path(bin), want: ""},
		{name: "symlink and copy of the built one are skipped", path: path(bin, symlinked, copied, empty, system), want: sys2},
		{name: "non-executable and directory are skipped", path: path(notExe, dirNamed, system), want: sys2},
		{name: "same size, other content is a system kubectl", path: path(bin, sameSize, system), want: sys1},
		{name: "relative and empty entries are skipped", path: path("", ".", "system", bin), want: ""},
		{name: "first system one wins", path: path(system, sameSize), want: sys2},
		{name: "no system one: the skew build", path: path(bin, copied), skew: true, want: filepath.Join(bin, SkewName)},
		{name: "a system one is preferred to the skew build", path: path(bin, system), skew: true, want: sys2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			skew := filepath.Join(bin, SkewName)
			if tc.skew {
				writeExe(t, bin, SkewName, "#!/bin/sh\necho v1.32\n")
				defer os.Remove(skew)
			}
			t.Chdir(root) // "system" relative to here exists, and must still be skipped
			if got := Find(tc.path, bin); got != tc.want {
				t.Errorf("Find(%q) = %q, want %q", tc.path, got, tc.want)
			}
		})
	}
}
