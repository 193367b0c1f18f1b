package cluster

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The test images hold the program, /bin/sh linked to it, and empty /tmp
// and /etc; the sandbox image runs `pause`.
func TestTestImages(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "flock-test")
	if err := os.WriteFile(bin, []byte("#!program"), 0o755); err != nil {
		t.Fatal(err)
	}
	imgs, err := TestImages(bin)
	if err != nil {
		t.Fatal(err)
	}
	for tag, want := range map[string]string{TestImage: "/flock-test sleep", PauseImage: "/flock-test pause"} {
		img := imgs[tag]
		if img == nil {
			t.Fatalf("no image %s", tag)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(append(cf.Config.Entrypoint, cf.Config.Cmd...), " "); got != want {
			t.Errorf("%s runs %q, want %q", tag, got, want)
		}
	}
	if _, err := TestImages(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("a missing program: no error")
	}
}
