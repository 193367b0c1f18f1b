package main

import (
	"strings"
	"testing"
	"time"
)

func TestVolumeSyncsSplitsThePhaseWritesFromTheOtherSyncs(t *testing.T) {
	log := `I1204 23:19:40.000000   16666 pv_controller_base.go:543] "syncVolumeByKey" volumeKey="a"
I1204 23:19:40.000100   16666 pv_controller.go:565] "Synchronizing PersistentVolume" volumeName="a"
I1204 23:19:40.030000   16666 pv_controller.go:936] "Volume entered phase" volumeName="a" phase="Bound"
I1204 23:19:40.030050   16666 graph_builder.go:716] "GraphBuilder process object" object="a"
I1204 23:19:40.035000   16666 pv_controller_base.go:543] "syncVolumeByKey" volumeKey="b"
I1204 23:19:40.035200   16666 pv_controller.go:721] "Synchronizing PersistentVolume, all is bound" volumeName="b"
I1204 23:19:40.035500   16666 pv_controller_base.go:543] "syncVolumeByKey" volumeKey="c"
I1204 23:19:40.036000   16666 pv_controller.go:936] "Volume entered phase" volumeName="c" phase="Bound"
I1204 23:59:59.900000   16666 pv_controller_base.go:543] "syncVolumeByKey" volumeKey="d"
I1205 00:00:00.100000   16666 pv_controller_base.go:543] "syncVolumeByKey" volumeKey="e"
not a klog line pv_controller
`
	got, err := volumeSyncs(strings.NewReader(log))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]time.Duration{
		syncKind(true):  {35 * time.Millisecond},  // c's sync is followed by a gap of 5 s: left out
		syncKind(false): {500 * time.Microsecond}, // d's, past midnight, left out
	}
	for k, w := range want {
		if len(got[k]) != len(w) {
			t.Fatalf("%s: %v, want %v", k, got[k], w)
		}
		for i := range w {
			if d := got[k][i] - w[i]; d > time.Microsecond || d < -time.Microsecond {
				t.Errorf("%s[%d] = %v, want %v", k, i, got[k][i], w[i])
			}
		}
	}
}
