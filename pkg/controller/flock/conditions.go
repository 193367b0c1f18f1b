// File conditions.go: setting conditions, and the MembersBlocked message,
// bounded whatever the number of blocked members.

package flock

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"flock.dev/flock/pkg/apis/flock/v1alpha1"
)

// Bounds of the MembersBlocked message. The API refuses a condition
// message over 32 KiB, and with it the whole status write; the message
// stays well under: at most maxBlockedListed member messages in full, each
// cut at maxMemberMessage bytes, and beyond that one line per reason.
const (
	maxBlockedListed = 5
	maxMemberMessage = 1024
	maxOrdinalsNamed = 3
)

// setCondition sets a condition, keeping its transition time unless its
// status changes.
func setCondition(status *v1alpha1.FlockStatus, typ string, s metav1.ConditionStatus, reason, message string, gen int64, now metav1.Time) {
	meta.SetStatusCondition(&status.Conditions, metav1.Condition{
		Type: typ, Status: s, Reason: reason, Message: message, ObservedGeneration: gen, LastTransitionTime: now,
	})
}

// blockedMessage returns the message of the MembersBlocked condition for
// the blocked members ordinals (ascending, not empty). Up to
// maxBlockedListed members, it joins their messages; beyond, it groups them
// by reason, e.g. "members 3, 7, 9 and 412 more cannot start (NodeGone):
// member 3 waits for node n-3, which is gone since ...", with the message
// of the first member of each group as the example.
func blockedMessage(blocked map[int32]blockage, ordinals []int32) string {
	if len(ordinals) <= maxBlockedListed {
		msgs := make([]string, 0, len(ordinals))
		for _, ord := range ordinals {
			msgs = append(msgs, truncateMessage(blocked[ord].Message, maxMemberMessage))
		}
		return strings.Join(msgs, "; ")
	}
	var reasons []string
	byReason := map[string][]int32{}
	for _, ord := range ordinals {
		r := blocked[ord].Reason
		if _, ok := byReason[r]; !ok {
			reasons = append(reasons, r)
		}
		byReason[r] = append(byReason[r], ord)
	}
	groups := make([]string, 0, len(reasons))
	for _, r := range reasons {
		ords := byReason[r]
		groups = append(groups, fmt.Sprintf("%s cannot start (%s): %s",
			namedOrdinals(ords), r, truncateMessage(blocked[ords[0]].Message, maxMemberMessage)))
	}
	return fmt.Sprintf("%d members are blocked: ", len(ordinals)) + strings.Join(groups, "; ")
}

// namedOrdinals names a few ordinals and counts the rest: "member 3",
// "members 3 and 7", "members 3, 7, 9 and 412 more".
func namedOrdinals(ords []int32) string {
	if len(ords) == 1 {
		return "member " + strconv.Itoa(int(ords[0]))
	}
	named := make([]string, 0, maxOrdinalsNamed)
	for _, ord := range ords[:min(len(ords), maxOrdinalsNamed)] {
		named = append(named, strconv.Itoa(int(ord)))
	}
	if rest := len(ords) - len(named); rest > 0 {
		return fmt.Sprintf("members %s and %d more", strings.Join(named, ", "), rest)
	}
	return "members " + strings.Join(named[:len(named)-1], ", ") + " and " + named[len(named)-1]
}

// truncateMessage cuts s to at most n bytes, on a rune boundary, marking
// the cut with "...".
func truncateMessage(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n - len("...")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}
