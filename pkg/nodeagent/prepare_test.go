package nodeagent

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// self is the owner the tests prepare directories for: the test's own, so
// that they pass as root or not.
func self() (uid, gid int64) {
	return int64(os.Getuid()), int64(os.Getgid())
}

// foreign is an owner for requests that must be refused: as root, a
// wrongful chown to it would show.
const foreign = 4242

// stat returns fi's owner and permission bits.
func stat(t *testing.T, p string) (uid, gid uint32, mode fs.FileMode) {
	t.Helper()
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	return st.Uid, st.Gid, fi.Mode().Perm()
}

func TestPrepareMakesParentsAndLeaf(t *testing.T) {
	root := t.TempDir()
	uid, gid := self()
	dir := filepath.Join(root, "ns", "flock", "member-0")
	req := Request{Dir: dir, UID: uid, GID: gid, Mode: 0o750}
	if err := Prepare(req, root); err != nil {
		t.Fatalf("Prepare: %v", err)
	}
	if u, g, m := stat(t, dir); int64(u) != uid || int64(g) != gid || m != 0o750 {
		t.Errorf("leaf is %d:%d %#o, want %d:%d 0750", u, g, m, uid, gid)
	}
	for _, p := range []string{filepath.Join(root, "ns"), filepath.Join(root, "ns", "flock")} {
		// 0755 under the test's umask of 022, the usual one.
		if _, _, m := stat(t, p); m&^0o755 != 0 || m&0o700 != 0o700 {
			t.Errorf("intermediate %s has mode %#o, want 0755", p, m)
		}
	}

	// A second call changes nothing, not even the ctime.
	if err := os.WriteFile(filepath.Join(dir, "data"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	before, err := os.Lstat(dir)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * time.Millisecond)
	if err := Prepare(req, root); err != nil {
		t.Fatalf("Prepare again: %v", err)
	}
	after, err := os.Lstat(dir)
	if err != nil {
		t.Fatal(err)
	}
	bs, as := before.Sys().(*syscall.Stat_t), after.Sys().(*syscall.Stat_t)
	if bs.Ctim != as.Ctim || before.Mode() != after.Mode() || bs.Uid != as.Uid || bs.Gid != as.Gid {
		t.Errorf("second Prepare changed the directory: %+v -> %+v", bs, as)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "data")); err != nil || string(b) != "x" {
		t.Errorf("content of the directory changed: %q, %v", b, err)
	}

	// A prepared directory with another mode is given the requested one.
	req.Mode = 0o700
	if err := Prepare(req, root); err != nil {
		t.Fatalf("Prepare with another mode: %v", err)
	}
	if _, _, m := stat(t, dir); m != 0o700 {
		t.Errorf("leaf mode %#o, want 0700", m)
	}
}

func TestPrepareRefusesSymlinks(t *testing.T) {
	for _, tc := range []struct {
		name string
		// link is the symbolic link's path under the data root; dir the
		// requested directory.
		link, dir string
		// leaf: whether dir is the link's target itself (else a
		// directory inside it).
		leaf bool
	}{
		{name: "leaf", link: "ns/member-0", dir: "ns/member-0", leaf: true},
		{name: "intermediate", link: "ns", dir: "ns/member-0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root, target := t.TempDir(), t.TempDir()
			if err := os.Chmod(target, 0o711); err != nil {
				t.Fatal(err)
			}
			tu, tg, tm := stat(t, target)
			link := filepath.Join(root, tc.link)
			if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(target, link); err != nil {
				t.Fatal(err)
			}
			req := Request{Dir: filepath.Join(root, tc.dir), UID: foreign, GID: foreign, Mode: 0o770}
			err := Prepare(req, root)
			if err == nil || !strings.Contains(err.Error(), link) || !strings.Contains(err.Error(), "symbolic link") {
				t.Fatalf("Prepare: %v, want an error naming the symbolic link %s", err, link)
			}
			if u, g, m := stat(t, target); u != tu || g != tg || m != tm {
				t.Errorf("symbolic link's target changed: %d:%d %#o, was %d:%d %#o", u, g, m, tu, tg, tm)
			}
			if !tc.leaf {
				if _, err := os.Lstat(filepath.Join(target, "member-0")); !os.IsNotExist(err) {
					t.Errorf("a directory was made in the symbolic link's target: %v", err)
				}
			}
		})
	}
}

func TestPrepareRefusesFileAtLeaf(t *testing.T) {
	root := t.TempDir()
	file := filepath.Join(root, "member-0")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	err := Prepare(Request{Dir: file, UID: foreign, GID: foreign, Mode: 0o777}, root)
	if err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Fatalf("Prepare: %v, want not a directory", err)
	}
	if _, _, m := stat(t, file); m != 0o600 {
		t.Errorf("file mode changed to %#o", m)
	}
}

func TestPrepareRefusesBadDataRoot(t *testing.T) {
	uid, gid := self()
	base := t.TempDir()
	missing := filepath.Join(base, "missing")
	if err := Prepare(Request{Dir: filepath.Join(missing, "a"), UID: uid, GID: gid, Mode: 0o700}, missing); err == nil {
		t.Error("Prepare under a missing data root succeeded")
	}
	if _, err := os.Lstat(missing); !os.IsNotExist(err) {
		t.Errorf("the missing data root was made: %v", err)
	}

	link := filepath.Join(base, "link")
	if err := os.Symlink(t.TempDir(), link); err != nil {
		t.Fatal(err)
	}
	if err := Prepare(Request{Dir: filepath.Join(link, "a"), UID: uid, GID: gid, Mode: 0o700}, link); err == nil {
		t.Error("Prepare under a data root that is a symbolic link succeeded")
	}
}

func TestPrepareRefusesBadRequests(t *testing.T) {
	root := t.TempDir()
	uid, gid := self()
	for _, req := range []Request{
		{Dir: root, UID: uid, GID: gid, Mode: 0o700},
		{Dir: root + "/a/../../b", UID: uid, GID: gid, Mode: 0o700},
		{Dir: root + "x/a", UID: uid, GID: gid, Mode: 0o700},
		{Dir: "a", UID: uid, GID: gid, Mode: 0o700},
		{Dir: root + "/a", UID: -1, GID: gid, Mode: 0o700},
		{Dir: root + "/a", UID: uid, GID: 1 << 32, Mode: 0o700},
		{Dir: root + "/a", UID: uid, GID: gid, Mode: 0o700 | fs.ModeSetuid},
	} {
		if err := Prepare(req, root); err == nil {
			t.Errorf("Prepare(%+v) succeeded", req)
		}
	}
	if entries, _ := os.ReadDir(root); len(entries) != 0 {
		t.Errorf("refused requests made %v", entries)
	}
}

// Tests of protocol.go.

func volume(name, path string) *corev1.PersistentVolume {
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{LabelFlockUID: "uid-1"}},
	}
	if path != "" {
		pv.Spec.HostPath = &corev1.HostPathVolumeSource{Path: path}
	}
	return pv
}

func TestRequestRoundTrip(t *testing.T) {
	pv := volume("pv", "/data-root/ns/f/m-0")
	SetRequest(pv, "node-a", 1000, 2000, 0o2770)
	if !HasRequest(pv, "node-a") || HasRequest(pv, "node-b") {
		t.Errorf("HasRequest wrong for %v", pv.Annotations)
	}
	req, err := RequestOf(pv, "/data-root/")
	if err != nil {
		t.Fatal(err)
	}
	want := Request{Dir: "/data-root/ns/f/m-0", UID: 1000, GID: 2000, Mode: 0o770}
	if req != want {
		t.Errorf("RequestOf = %+v, want %+v", req, want)
	}
}

func TestRequestOfRefuses(t *testing.T) {
	ok := func(pv *corev1.PersistentVolume) *corev1.PersistentVolume {
		SetRequest(pv, "node-a", 1000, 1000, 0o770)
		return pv
	}
	cases := map[string]*corev1.PersistentVolume{
		"dot dot":          ok(volume("pv", "../x")),
		"data root itself": ok(volume("pv", "/data-root")),
		"sibling prefix":   ok(volume("pv", "/data-rootx/a")),
		"unclean escape":   ok(volume("pv", "/data-root/a/../../etc")),
		"relative":         ok(volume("pv", "data-root/a")),
		"trailing slash":   ok(volume("pv", "/data-root/a/")),
		"not hostPath":     ok(volume("pv", "")),
	}
	for _, owner := range []string{"a:b", "1", "-1:0", "0:-1", "1:2:3", "", "4294967296:0"} {
		pv := ok(volume("pv", "/data-root/a"))
		pv.Annotations[AnnotationOwner] = owner
		cases["owner "+owner] = pv
	}
	for _, mode := range []string{"0800", "rwx", "01777", "-1", ""} {
		pv := ok(volume("pv", "/data-root/a"))
		pv.Annotations[AnnotationMode] = mode
		cases["mode "+mode] = pv
	}
	for name, pv := range cases {
		if req, err := RequestOf(pv, "/data-root"); err == nil {
			t.Errorf("%s: RequestOf = %+v, want an error", name, req)
		}
	}
	// And the data root "/" is refused: everything would be under it.
	if req, err := RequestOf(ok(volume("pv", "/etc")), "/"); err == nil {
		t.Errorf("data root /: RequestOf = %+v, want an error", req)
	}
}

func TestPending(t *testing.T) {
	pending := func() *corev1.PersistentVolume {
		pv := volume("pv", "/data-root/a")
		SetRequest(pv, "node-a", 1000, 1000, 0o770)
		return pv
	}
	if !Pending(pending(), "node-a") {
		t.Error("a new request is not pending")
	}
	if Pending(pending(), "node-b") {
		t.Error("a request for node-a is pending for node-b")
	}
	if Pending(volume("pv", "/data-root/a"), "node-a") {
		t.Error("a volume without a request is pending")
	}
	pv := pending()
	pv.Annotations[AnnotationPrepared] = "true"
	if Pending(pv, "node-a") {
		t.Error("a prepared volume is pending")
	}
	pv = pending()
	pv.Annotations[AnnotationRemoved] = "true"
	if Pending(pv, "node-a") {
		t.Error("a removed volume is pending")
	}
	pv = pending()
	now := metav1.Now()
	pv.DeletionTimestamp = &now
	if Pending(pv, "node-a") {
		t.Error("a volume being deleted is pending")
	}
}
