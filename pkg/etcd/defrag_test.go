package etcd

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3client"
)

func TestDefragPolicy(t *testing.T) {
	p := DefragPolicy{Interval: 1, MinFree: 16}
	for _, tc := range []struct {
		size, inUse int64
		want        bool
	}{
		{100, 40, true},   // 60 free: over MinFree and half
		{100, 50, true},   // exactly half
		{100, 51, false},  // less than half free
		{30, 10, true},    // 20 free
		{20, 8, false},    // 12 free: under MinFree
		{100, 100, false}, // nothing free
	} {
		if got := p.needsDefrag(tc.size, tc.inUse); got != tc.want {
			t.Errorf("size %d, in use %d: defragment %t, want %t", tc.size, tc.inUse, got, tc.want)
		}
	}
	if (DefragPolicy{MinFree: 16}).needsDefrag(100, 0) {
		t.Error("a policy without interval defragments")
	}
}

// TestDefragGivesSpaceBack: once the revisions that filled the file are
// compacted away, the member's file shrinks to what is in use, and every
// key that is left reads as before.
func TestDefragGivesSpaceBack(t *testing.T) {
	s := startMember(t)
	defer s.Stop()
	ctx := context.Background()
	cli := v3client.New(s.etcd.Server)
	defer cli.Close()

	value := strings.Repeat("x", 64<<10)
	var last *clientv3.PutResponse
	for i := range 600 { // ~38 MiB of revisions on 20 keys
		resp, err := cli.Put(ctx, fmt.Sprintf("/flock/k%02d", i%20), value+fmt.Sprint(i))
		if err != nil {
			t.Fatal(err)
		}
		last = resp
	}
	if _, err := cli.Compact(ctx, last.Header.Revision, clientv3.WithCompactPhysical()); err != nil {
		t.Fatal(err)
	}
	be := s.etcd.Server.Backend()
	p := DefragPolicy{Interval: 1, MinFree: 16 << 20}
	// The compacted revisions' pages count as free once the backend has
	// committed the compaction and no older read transaction holds them:
	// commit until it shows, a few times at most (a CI run in session 30
	// read the size in use before that commit and failed).
	before, inUse := be.Size(), be.SizeInUse()
	for i := 0; i < 20 && !p.needsDefrag(before, inUse); i++ {
		be.ForceCommit()
		time.Sleep(50 * time.Millisecond)
		before, inUse = be.Size(), be.SizeInUse()
	}
	dbPath := filepath.Join(s.etcd.Config().Dir, "member", "snap", "db")
	rssBefore := mappedRSS(t, dbPath)
	if !p.needsDefrag(before, inUse) {
		t.Fatalf("after compaction the file is %d bytes, %d in use: no defragmentation due; the test wrote too little", before, inUse)
	}
	if !s.maybeDefrag(ctx, p) {
		t.Fatal("maybeDefrag did not defragment")
	}
	after := be.Size()
	if after > before/2 {
		t.Errorf("the file is %d bytes after defragmentation, was %d (%d in use)", after, before, inUse)
	}
	for i := range 20 {
		resp, err := cli.Get(ctx, fmt.Sprintf("/flock/k%02d", i))
		if err != nil {
			t.Fatal(err)
		}
		if want := value + fmt.Sprint(580+i); len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != want {
			t.Fatalf("key k%02d after defragmentation: %d values, want its last write", i, len(resp.Kvs))
		}
	}
	if s.maybeDefrag(ctx, p) {
		t.Error("defragmented again a file with no free space to give back")
	}
	// etcd maps the file with MAP_POPULATE: all of it is resident, so the
	// process's resident set shrinks with the file.
	rssAfter := mappedRSS(t, dbPath)
	if rssAfter > rssBefore/2 {
		t.Errorf("the file's resident pages: %d bytes after defragmentation, %d before", rssAfter, rssBefore)
	}
	t.Logf("file %d bytes -> %d (in use %d); resident %d -> %d", before, after, inUse, rssBefore, rssAfter)
}

// mappedRSS returns the resident bytes of this process's mappings of path.
func mappedRSS(t *testing.T, path string) int64 {
	t.Helper()
	data, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		t.Skipf("no /proc/self/smaps: %v", err)
	}
	var total int64
	in := false
	for _, line := range strings.Split(string(data), "\n") {
		fields := strings.Fields(line)
		switch {
		case len(fields) >= 5 && strings.Contains(fields[0], "-") && !strings.HasSuffix(fields[0], ":"):
			in = len(fields) >= 6 && fields[5] == path
		case in && len(fields) == 3 && fields[0] == "Rss:":
			kb, err := strconv.ParseInt(fields[1], 10, 64)
			if err != nil {
				t.Fatalf("smaps line %q: %v", line, err)
			}
			total += kb << 10
		}
	}
	return total
}
