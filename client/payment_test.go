package client

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"slices"
	"testing"
	"time"
)

var visa = CreatePaymentParams{Amount: 2000, Currency: "usd", PaymentMethod: "pm_card_visa"}

func TestCreatePayment(t *testing.T) {
	t.Parallel()

	declined := problemJSON(http.StatusPaymentRequired, "card_declined", "Your card was declined.",
		`"payment":`+paymentJSON(StatusFailed))
	invalid := problemJSON(http.StatusBadRequest, "invalid_request", "The request body has invalid fields.",
		`"errors":[{"field":"amount","message":"is required"},{"field":"currency","message":"must be an ISO 4217 currency code such as USD"}]`)

	tests := []struct {
		name  string
		key   string // "" lets the client generate one
		steps []step

		wantHTTP     int
		wantStatus   string // the payment's status; "" wants no payment
		wantCode     string // the *Error's code; "" wants a nil error
		wantFields   []FieldError
		wantRequests int
		wantSleeps   []time.Duration
		wantReplayed bool
	}{
		{
			name:     "OK",
			key:      "order-1842",
			steps:    []step{respond(http.StatusCreated, paymentJSON(StatusSucceeded), "Location", "/v1/payments/pay_123")},
			wantHTTP: http.StatusCreated, wantStatus: StatusSucceeded, wantRequests: 1,
		},
		{
			name:     "Replayed",
			key:      "order-1842",
			steps:    []step{respond(http.StatusCreated, paymentJSON(StatusSucceeded), "Idempotent-Replayed", "true")},
			wantHTTP: http.StatusCreated, wantStatus: StatusSucceeded, wantRequests: 1, wantReplayed: true,
		},
		{
			name: "KeyInUseThenCreated",
			steps: []step{
				respond(http.StatusConflict, problemJSON(http.StatusConflict, "idempotency_key_in_use", "held"), "Retry-After", "3"),
				respond(http.StatusCreated, paymentJSON(StatusSucceeded)),
			},
			wantHTTP: http.StatusCreated, wantStatus: StatusSucceeded, wantRequests: 2,
			wantSleeps: []time.Duration{3 * time.Second},
		},
		{
			name: "ServiceUnavailableThenCreated",
			key:  "order-1842",
			steps: []step{
				respond(http.StatusServiceUnavailable, problemJSON(http.StatusServiceUnavailable, "service_unavailable", "db down"), "Retry-After", "1"),
				respond(http.StatusCreated, paymentJSON(StatusSucceeded)),
			},
			wantHTTP: http.StatusCreated, wantStatus: StatusSucceeded, wantRequests: 2,
			wantSleeps: []time.Duration{time.Second},
		},
		{
			name: "InternalErrorThenCreated",
			steps: []step{
				respond(http.StatusInternalServerError, problemJSON(http.StatusInternalServerError, "internal_error", "boom")),
				respond(http.StatusBadGateway, "<html>bad gateway</html>"),
				respond(http.StatusCreated, paymentJSON(StatusSucceeded)),
			},
			wantHTTP: http.StatusCreated, wantStatus: StatusSucceeded, wantRequests: 3,
			// No Retry-After: backoff, here at the top of its jitter range.
			wantSleeps: []time.Duration{200 * time.Millisecond, 400 * time.Millisecond},
		},
		{
			name:     "DroppedConnectionThenCreated",
			steps:    []step{hangUp, respond(http.StatusCreated, paymentJSON(StatusSucceeded))},
			wantHTTP: http.StatusCreated, wantStatus: StatusSucceeded, wantRequests: 2,
			wantSleeps: []time.Duration{200 * time.Millisecond},
		},
		{
			name: "ProcessingThenCreated",
			steps: []step{
				respond(http.StatusAccepted, paymentJSON(StatusProcessing), "Retry-After", "2", "Location", "/v1/payments/pay_123"),
				respond(http.StatusCreated, paymentJSON(StatusSucceeded), "Idempotent-Replayed", "true"),
			},
			wantHTTP: http.StatusCreated, wantStatus: StatusSucceeded, wantRequests: 2, wantReplayed: true,
			wantSleeps: []time.Duration{2 * time.Second},
		},
		{
			name:     "ErrDeclined",
			steps:    []step{respond(http.StatusPaymentRequired, declined, "Location", "/v1/payments/pay_123")},
			wantHTTP: http.StatusPaymentRequired, wantStatus: StatusFailed, wantCode: "card_declined", wantRequests: 1,
		},
		{
			name: "ErrDeclinedAfterProcessing",
			steps: []step{
				respond(http.StatusAccepted, paymentJSON(StatusProcessing), "Retry-After", "1"),
				respond(http.StatusPaymentRequired, declined),
			},
			wantHTTP: http.StatusPaymentRequired, wantStatus: StatusFailed, wantCode: "card_declined", wantRequests: 2,
			wantSleeps: []time.Duration{time.Second},
		},
		{
			name: "ErrProcessorError",
			steps: []step{respond(http.StatusBadGateway, problemJSON(http.StatusBadGateway, "processor_error", "could not charge",
				`"payment":`+paymentJSON(StatusFailed)))},
			wantHTTP: http.StatusBadGateway, wantStatus: StatusFailed, wantCode: "processor_error", wantRequests: 1,
		},
		{
			name:     "ErrInvalidRequest",
			steps:    []step{respond(http.StatusBadRequest, invalid)},
			wantHTTP: http.StatusBadRequest, wantCode: "invalid_request", wantRequests: 1,
			wantFields: []FieldError{
				{Field: "amount", Message: "is required"},
				{Field: "currency", Message: "must be an ISO 4217 currency code such as USD"},
			},
		},
		{
			name: "ErrIdempotencyKeyInvalid",
			key:  "bad key",
			steps: []step{respond(http.StatusBadRequest,
				problemJSON(http.StatusBadRequest, "idempotency_key_invalid", "not visible ASCII"))},
			wantHTTP: http.StatusBadRequest, wantCode: "idempotency_key_invalid", wantRequests: 1,
		},
		{
			name:     "ErrUnauthorized",
			steps:    []step{respond(http.StatusUnauthorized, problemJSON(http.StatusUnauthorized, "unauthorized", "unknown key"))},
			wantHTTP: http.StatusUnauthorized, wantCode: "unauthorized", wantRequests: 1,
		},
		{
			name:     "ErrNotFound",
			steps:    []step{respond(http.StatusNotFound, problemJSON(http.StatusNotFound, "not_found", "no such endpoint"))},
			wantHTTP: http.StatusNotFound, wantCode: "not_found", wantRequests: 1,
		},
		{
			name: "ErrPayloadTooLarge",
			steps: []step{respond(http.StatusRequestEntityTooLarge,
				problemJSON(http.StatusRequestEntityTooLarge, "payload_too_large", "over 64 KiB"))},
			wantHTTP: http.StatusRequestEntityTooLarge, wantCode: "payload_too_large", wantRequests: 1,
		},
		{
			name: "ErrUnsupportedMediaType",
			steps: []step{respond(http.StatusUnsupportedMediaType,
				problemJSON(http.StatusUnsupportedMediaType, "unsupported_media_type", "json only"))},
			wantHTTP: http.StatusUnsupportedMediaType, wantCode: "unsupported_media_type", wantRequests: 1,
		},
		{
			name: "ErrIdempotencyKeyMismatch",
			key:  "order-1842",
			steps: []step{respond(http.StatusUnprocessableEntity,
				problemJSON(http.StatusUnprocessableEntity, "idempotency_key_mismatch", "different body"))},
			wantHTTP: http.StatusUnprocessableEntity, wantCode: "idempotency_key_mismatch", wantRequests: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFakeAPI(t, tt.steps...)
			c, s := newTestClient(t, f)

			p, resp, err := c.CreatePayment(context.Background(), tt.key, visa)

			if tt.wantCode == "" && err != nil {
				t.Fatalf("err = %v, want nil", err)
			}
			if tt.wantCode != "" {
				apiErr, ok := errors.AsType[*Error](err)
				if !ok {
					t.Fatalf("err = %v, want an *Error", err)
				}
				if apiErr.Code != tt.wantCode || apiErr.Status != tt.wantHTTP {
					t.Errorf("error = %d %s, want %d %s", apiErr.Status, apiErr.Code, tt.wantHTTP, tt.wantCode)
				}
				if !reflect.DeepEqual(apiErr.Errors, tt.wantFields) {
					t.Errorf("field errors = %+v, want %+v", apiErr.Errors, tt.wantFields)
				}
				if got, want := apiErr.IsDeclined(), tt.wantHTTP == http.StatusPaymentRequired; got != want {
					t.Errorf("IsDeclined() = %v, want %v", got, want)
				}
			}
			switch {
			case tt.wantStatus == "" && p != nil:
				t.Errorf("payment = %+v, want none", p)
			case tt.wantStatus != "" && p == nil:
				t.Errorf("payment = nil, want one with status %s", tt.wantStatus)
			case tt.wantStatus != "" && (p.Status != tt.wantStatus || p.ID != "pay_123"):
				t.Errorf("payment = %s %s, want pay_123 %s", p.ID, p.Status, tt.wantStatus)
			}

			if resp == nil {
				t.Fatal("resp = nil")
			}
			if resp.StatusCode != tt.wantHTTP || resp.Replayed != tt.wantReplayed {
				t.Errorf("resp = %d replayed=%v, want %d replayed=%v", resp.StatusCode, resp.Replayed, tt.wantHTTP, tt.wantReplayed)
			}
			checkAttempts(t, f.requests(), resp, "/v1/payments", tt.key, tt.wantRequests)
			if got := s.all(); !slices.Equal(got, tt.wantSleeps) {
				t.Errorf("sleeps = %v, want %v", got, tt.wantSleeps)
			}
		})
	}
}

func TestCreatePaymentBody(t *testing.T) {
	t.Parallel()
	desc := "Order 1842"

	tests := []struct {
		name   string
		params CreatePaymentParams
		want   string
	}{
		{
			name:   "Required",
			params: visa,
			want:   `{"amount":2000,"currency":"usd","payment_method":"pm_card_visa"}`,
		},
		{
			name: "Optional",
			params: CreatePaymentParams{Amount: 2000, Currency: "usd", PaymentMethod: "pm_card_visa",
				Description: &desc, Metadata: map[string]string{"order": "1842"}},
			want: `{"amount":2000,"currency":"usd","payment_method":"pm_card_visa","description":"Order 1842","metadata":{"order":"1842"}}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFakeAPI(t, respond(http.StatusCreated, paymentJSON(StatusSucceeded)))
			c, _ := newTestClient(t, f)
			if _, _, err := c.CreatePayment(context.Background(), "k", tt.params); err != nil {
				t.Fatalf("CreatePayment: %v", err)
			}
			if got := f.requests()[0].Body; got != tt.want {
				t.Errorf("body = %s, want %s", got, tt.want)
			}
		})
	}
}

func TestPaymentWireFormat(t *testing.T) {
	t.Parallel()
	var p Payment
	if err := json.Unmarshal([]byte(paymentJSON(StatusSucceeded)), &p); err != nil {
		t.Fatal(err)
	}
	desc, charge := "Order 1842", "ch_123"
	want := Payment{
		ID: "pay_123", Object: "payment", Amount: 2000, Currency: "usd", PaymentMethod: "pm_card_visa",
		Description: &desc, Metadata: map[string]string{"order": "1842"}, Status: StatusSucceeded,
		ProcessorChargeID: &charge, AmountRefunded: 0,
		CreatedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		UpdatedAt: time.Date(2026, 1, 2, 3, 4, 6, 5e8, time.UTC),
	}
	if !reflect.DeepEqual(p, want) {
		t.Errorf("decoded %+v\nwant    %+v", p, want)
	}
}

func TestGetPayment(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name         string
		id           string
		steps        []step
		wantPath     string
		wantCode     string
		wantErr      bool
		wantRequests int
	}{
		{
			name:     "OK",
			id:       "pay_123",
			steps:    []step{respond(http.StatusOK, paymentJSON(StatusSucceeded))},
			wantPath: "/v1/payments/pay_123", wantRequests: 1,
		},
		{
			name: "ServiceUnavailableThenOK",
			id:   "pay_123",
			steps: []step{
				respond(http.StatusServiceUnavailable, problemJSON(http.StatusServiceUnavailable, "service_unavailable", "db down")),
				respond(http.StatusOK, paymentJSON(StatusSucceeded)),
			},
			wantPath: "/v1/payments/pay_123", wantRequests: 2,
		},
		{
			name:     "ErrNotFound",
			id:       "pay_a/b",
			steps:    []step{respond(http.StatusNotFound, problemJSON(http.StatusNotFound, "not_found", "Not found"))},
			wantPath: "/v1/payments/pay_a/b", wantCode: "not_found", wantErr: true, wantRequests: 1,
		},
		{
			name:    "ErrEmptyID",
			steps:   []step{respond(http.StatusOK, paymentJSON(StatusSucceeded))},
			wantErr: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFakeAPI(t, tt.steps...)
			c, _ := newTestClient(t, f)

			p, err := c.GetPayment(context.Background(), tt.id)

			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want error %v", err, tt.wantErr)
			}
			if !tt.wantErr && p.ID != "pay_123" {
				t.Errorf("payment = %+v, want pay_123", p)
			}
			if tt.wantCode != "" {
				if apiErr, ok := errors.AsType[*Error](err); !ok || apiErr.Code != tt.wantCode || !apiErr.IsNotFound() {
					t.Errorf("err = %v, want *Error %s", err, tt.wantCode)
				}
			}
			reqs := f.requests()
			if len(reqs) != tt.wantRequests {
				t.Fatalf("requests = %d, want %d", len(reqs), tt.wantRequests)
			}
			for _, r := range reqs {
				if r.Method != http.MethodGet || r.Path != tt.wantPath || r.Header.Get("Idempotency-Key") != "" {
					t.Errorf("request = %s %s key=%q, want GET %s without a key", r.Method, r.Path, r.Header.Get("Idempotency-Key"), tt.wantPath)
				}
			}
		})
	}
}

func TestListPayments(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name          string
		limit         int
		startingAfter string
		wantQuery     string
	}{
		{name: "Defaults", wantQuery: ""},
		{name: "Limit", limit: 2, wantQuery: "limit=2"},
		{name: "StartingAfter", limit: 2, startingAfter: "pay_9", wantQuery: "limit=2&starting_after=pay_9"},
	}
	body := `{"object":"list","data":[` + paymentJSON(StatusSucceeded) + `,` + paymentJSON(StatusFailed) + `],"has_more":true}`
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFakeAPI(t, respond(http.StatusOK, body))
			c, _ := newTestClient(t, f)

			l, err := c.ListPayments(context.Background(), tt.limit, tt.startingAfter)
			if err != nil {
				t.Fatalf("ListPayments: %v", err)
			}
			if l.Object != "list" || len(l.Data) != 2 || !l.HasMore || l.Data[1].Status != StatusFailed {
				t.Errorf("list = %+v, want two payments and has_more", l)
			}
			r := f.requests()[0]
			if r.Method != http.MethodGet || r.Path != "/v1/payments" || r.Query != tt.wantQuery {
				t.Errorf("request = %s %s?%s, want GET /v1/payments?%s", r.Method, r.Path, r.Query, tt.wantQuery)
			}
		})
	}
}
