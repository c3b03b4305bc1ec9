package client

import (
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// step answers one request of a scripted fake API.
type step func(w http.ResponseWriter, r *http.Request)

// recorded is one request the fake API got.
type recorded struct {
	Method string
	Path   string
	Query  string
	Header http.Header
	Body   string
}

// fakeAPI answers the n-th request with the n-th step, the last step once the
// script runs out, and records every request.
type fakeAPI struct {
	srv   *httptest.Server
	steps []step

	mu   sync.Mutex
	reqs []recorded
}

func newFakeAPI(t *testing.T, steps ...step) *fakeAPI {
	t.Helper()
	if len(steps) == 0 {
		t.Fatal("newFakeAPI: no steps")
	}
	f := &fakeAPI{steps: steps}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeAPI) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	f.reqs = append(f.reqs, recorded{
		Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, Header: r.Header.Clone(), Body: string(body),
	})
	s := f.steps[min(len(f.reqs), len(f.steps))-1]
	f.mu.Unlock()
	s(w, r)
}

// requests returns a copy of the requests recorded so far.
func (f *fakeAPI) requests() []recorded {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]recorded(nil), f.reqs...)
}

// sleeps records the waits a Client asked for instead of waiting.
type sleeps struct {
	mu sync.Mutex
	d  []time.Duration
}

func (s *sleeps) sleep(ctx context.Context, d time.Duration) error {
	s.mu.Lock()
	s.d = append(s.d, d)
	s.mu.Unlock()
	return ctx.Err()
}

func (s *sleeps) all() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Duration(nil), s.d...)
}

// newTestClient returns a Client of f that records its waits, without
// jitter: backoff waits its whole ceiling.
func newTestClient(t *testing.T, f *fakeAPI, opts ...Option) (*Client, *sleeps) {
	t.Helper()
	s := &sleeps{}
	opts = append([]Option{WithHTTPClient(f.srv.Client()), WithSleep(s.sleep)}, opts...)
	c := New(f.srv.URL+"/", "sk_test_acme", opts...)
	c.jitter = func(ceiling time.Duration) time.Duration { return ceiling }
	return c, s
}

// checkAttempts checks that the call that answered resp made n attempts,
// the requests reqs: each the same POST to path, with the same body and the
// same Idempotency-Key (key when given, else a generated one), reported in
// resp.
func checkAttempts(t *testing.T, reqs []recorded, resp *Response, path, key string, n int) {
	t.Helper()
	if len(reqs) != n || resp.Attempts != n {
		t.Fatalf("requests = %d, attempts = %d, want %d", len(reqs), resp.Attempts, n)
	}
	respKey := resp.IdempotencyKey
	if key != "" && respKey != key {
		t.Errorf("resp.IdempotencyKey = %q, want %q", respKey, key)
	}
	if key == "" {
		if _, err := hex.DecodeString(respKey); err != nil || len(respKey) != 32 {
			t.Errorf("generated key = %q, want 32 hex characters", respKey)
		}
	}
	for i, r := range reqs {
		if got := r.Header.Values("Idempotency-Key"); len(got) != 1 || got[0] != respKey {
			t.Errorf("request %d: Idempotency-Key = %q, want [%q]", i+1, got, respKey)
		}
		if r.Method != http.MethodPost || r.Path != path || r.Body != reqs[0].Body {
			t.Errorf("request %d = %s %s %s, want the first POST %s again", i+1, r.Method, r.Path, r.Body, path)
		}
	}
}

// respond answers with status, body and header name/value pairs. Bodies of
// error statuses are problems, as the API sends them.
func respond(status int, body string, header ...string) step {
	return func(w http.ResponseWriter, r *http.Request) {
		ct := "application/json"
		if status >= 400 {
			ct = "application/problem+json"
		}
		w.Header().Set("Content-Type", ct)
		for i := 0; i+1 < len(header); i += 2 {
			w.Header().Set(header[i], header[i+1])
		}
		if v := r.Header.Get("Idempotency-Key"); v != "" {
			w.Header().Set("Idempotency-Key", v)
		}
		w.WriteHeader(status)
		io.WriteString(w, body) //nolint:errcheck
	}
}

// hangUp drops the connection without an answer, as a crashed server or a
// broken network does.
func hangUp(w http.ResponseWriter, r *http.Request) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(fmt.Sprintf("hijack: %v", err))
	}
	conn.Close()
}

// stall answers nothing until the client gives up on the request.
func stall(w http.ResponseWriter, r *http.Request) {
	<-r.Context().Done()
}

// paymentJSON is a payment as the server encodes it.
func paymentJSON(status string) string {
	failureCode, failureMessage, chargeID := "null", "null", `"ch_123"`
	switch status {
	case StatusFailed:
		failureCode, failureMessage = `"card_declined"`, `"Your card was declined."`
	case StatusProcessing:
		chargeID = "null"
	}
	return fmt.Sprintf(`{"id":"pay_123","object":"payment","amount":2000,"currency":"usd",`+
		`"payment_method":"pm_card_visa","description":"Order 1842","metadata":{"order":"1842"},`+
		`"status":%q,"failure_code":%s,"failure_message":%s,"processor_charge_id":%s,"amount_refunded":0,`+
		`"created_at":"2026-01-02T03:04:05Z","updated_at":"2026-01-02T03:04:06.5Z"}`+"\n",
		status, failureCode, failureMessage, chargeID)
}

// problemJSON is a problem as the server encodes it, with extra members such
// as `"payment":{…}` appended.
func problemJSON(status int, code, detail string, extra ...string) string {
	b := fmt.Sprintf(`{"type":"https://payments.example/problems/%s","title":%q,"status":%d,"detail":%q,"code":%q`,
		code, http.StatusText(status), status, detail, code)
	for _, e := range extra {
		b += "," + e
	}
	return b + "}\n"
}

func TestNew(t *testing.T) {
	t.Parallel()

	t.Run("Defaults", func(t *testing.T) {
		t.Parallel()
		c := New("http://localhost:8080/", "sk")
		if c.baseURL != "http://localhost:8080" {
			t.Errorf("baseURL = %q, want the trailing slash trimmed", c.baseURL)
		}
		if c.maxAttempts != 5 || c.backoffBase != 200*time.Millisecond || c.backoffMax != 5*time.Second {
			t.Errorf("maxAttempts, backoff = %d, %v..%v; want 5, 200ms..5s", c.maxAttempts, c.backoffBase, c.backoffMax)
		}
		if c.wait >= 0 {
			t.Errorf("wait = %d, want no Prefer by default", c.wait)
		}
		if c.httpClient == nil || c.httpClient == http.DefaultClient || c.httpClient.Timeout == 0 {
			t.Errorf("httpClient = %+v, want an own client with a timeout", c.httpClient)
		}
	})

	t.Run("Options", func(t *testing.T) {
		t.Parallel()
		hc := &http.Client{}
		c := New("http://x", "sk", WithHTTPClient(hc), WithMaxAttempts(0), WithBackoff(time.Second, time.Minute), WithWait(7))
		if c.httpClient != hc {
			t.Error("WithHTTPClient not applied")
		}
		if c.maxAttempts != 1 {
			t.Errorf("maxAttempts = %d, want at least 1", c.maxAttempts)
		}
		if c.backoffBase != time.Second || c.backoffMax != time.Minute {
			t.Errorf("backoff = %v..%v, want 1s..1m", c.backoffBase, c.backoffMax)
		}
		if c.wait != 7 {
			t.Errorf("wait = %d, want 7", c.wait)
		}
	})

	t.Run("NilOptionsIgnored", func(t *testing.T) {
		t.Parallel()
		c := New("http://x", "sk", WithHTTPClient(nil), WithSleep(nil))
		if c.httpClient == nil || c.sleep == nil {
			t.Error("a nil option value replaced a default")
		}
	})
}

func TestRequestHeaders(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name       string
		opts       []Option
		call       func(c *Client) error
		wantKey    bool
		wantPrefer string
		wantCT     string
	}{
		{
			name: "CreatePayment",
			call: func(c *Client) error {
				_, _, err := c.CreatePayment(context.Background(), "k1", CreatePaymentParams{Amount: 1, Currency: "usd", PaymentMethod: "pm_card_visa"})
				return err
			},
			wantKey: true, wantCT: "application/json",
		},
		{
			name: "CreatePaymentWithWait",
			opts: []Option{WithWait(10)},
			call: func(c *Client) error {
				_, _, err := c.CreatePayment(context.Background(), "k1", CreatePaymentParams{Amount: 1, Currency: "usd", PaymentMethod: "pm_card_visa"})
				return err
			},
			wantKey: true, wantPrefer: "wait=10", wantCT: "application/json",
		},
		{
			name: "GetPayment",
			opts: []Option{WithWait(10)},
			call: func(c *Client) error {
				_, err := c.GetPayment(context.Background(), "pay_123")
				return err
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFakeAPI(t, respond(http.StatusCreated, paymentJSON(StatusSucceeded)))
			c, _ := newTestClient(t, f, tt.opts...)
			if err := tt.call(c); err != nil {
				t.Fatalf("call: %v", err)
			}
			h := f.requests()[0].Header
			checks := []struct{ name, got, want string }{
				{"Authorization", h.Get("Authorization"), "Bearer sk_test_acme"},
				{"User-Agent", h.Get("User-Agent"), "payments-go-client"},
				{"Content-Type", h.Get("Content-Type"), tt.wantCT},
				{"Prefer", h.Get("Prefer"), tt.wantPrefer},
			}
			for _, ch := range checks {
				if ch.got != ch.want {
					t.Errorf("%s = %q, want %q", ch.name, ch.got, ch.want)
				}
			}
			if got := h.Get("Idempotency-Key") != ""; got != tt.wantKey {
				t.Errorf("Idempotency-Key sent = %v, want %v", got, tt.wantKey)
			}
		})
	}
}
