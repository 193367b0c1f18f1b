package readme

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// readTour returns the README's tour and a transcript of what the product
// printed for it (testdata/tour-transcript.txt, written by the e2e test
// TestReadmeTour with FLOCK_TOUR_TRANSCRIPT).
func readTour(t *testing.T) (tour, transcript []Step) {
	t.Helper()
	data, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	tour, err = ParseTour(string(data))
	if err != nil {
		t.Fatal(err)
	}
	rec, err := os.ReadFile("testdata/tour-transcript.txt")
	if err != nil {
		t.Fatal(err)
	}
	transcript = ParseSession(string(rec), 1)
	if len(transcript) != len(tour) {
		t.Fatalf("the transcript has %d commands, the README's tour %d: refresh testdata with the e2e test", len(transcript), len(tour))
	}
	for i := range tour {
		if tour[i].Command != transcript[i].Command {
			t.Fatalf("command %d: README %q, transcript %q", i, tour[i].Command, transcript[i].Command)
		}
	}
	return tour, transcript
}

func TestParseTour(t *testing.T) {
	tour, _ := readTour(t)
	if len(tour) < 5 {
		t.Fatalf("the tour has %d commands, want at least 5", len(tour))
	}
	for _, s := range tour {
		if !strings.HasPrefix(s.Command, "kubectl ") || len(s.Output) == 0 {
			t.Errorf("line %d: command %q with %d output lines", s.Line, s.Command, len(s.Output))
		}
	}

	// Other sections, before and after, and other blocks do not count.
	doc := "# X\n\n## Storage\n\n```\n$ kubectl get pv\nNAME\n```\n\n" + TourHeading +
		"\n\nText.\n\n```yaml\nkind: Flock\n```\n\n```\n$ kubectl get fl\nNAME READY\nweb 3/3\n\n$ kubectl version\nv1\n```\n\n## Limits\n\n```\n$ kubectl get no\n```\n"
	steps, err := ParseTour(doc)
	if err != nil {
		t.Fatal(err)
	}
	want := "$ kubectl get fl\nNAME READY\nweb 3/3\n$ kubectl version\nv1\n"
	if got := FormatSession(steps); got != want {
		t.Errorf("parsed\n%s\nwant\n%s", got, want)
	}
	if steps[0].Line != 19 {
		t.Errorf("first command on line %d, want 19", steps[0].Line)
	}
	if _, err := ParseTour("# X\n## Other\n```\n$ kubectl get fl\n```\n"); err == nil {
		t.Error("a README without the tour section parsed")
	}
}

// The README's tour matches what the product printed.
func TestTourMatchesTranscript(t *testing.T) {
	tour, transcript := readTour(t)
	for i, s := range tour {
		if missing := Compare(s.Output, strings.Join(transcript[i].Output, "\n")); missing != nil {
			t.Errorf("README.md:%d `%s`: lines not printed: %q", s.Line, s.Command, missing)
		}
	}
}

// Any README line edited to something the product does not print fails the
// comparison: each line of each block, changed in one of several ways.
func TestEditedTourFails(t *testing.T) {
	tour, transcript := readTour(t)
	digit := regexp.MustCompile(`[0-9]`)
	edits := map[string]func(string) string{
		"a word added":        func(l string) string { return l + " extra" },
		"the first word lost": func(l string) string { f := strings.Fields(l); return strings.Join(f[1:], " ") + " x" },
		"a letter changed": func(l string) string {
			// Change the last letter that is not part of "..." or an age.
			f := strings.Fields(l)
			for i := len(f) - 1; i >= 0; i-- {
				if durationToken.MatchString(f[i]) || f[i] == "..." {
					continue
				}
				f[i] = "Q" + f[i]
				return strings.Join(f, " ")
			}
			return l + " Q"
		},
		"a digit changed": func(l string) string {
			if loc := digit.FindStringIndex(l); loc != nil && !durationToken.MatchString(tokenAt(l, loc[0])) {
				return l[:loc[0]] + "7" + l[loc[1]:]
			}
			return l + " 7"
		},
	}
	checked := 0
	for i, s := range tour {
		got := strings.Join(transcript[i].Output, "\n")
		for j := range s.Output {
			for name, edit := range edits {
				edited := append([]string(nil), s.Output...)
				edited[j] = edit(s.Output[j])
				if edited[j] == s.Output[j] {
					t.Fatalf("edit %q left %q as it was", name, s.Output[j])
				}
				checked++
				if Compare(edited, got) == nil {
					t.Errorf("README.md:%d `%s`: line %q edited (%s) to %q still matches", s.Line, s.Command, s.Output[j], name, edited[j])
				}
			}
		}
	}
	if checked < 20 {
		t.Errorf("only %d edits checked", checked)
	}

	// The drift issue 12 found: another node order, an event this
	// product does not print.
	for _, tc := range []struct{ command, from, to string }{
		{"kubectl get flocks -o wide", "node-1,node-2,node-3", "node-2,node-3,node-1"},
		{"kubectl describe flock web", "placed on node node-1", "placed on node node-2"},
	} {
		for i, s := range tour {
			if !strings.HasPrefix(s.Command, tc.command) {
				continue
			}
			edited := strings.Split(strings.ReplaceAll(strings.Join(s.Output, "\n"), tc.from, tc.to), "\n")
			if strings.Join(edited, "\n") == strings.Join(s.Output, "\n") {
				t.Errorf("%s: the README shows no %q", tc.command, tc.from)
			}
			if Compare(edited, strings.Join(transcript[i].Output, "\n")) == nil {
				t.Errorf("%s: %q -> %q still matches", tc.command, tc.from, tc.to)
			}
		}
	}
}

// tokenAt returns the whitespace-separated token of s at byte i.
func tokenAt(s string, i int) string {
	start := strings.LastIndexAny(s[:i], " \t") + 1
	end := strings.IndexAny(s[i:], " \t")
	if end < 0 {
		return s[start:]
	}
	return s[start : i+end]
}

// What may differ between runs, and what may not.
func TestCompare(t *testing.T) {
	got := "NAME   READY   AGE   SERVICE   NODES\nweb    3/3     2m13s   web       node-1,node-2\n" +
		"  Normal  MemberPlaced      <unknown>  flock-controller  member 0 placed\n" +
		`Error from server (BadRequest): error when creating "x.yaml": strict decoding error: unknown field "spec.replica"`
	for _, tc := range []struct {
		want    []string
		missing []string
	}{
		{want: []string{"web 3/3 0s web node-1,node-2"}},                                                 // age and spacing
		{want: []string{"web    3/3     0s    web       node-1,node-2", "NAME READY AGE SERVICE NODES"}}, // order
		{want: []string{"Normal MemberPlaced 5s flock-controller member 0 placed"}},
		{want: []string{`Error from server (BadRequest): ... strict decoding error: unknown field "spec.replica"`}},
		{want: []string{"web 3/3 0s web node-2,node-1"}, missing: []string{"web 3/3 0s web node-2,node-1"}},
		{want: []string{"web 2/3 0s web node-1,node-2"}, missing: []string{"web 2/3 0s web node-1,node-2"}},
		{want: []string{"web 3/3 0s web"}, missing: []string{"web 3/3 0s web"}}, // a whole line, not a prefix
		{want: []string{"NAME READY AGE SERVICE NODES", "NAME READY AGE SERVICE NODES"}, missing: []string{"NAME READY AGE SERVICE NODES"}},
		{want: []string{`... unknown field "spec.replicas"`}, missing: []string{`... unknown field "spec.replicas"`}},
		{want: []string{"web 3/3 0s web 5s"}, missing: []string{"web 3/3 0s web 5s"}}, // an age is not a node list
	} {
		if got := Compare(tc.want, got); strings.Join(got, "|") != strings.Join(tc.missing, "|") {
			t.Errorf("Compare(%q) missing %q, want %q", tc.want, got, tc.missing)
		}
	}
}
