package e2e

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"flock.dev/flock/test/cluster"
	"flock.dev/flock/test/readme"
)

// The README's kubectl tour is true: a fresh control plane set up as
// `REAL_NODES=0 make local-up` sets one up (3 kwok nodes, flock-apiserver
// registered), each
// command of the tour run as the README shows it (from the checkout, the
// built kubectl first on PATH as local-up's banner suggests), and what it
// prints compared with the README's block (package test/readme says what
// "stable parts" are). FLOCK_TOUR_TRANSCRIPT=FILE writes what the commands
// printed to FILE, in the README's form.
func TestReadmeTour(t *testing.T) {
	root, err := cluster.FindRepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	steps, err := readme.ParseTour(string(data))
	if err != nil {
		t.Fatal(err)
	}

	// Its own control plane: the tour starts from an empty cluster, and the
	// shared one carries other tests' Flocks (which change placement).
	c := ownControlPlane(t, "tour", cluster.Options{Nodes: 3})

	home := t.TempDir()
	cmdEnv := append(withoutEnv(os.Environ(), "KUBECONFIG", "HOME", "PATH"),
		"KUBECONFIG="+c.KubeconfigPath, "HOME="+home, "PATH="+env.BinDir()+string(os.PathListSeparator)+os.Getenv("PATH"))
	var transcript []readme.Step
	for _, s := range steps {
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
		cmd := exec.CommandContext(ctx, "bash", "-c", s.Command)
		cmd.Dir = root
		cmd.Env = cmdEnv
		cmd.WaitDelay = 5 * time.Second
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		runErr := cmd.Run() // the tour shows refusals too: the output decides
		cancel()
		got := strings.TrimRight(out.String(), "\n")
		transcript = append(transcript, readme.Step{Command: s.Command, Output: strings.Split(got, "\n")})
		if missing := readme.Compare(s.Output, got); len(missing) > 0 {
			t.Errorf("README.md:%d: `%s` (exit: %v) does not print what the README shows.\nREADME lines not in the output:\n  %s\noutput:\n%s",
				s.Line, s.Command, runErr, strings.Join(missing, "\n  "), got)
		}
	}
	if f := os.Getenv("FLOCK_TOUR_TRANSCRIPT"); f != "" {
		if err := os.WriteFile(f, []byte(readme.FormatSession(transcript)), 0o644); err != nil {
			t.Error(err)
		}
	}
	if t.Failed() {
		t.Logf("what the tour printed:\n%s", readme.FormatSession(transcript))
	}
}
