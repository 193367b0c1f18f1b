package e2e

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestMetricsAndHealth reads flock-apiserver's own /metrics, /livez and
// /readyz on its secure port (as the aggregator would reach it, with the
// front-proxy identity) after a Flock has been synced: the generic API server
// metrics and the controller's are there, and the health checks name the
// informer and etcd checks.
func TestMetricsAndHealth(t *testing.T) {
	ns := newNamespace(t)
	createFlock(t, newFlock("metered", ns, 1))
	kubectl(t, env.KubectlBuilt(), "wait", "-n", ns, "flock/metered", "--for=condition=Available", "--timeout=90s")

	asAdmin := map[string]string{"X-Remote-User": "admin", "X-Remote-Group": "system:masters"}
	var body string
	eventually(t, 60*time.Second, "/metrics reports the members of Flock "+ns+"/metered", func(context.Context) error {
		var code int
		code, body = directRequest(t, env.PKI.FrontProxyClient, http.MethodGet, "/metrics", nil, asAdmin)
		if code != http.StatusOK {
			t.Fatalf("/metrics: %d: %.300s", code, body)
		}
		if !regexp.MustCompile(`(?m)^flock_controller_members\{state="Ready"\} [1-9]`).MatchString(body) {
			return fmt.Errorf("no Ready member in flock_controller_members yet")
		}
		return nil
	})
	for _, want := range []string{
		`(?m)^apiserver_request_total\{.*resource="flocks".*\} \d+`,
		`(?m)^flock_controller_syncs_total\{result="success"\} [1-9]\d*`,
		`(?m)^flock_controller_sync_duration_seconds_count [1-9]\d*`,
		`(?m)^flock_controller_flocks [1-9]\d*`,
		`(?m)^workqueue_adds_total\{name="flock"\} [1-9]\d*`,
		`(?m)^workqueue_depth\{name="flock"\} \d+`,
		`(?m)^workqueue_queue_duration_seconds_count\{name="flock"\} [1-9]\d*`,
		`(?m)^workqueue_retries_total\{name="flock"\} \d+`,
		// The controller's requests to kube-apiserver: by code and verb,
		// and the time they waited for the client's rate limiter.
		`(?m)^rest_client_requests_total\{code="201",host="[^"]+",method="POST"\} [1-9]\d*`,
		`(?m)^rest_client_rate_limiter_duration_seconds_count\{host="[^"]+",verb="POST"\} [1-9]\d*`,
		// The server's own Flock informer holds the watch cache's objects.
		`(?m)^flock_apiserver_informer_flocks_total\{source="watch_cache"\} [1-9]`,
		// The embedded etcd member's file, which it defragments when mostly free.
		`(?m)^flock_embedded_etcd_db_size_bytes\{space="all"\} [1-9]`,
		`(?m)^flock_embedded_etcd_db_size_bytes\{space="in_use"\} [1-9]`,
	} {
		if !regexp.MustCompile(want).MatchString(body) {
			t.Errorf("/metrics lacks %s", want)
		}
	}

	// Bounded cardinality: no series names a Flock or a namespace.
	if m := regexp.MustCompile(`(?m)^flock_controller_\w+\{[^}]*(namespace|flock)=.*$`).FindString(body); m != "" {
		t.Errorf("/metrics has a per-Flock series: %s", m)
	}

	for _, path := range []string{"/livez?verbose", "/readyz?verbose"} {
		code, out := directRequest(t, env.PKI.FrontProxyClient, http.MethodGet, path, nil, asAdmin)
		if code != http.StatusOK {
			t.Fatalf("%s: %d: %s", path, code, out)
		}
		if !strings.Contains(out, "[+]etcd ok") {
			t.Errorf("%s does not check etcd:\n%s", path, out)
		}
		if path == "/readyz?verbose" {
			for _, check := range []string{"[+]flock-capacity-informers ok", "[+]flock-controller-informers ok", "[+]informer-sync ok", "[+]requestheader-client-ca ok"} {
				if !strings.Contains(out, check) {
					t.Errorf("/readyz lacks %q:\n%s", check, out)
				}
			}
		}
	}
	// Without credentials, nothing is served.
	if code, _ := directRequest(t, nil, http.MethodGet, "/metrics", nil, nil); code != http.StatusUnauthorized && code != http.StatusForbidden {
		t.Errorf("/metrics without a client certificate: %d, want 401 or 403", code)
	}
}
