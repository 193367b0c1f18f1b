package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"

	"flock.dev/flock/pkg/apis/flock"
	"flock.dev/flock/pkg/apis/flock/install"
	"flock.dev/flock/pkg/apis/flock/validation"
)

// hostileBodies is how many bodies TestHostileFlockBodies sends (every 20th
// is the valid one, the rest mutated); hostileSendBound stops it earlier on
// a slow machine (it says how many it sent). Every 30th body is created for
// real, the rest with dryRun=All, which goes through the same decoding,
// defaulting, validation and admission without storing.
const (
	hostileBodies    = 3000
	hostileSendBound = 90 * time.Second
	hostileSeed      = 20261130
)

// serverPanic matches what a recovered or fatal panic leaves in a server log.
var serverPanic = regexp.MustCompile(`(?i)observed a panic|panic serving|^panic: |goroutine \d+ \[running\]`)

// Hostile request bodies through kube-apiserver's aggregation layer: a few
// thousand Flock bodies, mutated deterministically (seed hostileSeed) with
// wrong types, nulls, unknown fields, huge strings and lists, invalid UTF-8,
// truncation and random bytes. Every answer is a 2xx or 4xx (never a 5xx or
// no answer), flock-apiserver logs no panic, and every Flock stored is valid.
// The same pipeline is fuzzed in-process by FuzzCreateFlockBody
// (pkg/admission/plugin/capacity).
func TestHostileFlockBodies(t *testing.T) {
	ns := newNamespace(t)
	logFile := filepath.Join(env.LogDir(), "flock-apiserver.log")
	logStart := fileSize(logFile)

	client, err := rest.HTTPClientFor(env.RESTConfig)
	if err != nil {
		t.Fatal(err)
	}
	client.Timeout = callTimeout
	url := env.KubeAPIServerURL + "/apis/flock.dev/v1alpha1/namespaces/" + ns + "/flocks"

	type outcome struct {
		code int
		err  error
		body []byte
		resp string
	}
	type numbered struct {
		i    int
		body []byte
	}
	bodies := make(chan numbered)
	results := make(chan outcome)
	ctx, cancel := context.WithTimeout(t.Context(), hostileSendBound)
	defer cancel()
	go func() {
		defer close(bodies)
		m := newMutator(hostileSeed)
		valid, err := json.Marshal(validBody())
		if err != nil {
			panic(err)
		}
		for i := range hostileBodies {
			b := valid // every 20th body is the valid one: stored Flocks to check
			if i%20 != 0 {
				b = m.body()
			}
			select {
			case bodies <- numbered{i, b}:
			case <-ctx.Done():
				return
			}
		}
	}()
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range bodies {
				i, body := n.i, n.body
				q := "?dryRun=All"
				if i%30 == 0 { // half of them the valid body
					q = "?"
				}
				q += "&fieldValidation=" + []string{"Strict", "Warn", "Ignore"}[i%3]
				req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url+q, bytes.NewReader(body))
				if err != nil {
					results <- outcome{err: err, body: body}
					continue
				}
				req.Header.Set("Content-Type", []string{"application/json", "application/yaml"}[min(i%10, 1)])
				resp, err := client.Do(req)
				if err != nil {
					results <- outcome{err: err, body: body}
					continue
				}
				msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
				resp.Body.Close()
				results <- outcome{code: resp.StatusCode, body: body, resp: string(msg)}
			}
		}()
	}
	go func() { wg.Wait(); close(results) }()

	codes := map[int]int{}
	sent, bad := 0, 0
	for r := range results {
		sent++
		codes[r.code]++
		if r.err != nil || r.code >= 500 || r.code < 200 {
			bad++
			if bad <= 5 {
				t.Errorf("a mutated body got code %d (%v): %s\nbody (first 500 bytes): %q", r.code, r.err, r.resp, truncate(r.body, 500))
			}
		}
	}
	t.Logf("sent %d bodies (of %d, seed %d; every 20th the valid one); answers by code: %v", sent, hostileBodies, hostileSeed, codes)
	if bad > 5 {
		t.Errorf("%d answers in all were 5xx or none", bad)
	}
	// Both sides were reached: some bodies were accepted, some refused.
	accepted, refused := codes[http.StatusCreated]+codes[http.StatusOK], 0
	for c, n := range codes {
		if c >= 400 && c < 500 {
			refused += n
		}
	}
	if accepted == 0 || refused == 0 {
		t.Errorf("want both accepted and refused bodies, got %v", codes)
	}

	// No panic in flock-apiserver's log since the test started.
	if lines, err := logLinesFrom(logFile, logStart); err != nil {
		t.Error(err)
	} else {
		for _, l := range lines {
			if serverPanic.MatchString(l) {
				t.Errorf("flock-apiserver logged a panic: %s", l)
				break
			}
		}
	}

	// Every Flock stored is valid.
	scheme := runtime.NewScheme()
	install.Install(scheme)
	list, err := env.Flock.FlockV1alpha1().Flocks(ns).List(ctxFor(t), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range list.Items {
		internal := &flock.Flock{}
		if err := scheme.Convert(&list.Items[i], internal, nil); err != nil {
			t.Errorf("%s: convert: %v", list.Items[i].Name, err)
			continue
		}
		if errs := validation.ValidateFlock(internal, validation.Options{}); len(errs) > 0 {
			t.Errorf("stored Flock %s is invalid: %v", internal.Name, errs)
		}
	}
	if len(list.Items) == 0 {
		t.Error("no Flock was stored: the valid bodies sent for real were refused")
	}
	t.Logf("%d Flocks stored, all valid", len(list.Items))
}

func fileSize(p string) int64 {
	st, err := os.Stat(p)
	if err != nil {
		return 0
	}
	return st.Size()
}

// logLinesFrom returns the lines of the log file p from byte offset start
// on (the whole file if it is shorter: a new file).
func logLinesFrom(p string, start int64) ([]string, error) {
	data, err := os.ReadFile(p)
	if err != nil {
		return nil, err
	}
	if int64(len(data)) >= start {
		data = data[start:]
	}
	return strings.Split(string(data), "\n"), nil
}

func truncate(b []byte, n int) []byte { return b[:min(len(b), n)] }

// mutator makes hostile variants of a valid Flock body, deterministically
// from its seed.
type mutator struct {
	r *rand.Rand
}

func newMutator(seed uint64) *mutator {
	return &mutator{r: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
}

// validBody is the valid Flock every mutation starts from: one member, so
// the bodies created for real stay cheap for the controller.
func validBody() map[string]any {
	return map[string]any{
		"apiVersion": "flock.dev/v1alpha1", "kind": "Flock",
		"metadata": map[string]any{"generateName": "hostile-", "labels": map[string]any{"e2e": "hostile"}},
		"spec": map[string]any{
			"replicas": 1,
			"selector": map[string]any{"matchLabels": map[string]any{"app": "hostile"}},
			"updateStrategy": map[string]any{"type": "RollingUpdate",
				"rollingUpdate": map[string]any{"partition": 0, "maxUnavailable": "50%"}},
			"placement": map[string]any{"nodes": []any{"node-1"}},
			"template": map[string]any{
				"metadata": map[string]any{"labels": map[string]any{"app": "hostile"}},
				"spec": map[string]any{"containers": []any{map[string]any{
					"name": "c", "image": "busybox:1.37", "command": []any{"sleep", "3600"},
					"volumeMounts": []any{map[string]any{"name": "data", "mountPath": "/data"}},
				}}},
			},
		},
	}
}

// body returns one mutated body: one to three changes to the tree, then
// sometimes a change to the bytes.
func (m *mutator) body() []byte {
	tree := any(validBody())
	for range 1 + m.r.IntN(3) {
		tree = m.mutateTree(tree)
	}
	b, err := json.Marshal(tree)
	if err != nil {
		b = []byte(fmt.Sprint(tree))
	}
	switch m.r.IntN(10) {
	case 0: // invalid UTF-8 just after a quote (inside a key or a string)
		var quotes []int
		for i, c := range b {
			if c == '"' {
				quotes = append(quotes, i+1)
			}
		}
		if len(quotes) > 0 {
			at := quotes[m.r.IntN(len(quotes))]
			b = slices.Concat(b[:at], []byte{0xff, 0xc3, 0x28}, b[at:])
		}
	case 1: // truncated
		b = b[:m.r.IntN(len(b)+1)]
	case 2: // random bytes
		b = make([]byte, m.r.IntN(2048))
		for i := range b {
			b[i] = byte(m.r.UintN(256))
		}
	case 3: // a byte changed
		if len(b) > 0 {
			b[m.r.IntN(len(b))] = byte(m.r.UintN(256))
		}
	}
	return b
}

// mutateTree changes one node of the JSON tree: a value of another type,
// null, a huge string or list, an unknown field, or a field removed.
func (m *mutator) mutateTree(tree any) any {
	// Map order is random: the paths are sorted by their printed form,
	// each printed once (printed in every comparison, the sort took most of
	// the test's minute once a huge list was in the tree).
	type keyedPath struct {
		key  string
		path []any
	}
	var keyed []keyedPath
	var walk func(v any, path []any)
	walk = func(v any, path []any) {
		keyed = append(keyed, keyedPath{fmt.Sprint(path), slices.Clone(path)})
		switch v := v.(type) {
		case map[string]any:
			for k, c := range v {
				walk(c, append(path, k))
			}
		case []any:
			for i, c := range v {
				walk(c, append(path, i))
			}
		}
	}
	walk(tree, nil)
	slices.SortFunc(keyed, func(a, b keyedPath) int { return strings.Compare(a.key, b.key) })
	path := keyed[m.r.IntN(len(keyed))].path

	var v any
	switch m.r.IntN(7) {
	case 0: // another type
		v = []any{"x", 12345, -1, true, 1e308, 3.5, map[string]any{"a": 1}, []any{1, "x"}, ""}[m.r.IntN(9)]
	case 1:
		v = nil
	case 2: // a huge string
		v = strings.Repeat("x", []int{64, 254, 1000, 70000, 300000}[m.r.IntN(5)])
	case 3: // a huge list
		n := []int{100, 1000, 10001}[m.r.IntN(3)]
		l := make([]any, n)
		for i := range l {
			l[i] = []any{"node-1", fmt.Sprintf("n%d", i), map[string]any{"name": fmt.Sprintf("c%d", i), "image": "i"}}[m.r.IntN(3)]
		}
		v = l
	case 4: // an unknown field next to the node (or in it, for an object)
		if obj, ok := get(tree, path).(map[string]any); ok {
			obj[fmt.Sprintf("unknown%d", m.r.IntN(100))] = m.r.IntN(10)
			return tree
		}
		v = map[string]any{"unknown": 1}
	case 5: // removed
		if len(path) > 0 {
			if parent, ok := get(tree, path[:len(path)-1]).(map[string]any); ok {
				delete(parent, path[len(path)-1].(string))
				return tree
			}
		}
		v = map[string]any{}
	case 6: // a plausible number
		v = []any{0, 1, 2, 3, 4, 10000, 10001, 2147483647, 2147483648, -2147483649}[m.r.IntN(10)]
	}
	return set(tree, path, v)
}

// get returns the node at path.
func get(tree any, path []any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			tree = tree.(map[string]any)[k]
		case int:
			tree = tree.([]any)[k]
		}
	}
	return tree
}

// set replaces the node at path with v and returns the tree.
func set(tree any, path []any, v any) any {
	if len(path) == 0 {
		return v
	}
	parent := get(tree, path[:len(path)-1])
	switch k := path[len(path)-1].(type) {
	case string:
		parent.(map[string]any)[k] = v
	case int:
		parent.([]any)[k] = v
	}
	return tree
}
