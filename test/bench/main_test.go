// File main_test.go: unit tests of the API table's cells.

package main

import "testing"

func TestCellShowsMedianAndRunRatios(t *testing.T) {
	rate := row{Case: "create c=1", Unit: "obj/s", Higher: true,
		Samples: map[string][]float64{tCRD: {100, 200, 400}, tFlockAgg: {50, 50, 100}}, Values: map[string]float64{}}
	rate = rate.medians()
	if got, want := cell(rate, tFlockAgg, tCRD), "50 (0.25×) [0.50 0.25 0.25]"; got != want {
		t.Errorf("rate cell: %q, want %q", got, want)
	}
	if got, want := cell(rate, tCRD, tCRD), "200"; got != want {
		t.Errorf("anchor's own cell: %q, want %q", got, want)
	}
	// For a time, the ratio is the anchor's over the target's: above 1 is
	// still better.
	time := row{Case: "LIST", Unit: "ms", Values: map[string]float64{},
		Samples: map[string][]float64{tCRD: {300, 400, 500}, tFlockDirs: {150, 800, 250}}}
	time = time.medians()
	if got, want := cell(time, tFlockDirs, tCRD), "250 (1.60×) [2.00 0.50 2.00]"; got != want {
		t.Errorf("time cell: %q, want %q", got, want)
	}
	// One run: no brackets; a run without a value shows "-".
	one := row{Values: map[string]float64{tCRD: 10, tSTS: 20}, Higher: true}
	if got, want := cell(one, tSTS, tCRD), "20 (2.00×)"; got != want {
		t.Errorf("single run: %q, want %q", got, want)
	}
	gap := row{Higher: true, Values: map[string]float64{}, Samples: map[string][]float64{tCRD: {10, 0}, tSTS: {20, 20}}}
	gap.Values[tCRD], gap.Values[tSTS] = 10, 20
	if got, want := cell(gap, tSTS, tCRD), "20 (2.00×) [2.00 -]"; got != want {
		t.Errorf("a run without a value: %q, want %q", got, want)
	}
}

func TestAPICasesRotateTargets(t *testing.T) {
	first := map[string]bool{}
	for run := range len(targetOrder) {
		first[turns(targetOrder, run)[0]] = true
	}
	if len(first) != len(targetOrder) {
		t.Errorf("over %d runs the first target was %v, want each once", len(targetOrder), first)
	}
}
