package fake_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/example/payments/internal/gateway/fake"
	"github.com/example/payments/internal/operation"
	"github.com/example/payments/internal/payments"
	"github.com/example/payments/internal/refunds"
)

// verdict is how a caller must treat an answer.
type verdict int

const (
	definite verdict = iota // an Outcome, no error
	unknown                 // an error wrapping operation.ErrProcessorUnknown
	closed                  // an error wrapping operation.ErrKeyClosed
)

// answer is a canned processor answer and how it must be classified.
type answer struct {
	name   string
	status int
	body   string
	want   verdict
	// outcome is the definite Outcome expected.
	outcome operation.Outcome
}

// fakeProcessor answers every request with status and body, after checking
// that it carries the Idempotency-Key key ("" for none: a question's).
func fakeProcessor(t *testing.T, status int, body, key string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Idempotency-Key") != key {
			t.Errorf("Idempotency-Key = %q", r.Header.Get("Idempotency-Key"))
		}
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// check fails unless got and err are what a.want says.
func (a answer) check(t *testing.T, got operation.Outcome, err error) {
	t.Helper()
	switch a.want {
	case definite:
		if err != nil || got != a.outcome {
			t.Fatalf("got %+v, %v; want %+v, nil", got, err, a.outcome)
		}
	case unknown:
		if !errors.Is(err, operation.ErrProcessorUnknown) || errors.Is(err, operation.ErrKeyClosed) {
			t.Fatalf("got %+v, %v; want ErrProcessorUnknown", got, err)
		}
	case closed:
		if !errors.Is(err, operation.ErrKeyClosed) || errors.Is(err, operation.ErrProcessorUnknown) {
			t.Fatalf("got %+v, %v; want ErrKeyClosed", got, err)
		}
	}
	if err != nil && got != (operation.Outcome{}) {
		t.Errorf("an error with an outcome: %+v", got)
	}
}

// classifyEach makes call to a fake processor giving each answer, with the
// key "k", and checks how the answer is classified.
func classifyEach(t *testing.T, answers []answer, call func(context.Context, *fake.Client) (operation.Outcome, error)) {
	for _, tt := range answers {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := call(context.Background(), fake.New(fakeProcessor(t, tt.status, tt.body, "k"), 5*time.Second))
			tt.check(t, got, err)
		})
	}
}

// commonAnswers are classified alike for charges and refunds.
var commonAnswers = []answer{
	{name: "ErrBadRequest", status: 400, body: `{"error":{"type":"invalid_request_error","code":"parameter_invalid","message":"bad"}}`,
		want: definite, outcome: operation.Outcome{FailureCode: "parameter_invalid", FailureMessage: "bad"}},
	{name: "ErrKeyReused", status: 400, body: `{"error":{"type":"idempotency_error","code":"idempotency_key_reused","message":"other params"}}`,
		want: definite, outcome: operation.Outcome{FailureCode: "idempotency_key_reused", FailureMessage: "other params"}},
	{name: "ErrKeyClosed", status: 400, body: `{"error":{"type":"idempotency_error","code":"idempotency_key_closed","message":"closed"}}`, want: closed},
	{name: "ErrUnreadable200", status: 200, body: `<html>`, want: unknown},
	{name: "ErrNoID200", status: 200, body: `{}`, want: unknown},
	{name: "ErrCreated", status: 201, body: `{}`, want: unknown},
	{name: "ErrBadGateway", status: 502, body: `<html>bad gateway</html>`, want: unknown},
	{name: "ErrUnavailable", status: 503, body: `{"error":{"type":"api_error","code":"down","message":"down"}}`, want: unknown},
	{name: "ErrInUse", status: 409, body: `{"error":{"type":"idempotency_error","code":"in_use","message":"busy"}}`, want: unknown},
	{name: "ErrRateLimited", status: 429, body: `{"error":{"type":"rate_limit_error","code":"rate_limit","message":"slow down"}}`, want: unknown},
	{name: "ErrRequestTimeout", status: 408, body: `{"error":{"type":"api_error","code":"timeout","message":"slow"}}`, want: unknown},
	// A proxy's page says nothing of what the processor did.
	{name: "ErrProxyPage", status: 401, body: `unauthorized`, want: unknown},
}

func TestClassifyCharge(t *testing.T) {
	t.Parallel()
	classifyEach(t, append([]answer{
		{name: "OK", status: 200, body: `{"id":"ch_1","object":"charge","status":"succeeded"}`,
			want: definite, outcome: operation.Outcome{ID: "ch_1", Succeeded: true}},
		{name: "Declined", status: 402, body: `{"error":{"type":"card_error","code":"card_declined","message":"no","charge":"ch_2"}}`,
			want: definite, outcome: operation.Outcome{ID: "ch_2", FailureCode: "card_declined", FailureMessage: "no"}},
		{name: "ErrUnreadable402", status: 402, body: `{}`, want: unknown},
		{name: "ErrNotFound", status: 404, body: `{"error":{"type":"invalid_request_error","code":"resource_missing","message":"no route"}}`,
			want: definite, outcome: operation.Outcome{FailureCode: "resource_missing", FailureMessage: "no route"}},
	}, commonAnswers...), func(ctx context.Context, c *fake.Client) (operation.Outcome, error) {
		return c.Charge(ctx, payments.ChargeRequest{IdempotencyKey: "k", Amount: 1, Currency: "USD", PaymentMethod: "pm_card_visa"})
	})
}

func TestClassifyRefund(t *testing.T) {
	t.Parallel()
	classifyEach(t, append([]answer{
		{name: "OK", status: 200, body: `{"id":"re_1","object":"refund","status":"succeeded"}`,
			want: definite, outcome: operation.Outcome{ID: "re_1", Succeeded: true}},
		{name: "Failed", status: 200, body: `{"id":"re_2","object":"refund","status":"failed"}`,
			want: definite, outcome: operation.Outcome{ID: "re_2"}},
		// An unknown charge is a definite refusal, not a reason to retry.
		{name: "ErrUnknownCharge", status: 404, body: `{"error":{"type":"invalid_request_error","code":"resource_missing","message":"No such charge"}}`,
			want: definite, outcome: operation.Outcome{FailureCode: "resource_missing", FailureMessage: "No such charge"}},
		{name: "ErrTooLarge", status: 400, body: `{"error":{"type":"invalid_request_error","code":"amount_too_large","message":"too much"}}`,
			want: definite, outcome: operation.Outcome{FailureCode: "amount_too_large", FailureMessage: "too much"}},
	}, commonAnswers...), func(ctx context.Context, c *fake.Client) (operation.Outcome, error) {
		return c.Refund(ctx, refunds.Request{IdempotencyKey: "k", ChargeID: "ch_1", Amount: 1})
	})
}

// TestClassifyTimeout checks that a processor that does not answer in time
// leaves every outcome unknown.
func TestClassifyTimeout(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Reading the body lets the server notice the caller leaving.
		_, _ = io.Copy(io.Discard, r.Body)
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) }) // runs first: cleanups run last in, first out
	client := fake.New(srv.URL, 100*time.Millisecond)
	ctx := context.Background()

	_, err := client.Charge(ctx, payments.ChargeRequest{IdempotencyKey: "k", Amount: 1, Currency: "USD", PaymentMethod: "pm_card_visa"})
	if !errors.Is(err, operation.ErrProcessorUnknown) {
		t.Errorf("charge: %v", err)
	}
	_, err = client.Refund(ctx, refunds.Request{IdempotencyKey: "k", ChargeID: "ch_1", Amount: 1})
	if !errors.Is(err, operation.ErrProcessorUnknown) {
		t.Errorf("refund: %v", err)
	}
	if _, _, err := client.Charges().Close(ctx, payments.ChargeRequest{IdempotencyKey: "k"}); !errors.Is(err, operation.ErrProcessorUnknown) {
		t.Errorf("close charge: %v", err)
	}
}

// TestLookupClassify checks that the questions the caller asks fail with
// ErrProcessorUnknown, never with an answer, when the processor does not
// give a definite one.
func TestLookupClassify(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name   string
		status int
		body   string
	}{
		{"Unavailable", 503, ``},
		{"BadRequest", 400, `{"error":{"type":"invalid_request_error","code":"parameter_invalid","message":"bad"}}`},
		// A 200 that is not the expected object must not read as "none".
		{"EmptyObject", 200, `{}`},
		{"NullData", 200, `{"object":"list","data":null,"has_more":false}`},
		{"OtherClosure", 200, `{"object":"key_closure","idempotency_key":"other","charge":null,"refund":null}`},
		{"MoreButEmpty", 200, `{"object":"list","data":[],"has_more":true}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			client := fake.New(fakeProcessor(t, tt.status, tt.body, ""), 5*time.Second)
			ctx := context.Background()

			if _, found, err := client.Charges().Find(ctx, payments.ChargeRequest{IdempotencyKey: "k"}); !errors.Is(err, operation.ErrProcessorUnknown) || found {
				t.Errorf("FindCharge: %v, %v", found, err)
			}
			if _, found, err := client.Refunds().Find(ctx, refunds.Request{IdempotencyKey: "k"}); !errors.Is(err, operation.ErrProcessorUnknown) || found {
				t.Errorf("FindRefund: %v, %v", found, err)
			}
			if _, made, err := client.Charges().Close(ctx, payments.ChargeRequest{IdempotencyKey: "k"}); !errors.Is(err, operation.ErrProcessorUnknown) || made {
				t.Errorf("CloseCharge: %v, %v", made, err)
			}
			if _, made, err := client.Refunds().Close(ctx, refunds.Request{IdempotencyKey: "k"}); !errors.Is(err, operation.ErrProcessorUnknown) || made {
				t.Errorf("CloseRefund: %v, %v", made, err)
			}
			if _, _, err := client.Charges().Ledger(ctx, time.Now(), ""); !errors.Is(err, operation.ErrProcessorUnknown) {
				t.Errorf("LedgerCharges: %v", err)
			}
			if _, _, err := client.Refunds().Ledger(ctx, time.Now(), "re_1"); !errors.Is(err, operation.ErrProcessorUnknown) {
				t.Errorf("LedgerRefunds: %v", err)
			}
			if tt.status == http.StatusBadRequest {
				return
			}
			if _, err := client.ChargesByIdempotencyKey(ctx, "k"); !errors.Is(err, operation.ErrProcessorUnknown) {
				t.Errorf("ChargesByIdempotencyKey: %v", err)
			}
			if _, err := client.RefundsByIdempotencyKey(ctx, "k"); !errors.Is(err, operation.ErrProcessorUnknown) {
				t.Errorf("RefundsByIdempotencyKey: %v", err)
			}
			if _, err := client.ChargesByPayment(ctx, "pay_1"); !errors.Is(err, operation.ErrProcessorUnknown) {
				t.Errorf("ChargesByPayment: %v", err)
			}
		})
	}

	t.Run("ClosureWithoutMember", func(t *testing.T) {
		t.Parallel()
		srv := fakeProcessor(t, http.StatusOK, `{"object":"key_closure","idempotency_key":"k"}`, "")
		// A closure that does not say "null" has not said nothing was made.
		if _, made, err := fake.New(srv, 5*time.Second).Charges().Close(context.Background(), payments.ChargeRequest{IdempotencyKey: "k"}); !errors.Is(err, operation.ErrProcessorUnknown) || made {
			t.Errorf("CloseCharge: %v, %v", made, err)
		}
	})
}
