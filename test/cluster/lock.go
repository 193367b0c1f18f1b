package cluster

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// LockFileName is the file in a work directory that holds the PID of the
// harness (local-up or an e2e run) using it.
const LockFileName = "harness.pid"

// AlreadyRunningError says that another harness holds a work directory.
type AlreadyRunningError struct {
	Dir string
	PID int
}

func (e *AlreadyRunningError) Error() string {
	pid := "unknown pid"
	if e.PID > 0 {
		pid = fmt.Sprintf("pid %d", e.PID)
	}
	return fmt.Sprintf("a local control plane is already running in %s (%s); stop it first (Ctrl-C in its terminal, or kill %s)",
		e.Dir, pid, strings.TrimPrefix(pid, "pid "))
}

// dirLock is an exclusive flock(2) on WorkDir/harness.pid. The kernel drops it
// when the holder dies, so a crashed harness never leaves a stale lock.
type dirLock struct {
	f    *os.File
	path string
	// keep leaves the file in place on release: a lock file at a fixed path
	// that several processes race for must not be removed, or two of them
	// could each lock a different file of the same name.
	keep bool
}

// lockDir takes the lock of dir or returns *AlreadyRunningError.
func lockDir(dir string) (*dirLock, error) {
	return lockFile(dir+"/"+LockFileName, false)
}

// lockFile takes the lock file at path or returns *AlreadyRunningError
// naming its directory and holder; keep leaves the file on release.
func lockFile(path string, keep bool) (*dirLock, error) {
	dir := filepath.Dir(path)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		defer f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			data, _ := os.ReadFile(path)
			pid, _ := strconv.Atoi(strings.TrimSpace(string(data)))
			return nil, &AlreadyRunningError{Dir: dir, PID: pid}
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	if err := f.Truncate(0); err != nil {
		f.Close()
		return nil, err
	}
	if _, err := f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0); err != nil {
		f.Close()
		return nil, err
	}
	return &dirLock{f: f, path: path, keep: keep}, nil
}

// ReadLockPID returns the PID recorded in dir's lock file, or 0.
func ReadLockPID(dir string) int {
	data, err := os.ReadFile(dir + "/" + LockFileName)
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(data)))
	return pid
}

func (l *dirLock) release() {
	if l == nil {
		return
	}
	if !l.keep {
		os.Remove(l.path)
	}
	l.f.Close()
}
