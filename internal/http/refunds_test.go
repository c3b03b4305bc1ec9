package http_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/example/payments/internal/operation"
	"github.com/example/payments/internal/payments"
	"github.com/example/payments/internal/refunds"
	"github.com/example/payments/tools/stacktest"
)

func decodeRefund(t *testing.T, body []byte) refunds.Refund {
	t.Helper()
	return decodeMember[refunds.Refund](t, body, "refund")
}

// paid makes a succeeded payment of 1999 and returns it.
func paid(t *testing.T, s *stacktest.Stack, key string) payments.Payment {
	t.Helper()
	return decodePayment(t, created(t, s, acme, key, visa).Body)
}

func refund(s *stacktest.Stack, apiKey, paymentID, key, body string) stacktest.Response {
	return s.Request(http.MethodPost, "/v1/payments/"+paymentID+"/refunds", apiKey, body, "Idempotency-Key", key)
}

func TestRefunds(t *testing.T) {
	t.Parallel()

	t.Run("OK", func(t *testing.T) {
		t.Parallel()
		s := startStack(t, stacktest.Options{})
		p := paid(t, s, "pay-1")

		first := refund(s, acme, p.ID, "refund-1", "")
		if first.Status != http.StatusCreated {
			t.Fatalf("refund: %d %s", first.Status, first.Body)
		}
		r := decodeRefund(t, first.Body)
		if r.Status != operation.StatusSucceeded || r.Amount != p.Amount || r.PaymentID != p.ID || r.ProcessorRefundID == nil {
			t.Fatalf("refund = %+v", r)
		}
		if first.Header.Get("Location") != "/v1/refunds/"+r.ID {
			t.Errorf("Location = %q", first.Header.Get("Location"))
		}
		wantReplay(t, refund(s, acme, p.ID, "refund-1", ""), first)
		if n := s.Count(`SELECT count(*) FROM processor.refunds WHERE idempotency_key = $1`, refunds.Names.DownstreamKey(r.ID)); n != 1 {
			t.Fatalf("processor refunds = %d, want 1", n)
		}
		got := decodePayment(t, s.Request(http.MethodGet, "/v1/payments/"+p.ID, acme, "").Body)
		if got.AmountRefunded != p.Amount {
			t.Errorf("amount_refunded = %d, want %d", got.AmountRefunded, p.Amount)
		}
		if res := s.Request(http.MethodGet, "/v1/refunds/"+r.ID, acme, ""); res.Status != http.StatusOK {
			t.Errorf("GET refund: %d", res.Status)
		}
		if res := s.Request(http.MethodGet, "/v1/refunds/"+r.ID, globex, ""); res.Status != http.StatusNotFound {
			t.Errorf("another tenant's refund: %d", res.Status)
		}
	})

	t.Run("FinalRefusalsAreStored", func(t *testing.T) {
		t.Parallel()
		s := startStack(t, stacktest.Options{})
		p := paid(t, s, "pay-1")
		if res := refund(s, acme, p.ID, "part-1", `{"amount": 1500, "reason": "requested_by_customer"}`); res.Status != http.StatusCreated {
			t.Fatalf("partial refund: %d %s", res.Status, res.Body)
		}
		over := refund(s, acme, p.ID, "part-2", `{"amount": 500}`)
		if over.Status != http.StatusBadRequest || !strings.Contains(string(over.Body), `"code":"refund_exceeds_payment"`) ||
			!strings.Contains(string(over.Body), "499 USD left") {
			t.Fatalf("over-refund: %d %s", over.Status, over.Body)
		}
		wantReplay(t, refund(s, acme, p.ID, "part-2", `{"amount": 500}`), over)
		// A refusal finished in the first phase is kept as long as any key, and its lock is released.
		var key struct {
			Locked     bool      `json:"locked"`
			FinishedAt time.Time `json:"finished_at"`
			ExpiresAt  time.Time `json:"expires_at"`
		}
		if err := json.Unmarshal(s.Request(http.MethodGet, "/v1/idempotency-keys/part-2", acme, "").Body, &key); err != nil {
			t.Fatal(err)
		}
		if key.Locked || key.ExpiresAt.Sub(key.FinishedAt) != 24*time.Hour {
			t.Fatalf("refused key: %+v", key)
		}

		declined := s.Pay(acme, "pay-2", strings.Replace(visa, "pm_card_visa", "pm_card_declined", 1))
		d := decodePayment(t, declined.Body)
		res := refund(s, acme, d.ID, "refund-declined", "")
		if res.Status != http.StatusConflict || !strings.Contains(string(res.Body), `"code":"payment_not_refundable"`) || res.Header.Get("Retry-After") != "" {
			t.Fatalf("refund of a declined payment: %d %v %s", res.Status, res.Header, res.Body)
		}
		wantReplay(t, refund(s, acme, d.ID, "refund-declined", ""), res)
		if n := s.Count(`SELECT count(*) FROM refunds`); n != 1 {
			t.Fatalf("refunds = %d, want 1", n)
		}
	})

	t.Run("RejectedRequestsChangeNothing", func(t *testing.T) {
		t.Parallel()
		s := startStack(t, stacktest.Options{})
		p := paid(t, s, "pay-1")
		for _, tc := range []struct {
			name, apiKey, paymentID, body string
			status                        int
		}{
			{"ErrUnknownPayment", acme, "pay_unknown", "", http.StatusNotFound},
			{"ErrOtherTenantsPayment", globex, p.ID, "", http.StatusNotFound},
			{"ErrAmountZero", acme, p.ID, `{"amount": 0}`, http.StatusBadRequest},
			{"ErrReason", acme, p.ID, `{"reason": "changed my mind"}`, http.StatusBadRequest},
			{"ErrUnknownField", acme, p.ID, `{"amount": 1, "tip": 1}`, http.StatusBadRequest},
		} {
			if res := refund(s, tc.apiKey, tc.paymentID, "r-1", tc.body); res.Status != tc.status {
				t.Errorf("%s: %d %s, want %d", tc.name, res.Status, res.Body, tc.status)
			}
		}
		if n := s.Count(`SELECT count(*) FROM idempotency_keys WHERE key = 'r-1'`); n != 0 {
			t.Fatalf("rejected refunds left %d keys", n)
		}
		// The same key under another payment's path, or a payment's, is a mismatch.
		if res := refund(s, acme, p.ID, "r-1", `{"amount": 100}`); res.Status != http.StatusCreated {
			t.Fatalf("valid refund: %d %s", res.Status, res.Body)
		}
		other := paid(t, s, "pay-2")
		if res := refund(s, acme, other.ID, "r-1", `{"amount": 100}`); res.Status != http.StatusUnprocessableEntity {
			t.Errorf("same key, other payment: %d %s", res.Status, res.Body)
		}
		if res := s.Pay(acme, "r-1", visa); res.Status != http.StatusUnprocessableEntity {
			t.Errorf("same key, other endpoint: %d %s", res.Status, res.Body)
		}
	})

	t.Run("ConcurrentRefundsNeverExceedThePayment", func(t *testing.T) {
		t.Parallel()
		s := startStack(t, stacktest.Options{})
		p := paid(t, s, "pay-1")
		var wg sync.WaitGroup
		statuses := make([]int, 10)
		for i := range statuses {
			wg.Go(func() {
				statuses[i] = refund(s, acme, p.ID, fmt.Sprintf("r-%d", i), `{"amount": 500}`).Status
			})
		}
		wg.Wait()
		created := 0
		for _, st := range statuses {
			switch st {
			case http.StatusCreated:
				created++
			case http.StatusBadRequest:
			default:
				t.Errorf("unexpected status %d", st)
			}
		}
		if created != 3 {
			t.Fatalf("%d refunds of 500 succeeded on a payment of 1999, want 3", created)
		}
		got := decodePayment(t, s.Request(http.MethodGet, "/v1/payments/"+p.ID, acme, "").Body)
		if got.AmountRefunded != 1500 {
			t.Fatalf("amount_refunded = %d, want 1500", got.AmountRefunded)
		}
	})
}

func TestEvents(t *testing.T) {
	t.Parallel()
	s := startStack(t, stacktest.Options{})
	p := paid(t, s, "pay-1")
	if res := refund(s, acme, p.ID, "refund-1", `{"amount": 100}`); res.Status != http.StatusCreated {
		t.Fatalf("refund: %d", res.Status)
	}

	type page struct {
		Data []struct {
			ID, Type string
			Data     struct {
				Object struct {
					ID             string
					AmountRefunded int64 `json:"amount_refunded"`
				}
			}
		}
		HasMore bool `json:"has_more"`
	}
	// Newest first, a page of one at a time: the refund's success, and the
	// payment refunded after it, carrying the amount refunded.
	want := []struct {
		typ, object string
		refunded    int64
	}{{"payment.refunded", p.ID, 100}, {"refund.succeeded", "", 0}, {"payment.succeeded", p.ID, 0}}
	after := ""
	for i, w := range want {
		res := s.Request(http.MethodGet, "/v1/events?limit=1"+after, acme, "")
		var got page
		if err := json.Unmarshal(res.Body, &got); err != nil || len(got.Data) != 1 || got.HasMore != (i < len(want)-1) ||
			got.Data[0].Type != w.typ || w.object != "" && (got.Data[0].Data.Object.ID != w.object || got.Data[0].Data.Object.AmountRefunded != w.refunded) {
			t.Fatalf("page %d: %s, want %s", i+1, res.Body, w.typ)
		}
		after = "&starting_after=" + got.Data[0].ID
	}
	if res := s.Request(http.MethodGet, "/v1/events", globex, ""); !strings.Contains(string(res.Body), `"data":[]`) {
		t.Fatalf("globex sees %s", res.Body)
	}
	if res := s.Request(http.MethodGet, "/v1/events?limit=0", acme, ""); res.Status != http.StatusBadRequest {
		t.Fatalf("limit=0: %d", res.Status)
	}
}
