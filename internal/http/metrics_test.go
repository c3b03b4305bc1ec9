package http_test

import (
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/example/payments/internal/catalog"
	"github.com/example/payments/tools/stacktest"
)

// standardMethods are the only method label values besides "other".
var standardMethods = []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"}

// routeLabels are the values the route label may take: the API's route
// patterns, walked from its router, so that they follow the declared kinds
// (each route's latency is a series from the start); "unmatched"; "/v1/*"
// for a request that entered the /v1 subrouter and matched nothing there;
// and "/metrics", the internal listener's.
func routeLabels(t *testing.T) []string {
	t.Helper()
	labels := []string{"unmatched", "/v1/*", "/metrics"}
	err := chi.Walk(newHandler(t).(chi.Routes), func(_, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		if !slices.Contains(labels, route) {
			labels = append(labels, route)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("walk routes: %v", err)
	}
	for _, k := range catalog.Kinds(nil).Kinds() {
		if !slices.Contains(labels, k.Names().Path+"/{id}") {
			t.Fatalf("the routes %v lack %s's", labels, k.Names().Type)
		}
	}
	return labels
}

// TestMetricsLabelsAreBounded sends requests with made-up methods and paths,
// with and without an API key, and checks that they cannot grow /metrics:
// every label value comes from a small fixed set.
func TestMetricsLabelsAreBounded(t *testing.T) {
	t.Parallel()
	s := stacktest.New(t, stacktest.Options{})
	routes := routeLabels(t)
	client := &http.Client{Timeout: 10 * time.Second}
	t.Cleanup(client.CloseIdleConnections)

	const n = 1000
	rng := rand.New(rand.NewPCG(8, 1000))
	type request struct {
		method, path string
		authed       bool
	}
	reqs := make(chan request, n)
	for range n {
		reqs <- request{randomMethod(rng), randomPath(rng), rng.IntN(2) == 0}
	}
	close(reqs)

	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for r := range reqs {
				req, err := http.NewRequest(r.method, s.API.URL+r.path, nil)
				if err != nil {
					t.Errorf("%s %s: %v", r.method, r.path, err)
					continue
				}
				if r.authed {
					req.Header.Set("Authorization", "Bearer "+acme)
				}
				// A payment must never wait for a worker this stack lacks.
				req.Header.Set("Prefer", "respond-async")
				res, err := client.Do(req)
				if err != nil {
					t.Errorf("%s %s: %v", r.method, r.path, err)
					continue
				}
				io.Copy(io.Discard, res.Body)
				res.Body.Close()
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}

	scrape := []byte(s.APIMetrics())
	requests := series(t, scrape, "payments_http_requests_total")
	durations := series(t, scrape, "payments_http_request_duration_seconds_count")

	// Each series is counted once, so the sums show no request went
	// unrecorded, and the scrape itself is not yet in them.
	for name, ss := range map[string][]sample{"requests": requests, "durations": durations} {
		total := 0.0
		for _, x := range ss {
			total += x.value
			if !slices.Contains(standardMethods, x.labels["method"]) && x.labels["method"] != "other" {
				t.Errorf("%s: made-up method label %q", name, x.labels["method"])
			}
			if !slices.Contains(routes, x.labels["route"]) {
				t.Errorf("%s: unknown route label %q", name, x.labels["route"])
			}
		}
		if total != n {
			t.Errorf("%s: %v requests counted, want %d", name, total, n)
		}
	}
	for _, x := range requests {
		if st := x.labels["status"]; !regexp.MustCompile(`^[1-5]xx$`).MatchString(st) {
			t.Errorf("requests: status label %q is not a class", st)
		}
	}

	// 8 methods × the routes × 5 classes bounds the series in principle; in
	// practice most pairs cannot occur (a route answers few methods and
	// statuses), and what these requests reach, with the latency of every
	// route there from the start, stays well under 60.
	if len(requests) >= 60 || len(durations) >= 60 {
		t.Errorf("%d request series and %d duration series, want fewer than 60 each:\n%s",
			len(requests), len(durations), scrape)
	}
	t.Logf("%d request series, %d duration series", len(requests), len(durations))
	if !slices.ContainsFunc(requests, func(x sample) bool { return x.labels["method"] == "other" }) {
		t.Error(`no series has method="other", though most requests used made-up methods`)
	}
	// /metrics is not on the public port: anyone who reaches the API would
	// read what it counts.
	if res := s.Request(http.MethodGet, "/metrics", "", ""); res.Status != http.StatusNotFound {
		t.Fatalf("GET /metrics on the public port = %d", res.Status)
	}
}

// randomMethod is a standard method a third of the time, else a made-up
// uppercase token such as FOO123 (or, now and then, a lowercase standard one,
// which is made up too: methods are case-sensitive).
func randomMethod(rng *rand.Rand) string {
	switch rng.IntN(6) {
	case 0, 1:
		return standardMethods[rng.IntN(len(standardMethods))]
	case 2:
		return strings.ToLower(standardMethods[rng.IntN(len(standardMethods))])
	}
	for {
		m := randomString(rng, 1+rng.IntN(12), "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
		if !slices.Contains(standardMethods, m) && m != "CONNECT" {
			return m
		}
	}
}

// randomPath is a real endpoint with a random id, or random segments.
func randomPath(rng *rand.Rand) string {
	switch rng.IntN(8) {
	case 0:
		return "/v1/payments/" + randomSegment(rng)
	case 1:
		return "/v1/payments/" + randomSegment(rng) + "/refunds"
	case 2:
		return "/v1/refunds/" + randomSegment(rng)
	case 3:
		return "/v1/idempotency-keys/" + randomSegment(rng)
	case 4:
		return "/v1/events?starting_after=" + randomSegment(rng)
	case 5:
		return []string{"/healthz", "/readyz", "/openapi.yaml", "/v1/payments", "/v1/events"}[rng.IntN(5)]
	}
	var b strings.Builder
	for range 1 + rng.IntN(4) {
		b.WriteString("/" + randomSegment(rng))
	}
	return b.String()
}

// randomSegment is a word, an id, or a run of percent-escapes.
func randomSegment(rng *rand.Rand) string {
	switch rng.IntN(4) {
	case 0:
		return "pay_" + randomString(rng, 16, "0123456789abcdefghijklmnopqrstuvwxyz")
	case 1:
		var b strings.Builder
		for range 1 + rng.IntN(4) {
			fmt.Fprintf(&b, "%%%02x", rng.IntN(256))
		}
		return b.String()
	case 2:
		return strconv.Itoa(rng.IntN(1 << 20))
	}
	return randomString(rng, 1+rng.IntN(20), "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.~")
}

func randomString(rng *rand.Rand, n int, alphabet string) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = alphabet[rng.IntN(len(alphabet))]
	}
	return string(b)
}

// sample is one series of a Prometheus text scrape.
type sample struct {
	labels map[string]string
	value  float64
}

var (
	sampleLine = regexp.MustCompile(`^(\w+)\{(.*)\} (\S+)$`)
	labelPair  = regexp.MustCompile(`(\w+)="((?:[^"\\]|\\.)*)"`)
)

// series reads the samples of one metric from a text-format scrape.
func series(t *testing.T, scrape []byte, name string) []sample {
	t.Helper()
	var out []sample
	for line := range strings.Lines(string(scrape)) {
		m := sampleLine.FindStringSubmatch(strings.TrimSuffix(line, "\n"))
		if m == nil || m[1] != name {
			continue
		}
		v, err := strconv.ParseFloat(m[3], 64)
		if err != nil {
			t.Fatalf("sample %q: %v", line, err)
		}
		labels := map[string]string{}
		for _, p := range labelPair.FindAllStringSubmatch(m[2], -1) {
			labels[p[1]] = p[2]
		}
		out = append(out, sample{labels, v})
	}
	if len(out) == 0 {
		t.Fatalf("scrape has no %s:\n%s", name, scrape)
	}
	return out
}
