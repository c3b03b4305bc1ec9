package fakeprocessor_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/example/payments/tools/fakeprocessor"
)

func TestCreateCharge(t *testing.T) {
	t.Parallel()
	e := newEnv(t, fakeprocessor.Config{})

	tests := []struct {
		name        string
		method      string
		wantStatus  int
		wantCharge  string // ledger status
		wantFailure string
	}{
		{"Visa", "pm_card_visa", http.StatusOK, "succeeded", ""},
		{"Mastercard", "pm_card_mastercard", http.StatusOK, "succeeded", ""},
		{"Declined", "pm_card_declined", http.StatusPaymentRequired, "failed", "card_declined"},
		{"InsufficientFunds", "pm_card_insufficient_funds", http.StatusPaymentRequired, "failed", "insufficient_funds"},
		{"UnknownMethod", "pm_card_bogus", http.StatusPaymentRequired, "failed", "invalid_payment_method"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			key := "key-" + tt.name
			body := fmt.Sprintf(`{"amount":1234,"currency":"usd","payment_method":%q,"payment_id":"pay_%s","description":"order 7"}`, tt.method, tt.name)
			resp := e.post("/v1/charges", key, body)
			if resp.status != tt.wantStatus {
				t.Fatalf("status = %d, want %d: %s", resp.status, tt.wantStatus, resp.body)
			}
			if got := resp.header.Get("Idempotent-Replayed"); got != "" {
				t.Errorf("first answer has Idempotent-Replayed %q", got)
			}

			var id string
			if tt.wantStatus == http.StatusOK {
				c := decode[fakeprocessor.Charge](t, resp)
				if c.Object != "charge" || c.Status != "succeeded" || c.Amount != 1234 || c.Currency != "USD" ||
					c.PaymentMethod != tt.method || c.IdempotencyKey != key || c.FailureCode != nil ||
					c.PaymentID == nil || *c.PaymentID != "pay_"+tt.name || c.Description == nil || *c.Description != "order 7" {
					t.Errorf("charge = %s", resp.body)
				}
				id = c.ID
			} else {
				ej := decodeError(t, resp)
				if ej.Type != "card_error" || ej.Code != tt.wantFailure || ej.Message == "" {
					t.Errorf("error = %+v", ej)
				}
				id = ej.Charge
			}
			if !strings.HasPrefix(id, "ch_") {
				t.Fatalf("charge id = %q", id)
			}

			var status, failure string
			err := e.db.Pool.QueryRow(context.Background(),
				`SELECT status, coalesce(failure_code, '') FROM processor.charges WHERE id = $1 AND idempotency_key = $2`,
				id, key).Scan(&status, &failure)
			if err != nil {
				t.Fatalf("ledger row: %v", err)
			}
			if status != tt.wantCharge || failure != tt.wantFailure {
				t.Errorf("ledger = %s/%q, want %s/%q", status, failure, tt.wantCharge, tt.wantFailure)
			}
			e.wantChargesUnder(t, key, 1)
		})
	}
}

func TestCreateChargeInvalid(t *testing.T) {
	t.Parallel()
	e := newEnv(t, fakeprocessor.Config{})

	tests := []struct {
		name     string
		key      string
		body     string
		wantCode string
	}{
		{"ErrKeyMissing", "", `{"amount":100,"currency":"USD","payment_method":"pm_card_visa"}`, "idempotency_key_missing"},
		{"ErrKeyTooLong", strings.Repeat("k", 256), `{"amount":100,"currency":"USD","payment_method":"pm_card_visa"}`, "idempotency_key_invalid"},
		{"ErrUnknownField", "k-unknown", `{"amount":100,"currency":"USD","payment_method":"pm_card_visa","capture":true}`, "parameter_invalid"},
		{"ErrAmountZero", "k-zero", `{"amount":0,"currency":"USD","payment_method":"pm_card_visa"}`, "parameter_invalid"},
		{"ErrAmountFraction", "k-fraction", `{"amount":1.5,"currency":"USD","payment_method":"pm_card_visa"}`, "parameter_invalid"},
		{"ErrCurrency", "k-currency", `{"amount":100,"currency":"US","payment_method":"pm_card_visa"}`, "parameter_invalid"},
		{"ErrMethodMissing", "k-method", `{"amount":100,"currency":"USD"}`, "parameter_invalid"},
		{"ErrMalformed", "k-malformed", `{"amount":`, "parameter_invalid"},
		{"ErrTrailing", "k-trailing", `{"amount":100,"currency":"USD","payment_method":"pm_card_visa"} {}`, "parameter_invalid"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			wantError(t, e.post("/v1/charges", tt.key, tt.body), http.StatusBadRequest, "invalid_request_error", tt.wantCode)
			if tt.key == "" {
				return
			}
			if n := e.keyRows(tt.key); n != 0 {
				t.Errorf("key rows = %d, want 0", n)
			}
			// The key stays free: a corrected request with it succeeds.
			if len(tt.key) <= 255 {
				wantFresh(t, e.post("/v1/charges", tt.key, `{"amount":100,"currency":"USD","payment_method":"pm_card_visa"}`))
			}
		})
	}
}

func TestGetCharge(t *testing.T) {
	t.Parallel()
	e := newEnv(t, fakeprocessor.Config{})

	t.Run("OK", func(t *testing.T) {
		t.Parallel()
		created := e.post("/v1/charges", "get-ok", `{"amount":500,"currency":"EUR","payment_method":"pm_card_visa"}`)
		id := decode[fakeprocessor.Charge](t, created).ID
		got := e.get("/v1/charges/" + id)
		if got.status != http.StatusOK {
			t.Fatalf("status = %d: %s", got.status, got.body)
		}
		// Read back from the ledger, the charge is the very object first answered.
		if !bytes.Equal(got.body, created.body) {
			t.Errorf("GET  = %s\nPOST = %s", got.body, created.body)
		}
	})
	t.Run("ErrNotFound", func(t *testing.T) {
		t.Parallel()
		wantError(t, e.get("/v1/charges/ch_missing"), http.StatusNotFound, "invalid_request_error", "resource_missing")
	})
}

func TestListCharges(t *testing.T) {
	t.Parallel()
	e := newEnv(t, fakeprocessor.Config{})
	e.post("/v1/charges", "list-1", `{"amount":100,"currency":"USD","payment_method":"pm_card_declined","payment_id":"pay_list"}`)
	e.post("/v1/charges", "list-2", `{"amount":100,"currency":"USD","payment_method":"pm_card_visa","payment_id":"pay_list"}`)
	e.post("/v1/charges", "list-3", `{"amount":100,"currency":"USD","payment_method":"pm_card_visa","payment_id":"pay_other"}`)

	tests := []struct {
		name     string
		query    string
		wantKeys []string
	}{
		{"ByKey", "idempotency_key=list-2", []string{"list-2"}},
		{"ByPayment", "payment_id=pay_list", []string{"list-1", "list-2"}},
		{"EmptyByKey", "idempotency_key=never-used", nil},
		{"EmptyByPayment", "payment_id=pay_none", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			resp := e.get("/v1/charges?" + tt.query)
			if resp.status != http.StatusOK {
				t.Fatalf("status = %d: %s", resp.status, resp.body)
			}
			list := decode[listJSON[fakeprocessor.Charge]](t, resp)
			// Only the ledger pages; the other filters answer in full.
			if list.Object != "list" || list.Data == nil || list.HasMore == nil || *list.HasMore {
				t.Fatalf("list = %s", resp.body)
			}
			var keys []string
			for _, c := range list.Data {
				keys = append(keys, c.IdempotencyKey)
			}
			if fmt.Sprint(keys) != fmt.Sprint(tt.wantKeys) {
				t.Errorf("keys = %v, want %v", keys, tt.wantKeys)
			}
		})
	}
	for _, q := range []string{"", "idempotency_key=list-1&payment_id=pay_list"} {
		if resp := e.get("/v1/charges?" + q); resp.status != http.StatusBadRequest {
			t.Errorf("query %q: status = %d, want 400", q, resp.status)
		}
	}
}

func TestHealthz(t *testing.T) {
	t.Parallel()
	e := newEnv(t, fakeprocessor.Config{})
	if resp := e.get("/healthz"); resp.status != http.StatusOK {
		t.Fatalf("status = %d", resp.status)
	}
}
