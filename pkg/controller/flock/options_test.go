package flock

import (
	"testing"
)

func TestOptionsComplete(t *testing.T) {
	o, err := Options{}.Complete()
	if err != nil || o.ClusterDomain != "cluster.local" || o.DataRoot != "/var/lib/flock" || o.Workers != 1 {
		t.Fatalf("defaults = %+v, %v", o, err)
	}
	for _, bad := range []Options{{DataRoot: "relative"}, {DataRoot: "/"}, {DataRoot: "/a/../b"}, {ClusterDomain: ".local."}} {
		if _, err := bad.Complete(); err == nil {
			t.Errorf("%+v: no error", bad)
		}
	}
}
