package e2e

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/example/payments/internal/testdb"
)

// TestWalkthrough creates the database from nothing with the documented
// commands, starts the three programs and drives the README's curl session:
// a payment, its replay, a mismatch and a decline. Then it stops them all
// with SIGTERM and expects each to exit cleanly.
func TestWalkthrough(t *testing.T) {
	t.Parallel()
	s := startStack(t, testdb.NewEmpty(t), nil, nil)

	body := `{"amount": 1999, "currency": "USD", "payment_method": "pm_card_visa", "description": "T-shirt"}`
	status, header, first := do(t, http.MethodPost, s.apiURL+"/v1/payments", "sk_test_acme", "e2e-order-1", body)
	if status != http.StatusCreated {
		t.Fatalf("create: %d %s", status, first)
	}
	var p struct {
		ID                string `json:"id"`
		Status            string `json:"status"`
		ProcessorChargeID string `json:"processor_charge_id"`
	}
	if err := json.Unmarshal(first, &p); err != nil || p.Status != "succeeded" {
		t.Fatalf("payment %s: %v", first, err)
	}
	if header.Get("Location") != "/v1/payments/"+p.ID {
		t.Errorf("Location = %q", header.Get("Location"))
	}

	status, header, replay := do(t, http.MethodPost, s.apiURL+"/v1/payments", "sk_test_acme", "e2e-order-1", body)
	if status != http.StatusCreated || !bytes.Equal(replay, first) || header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replay: %d %v %s", status, header, replay)
	}

	status, _, mismatch := do(t, http.MethodPost, s.apiURL+"/v1/payments", "sk_test_acme", "e2e-order-1", strings.Replace(body, "1999", "2999", 1))
	if status != http.StatusUnprocessableEntity || !strings.Contains(string(mismatch), "idempotency_key_mismatch") {
		t.Fatalf("mismatch: %d %s", status, mismatch)
	}

	status, _, declined := do(t, http.MethodPost, s.apiURL+"/v1/payments", "sk_test_acme", "e2e-order-2", strings.Replace(body, "pm_card_visa", "pm_card_declined", 1))
	if status != http.StatusPaymentRequired || !strings.Contains(string(declined), `"code":"card_declined"`) {
		t.Fatalf("decline: %d %s", status, declined)
	}

	// Exactly one charge at the processor, asked over its own HTTP API.
	status, _, charges := do(t, http.MethodGet, s.processorURL+"/v1/charges?payment_id="+p.ID, "", "", "")
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.Unmarshal(charges, &list); err != nil || status != http.StatusOK {
		t.Fatalf("processor list: %d %s", status, charges)
	}
	if len(list.Data) != 1 || list.Data[0].ID != p.ProcessorChargeID {
		t.Fatalf("processor charges for %s: %s", p.ID, charges)
	}

	s.api.stop(t)
	s.worker.stop(t)
	s.processor.stop(t)
}
