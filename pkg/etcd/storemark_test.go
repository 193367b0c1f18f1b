package etcd

import (
	"bytes"
	"context"
	"testing"
	"time"
)

// TestStoreMark: a store's state tells its mark and its objects apart (the
// mark is not an object); the mark is written once and never overwritten;
// a backup leaves the mark out, so its count is the Flocks'.
func TestStoreMark(t *testing.T) {
	ctx := context.Background()
	s := startMember(t)
	defer s.Stop()
	c := memberClient(t, s)
	const prefix = "/registry/flock.dev"
	// A key of another prefix that shares this one's first characters.
	if _, err := c.Put(ctx, prefix+"-other/flock.dev/flocks/a/x", "x"); err != nil {
		t.Fatal(err)
	}

	state, err := ReadStoreState(ctx, c, prefix)
	if err != nil {
		t.Fatal(err)
	}
	if state.Mark != nil || state.Objects {
		t.Fatalf("an empty store: %+v", state)
	}

	first := StoreMark{Time: time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC), Reason: "served: first"}
	for i, m := range []StoreMark{first, {Time: first.Time.Add(time.Hour), Reason: "served: second"}} {
		wrote, err := MarkStore(ctx, c, prefix+"/", m)
		if err != nil {
			t.Fatal(err)
		}
		if wrote != (i == 0) {
			t.Fatalf("mark %d: wrote %v", i, wrote)
		}
	}
	if state, err = ReadStoreState(ctx, c, prefix); err != nil {
		t.Fatal(err)
	}
	if state.Mark == nil || *state.Mark != first || state.Objects {
		t.Fatalf("a marked store without objects: %+v (mark %+v), want mark %+v and no objects", state, state.Mark, first)
	}

	if _, err := c.Put(ctx, prefix+"/flock.dev/flocks/a/pg", "pg"); err != nil {
		t.Fatal(err)
	}
	if state, err = ReadStoreState(ctx, c, prefix); err != nil {
		t.Fatal(err)
	}
	if state.Mark == nil || !state.Objects {
		t.Fatalf("a marked store with a Flock: %+v", state)
	}
	var buf bytes.Buffer
	_, n, err := Backup(ctx, c, prefix, "", &buf, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if n != 1 || bytes.Contains(buf.Bytes(), []byte(storeMarkName)) {
		t.Fatalf("backup of one Flock and the mark: %d keys\n%s", n, buf.String())
	}

	// A mark another program wrote, unreadable, is still a mark.
	if _, err := c.Put(ctx, StoreMarkKey(prefix), "not json"); err != nil {
		t.Fatal(err)
	}
	if state, err = ReadStoreState(ctx, c, prefix); err != nil {
		t.Fatal(err)
	}
	if state.Mark == nil {
		t.Fatal("an unreadable mark was read as none")
	}
}
