package fakeprocessor_test

import (
	"bytes"
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/example/payments/tools/fakeprocessor"
)

func TestReplay(t *testing.T) {
	t.Parallel()
	e := newEnv(t, fakeprocessor.Config{})

	tests := []struct {
		name, method string
		wantStatus   int
	}{
		{"Succeeded", "pm_card_visa", http.StatusOK},
		{"Declined", "pm_card_declined", http.StatusPaymentRequired},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			key := "replay-" + tt.name
			first := e.post("/v1/charges", key, `{"amount":700,"currency":"USD","payment_method":"`+tt.method+`"}`)
			if first.status != tt.wantStatus {
				t.Fatalf("status = %d, want %d: %s", first.status, tt.wantStatus, first.body)
			}
			// The same parameters in another order and layout are the same request.
			wantReplayOf(t, e.post("/v1/charges", key, "{ \"payment_method\": \""+tt.method+"\",\n \"currency\": \"USD\", \"amount\": 700 }"), first)
			e.wantChargesUnder(t, key, 1)
		})
	}
}

func TestKeyReused(t *testing.T) {
	t.Parallel()
	e := newEnv(t, fakeprocessor.Config{})
	first := e.postOK(t, "/v1/charges", "reused", `{"amount":100,"currency":"USD","payment_method":"pm_card_visa"}`)
	chargeID := decode[fakeprocessor.Charge](t, first).ID

	tests := []struct{ name, path, body string }{
		{"OtherAmount", "/v1/charges", `{"amount":101,"currency":"USD","payment_method":"pm_card_visa"}`},
		{"OtherEndpoint", "/v1/refunds", `{"charge":"` + chargeID + `"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			wantError(t, e.post(tt.path, "reused", tt.body), http.StatusBadRequest, "idempotency_error", "idempotency_key_reused")
		})
	}
	t.Cleanup(func() { e.wantChargesUnder(t, "reused", 1) })
}

func TestConcurrentSameKey(t *testing.T) {
	t.Parallel()
	e := newEnv(t, fakeprocessor.Config{})
	const n = 20

	var (
		wg        sync.WaitGroup
		start     = make(chan struct{})
		responses = make([]response, n)
		errs      = make([]error, n)
	)
	for i := range n {
		wg.Go(func() {
			<-start
			responses[i], errs[i] = e.postCtx(context.Background(), "/v1/charges", "race",
				`{"amount":2500,"currency":"USD","payment_method":"pm_card_visa"}`)
		})
	}
	close(start)
	wg.Wait()

	fresh := 0
	for i, resp := range responses {
		if errs[i] != nil {
			t.Fatalf("request %d: %v", i, errs[i])
		}
		if resp.status != http.StatusOK {
			t.Fatalf("request %d: %d %s", i, resp.status, resp.body)
		}
		if !bytes.Equal(resp.body, responses[0].body) {
			t.Errorf("request %d body differs:\n%s\n%s", i, resp.body, responses[0].body)
		}
		if resp.header.Get("Idempotent-Replayed") == "" {
			fresh++
		}
	}
	if fresh != 1 {
		t.Errorf("fresh answers = %d, want 1", fresh)
	}
	e.wantChargesUnder(t, "race", 1)
}

func TestProcessingError(t *testing.T) {
	t.Parallel()
	e := newEnv(t, fakeprocessor.Config{})

	resp := e.post("/v1/charges", "proc-err", `{"amount":100,"currency":"USD","payment_method":"pm_card_processing_error"}`)
	wantError(t, resp, http.StatusInternalServerError, "api_error", "processing_error")
	e.wantChargesUnder(t, "proc-err", 0)
	if n := e.keyRows("proc-err"); n != 0 {
		t.Errorf("key rows = %d, want 0", n)
	}
	// Nothing was stored, so the key is free, even for other parameters.
	wantFresh(t, e.post("/v1/charges", "proc-err", `{"amount":100,"currency":"USD","payment_method":"pm_card_visa"}`))
}

func TestKeyExpiry(t *testing.T) {
	t.Parallel()
	c := &clock{start: time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)}
	e := newEnv(t, fakeprocessor.Config{KeyRetention: 24 * time.Hour, Now: c.Now})

	e.postOK(t, "/v1/charges", "expiring", `{"amount":100,"currency":"USD","payment_method":"pm_card_visa"}`)

	// Within retention the key is remembered.
	c.Advance(23 * time.Hour)
	reused := e.post("/v1/charges", "expiring", `{"amount":200,"currency":"USD","payment_method":"pm_card_visa"}`)
	if reused.status != http.StatusBadRequest {
		t.Fatalf("within retention: %d %s", reused.status, reused.body)
	}

	// Past it, the key is absent and its use is a new request.
	c.Advance(time.Hour)
	fresh := e.post("/v1/charges", "expiring", `{"amount":200,"currency":"USD","payment_method":"pm_card_visa"}`)
	wantFresh(t, fresh)
	if got := decode[fakeprocessor.Charge](t, fresh).Amount; got != 200 {
		t.Errorf("amount = %d, want 200", got)
	}
	e.wantChargesUnder(t, "expiring", 2)
	// The new request is replayed in turn.
	wantReplayOf(t, e.post("/v1/charges", "expiring", `{"amount":200,"currency":"USD","payment_method":"pm_card_visa"}`), fresh)
}

// clock is a settable clock for expiry tests: start, plus what Advance
// added.
type clock struct {
	start    time.Time
	advanced atomic.Int64
}

func (c *clock) Now() time.Time { return c.start.Add(time.Duration(c.advanced.Load())) }

func (c *clock) Advance(d time.Duration) { c.advanced.Add(int64(d)) }
