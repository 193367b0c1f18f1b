package flock

import (
	"testing"
)

func TestParseOrdinal(t *testing.T) {
	for _, tc := range []struct {
		pod  string
		ord  int32
		okay bool
	}{
		{"pg-0", 0, true},
		{"pg-12", 12, true},
		{"pg-2147483647", 2147483647, true},
		{"pg-2147483648", 0, false},
		{"pg-01", 0, false},
		{"pg--1", 0, false},
		{"pg-+1", 0, false},
		{"pg-", 0, false},
		{"pg", 0, false},
		{"pg-1-0", 0, false}, // a pod of Flock "pg-1"
		{"pgx-1", 0, false},
		{"pg-1a", 0, false},
	} {
		ord, ok := ParseOrdinal("pg", tc.pod)
		if ok != tc.okay || ord != tc.ord {
			t.Errorf("ParseOrdinal(pg, %q) = %d, %v; want %d, %v", tc.pod, ord, ok, tc.ord, tc.okay)
		}
		if ok && PodName("pg", ord) != tc.pod {
			t.Errorf("PodName(pg, %d) = %q, want %q", ord, PodName("pg", ord), tc.pod)
		}
	}
}
