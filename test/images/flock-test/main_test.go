package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The sh subset runs the Flock helpers' scripts: prepare (chmod, chown) and
// remove (rm -rf of every entry, dot files included, through globs).
func TestShell(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	for _, f := range []string{"data/a", "data/.hidden", "data/..odd", "data/sub/b"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := shell("chmod 2770 " + data + " && chown " + "0:0 " + data); err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(data); st.Mode().Perm() != 0o770 || st.Mode()&os.ModeSetgid == 0 {
		t.Errorf("mode %v, want setgid 0770", st.Mode())
	}
	if err := shell("rm -rf -- " + data + "/* " + data + "/.[!.]* " + data + "/..?*"); err != nil {
		t.Fatal(err)
	}
	if es, _ := os.ReadDir(data); len(es) != 0 {
		t.Errorf("left %v", es)
	}
	if _, err := os.Stat(data); err != nil {
		t.Errorf("the directory itself must stay: %v", err)
	}
	for script, want := range map[string]string{
		"ls " + data:        `command "ls" is not supported`,
		"rm '" + data + "'": "quoting",
		"chmod u+x " + data: "only octal modes",
		"chown me " + data:  "only numeric UID:GID",
	} {
		if err := shell(script); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want an error with %q", script, err, want)
		}
	}
}
