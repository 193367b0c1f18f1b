package flock

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestBlockedMessage(t *testing.T) {
	gone := func(ord int32) blockage {
		return blockage{ReasonNodeGone, fmt.Sprintf("member %d waits for node n-%d, which is gone", ord, ord)}
	}
	few := map[int32]blockage{1: gone(1), 4: gone(4)}
	if got, want := blockedMessage(few, []int32{1, 4}),
		"member 1 waits for node n-1, which is gone; member 4 waits for node n-4, which is gone"; got != want {
		t.Errorf("two members: %q, want %q", got, want)
	}

	// 10,000 members (the most replicas allows), every one with a long
	// scheduler message, in three reasons.
	many := map[int32]blockage{}
	var ords []int32
	for ord := range int32(10000) {
		switch {
		case ord%3 == 0:
			many[ord] = blockage{ReasonUnschedulable, fmt.Sprintf("member %d cannot be scheduled on node n-%d: %s", ord, ord, strings.Repeat("0/500 nodes are available; ", 200))}
		case ord%3 == 1:
			many[ord] = gone(ord)
		default:
			many[ord] = blockage{ReasonNodeCordoned, fmt.Sprintf("member %d waits for node n-%d, which is cordoned", ord, ord)}
		}
		ords = append(ords, ord)
	}
	msg := blockedMessage(many, ords)
	if len(msg) > 8*1024 {
		t.Errorf("message of 10000 blocked members is %d bytes, want well under the API's 32 KiB", len(msg))
	}
	for _, want := range []string{
		"10000 members are blocked: ",
		"members 0, 3, 6 and 3331 more cannot start (Unschedulable): member 0 cannot be scheduled on node n-0: 0/500 nodes",
		"; members 1, 4, 7 and 3330 more cannot start (NodeGone): member 1 waits for node n-1, which is gone",
		"; members 2, 5, 8 and 3330 more cannot start (NodeCordoned): member 2 waits for node n-2, which is cordoned",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("message lacks %q:\n%.600s", want, msg)
		}
	}

	// One member with a huge message is cut, on a rune boundary.
	huge := map[int32]blockage{0: {ReasonUnschedulable, strings.Repeat("é", 5000)}}
	got := blockedMessage(huge, []int32{0})
	if len(got) > maxMemberMessage || !strings.HasSuffix(got, "...") || !utf8.ValidString(got) {
		t.Errorf("huge message cut to %d bytes, valid UTF-8 %v, suffix %q", len(got), utf8.ValidString(got), got[len(got)-5:])
	}
}

func TestNamedOrdinals(t *testing.T) {
	for _, tc := range []struct {
		ords []int32
		want string
	}{
		{[]int32{3}, "member 3"},
		{[]int32{3, 7}, "members 3 and 7"},
		{[]int32{3, 7, 9}, "members 3, 7 and 9"},
		{[]int32{3, 7, 9, 10}, "members 3, 7, 9 and 1 more"},
		{[]int32{3, 7, 9, 10, 11}, "members 3, 7, 9 and 2 more"},
	} {
		if got := namedOrdinals(tc.ords); got != tc.want {
			t.Errorf("namedOrdinals(%v) = %q, want %q", tc.ords, got, tc.want)
		}
	}
}
