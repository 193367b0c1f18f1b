package nodeagent

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// maxID is the largest uid or gid Prepare sets. A negative one must never
// reach Lchown: -1 there means "leave unchanged", not an owner.
const maxID = 1<<31 - 1

// Prepare makes req.Dir, a directory strictly under dataRoot, owned by
// req.UID:req.GID with mode req.Mode. The agent runs as root, so it is
// careful about what it follows: dataRoot must already be a directory (the
// node's data root, mounted at the same path), and no component from there
// down to req.Dir may be a symbolic link or anything but a directory;
// otherwise Prepare refuses, naming the path, and changes nothing. Missing
// directories are made as kubelet makes a hostPath DirectoryOrCreate (root,
// 0755); only the leaf is given the owner and mode. Nothing inside the leaf
// is looked at, and preparing a prepared directory changes nothing.
func Prepare(req Request, dataRoot string) error {
	if !filepath.IsAbs(dataRoot) {
		return fmt.Errorf("data root %q is not an absolute path", dataRoot)
	}
	root := filepath.Clean(dataRoot)
	dir := req.Dir
	// RequestOf checks the path already; check again here, as Prepare is
	// what acts as root and may be called with any Request.
	if root == "/" || !filepath.IsAbs(dir) || filepath.Clean(dir) != dir || !strings.HasPrefix(dir, root+"/") {
		return fmt.Errorf("directory %q is not a clean path under the data root %s", dir, root)
	}
	if req.UID < 0 || req.GID < 0 || req.UID > maxID || req.GID > maxID {
		return fmt.Errorf("directory %s: owner %d:%d out of range", dir, req.UID, req.GID)
	}
	if req.Mode&^fs.ModePerm != 0 {
		return fmt.Errorf("directory %s: mode %#o has more than permission bits", dir, uint32(req.Mode))
	}

	// The data root is not made: a missing one means the agent's mount is
	// wrong, and a directory made in the container's own filesystem would
	// never be seen by the member's pod.
	if _, err := realDir(root); err != nil {
		return fmt.Errorf("data root: %w", err)
	}
	p := root
	var leaf fs.FileInfo
	for _, name := range strings.Split(strings.TrimPrefix(dir, root+"/"), "/") {
		p = filepath.Join(p, name)
		fi, err := makeDir(p)
		if err != nil {
			return err
		}
		leaf = fi
	}

	// Owner first, then mode, as the prepare helper pod does, each only if
	// it differs (a prepared directory is left as it is, its ctime too).
	// Lchown does not follow a symbolic link; Chmod would, but p was a real
	// directory an instant ago, and only who may write its parent (root,
	// for the 0755 directories kubelet and Prepare make) could swap it.
	if st, ok := leaf.Sys().(*syscall.Stat_t); !ok || int64(st.Uid) != req.UID || int64(st.Gid) != req.GID {
		if err := os.Lchown(p, int(req.UID), int(req.GID)); err != nil {
			return err
		}
	}
	if leaf.Mode().Perm() != req.Mode {
		if err := os.Chmod(p, req.Mode); err != nil {
			return err
		}
	}

	// Check what the directory became, rather than trust the calls above
	// (a file system may ignore or map owners: NFS root squash, idmapped
	// mounts).
	fi, err := realDir(p)
	if err != nil {
		return err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fmt.Errorf("directory %s: no owner information", p)
	}
	if int64(st.Uid) != req.UID || int64(st.Gid) != req.GID || fi.Mode().Perm() != req.Mode {
		return fmt.Errorf("directory %s is owned by %d:%d with mode %#o after preparing, not %d:%d with mode %#o",
			p, st.Uid, st.Gid, uint32(fi.Mode().Perm()), req.UID, req.GID, uint32(req.Mode))
	}
	return nil
}

// makeDir returns p, a real directory, making it (root, 0755) when
// missing.
func makeDir(p string) (fs.FileInfo, error) {
	fi, err := realDir(p)
	if err == nil || !errors.Is(err, fs.ErrNotExist) {
		return fi, err
	}
	if err := os.Mkdir(p, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		// ErrExist: made meanwhile (by kubelet, or a prepare helper pod);
		// it is checked like any other below.
		return nil, err
	}
	return realDir(p)
}

// realDir returns the Lstat of p, or an error naming p if p is missing (an
// error satisfying errors.Is(err, fs.ErrNotExist)), a symbolic link, or
// not a directory.
func realDir(p string) (fs.FileInfo, error) {
	fi, err := os.Lstat(p)
	switch {
	case err != nil:
		return nil, err
	case fi.Mode()&fs.ModeSymlink != 0:
		return nil, fmt.Errorf("%s is a symbolic link, not a directory: refusing to follow it", p)
	case !fi.IsDir():
		return nil, fmt.Errorf("%s is not a directory (%s)", p, fi.Mode().Type())
	}
	return fi, nil
}
