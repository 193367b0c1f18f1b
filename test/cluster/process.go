package cluster

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"
)

// DefaultStopGrace is how long Stop waits after SIGTERM before it sends SIGKILL.
const DefaultStopGrace = 15 * time.Second

// Process is a child process the cluster started. Its output goes to LogFile.
type Process struct {
	// Name identifies the component, e.g. "kube-apiserver".
	Name string
	// Path and Args are the binary and its arguments (without the binary).
	Path string
	Args []string
	// Env is what the process got on top of the harness's environment.
	Env []string
	// LogFile receives the process's stdout and stderr.
	LogFile string

	cmd     *exec.Cmd
	log     *os.File
	done    chan struct{}
	waitErr error
	stopped bool // Stop or Kill was called
	mu      sync.Mutex
}

// PID is the process id.
func (p *Process) PID() int { return p.cmd.Process.Pid }

// Done is closed when the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Exited reports whether the process has exited.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// ExitErr is the result of waiting for the process; valid once Done is closed.
func (p *Process) ExitErr() error {
	<-p.done
	return p.waitErr
}

// Unexpected reports whether the process exited without Stop or Kill being called.
func (p *Process) Unexpected() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.Exited() && !p.stopped
}

// Signal sends sig to the process (and only to it).
func (p *Process) Signal(sig syscall.Signal) error {
	if p.Exited() {
		return nil
	}
	err := p.cmd.Process.Signal(sig)
	if errors.Is(err, os.ErrProcessDone) {
		return nil
	}
	return err
}

// Stop sends SIGTERM, waits up to grace for the process to exit, then sends
// SIGKILL and waits for it. It returns an error only if the process could not
// be stopped.
func (p *Process) Stop(grace time.Duration) error {
	p.mu.Lock()
	p.stopped = true
	p.mu.Unlock()
	if p.Exited() {
		return nil
	}
	if err := p.Signal(syscall.SIGTERM); err != nil {
		return fmt.Errorf("SIGTERM %s (pid %d): %w", p.Name, p.PID(), err)
	}
	select {
	case <-p.done:
		return nil
	case <-time.After(grace):
	}
	return p.Kill()
}

// Kill sends SIGKILL and waits (bounded) for the process to exit.
func (p *Process) Kill() error {
	p.mu.Lock()
	p.stopped = true
	p.mu.Unlock()
	if err := p.Signal(syscall.SIGKILL); err != nil {
		return fmt.Errorf("SIGKILL %s (pid %d): %w", p.Name, p.PID(), err)
	}
	select {
	case <-p.done:
		return nil
	case <-time.After(30 * time.Second):
		return fmt.Errorf("%s (pid %d) did not exit 30s after SIGKILL", p.Name, p.PID())
	}
}

// LogTail returns the last n lines of the process's log.
func (p *Process) LogTail(n int) string {
	return tailFile(p.LogFile, n)
}

// String describes the process for messages.
func (p *Process) String() string {
	return fmt.Sprintf("%s (pid %d, log %s)", p.Name, p.PID(), p.LogFile)
}

// ExitDescription explains how a process ended, with the end of its log.
func (p *Process) ExitDescription() string { return p.exitDescription() }

// exitDescription explains how a process ended, with the end of its log.
func (p *Process) exitDescription() string {
	return fmt.Sprintf("%s exited: %v; last lines of %s:\n%s", p.Name, p.waitErr, p.LogFile, p.LogTail(25))
}

// StartProcess starts path with args, appending its output to logFile.
// The child gets its own process group, so a Ctrl-C in the terminal reaches
// only the harness, which stops the children in order; and it gets SIGKILL
// if the harness dies (Pdeathsig), so a crashed test run leaks nothing.
func StartProcess(name, path string, args, env []string, logFile, dir string) (*Process, error) {
	f, err := os.OpenFile(logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(f, "\n=== %s: %s %s\n", time.Now().Format(time.RFC3339), path, strings.Join(args, " "))
	cmd := exec.Command(path, args...)
	cmd.Stdout = f
	cmd.Stderr = f
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := spawn(cmd); err != nil {
		f.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &Process{Name: name, Path: path, Args: args, Env: env, LogFile: logFile, cmd: cmd, log: f, done: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		f.Close()
		close(p.done)
	}()
	return p, nil
}

// Pdeathsig fires when the *thread* that forked the child exits, not the
// process. Go may retire threads, so every child is forked from one goroutine
// that is locked to its thread and never returns.
var (
	spawnOnce sync.Once
	spawnReqs chan spawnReq
)

type spawnReq struct {
	cmd *exec.Cmd
	res chan error
}

func spawn(cmd *exec.Cmd) error {
	spawnOnce.Do(func() {
		spawnReqs = make(chan spawnReq)
		go func() {
			runtime.LockOSThread()
			for r := range spawnReqs {
				r.res <- r.cmd.Start()
			}
		}()
	})
	res := make(chan error, 1)
	spawnReqs <- spawnReq{cmd: cmd, res: res}
	return <-res
}

// tailFile returns the last n lines of a file (best effort).
func tailFile(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", path, err)
	}
	data = bytes.TrimRight(data, "\n")
	lines := bytes.Split(data, []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}
