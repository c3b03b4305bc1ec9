package outbox_test

import (
	"encoding/json"
	"testing"

	"go.uber.org/goleak"

	"github.com/example/payments/internal/payments"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// paymentOf reads the payment of a final response or a 202.
func paymentOf(t *testing.T, body []byte) payments.Payment {
	t.Helper()
	var v struct {
		Payment *payments.Payment `json:"payment"`
	}
	if err := json.Unmarshal(body, &v); err == nil && v.Payment != nil {
		return *v.Payment
	}
	var p payments.Payment
	if err := json.Unmarshal(body, &p); err != nil {
		t.Fatalf("decode %s: %v", body, err)
	}
	return p
}
