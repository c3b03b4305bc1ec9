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

	"github.com/example/payments/internal/signing"
	"github.com/example/payments/internal/webhooks"
	"github.com/example/payments/tools/demoreceiver"
	"github.com/example/payments/tools/stacktest"
	"github.com/example/payments/tools/testio"
)

// Helpers the tests share: the service with its worker, what its answers
// must be, payments that must be created, webhook endpoints, and a real
// receiver of their deliveries.

// startStack starts the service under opts with its worker.
func startStack(t *testing.T, opts stacktest.Options) *stacktest.Stack {
	t.Helper()
	s := stacktest.New(t, opts)
	s.StartWorker()
	return s
}

// wantReplay fails t unless again replays first: the same status and body,
// marked Idempotent-Replayed.
func wantReplay(t *testing.T, again, first stacktest.Response) {
	t.Helper()
	if again.Status != first.Status || !bytes.Equal(again.Body, first.Body) || again.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replay: %d %v %s\nwant the first answer: %d %s", again.Status, again.Header, again.Body, first.Status, first.Body)
	}
}

// wantCharges fails t unless the processor holds n charges for the payment
// paymentID.
func wantCharges(t *testing.T, s *stacktest.Stack, paymentID string, n int) {
	t.Helper()
	if got := s.ChargesAtProcessor(paymentID); got != n {
		t.Fatalf("processor charges of %s = %d, want %d", paymentID, got, n)
	}
}

// wantMetrics fails t unless the scrape metrics holds every one of lines.
func wantMetrics(t *testing.T, metrics string, lines ...string) {
	t.Helper()
	lacking := false
	for _, want := range lines {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %s", want)
			lacking = true
		}
	}
	if lacking {
		t.Logf("metrics:\n%s", metrics)
	}
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

func decode[T any](t *testing.T, res stacktest.Response) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(res.Body, &v); err != nil {
		t.Fatalf("%d %s: %v", res.Status, res.Body, err)
	}
	return v
}

// created makes a payment and fails the test unless it was created.
func created(t *testing.T, s *stacktest.Stack, apiKey, key, body string, headers ...string) stacktest.Response {
	t.Helper()
	res := s.Pay(apiKey, key, body, headers...)
	if res.Status != http.StatusCreated {
		t.Fatalf("payment: %d %s", res.Status, res.Body)
	}
	return res
}

// paidPayment makes a payment that succeeds and returns its id.
func paidPayment(t *testing.T, s *stacktest.Stack, key string) string {
	t.Helper()
	res := created(t, s, acme, key, `{"amount":1000,"currency":"USD","payment_method":"pm_card_visa"}`, "Prefer", "wait=10")
	return decode[struct{ ID string }](t, res).ID
}

func register(t *testing.T, s *stacktest.Stack, apiKey, key, url string, events ...string) (stacktest.Response, webhooks.Endpoint) {
	t.Helper()
	if len(events) == 0 {
		events = []string{"*"}
	}
	b, _ := json.Marshal(map[string]any{"url": url, "enabled_events": events})
	res := s.Request(http.MethodPost, "/v1/webhook_endpoints", apiKey, string(b), "Idempotency-Key", key)
	if res.Status != http.StatusCreated {
		return res, webhooks.Endpoint{}
	}
	return res, decode[webhooks.Endpoint](t, res)
}

// getEndpoint returns acme's webhook endpoint id.
func getEndpoint(t *testing.T, s *stacktest.Stack, id string) webhooks.Endpoint {
	t.Helper()
	return decode[webhooks.Endpoint](t, s.Request(http.MethodGet, "/v1/webhook_endpoints/"+id, acme, ""))
}

// updateEndpoint changes acme's webhook endpoint id with body, under key.
func updateEndpoint(s *stacktest.Stack, id, key, body string) stacktest.Response {
	s.T.Helper()
	return s.Request(http.MethodPost, "/v1/webhook_endpoints/"+id, acme, body, "Idempotency-Key", key)
}

// rotate rotates the secret of acme's webhook endpoint id with body, under
// key.
func rotate(s *stacktest.Stack, id, key, body string) stacktest.Response {
	s.T.Helper()
	return s.Request(http.MethodPost, "/v1/webhook_endpoints/"+id+"/rotate_secret", acme, body, "Idempotency-Key", key)
}

// resend asks for the event eventID to be delivered again to acme's webhook
// endpoint id, under key.
func resend(s *stacktest.Stack, id, eventID, key string) stacktest.Response {
	s.T.Helper()
	return s.Request(http.MethodPost, "/v1/webhook_endpoints/"+id+"/resend", acme, fmt.Sprintf(`{"event":%q}`, eventID), "Idempotency-Key", key)
}

// registeredSecret rotates endpoint id's secret, ending the others, and
// returns the new one: a test's way to learn a secret after registration.
func registeredSecret(t *testing.T, s *stacktest.Stack, id string) string {
	t.Helper()
	res := rotate(s, id, "rotate-"+id, `{"expire_current_secret_in":0}`)
	if res.Status != http.StatusOK {
		t.Fatalf("rotate: %d %s", res.Status, res.Body)
	}
	return decode[webhooks.Endpoint](t, res).Secret
}

func deliveryLog(t *testing.T, s *stacktest.Stack, id string) []attemptJSON {
	t.Helper()
	return decode[struct{ Data []attemptJSON }](t, s.Request(http.MethodGet, "/v1/webhook_endpoints/"+id+"/deliveries?limit=100", acme, "")).Data
}

// frontFunc takes over a receiver's answer to its nth request when it returns
// true.
type frontFunc func(w http.ResponseWriter, r *http.Request, n int64) bool

// answer is a front that answers every request with status.
func answer(status int) frontFunc {
	return func(w http.ResponseWriter, _ *http.Request, _ int64) bool {
		w.WriteHeader(status)
		return true
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
	front     frontFunc
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
	secrets, err := signing.ParseSecrets(secret)
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

// registerWith registers h's URL for events (every event when none) and
// starts h with the endpoint's secret.
func registerWith(t *testing.T, s *stacktest.Stack, h *hookReceiver, events ...string) webhooks.Endpoint {
	t.Helper()
	res, e := register(t, s, acme, "we-"+h.srv.URL, h.srv.URL+"/hooks", events...)
	if res.Status != http.StatusCreated {
		t.Fatalf("register: %d %s", res.Status, res.Body)
	}
	h.start(e.Secret)
	return e
}

// startDelivering starts the service under opts with its worker, and a
// receiver whose answers f takes over when not nil, registered for events
// (every event when none) of acme's. It returns the stack, the receiver and
// the endpoint's id.
func startDelivering(t *testing.T, opts stacktest.Options, f frontFunc, events ...string) (*stacktest.Stack, *hookReceiver, string) {
	t.Helper()
	s := startStack(t, opts)
	h := newReceiver(t, 0)
	h.front = f
	return s, h, registerWith(t, s, h, events...).ID
}

// deliveries counts the deliveries in status.
func deliveries(s *stacktest.Stack, status string) int {
	s.T.Helper()
	return s.Count(`SELECT count(*) FROM webhook_deliveries WHERE status = $1`, status)
}

// waitDeliveries waits until n deliveries are in status.
func waitDeliveries(t *testing.T, s *stacktest.Stack, status string, n int) {
	t.Helper()
	stacktest.WaitFor(t, fmt.Sprintf("%d deliveries %s", n, status), func() bool { return deliveries(s, status) == n })
}

// delivered waits until the one delivery is recorded delivered: the
// receiver processes an event before the worker records the attempt.
func delivered(t *testing.T, s *stacktest.Stack) {
	t.Helper()
	waitDeliveries(t, s, "delivered", 1)
}

// waitDisabled waits until acme's webhook endpoint id is disabled for
// reason.
func waitDisabled(t *testing.T, s *stacktest.Stack, id, reason string) {
	t.Helper()
	stacktest.WaitFor(t, "the endpoint disabled", func() bool {
		got := getEndpoint(t, s, id)
		return got.Status == "disabled" && got.DisabledReason != nil && *got.DisabledReason == reason
	})
}

// waitAllDelivered waits until there are more deliveries than first, every
// one delivered and none in line, and checks that no place is left held.
func waitAllDelivered(t *testing.T, s *stacktest.Stack, first int) {
	t.Helper()
	stacktest.WaitFor(t, "every delivery delivered, none in line", func() bool {
		n := s.Count(`SELECT count(*) FROM webhook_deliveries`)
		return n > first && deliveries(s, "delivered") == n && s.Count(`SELECT count(*) FROM webhook_line`) == 0
	})
	if n := s.Count(`SELECT count(*) FROM webhook_places`); n != 0 {
		t.Fatalf("%d places left held", n)
	}
}

// peak counts the requests in flight at once, and the most there ever were.
type peak struct{ now, most atomic.Int64 }

// enter counts one more request in flight until leave is called.
func (p *peak) enter() (leave func()) {
	n := p.now.Add(1)
	for m := p.most.Load(); n > m && !p.most.CompareAndSwap(m, n); m = p.most.Load() {
	}
	return func() { p.now.Add(-1) }
}
