package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The PersistentVolume controller's metrics give its volume worker's time
// only as a sum over every sync. Which syncs take it shows in its log at
// -v=5 (-kcm-args=-v=5): every sync starts with a "syncVolumeByKey" line,
// and a sync that wrote the volume's phase logs "Volume entered phase".
// With one worker, a sync lasts until the next one starts when the queue
// is not empty; -pv-syncs=LOG reads such a log and prints, by what the
// syncs did, how many there were and how long they took (gaps over a
// second are left out: the queue was empty).

// syncKind names what a volume sync did from its log lines.
func syncKind(wrotePhase bool) string {
	if wrotePhase {
		return "wrote the volume's phase"
	}
	return "no write"
}

// volumeSyncs reads a kube-controller-manager log at -v=5 and returns,
// by syncKind, the lengths of the volume worker's syncs that were
// followed by another within a second.
func volumeSyncs(r io.Reader) (map[string][]time.Duration, error) {
	out := map[string][]time.Duration{}
	var start time.Duration
	started, wrote := false, false
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.Contains(line, "pv_controller") {
			continue
		}
		t, ok := klogTime(line)
		if !ok {
			continue
		}
		switch {
		case strings.Contains(line, `"syncVolumeByKey"`):
			// A log that runs past midnight goes back a day: that gap
			// is left out too.
			if started && t >= start && t-start <= time.Second {
				k := syncKind(wrote)
				out[k] = append(out[k], t-start)
			}
			start, started, wrote = t, true, false
		case started && strings.Contains(line, `"Volume entered phase"`):
			wrote = true
		}
	}
	return out, sc.Err()
}

// klogTime returns the time of day of a klog line ("I1204 23:20:08.830987
// ..."), as a duration since midnight.
func klogTime(line string) (time.Duration, bool) {
	f := strings.Fields(line)
	if len(f) < 2 || len(f[0]) != 5 {
		return 0, false
	}
	hms := strings.Split(f[1], ":")
	if len(hms) != 3 {
		return 0, false
	}
	h, err1 := strconv.Atoi(hms[0])
	m, err2 := strconv.Atoi(hms[1])
	s, err3 := strconv.ParseFloat(hms[2], 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return 0, false
	}
	return time.Duration(h)*time.Hour + time.Duration(m)*time.Minute + time.Duration(s*float64(time.Second)), true
}

// printVolumeSyncs prints volumeSyncs of the log at path.
func printVolumeSyncs(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	syncs, err := volumeSyncs(f)
	if err != nil {
		return err
	}
	fmt.Printf("The PersistentVolume controller's volume syncs in %s (each until the next began; gaps over 1 s left out):\n\n", path)
	fmt.Println("| sync | count | mean, ms | p50, ms | p90, ms | sum, s |")
	fmt.Println("|---|---|---|---|---|---|")
	for _, k := range []string{syncKind(true), syncKind(false)} {
		d := syncs[k]
		if len(d) == 0 {
			continue
		}
		slices.Sort(d)
		var sum time.Duration
		for _, x := range d {
			sum += x
		}
		ms := func(x time.Duration) float64 { return float64(x) / float64(time.Millisecond) }
		fmt.Printf("| %s | %d | %.2f | %.2f | %.2f | %.1f |\n", k, len(d), ms(sum)/float64(len(d)), ms(d[len(d)/2]), ms(d[len(d)*9/10]), sum.Seconds())
	}
	return nil
}
