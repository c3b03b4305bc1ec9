package stripe_test

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.uber.org/goleak"

	"github.com/example/payments/internal/catalog"
	"github.com/example/payments/internal/gateway/stripe"
	"github.com/example/payments/internal/operation"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// The adapter makes every kind's calls.
var _ catalog.Processor = (*stripe.Client)(nil)

// The downstream keys and ids of the recorded answers.
const (
	chargeKey = "charge_pay_1"
	refundKey = "refund_re_1"
	paymentID = "pay_1"
)

// reply is one recorded Stripe answer: status, body and headers, or a
// server that hangs until the client gives up, or one that drops the
// connection without an answer.
type reply struct {
	status int
	body   string
	header map[string]string
	hang   bool
	drop   bool
	// serve, when set, answers instead.
	serve http.HandlerFunc
}

// request is a request the server received.
type request struct {
	header http.Header
	form   url.Values
}

// server answers each request by "METHOD /path" from its routes, each
// route's replies in turn and its last one from then on, and records the
// requests it gets.
type server struct {
	t      *testing.T
	url    string
	mu     sync.Mutex
	routes map[string][]reply
	got    map[string][]request
}

// serve starts a server of recorded answers for the test.
func serve(t *testing.T, routes map[string][]reply) *server {
	t.Helper()
	s := &server{t: t, routes: routes, got: map[string][]request{}}
	srv := httptest.NewServer(http.HandlerFunc(s.handle))
	t.Cleanup(srv.Close)
	s.url = srv.URL
	return s
}

// handle answers one request.
func (s *server) handle(w http.ResponseWriter, r *http.Request) {
	route := r.Method + " " + r.URL.Path
	if err := r.ParseForm(); err != nil {
		s.t.Errorf("%s: %v", route, err)
	}
	s.mu.Lock()
	s.got[route] = append(s.got[route], request{header: r.Header.Clone(), form: r.Form})
	replies, ok := s.routes[route]
	var rep reply
	if ok {
		rep = replies[0]
		if len(replies) > 1 {
			s.routes[route] = replies[1:]
		}
	}
	s.mu.Unlock()
	switch {
	case !ok:
		s.t.Errorf("unexpected request %s", route)
		rep = reply{status: http.StatusNotFound, body: errorBody(http.StatusNotFound, "invalid_request_error", "resource_missing", nil)}
	case rep.serve != nil:
		rep.serve(w, r)
		return
	case rep.hang:
		<-r.Context().Done()
		return
	case rep.drop:
		conn, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			s.t.Errorf("hijack: %v", err)
			return
		}
		_ = conn.Close()
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Request-Id", "req_test")
	for k, v := range rep.header {
		w.Header().Set(k, v)
	}
	w.WriteHeader(rep.status)
	_, _ = w.Write([]byte(rep.body))
}

// requests are the requests the server got on route.
func (s *server) requests(route string) []request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.got[route]
}

// client is a client of the server's, its requests bounded by timeout, its
// ledger unpaced (TestLedgerPaced paces it).
func (s *server) client(t *testing.T, timeout time.Duration, pageSize int) *stripe.Client {
	t.Helper()
	c, err := stripe.New(stripe.Config{APIKey: "sk_test_recorded", APIBase: s.url, Timeout: timeout, PageSize: pageSize})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// object is base with over's members set, as JSON.
func object(base, over map[string]any) string {
	m := maps.Clone(base)
	maps.Copy(m, over)
	return marshal(m)
}

// marshal is v as JSON; every answer a test writes marshals.
func marshal(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// paymentIntent is a PaymentIntent as Stripe answers it, made under key
// for pay_1, in status, with over's members set.
func paymentIntent(id, status, key string, over map[string]any) string {
	return object(map[string]any{
		"id": id, "object": "payment_intent", "amount": 1500, "currency": "usd", "status": status,
		"created": 1_700_000_000, "livemode": false, "client_secret": id + "_secret_test", "confirmation_method": "automatic",
		"capture_method": "automatic", "payment_method": "pm_card_visa", "payment_method_types": []string{"card"},
		"last_payment_error": nil, "next_action": nil, "latest_charge": nil,
		"metadata": map[string]string{"downstream_key": key, "payment_id": paymentID},
	}, over)
}

// lastPaymentError is the error member of a declined attempt.
func lastPaymentError(code, declineCode, message string) map[string]any {
	return map[string]any{"type": "card_error", "code": code, "decline_code": declineCode, "message": message}
}

// refund is a Refund as Stripe answers it, made under key, in status.
func refund(id, status, key string, over map[string]any) string {
	return object(map[string]any{
		"id": id, "object": "refund", "amount": 500, "currency": "usd", "status": status, "created": 1_700_000_100,
		"payment_intent": "pi_1", "charge": "ch_1", "failure_reason": nil, "reason": nil,
		"metadata": map[string]string{"downstream_key": key},
	}, over)
}

// errorBody is Stripe's error envelope.
func errorBody(status int, typ, code string, over map[string]any) string {
	e := map[string]any{"type": typ, "message": "The test's " + typ + "."}
	if code != "" {
		e["code"] = code
		e["doc_url"] = "https://stripe.com/docs/error-codes/" + code
	}
	maps.Copy(e, over)
	return marshal(map[string]any{"error": e})
}

// list is a list of Stripe's, of the JSON objects.
func list(path string, hasMore bool, objects ...string) string {
	return marshal(map[string]any{"object": "list", "url": path, "has_more": hasMore, "data": data(objects)})
}

// searchResult is a page of a search of Stripe's, of the JSON objects.
func searchResult(nextPage string, objects ...string) string {
	m := map[string]any{"object": "search_result", "url": "/v1/payment_intents/search", "has_more": nextPage != "",
		"next_page": nil, "data": data(objects)}
	if nextPage != "" {
		m["next_page"] = nextPage
	}
	return marshal(m)
}

// data is the data member of a list or a search page: the JSON objects.
func data(objects []string) []json.RawMessage {
	d := make([]json.RawMessage, len(objects))
	for i, o := range objects {
		d[i] = json.RawMessage(o)
	}
	return d
}

// ok is a 200 answer of body.
func ok(body string) reply { return reply{status: http.StatusOK, body: body} }

// replay is r as Stripe replays it from its idempotency cache, for a
// request made again under the key.
func (r reply) replay() reply {
	r.header = map[string]string{"Idempotent-Replayed": "true"}
	return r
}

// failure is an error answer.
func failure(status int, typ, code string, over map[string]any) reply {
	return reply{status: status, body: errorBody(status, typ, code, over)}
}

// verdict is how a caller must treat an answer.
type verdict int

const (
	definite verdict = iota // an Outcome, no error
	unknown                 // an error wrapping operation.ErrProcessorUnknown
	notSent                 // an error wrapping operation.ErrNotSent (and ErrProcessorUnknown)
)

// check fails unless got and err are what want and outcome say.
func check(t *testing.T, want verdict, outcome, got operation.Outcome, err error) {
	t.Helper()
	switch want {
	case definite:
		if err != nil || got != outcome {
			t.Fatalf("got %+v, %v; want %+v, nil", got, err, outcome)
		}
	case notSent:
		if !errors.Is(err, operation.ErrNotSent) {
			t.Fatalf("got %+v, %v; want ErrNotSent", got, err)
		}
		fallthrough
	case unknown:
		if !errors.Is(err, operation.ErrProcessorUnknown) || errors.Is(err, operation.ErrKeyClosed) {
			t.Fatalf("got %+v, %v; want ErrProcessorUnknown", got, err)
		}
		if got != (operation.Outcome{}) {
			t.Errorf("an error with an outcome: %+v", got)
		}
	}
}

// wantForm fails unless form has each of want's fields, as want says.
func wantForm(t *testing.T, form url.Values, want map[string]string) {
	t.Helper()
	for k, v := range want {
		if got := form.Get(k); got != v {
			t.Errorf("%s = %q, want %q (form %v)", k, got, v, form)
		}
	}
}

func TestNew(t *testing.T) {
	t.Parallel()
	for _, cfg := range []stripe.Config{
		{},
		{APIKey: "sk_test_1", PageSize: 101},
		{APIKey: "sk_test_1", PageSize: -1},
		{APIKey: "sk_test_1", Timeout: -time.Second},
		{APIKey: "sk_test_1", APIBase: "localhost:12111"},
	} {
		if _, err := stripe.New(cfg); err == nil {
			t.Errorf("New(%+v) accepted", cfg)
		}
	}
	if _, err := stripe.New(stripe.Config{APIKey: "sk_test_1"}); err != nil {
		t.Errorf("New with Stripe's API: %v", err)
	}
}

// TestTraced: a traced client makes the same calls, each a client span
// whose context goes to Stripe as traceparent.
func TestTraced(t *testing.T) {
	t.Parallel()
	tp := sdktrace.NewTracerProvider()
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	s := serve(t, map[string][]reply{
		"POST /v1/payment_intents": {ok(paymentIntent("pi_1", "succeeded", chargeKey, nil))},
	})
	c := s.client(t, 5*time.Second, 0).Traced(tp)
	out, err := c.Charge(context.Background(), chargeRequest())
	check(t, definite, operation.Outcome{ID: "pi_1", Succeeded: true}, out, err)
	got := s.requests("POST /v1/payment_intents")
	if len(got) != 1 || got[0].header.Get("Traceparent") == "" || got[0].header.Get("Idempotency-Key") != chargeKey {
		t.Errorf("requests = %+v", got)
	}
}

// rawJSON is JSON text to embed as it is.
func rawJSON(s string) json.RawMessage { return json.RawMessage(s) }
