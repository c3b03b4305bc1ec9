package http_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/example/payments/internal/webhook"
	"github.com/example/payments/tools/demoreceiver"
	"github.com/example/payments/tools/stacktest"
	"github.com/example/payments/tools/testio"
)

// endpointJSON is a webhook endpoint as the API answers it.
type endpointJSON struct {
	ID             string   `json:"id"`
	Object         string   `json:"object"`
	URL            string   `json:"url"`
	EnabledEvents  []string `json:"enabled_events"`
	Status         string   `json:"status"`
	DisabledReason *string  `json:"disabled_reason"`
	Secret         *string  `json:"secret"`
}

func decode[T any](t *testing.T, res stacktest.Response) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(res.Body, &v); err != nil {
		t.Fatalf("%d %s: %v", res.Status, res.Body, err)
	}
	return v
}

func register(t *testing.T, s *stacktest.Stack, apiKey, key, url string, events ...string) (stacktest.Response, endpointJSON) {
	t.Helper()
	if len(events) == 0 {
		events = []string{"*"}
	}
	b, _ := json.Marshal(map[string]any{"url": url, "enabled_events": events})
	res := s.Request(http.MethodPost, "/v1/webhook_endpoints", apiKey, string(b), "Idempotency-Key", key)
	if res.Status != http.StatusCreated {
		return res, endpointJSON{}
	}
	return res, decode[endpointJSON](t, res)
}

// TestWebhookEndpoints covers registering, reading, changing, rotating and
// removing endpoints, tenant isolation, and that a secret is shown once.
func TestWebhookEndpoints(t *testing.T) {
	t.Parallel()
	s := stacktest.New(t, stacktest.Options{})
	res, e := register(t, s, acme, "we-1", "https://127.0.0.1:8443/hooks", "payment.succeeded")
	if res.Status != http.StatusCreated || e.Secret == nil || !strings.HasPrefix(*e.Secret, "whsec_") ||
		e.Status != "enabled" || !strings.HasPrefix(e.ID, "we_") || res.Header.Get("Location") != "/v1/webhook_endpoints/"+e.ID {
		t.Fatalf("create: %d %s", res.Status, res.Body)
	}
	if _, err := webhook.ParseSecrets(*e.Secret); err != nil {
		t.Fatalf("secret %v", err)
	}
	// The secret is stored encrypted, and nowhere in the clear.
	secret := strings.TrimPrefix(*e.Secret, "whsec_")
	if n := s.Count(`SELECT count(*) FROM idempotency_keys WHERE position($1 in convert_from(response_body, 'UTF8')) > 0`, secret); n != 0 {
		t.Fatal("the secret is stored in a key's response")
	}
	if n := s.Count(`SELECT count(*) FROM webhook_endpoint_secrets WHERE position(convert_to($1, 'UTF8') in ciphertext) > 0`, *e.Secret); n != 0 {
		t.Fatal("the secret is stored in the clear")
	}

	b, _ := json.Marshal(map[string]any{"url": "https://127.0.0.1:8443/hooks", "enabled_events": []string{"payment.succeeded"}})
	replay := s.Request(http.MethodPost, "/v1/webhook_endpoints", acme, string(b), "Idempotency-Key", "we-1")
	if replay.Status != http.StatusCreated || replay.Header.Get("Idempotent-Replayed") != "true" || decode[endpointJSON](t, replay).Secret != nil ||
		decode[endpointJSON](t, replay).ID != e.ID {
		t.Fatalf("replay: %d %s", replay.Status, replay.Body)
	}
	if got := decode[endpointJSON](t, s.Request(http.MethodGet, "/v1/webhook_endpoints/"+e.ID, acme, "")); got.ID != e.ID || got.Secret != nil {
		t.Fatalf("get: %+v", got)
	}
	if res := s.Request(http.MethodGet, "/v1/webhook_endpoints/"+e.ID, globex, ""); res.Status != http.StatusNotFound {
		t.Fatalf("another tenant's endpoint: %d", res.Status)
	}
	if res := s.Request(http.MethodPost, "/v1/webhook_endpoints/"+e.ID, globex, `{"status":"disabled"}`, "Idempotency-Key", "g-1"); res.Status != http.StatusNotFound {
		t.Fatalf("another tenant's update: %d", res.Status)
	}
	list := decode[struct{ Data []endpointJSON }](t, s.Request(http.MethodGet, "/v1/webhook_endpoints", acme, ""))
	if len(list.Data) != 1 || list.Data[0].ID != e.ID {
		t.Fatalf("list: %+v", list)
	}
	if got := decode[struct{ Data []endpointJSON }](t, s.Request(http.MethodGet, "/v1/webhook_endpoints", globex, "")); len(got.Data) != 0 {
		t.Fatalf("globex sees %+v", got)
	}

	upd := s.Request(http.MethodPost, "/v1/webhook_endpoints/"+e.ID, acme, `{"status":"disabled","enabled_events":["*"]}`, "Idempotency-Key", "we-2")
	if got := decode[endpointJSON](t, upd); upd.Status != http.StatusOK || got.Status != "disabled" || *got.DisabledReason != "by_tenant" ||
		got.EnabledEvents[0] != "*" {
		t.Fatalf("update: %d %s", upd.Status, upd.Body)
	}

	rot := s.Request(http.MethodPost, "/v1/webhook_endpoints/"+e.ID+"/rotate_secret", acme, "", "Idempotency-Key", "we-3")
	rotated := decode[endpointJSON](t, rot)
	if rot.Status != http.StatusOK || rotated.Secret == nil || *rotated.Secret == *e.Secret {
		t.Fatalf("rotate: %d %s", rot.Status, rot.Body)
	}
	if again := s.Request(http.MethodPost, "/v1/webhook_endpoints/"+e.ID+"/rotate_secret", acme, "", "Idempotency-Key", "we-3"); decode[endpointJSON](t, again).Secret != nil {
		t.Fatalf("a rotation's replay shows the secret: %s", again.Body)
	}
	if n := s.Count(`SELECT count(*) FROM webhook_endpoint_secrets WHERE endpoint_id = $1 AND expires_at > now() + interval '23 hours'`, e.ID); n != 1 {
		t.Fatalf("%d old secrets still signing for the grace period", n)
	}

	for _, c := range []struct{ name, body string }{
		{"no events", `{"url":"https://127.0.0.1/x"}`},
		{"unknown event", `{"url":"https://127.0.0.1/x","enabled_events":["payment.refunded"]}`},
		{"no url", `{"enabled_events":["*"]}`},
		{"unknown field", `{"url":"https://127.0.0.1/x","enabled_events":["*"],"secret":"whsec_x"}`},
	} {
		if res := s.Request(http.MethodPost, "/v1/webhook_endpoints", acme, c.body, "Idempotency-Key", "bad-"+c.name); res.Status != http.StatusBadRequest {
			t.Errorf("%s: %d %s", c.name, res.Status, res.Body)
		}
	}

	if res := s.Request(http.MethodDelete, "/v1/webhook_endpoints/"+e.ID, globex, ""); res.Status != http.StatusNotFound {
		t.Fatalf("another tenant's delete: %d", res.Status)
	}
	if res := s.Request(http.MethodDelete, "/v1/webhook_endpoints/"+e.ID, acme, ""); res.Status != http.StatusOK || !strings.Contains(string(res.Body), `"deleted":true`) {
		t.Fatalf("delete: %d %s", res.Status, res.Body)
	}
	if res := s.Request(http.MethodDelete, "/v1/webhook_endpoints/"+e.ID, acme, ""); res.Status != http.StatusNotFound {
		t.Fatalf("second delete: %d", res.Status)
	}
}

// TestWebhookEndpointsRefuseTheInside: without private networks allowed,
// registration refuses every URL that reaches the inside, and other schemes.
func TestWebhookEndpointsRefuseTheInside(t *testing.T) {
	t.Parallel()
	s := stacktest.New(t, stacktest.Options{PublicEndpointsOnly: true})
	for i, url := range []string{
		"http://169.254.169.254/latest/meta-data/", "https://169.254.169.254/", "http://127.0.0.1/", "https://127.0.0.1:8443/",
		"http://10.0.0.1/", "https://10.0.0.1/", "https://192.168.1.10/", "https://[::1]/", "https://localhost/hooks",
		"ftp://example.com/", "file:///etc/passwd", "http://example.com/hooks", "https://user:pass@127.0.0.1/",
	} {
		res, _ := register(t, s, acme, fmt.Sprintf("inside-%d", i), url)
		if res.Status != http.StatusBadRequest || !strings.Contains(string(res.Body), `"field":"url"`) {
			t.Errorf("%s: %d %s", url, res.Status, res.Body)
		}
	}
	if n := s.Count(`SELECT count(*) FROM webhook_endpoints`) + s.Count(`SELECT count(*) FROM idempotency_keys`); n != 0 {
		t.Fatalf("a refused registration left %d rows", n)
	}
}

// hookReceiver is a real receiver (package receiver) on loopback, started
// once the endpoint it serves is registered and its secret known; a test
// can take its answers over with front.
type hookReceiver struct {
	t         *testing.T
	failFirst int
	recv      atomic.Pointer[demoreceiver.Receiver]
	srv       *httptest.Server
	out       *testio.Buffer
	hits      atomic.Int64
	ids       sync.Map // webhook-id → deliveries
	front     func(w http.ResponseWriter, r *http.Request, n int64) bool
}

// events lists the lines the receiver printed for new events.
func (h *hookReceiver) events() []string {
	var lines []string
	for _, l := range strings.Split(h.out.String(), "\n") {
		if strings.HasPrefix(l, "event ") {
			lines = append(lines, l)
		}
	}
	return lines
}

func newReceiver(t *testing.T, failFirst int) *hookReceiver {
	t.Helper()
	h := &hookReceiver{t: t, failFirst: failFirst, out: &testio.Buffer{}}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := h.hits.Add(1)
		v, _ := h.ids.LoadOrStore(r.Header.Get("webhook-id"), new(atomic.Int64))
		v.(*atomic.Int64).Add(1)
		if h.front != nil && h.front(w, r, n) {
			return
		}
		if recv := h.recv.Load(); recv != nil {
			recv.ServeHTTP(w, r)
			return
		}
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	t.Cleanup(h.srv.Close)
	return h
}

// start makes the receiver verify with secret.
func (h *hookReceiver) start(secret string) {
	h.t.Helper()
	secrets, err := webhook.ParseSecrets(secret)
	if err != nil {
		h.t.Fatal(err)
	}
	recv, err := demoreceiver.New(demoreceiver.Config{LogFormat: "json", Path: "/hooks", Secret: secrets,
		DedupeFile: h.t.TempDir() + "/seen.log", FailFirst: h.failFirst}, slog.New(slog.NewTextHandler(io.Discard, nil)), h.out)
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { recv.Close() })
	h.recv.Store(recv)
}

// registerWith registers h's URL for every event and starts h with the
// endpoint's secret.
func registerWith(t *testing.T, s *stacktest.Stack, h *hookReceiver) endpointJSON {
	t.Helper()
	res, e := register(t, s, acme, "we-"+h.srv.URL, h.srv.URL+"/hooks")
	if res.Status != http.StatusCreated {
		t.Fatalf("register: %d %s", res.Status, res.Body)
	}
	h.start(*e.Secret)
	return e
}

// attemptJSON is a line of the delivery log.
type attemptJSON struct {
	Event       string     `json:"event"`
	Attempt     int        `json:"attempt"`
	StatusCode  *int       `json:"status_code"`
	Error       *string    `json:"error"`
	NextRetryAt *time.Time `json:"next_retry_at"`
	CreatedAt   time.Time  `json:"created_at"`
}

func deliveryLog(t *testing.T, s *stacktest.Stack, id string) []attemptJSON {
	t.Helper()
	return decode[struct{ Data []attemptJSON }](t, s.Request(http.MethodGet, "/v1/webhook_endpoints/"+id+"/deliveries?limit=100", acme, "")).Data
}

// paidPayment makes a payment that succeeds and returns its id.
func paidPayment(t *testing.T, s *stacktest.Stack, key string) string {
	t.Helper()
	res := s.Pay(acme, key, `{"amount":1000,"currency":"USD","payment_method":"pm_card_visa"}`, "Prefer", "wait=10")
	if res.Status != http.StatusCreated {
		t.Fatalf("payment: %d %s", res.Status, res.Body)
	}
	return decode[struct{ ID string }](t, res).ID
}

// delivered waits until the one delivery is recorded delivered: the
// receiver processes an event before the worker records the attempt.
func delivered(t *testing.T, s *stacktest.Stack) {
	t.Helper()
	stacktest.WaitFor(t, "the delivery recorded", func() bool {
		return s.Count(`SELECT count(*) FROM webhook_deliveries WHERE status = 'delivered'`) == 1
	})
}

// TestWebhookDelivery delivers events to real receivers: signed and
// verified, the body the event as GET /v1/events/{id} answers it; retried
// with the same webhook-id; 410 disables; 429's Retry-After is waited; a
// spent schedule fails the delivery, in the log and the metrics; a resend
// arrives again and the receiver's dedupe makes it once.
func TestWebhookDelivery(t *testing.T) {
	t.Parallel()

	t.Run("SignedVerifiedOnce", func(t *testing.T) {
		t.Parallel()
		s := stacktest.New(t, stacktest.Options{})
		s.StartWorker()
		h2 := newReceiver(t, 0)
		_, e := register(t, s, acme, "we", h2.srv.URL+"/hooks", "payment.succeeded")
		h2.start(*e.Secret)
		id := paidPayment(t, s, "pay-1")
		stacktest.WaitFor(t, "the event at the receiver", func() bool { return len(h2.events()) == 1 })
		if got := h2.events()[0]; !strings.Contains(got, "payment.succeeded "+id+" succeeded") {
			t.Fatalf("receiver printed %q", got)
		}
		evID := strings.Fields(h2.events()[0])[1]
		var body []byte
		h2.front = func(w http.ResponseWriter, r *http.Request, _ int64) bool {
			body, _ = io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			return false
		}
		// A declined payment is not wanted by this endpoint.
		s.Pay(acme, "pay-2", `{"amount":1000,"currency":"USD","payment_method":"pm_card_declined"}`, "Prefer", "wait=10")
		// A resend arrives again; the receiver's dedupe makes it once. It is
		// refused while the first delivery is in flight, which it is until
		// the worker records the receiver's answer.
		delivered(t, s)
		if res := s.Request(http.MethodPost, "/v1/webhook_endpoints/"+e.ID+"/resend", acme, fmt.Sprintf(`{"event":%q}`, evID), "Idempotency-Key", "rs"); res.Status != http.StatusAccepted {
			t.Fatalf("resend: %d %s", res.Status, res.Body)
		}
		stacktest.WaitFor(t, "the resend", func() bool { return len(deliveryLog(t, s, e.ID)) == 2 })
		if got := s.Request(http.MethodGet, "/v1/events/"+evID, acme, "").Body; !bytes.Equal(body, got) {
			t.Fatalf("delivered body\n%s\nis not GET /v1/events/{id}\n%s", body, got)
		}
		if len(h2.events()) != 1 {
			t.Fatalf("receiver printed %v", h2.events())
		}
		for _, a := range deliveryLog(t, s, e.ID) {
			if a.Event != evID || a.StatusCode == nil || *a.StatusCode != 200 {
				t.Fatalf("log %+v", a)
			}
		}
		if s.Count(`SELECT count(*) FROM webhook_deliveries`) != 1 {
			t.Fatal("a delivery for an event the endpoint does not want")
		}
	})

	t.Run("RetriedWithTheSameID", func(t *testing.T) {
		t.Parallel()
		s := stacktest.New(t, stacktest.Options{})
		s.StartWorker()
		h := newReceiver(t, 2)
		e := registerWith(t, s, h).ID
		paidPayment(t, s, "pay-1")
		delivered(t, s)
		if len(h.events()) != 1 {
			t.Fatalf("the receiver printed %v", h.events())
		}
		log := deliveryLog(t, s, e)
		if len(log) != 3 || *log[2].StatusCode != 500 || *log[1].StatusCode != 500 || *log[0].StatusCode != 200 ||
			log[2].NextRetryAt == nil || log[0].NextRetryAt != nil {
			t.Fatalf("log %+v", log)
		}
		n := 0
		h.ids.Range(func(_, v any) bool { n++; return v.(*atomic.Int64).Load() == 3 })
		if n != 1 {
			t.Fatalf("deliveries under %d webhook-ids", n)
		}
	})

	t.Run("GoneDisables", func(t *testing.T) {
		t.Parallel()
		s := stacktest.New(t, stacktest.Options{})
		s.StartWorker()
		h := newReceiver(t, 0)
		h.front = func(w http.ResponseWriter, _ *http.Request, _ int64) bool {
			w.WriteHeader(http.StatusGone)
			return true
		}
		e := registerWith(t, s, h).ID
		paidPayment(t, s, "pay-1")
		stacktest.WaitFor(t, "the endpoint disabled", func() bool {
			got := decode[endpointJSON](t, s.Request(http.MethodGet, "/v1/webhook_endpoints/"+e, acme, ""))
			return got.Status == "disabled" && got.DisabledReason != nil && *got.DisabledReason == "gone"
		})
		paidPayment(t, s, "pay-2")
		if h.hits.Load() != 1 || s.Count(`SELECT count(*) FROM webhook_deliveries WHERE status = 'failed'`) != 1 {
			t.Fatalf("%d hits after 410", h.hits.Load())
		}
	})

	t.Run("RetryAfterWaited", func(t *testing.T) {
		t.Parallel()
		s := stacktest.New(t, stacktest.Options{})
		s.StartWorker()
		h := newReceiver(t, 0)
		h.front = func(w http.ResponseWriter, _ *http.Request, n int64) bool {
			if n == 1 {
				w.Header().Set("Retry-After", "2")
				w.WriteHeader(http.StatusTooManyRequests)
				return true
			}
			return false
		}
		e := registerWith(t, s, h).ID
		paidPayment(t, s, "pay-1")
		// While it waits out Retry-After, the delivery is the oldest undelivered.
		stacktest.WaitFor(t, "the delivery waiting", func() bool {
			return value(t, s.WorkerMetrics(), "payments_webhook_oldest_undelivered_seconds") > 0
		})
		delivered(t, s)
		log := deliveryLog(t, s, e)
		if len(log) != 2 || *log[1].StatusCode != 429 || log[0].CreatedAt.Sub(log[1].CreatedAt) < 2*time.Second ||
			log[1].NextRetryAt.Sub(log[1].CreatedAt) < 2*time.Second {
			t.Fatalf("the schedule's 100 ms was used, not Retry-After: %+v", log)
		}
	})

	t.Run("ScheduleSpentFails", func(t *testing.T) {
		t.Parallel()
		s := stacktest.New(t, stacktest.Options{})
		s.StartWorker()
		h := newReceiver(t, 0)
		h.front = func(w http.ResponseWriter, _ *http.Request, _ int64) bool {
			w.WriteHeader(http.StatusBadGateway)
			return true
		}
		e := registerWith(t, s, h).ID
		paidPayment(t, s, "pay-1")
		stacktest.WaitFor(t, "the delivery failed", func() bool {
			return s.Count(`SELECT count(*) FROM webhook_deliveries WHERE status = 'failed'`) == 1
		})
		if log := deliveryLog(t, s, e); len(log) != 4 || h.hits.Load() != 4 {
			t.Fatalf("%d attempts logged, %d made, want the first and 3 retries", len(log), h.hits.Load())
		}
		m := s.WorkerMetrics()
		for _, want := range []string{`payments_webhook_deliveries_total{result="failed"} 1`, `payments_webhook_deliveries_total{result="retrying"} 3`,
			`payments_webhook_delivery_attempts_total 4`, `payments_webhook_oldest_undelivered_seconds 0`,
			`payments_webhook_attempt_duration_seconds_count{result="failed"} 1`,
			`payments_webhook_attempt_duration_seconds_count{result="retrying"} 3`,
			`payments_webhook_attempt_duration_seconds_count{result="delivered"} 0`} {
			if !strings.Contains(m, want) {
				t.Errorf("worker metrics lack %s", want)
			}
		}
	})

	t.Run("RotationSignsWithBoth", func(t *testing.T) {
		t.Parallel()
		s := stacktest.New(t, stacktest.Options{})
		s.StartWorker()
		holdsOld := newReceiver(t, 0)
		e := registerWith(t, s, holdsOld).ID
		rot := decode[endpointJSON](t, s.Request(http.MethodPost, "/v1/webhook_endpoints/"+e+"/rotate_secret", acme, "", "Idempotency-Key", "rot"))
		paidPayment(t, s, "pay-1")
		stacktest.WaitFor(t, "the event verified with the old secret", func() bool { return len(holdsOld.events()) == 1 })
		holdsNew := newReceiver(t, 0)
		holdsNew.start(*rot.Secret)
		s.Request(http.MethodPost, "/v1/webhook_endpoints/"+e, acme, fmt.Sprintf(`{"url":%q}`, holdsNew.srv.URL+"/hooks"), "Idempotency-Key", "to-new")
		paidPayment(t, s, "pay-2")
		stacktest.WaitFor(t, "the event verified with the new secret", func() bool { return len(holdsNew.events()) == 1 })
	})
}
