// Package readme reads the README's kubectl tour (the shell-session block of
// section "A kubectl tour") and compares what the product prints with it, so
// the README cannot drift from the product: the e2e test TestReadmeTour runs
// each command of the tour against a local control plane and checks its
// output with Compare.
//
// A tour block is a shell session: a line "$ COMMAND" starts a step, the lines
// up to the next "$ " line are what the README says it prints. The README
// shows the stable parts only, so the comparison allows for what changes from
// run to run or is left out:
//   - each README line must match a line of the output, in any order, and no
//     two README lines the same output line; output lines the README does not
//     show are allowed (e.g. the rest of `kubectl describe`);
//   - runs of spaces and tabs compare equal;
//   - an age or duration (0s, 5s, 2m3s, <unknown>) matches any other;
//   - "..." matches any text.
//
// Everything else must be exactly what the product prints.
package readme

import (
	"bufio"
	"fmt"
	"regexp"
	"strings"
)

// TourHeading is the heading of the README section holding the tour.
const TourHeading = "## A kubectl tour"

// Step is one command of a session with the lines it prints.
type Step struct {
	// Command is the shell command (without the "$ ").
	Command string
	// Output is the lines shown after it.
	Output []string
	// Line is the 1-based line of the command in the source.
	Line int
}

// ParseTour returns the steps of the first fenced block in the README
// section TourHeading that holds "$ " lines. Other sections are ignored.
func ParseTour(readme string) ([]Step, error) {
	lines := strings.Split(readme, "\n")
	start := -1
	for i, l := range lines {
		if strings.TrimSpace(l) == TourHeading {
			start = i + 1
			break
		}
	}
	if start < 0 {
		return nil, fmt.Errorf("the README has no section %q", TourHeading)
	}
	for i := start; i < len(lines); i++ {
		l := lines[i]
		if strings.HasPrefix(l, "## ") {
			break // the next section
		}
		if !strings.HasPrefix(l, "```") {
			continue
		}
		end := i + 1
		for end < len(lines) && !strings.HasPrefix(lines[end], "```") {
			end++
		}
		if end == len(lines) {
			return nil, fmt.Errorf("line %d: unterminated code block", i+1)
		}
		steps := ParseSession(strings.Join(lines[i+1:end], "\n"), i+2)
		if len(steps) > 0 {
			return steps, nil
		}
		i = end
	}
	return nil, fmt.Errorf("section %q has no code block with \"$ \" commands", TourHeading)
}

// ParseSession splits a shell session into steps; firstLine is the line
// number of its first line. Text before the first "$ " line is ignored.
func ParseSession(session string, firstLine int) []Step {
	var steps []Step
	sc := bufio.NewScanner(strings.NewReader(session))
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for n := firstLine; sc.Scan(); n++ {
		l := sc.Text()
		if cmd, ok := strings.CutPrefix(l, "$ "); ok {
			steps = append(steps, Step{Command: strings.TrimSpace(cmd), Line: n})
			continue
		}
		if len(steps) > 0 && strings.TrimSpace(l) != "" {
			last := &steps[len(steps)-1]
			last.Output = append(last.Output, l)
		}
	}
	return steps
}

// FormatSession is the inverse of ParseSession: "$ COMMAND" lines, each
// followed by its output (e.g. a transcript of a run, in the README's form).
func FormatSession(steps []Step) string {
	var b strings.Builder
	for _, s := range steps {
		b.WriteString("$ " + s.Command + "\n")
		for _, l := range s.Output {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

// durationToken is an age or duration as kubectl prints one.
var durationToken = regexp.MustCompile(`^(\d+(ms|s|m|h|d|y))+$|^<unknown>$|^<invalid>$`)

// durationPattern matches any durationToken.
const durationPattern = `(?:(?:\d+(?:ms|s|m|h|d|y))+|<unknown>|<invalid>)`

// linePattern compiles a README line into a regular expression for an
// output line (see the package comment).
func linePattern(want string) *regexp.Regexp {
	fields := strings.Fields(want)
	parts := make([]string, len(fields))
	for i, f := range fields {
		if durationToken.MatchString(f) {
			parts[i] = durationPattern
			continue
		}
		parts[i] = strings.ReplaceAll(regexp.QuoteMeta(f), `\.\.\.`, `.*`)
	}
	return regexp.MustCompile(`^` + strings.Join(parts, `\s+`) + `$`)
}

// Compare returns the README lines (want) that no line of got matches,
// each line of got matching at most one README line. Nil means got shows
// everything the README says.
func Compare(want []string, got string) []string {
	gotLines := strings.Split(got, "\n")
	for i := range gotLines {
		gotLines[i] = strings.TrimSpace(gotLines[i])
	}
	used := make([]bool, len(gotLines))
	// Lines with "..." go last, so they do not take an output line that a
	// more specific README line needs.
	order := make([]string, 0, len(want))
	for _, w := range want {
		if !strings.Contains(w, "...") {
			order = append(order, w)
		}
	}
	for _, w := range want {
		if strings.Contains(w, "...") {
			order = append(order, w)
		}
	}
	var missing []string
	for _, w := range order {
		re := linePattern(w)
		found := false
		for i, g := range gotLines {
			if !used[i] && re.MatchString(g) {
				used[i], found = true, true
				break
			}
		}
		if !found {
			missing = append(missing, w)
		}
	}
	return missing
}
