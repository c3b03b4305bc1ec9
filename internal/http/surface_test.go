package http_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"testing"

	"github.com/example/payments/internal/process"
	"github.com/example/payments/internal/process/api"
	"github.com/example/payments/internal/process/worker"
	"github.com/example/payments/internal/signing"
	"github.com/example/payments/tools/stacktest"
	"github.com/example/payments/tools/testio"
	"github.com/example/payments/tools/testwait"
)

// The tests of this file are about what the service shows to those who
// should not see it: routes to a caller without a key, the logs to a sender
// of forged webhooks, the trace headers of a client to the processor and
// the merchants, the internal listeners to the network.

// TestSurfaceUnauthenticated: without an API key, every path under /v1 is
// 401, known or not, whatever the method, so that routes cannot be probed;
// the same requests with a key get their 404 or 405. Only POST
// /v1/processor/webhooks goes on without a key, to its signature check.
func TestSurfaceUnauthenticated(t *testing.T) {
	t.Parallel()
	s := stacktest.New(t, stacktest.Options{})
	for _, tt := range []struct {
		method, path string
		withKey      int    // the status with a good key
		allow        string // its Allow, for a 405
	}{
		{http.MethodGet, "/v1/nonexistent", http.StatusNotFound, ""},
		{http.MethodHead, "/v1/nonexistent", http.StatusNotFound, ""},
		{http.MethodPost, "/v1/nonexistent", http.StatusNotFound, ""},
		{http.MethodGet, "/v1", http.StatusNotFound, ""},
		{http.MethodGet, "/v1/", http.StatusNotFound, ""},
		{http.MethodGet, "/v1/payments/pay_x/nothing", http.StatusNotFound, ""},
		{http.MethodDelete, "/v1/payments", http.StatusMethodNotAllowed, "GET, HEAD, POST"},
		{"PATCH", "/v1/payments/pay_x", http.StatusMethodNotAllowed, "GET, HEAD"},
		{http.MethodGet, "/v1/processor/webhooks", http.StatusMethodNotAllowed, "POST"},
		{http.MethodPost, "/v1/processor/webhooks/", http.StatusNotFound, ""},
		{http.MethodPost, "/v1/processor%2Fwebhooks", http.StatusNotFound, ""},
		{http.MethodGet, "/v1/payments", http.StatusOK, ""},
	} {
		name := tt.method + " " + tt.path
		res := s.Request(tt.method, tt.path, "", "")
		if res.Status != http.StatusUnauthorized || res.Header.Get("WWW-Authenticate") != `Bearer realm="payments"` || res.Header.Get("Allow") != "" {
			t.Errorf("%s without a key: %d, WWW-Authenticate %q, Allow %q; want 401 and nothing about the route",
				name, res.Status, res.Header.Get("WWW-Authenticate"), res.Header.Get("Allow"))
		}
		if tt.method != http.MethodHead && !strings.Contains(string(res.Body), `"code":"unauthorized"`) {
			t.Errorf("%s without a key: body %s", name, res.Body)
		}
		res = s.Request(tt.method, tt.path, acme, "")
		if res.Status != tt.withKey || res.Header.Get("Allow") != tt.allow {
			t.Errorf("%s with a key: %d, Allow %q; want %d, Allow %q", name, res.Status, res.Header.Get("Allow"), tt.withKey, tt.allow)
		}
	}
	// The processor's webhooks take no key: a delivery without a signature
	// is refused by its signature check.
	res := s.Request(http.MethodPost, "/v1/processor/webhooks", "", `{}`)
	if res.Status != http.StatusBadRequest || !strings.Contains(string(res.Body), "webhook_signature_invalid") {
		t.Errorf("POST /v1/processor/webhooks without a key: %d %s; want 400 webhook_signature_invalid", res.Status, res.Body)
	}
	// Outside /v1, what needs no key still answers without one.
	for path, want := range map[string]int{"/healthz": http.StatusOK, "/openapi.yaml": http.StatusOK, "/nonexistent": http.StatusNotFound} {
		if res := s.Request(http.MethodGet, path, "", ""); res.Status != want {
			t.Errorf("GET %s without a key: %d; want %d", path, res.Status, want)
		}
	}
}

// TestSurfaceRefusedWebhookLogBounded: a forged processor webhook is
// logged with at most a short prefix of the headers it names, however long
// the sender made them, and never its signature.
func TestSurfaceRefusedWebhookLogBounded(t *testing.T) {
	t.Parallel()
	logs := &testio.Buffer{}
	s := stacktest.New(t, stacktest.Options{Logs: logs})
	id := "msg_" + strings.Repeat("i", 12<<10) + "é"
	timestamp := strings.Repeat("7", 8<<10)
	signature := "v1," + strings.Repeat("s", 8<<10)
	res := s.Request(http.MethodPost, "/v1/processor/webhooks", "", `{"id":"evt_1"}`,
		signing.HeaderID, id, signing.HeaderTimestamp, timestamp, signing.HeaderSignature, signature)
	if res.Status != http.StatusBadRequest {
		t.Fatalf("forged webhook: %d %s", res.Status, res.Body)
	}
	var line map[string]any
	var raw string
	testwait.For(t, "the refusal logged", func() bool {
		for _, l := range strings.Split(logs.String(), "\n") {
			if strings.Contains(l, `"msg":"processor webhook refused"`) {
				raw = l
				return json.Unmarshal([]byte(l), &line) == nil
			}
		}
		return false
	})
	gotID, _ := line["webhook_id"].(string)
	gotTimestamp, _ := line["webhook_timestamp"].(string)
	if gotID == "" || len(gotID) > 128 || !strings.HasPrefix(id, gotID) || len(gotTimestamp) > 128 || !strings.HasPrefix(timestamp, gotTimestamp) {
		t.Errorf("logged webhook_id of %d bytes and webhook_timestamp of %d bytes; want prefixes of at most 128 bytes", len(gotID), len(gotTimestamp))
	}
	if len(raw) > 1024 {
		t.Errorf("the refusal's line is %d bytes: %.300s…", len(raw), raw)
	}
	// No line of any process carries more than the bound of what the
	// sender chose.
	for _, long := range []string{strings.Repeat("i", 129), strings.Repeat("7", 129), strings.Repeat("s", 16)} {
		if strings.Contains(logs.String(), long) {
			t.Errorf("the logs carry %.20q… past the bound", long)
		}
	}
}

// TestSurfaceTraceHeadersBounded: a request with a huge baggage, or an
// overlong traceparent, is served as any other. Its baggage goes nowhere:
// not into the job's metadata, not to the merchant's webhook endpoint. A
// valid traceparent is kept (the job carries its trace); an overlong one is
// ignored.
func TestSurfaceTraceHeadersBounded(t *testing.T) {
	t.Parallel()
	const (
		traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
		marker  = "client-chose-this"
	)
	// A merchant endpoint that records the headers of what it receives.
	var mu sync.Mutex
	var received []http.Header
	s, _, _ := startDelivering(t, stacktest.Options{}, func(_ http.ResponseWriter, r *http.Request, _ int64) bool {
		mu.Lock()
		defer mu.Unlock()
		received = append(received, r.Header.Clone())
		return true
	})

	baggage := "k0=" + marker
	for i := 1; len(baggage) < 16<<10; i++ {
		baggage += fmt.Sprintf(",k%d=%s", i, marker)
	}
	for i, tt := range []struct {
		name        string
		traceparent string
		baggage     string
		keepTrace   bool
	}{
		{"SmallBaggage", "00-" + traceID + "-00f067aa0ba902b7-01", "k=" + marker, true},
		{"HugeBaggage", "00-" + traceID + "-00f067aa0ba902b7-01", baggage, true},
		{"LongTraceparent", "01-" + traceID + "-00f067aa0ba902b7-01-" + strings.Repeat("x", 1000), baggage, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			res := created(t, s, acme, fmt.Sprintf("surface-trace-%d", i), `{"amount":1000,"currency":"USD","payment_method":"pm_card_visa"}`,
				"Prefer", "wait=10", "traceparent", tt.traceparent, "baggage", tt.baggage)
			p := decodePayment(t, res.Body)
			var metadata string
			if err := s.DB.Pool.QueryRow(context.Background(),
				`SELECT metadata::text FROM river_job WHERE args->>'id' = $1`, p.ID).Scan(&metadata); err != nil {
				t.Fatal(err)
			}
			if strings.Contains(metadata, "baggage") || strings.Contains(metadata, marker) || strings.Contains(metadata, "xxxx") {
				t.Errorf("the job's metadata carries what the client sent: %.300s", metadata)
			}
			if strings.Contains(metadata, `"traceparent": "00-`+traceID) != tt.keepTrace {
				t.Errorf("the job's metadata %.300s; the client's trace kept: want %v", metadata, tt.keepTrace)
			}
			testwait.For(t, "the payment's webhook", func() bool {
				mu.Lock()
				defer mu.Unlock()
				return len(received) > i
			})
			mu.Lock()
			defer mu.Unlock()
			for name, values := range received[i] {
				if v := strings.Join(values, ","); strings.EqualFold(name, "baggage") || strings.Contains(v, marker) || strings.Contains(v, "xxxx") {
					t.Errorf("the webhook carries %s: %.100q", name, v)
				}
			}
		})
	}
}

// TestSurfaceInternalListenersLoopback: by default the API's and the
// worker's internal listeners (metrics, health, River's dashboard) are on
// loopback, reached from this host only; a deployment names the address
// its Prometheus reaches.
func TestSurfaceInternalListenersLoopback(t *testing.T) {
	t.Parallel()
	var a api.Config
	var w worker.Config
	for _, cfg := range []any{&a, &w} {
		if err := process.Load(cfg); err != nil {
			t.Fatal(err)
		}
	}
	for name, addr := range map[string]string{"API_INTERNAL_ADDR": a.InternalAddr, "METRICS_ADDR": w.MetricsAddr} {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			t.Fatalf("%s %q: %v", name, addr, err)
		}
		if ip, err := netip.ParseAddr(host); err != nil || !ip.IsLoopback() {
			t.Errorf("%s defaults to %q; want a loopback address", name, addr)
		}
	}
	if a.InternalAddr != "127.0.0.1:9090" || w.MetricsAddr != "127.0.0.1:9091" {
		t.Errorf("defaults %q and %q; want 127.0.0.1:9090 and 127.0.0.1:9091", a.InternalAddr, w.MetricsAddr)
	}
}
