package client

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"
)

func TestCreatePaymentGeneratesKeyOncePerCall(t *testing.T) {
	t.Parallel()
	unavailable := respond(http.StatusServiceUnavailable, problemJSON(http.StatusServiceUnavailable, "service_unavailable", "db down"))
	f := newFakeAPI(t, unavailable, unavailable, respond(http.StatusCreated, paymentJSON(StatusSucceeded)),
		respond(http.StatusCreated, paymentJSON(StatusSucceeded)))
	c, _ := newTestClient(t, f)

	_, first, err := c.CreatePayment(context.Background(), "", visa)
	if err != nil {
		t.Fatalf("first call: %v", err)
	}
	checkAttempts(t, f.requests(), first, "/v1/payments", "", 3)

	_, second, err := c.CreatePayment(context.Background(), "", visa)
	if err != nil {
		t.Fatalf("second call: %v", err)
	}
	if second.IdempotencyKey == first.IdempotencyKey {
		t.Errorf("two calls shared the generated key %q", first.IdempotencyKey)
	}
	if got := f.requests()[3].Header.Get("Idempotency-Key"); got != second.IdempotencyKey {
		t.Errorf("second call sent key %q, reported %q", got, second.IdempotencyKey)
	}
}

func TestCreatePaymentTimeoutThenCreated(t *testing.T) {
	t.Parallel()
	f := newFakeAPI(t, stall, respond(http.StatusCreated, paymentJSON(StatusSucceeded)))
	hc := f.srv.Client()
	hc.Timeout = 250 * time.Millisecond
	c, s := newTestClient(t, f, WithHTTPClient(hc))

	p, resp, err := c.CreatePayment(context.Background(), "order-1842", visa)
	if err != nil {
		t.Fatalf("CreatePayment: %v", err)
	}
	if p.Status != StatusSucceeded || resp.StatusCode != http.StatusCreated {
		t.Errorf("got %s %d, want succeeded 201", p.Status, resp.StatusCode)
	}
	checkAttempts(t, f.requests(), resp, "/v1/payments", "order-1842", 2)
	if got := s.all(); len(got) != 1 {
		t.Errorf("sleeps = %v, want one backoff", got)
	}
}

func TestCreatePaymentAttemptsExhausted(t *testing.T) {
	t.Parallel()

	const attempts = 3
	tests := []struct {
		name       string
		steps      []step
		wantHTTP   int    // resp.StatusCode
		wantCode   string // the last *Error's code, when the last answer was one
		wantErr    bool
		wantStatus string // the payment's status; "" wants no payment
	}{
		{
			name:     "ErrServiceUnavailable",
			steps:    []step{respond(http.StatusServiceUnavailable, problemJSON(http.StatusServiceUnavailable, "service_unavailable", "db down"), "Retry-After", "1")},
			wantHTTP: http.StatusServiceUnavailable, wantCode: "service_unavailable", wantErr: true,
		},
		{
			name:     "ErrIdempotencyKeyInUse",
			steps:    []step{respond(http.StatusConflict, problemJSON(http.StatusConflict, "idempotency_key_in_use", "held"), "Retry-After", "1")},
			wantHTTP: http.StatusConflict, wantCode: "idempotency_key_in_use", wantErr: true,
		},
		{
			name:    "ErrDroppedConnection",
			steps:   []step{hangUp},
			wantErr: true,
		},
		{
			name:       "StillProcessing",
			steps:      []step{respond(http.StatusAccepted, paymentJSON(StatusProcessing), "Retry-After", "1", "Location", "/v1/payments/pay_123")},
			wantHTTP:   http.StatusAccepted,
			wantStatus: StatusProcessing,
		},
		{
			name: "ProcessingThenUnavailable",
			steps: []step{
				respond(http.StatusAccepted, paymentJSON(StatusProcessing), "Retry-After", "1", "Location", "/v1/payments/pay_123"),
				respond(http.StatusServiceUnavailable, problemJSON(http.StatusServiceUnavailable, "service_unavailable", "db down")),
			},
			// Accepted once is accepted: the payment runs whatever came after.
			wantHTTP:   http.StatusAccepted,
			wantStatus: StatusProcessing,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFakeAPI(t, tt.steps...)
			c, s := newTestClient(t, f, WithMaxAttempts(attempts))

			p, resp, err := c.CreatePayment(context.Background(), "", visa)

			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want error %v", err, tt.wantErr)
			}
			if tt.wantCode != "" {
				if apiErr, ok := errors.AsType[*Error](err); !ok || apiErr.Code != tt.wantCode {
					t.Errorf("err = %v, want the last *Error, %s", err, tt.wantCode)
				}
			}
			if tt.wantStatus == "" && p != nil || tt.wantStatus != "" && (p == nil || p.Status != tt.wantStatus) {
				t.Errorf("payment = %+v, want status %q", p, tt.wantStatus)
			}
			if resp.StatusCode != tt.wantHTTP {
				t.Errorf("resp.StatusCode = %d, want %d", resp.StatusCode, tt.wantHTTP)
			}
			if tt.wantStatus != "" && resp.Location != "/v1/payments/pay_123" {
				t.Errorf("resp.Location = %q, want the payment's", resp.Location)
			}
			checkAttempts(t, f.requests(), resp, "/v1/payments", "", attempts)
			if n := len(s.all()); n != attempts-1 {
				t.Errorf("sleeps = %d, want one between each two attempts, %d", n, attempts-1)
			}
		})
	}
}

func TestCreatePaymentContextCancelledDuringWait(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name        string
		first       step
		wantPayment bool
	}{
		{
			name:  "ErrServiceUnavailable",
			first: respond(http.StatusServiceUnavailable, problemJSON(http.StatusServiceUnavailable, "service_unavailable", "db down"), "Retry-After", "3600"),
		},
		{
			name:        "Processing",
			first:       respond(http.StatusAccepted, paymentJSON(StatusProcessing), "Retry-After", "3600"),
			wantPayment: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFakeAPI(t, tt.first, respond(http.StatusCreated, paymentJSON(StatusSucceeded)))
			waiting := make(chan time.Duration, 1)
			// The real sleep, which must wake when ctx is cancelled; the hour
			// it is asked to wait would time the test out.
			c := New(f.srv.URL, "sk_test_acme", WithHTTPClient(f.srv.Client()),
				WithSleep(func(ctx context.Context, d time.Duration) error {
					waiting <- d
					return sleepCtx(ctx, d)
				}))

			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			type result struct {
				p    *Payment
				resp *Response
				err  error
			}
			done := make(chan result, 1)
			go func() {
				p, resp, err := c.CreatePayment(ctx, "", visa)
				done <- result{p, resp, err}
			}()
			if d := <-waiting; d != time.Hour {
				t.Errorf("wait = %v, want Retry-After's hour", d)
			}
			cancel()
			var r result
			select {
			case r = <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("CreatePayment did not return after its context was cancelled")
			}
			if !errors.Is(r.err, context.Canceled) {
				t.Errorf("err = %v, want context.Canceled", r.err)
			}
			if got := r.p != nil; got != tt.wantPayment {
				t.Errorf("payment returned = %v, want %v", got, tt.wantPayment)
			}
			if tt.wantPayment && (r.resp.StatusCode != http.StatusAccepted || r.resp.Attempts != 1) {
				t.Errorf("resp = %d after %d attempts, want the 202 after 1", r.resp.StatusCode, r.resp.Attempts)
			}
			if n := len(f.requests()); n != 1 {
				t.Errorf("requests = %d, want 1", n)
			}
		})
	}
}

func TestCreatePaymentContextDone(t *testing.T) {
	t.Parallel()
	f := newFakeAPI(t, respond(http.StatusCreated, paymentJSON(StatusSucceeded)))
	c, _ := newTestClient(t, f)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()

	_, resp, err := c.CreatePayment(ctx, "order-1842", visa)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
	if resp == nil || resp.IdempotencyKey != "order-1842" {
		t.Errorf("resp = %+v, want the key", resp)
	}
	if n := len(f.requests()); n != 0 {
		t.Errorf("requests = %d, want none", n)
	}
}

func TestCreatePaymentBadBaseURL(t *testing.T) {
	t.Parallel()

	tests := []struct{ name, base string }{
		{name: "NoScheme", base: "localhost:8080"},
		{name: "OtherScheme", base: "ftp://example.com"},
		{name: "NoHost", base: "http://"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := &sleeps{}
			c := New(tt.base, "sk", WithSleep(s.sleep))
			_, resp, err := c.CreatePayment(context.Background(), "k", visa)
			if err == nil || resp.Attempts != 0 || len(s.all()) != 0 {
				t.Errorf("New(%q): err = %v after %d attempts, want an error before any", tt.base, err, resp.Attempts)
			}
		})
	}
}
