package fakeprocessor_test

import (
	"bytes"
	"context"
	"net/http"
	"sync"
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
			// The same parameters in another order and layout are the same request.
			again := e.post("/v1/charges", key, "{ \"payment_method\": \""+tt.method+"\",\n \"currency\": \"USD\", \"amount\": 700 }")
			if first.status != tt.wantStatus || again.status != tt.wantStatus {
				t.Fatalf("statuses = %d, %d, want %d", first.status, again.status, tt.wantStatus)
			}
			if !bytes.Equal(first.body, again.body) {
				t.Errorf("replay differs:\n%s\n%s", first.body, again.body)
			}
			if got := again.header.Get("Idempotent-Replayed"); got != "true" {
				t.Errorf("Idempotent-Replayed = %q, want true", got)
			}
			if n := e.chargesUnder(key); n != 1 {
				t.Errorf("charges under key = %d, want 1", n)
			}
		})
	}
}

func TestKeyReused(t *testing.T) {
	t.Parallel()
	e := newEnv(t, fakeprocessor.Config{})
	first := e.post("/v1/charges", "reused", `{"amount":100,"currency":"USD","payment_method":"pm_card_visa"}`)
	if first.status != http.StatusOK {
		t.Fatalf("first: %d %s", first.status, first.body)
	}
	chargeID := decode[chargeJSON](t, first).ID

	tests := []struct{ name, path, body string }{
		{"OtherAmount", "/v1/charges", `{"amount":101,"currency":"USD","payment_method":"pm_card_visa"}`},
		{"OtherEndpoint", "/v1/refunds", `{"charge":"` + chargeID + `"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			resp := e.post(tt.path, "reused", tt.body)
			if resp.status != http.StatusBadRequest {
				t.Fatalf("status = %d: %s", resp.status, resp.body)
			}
			if ej := decodeError(t, resp); ej.Type != "idempotency_error" || ej.Code != "idempotency_key_reused" {
				t.Errorf("error = %+v", ej)
			}
		})
	}
	t.Cleanup(func() {
		if n := e.chargesUnder("reused"); n != 1 {
			t.Errorf("charges under key = %d, want 1", n)
		}
	})
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
	if got := e.chargesUnder("race"); got != 1 {
		t.Errorf("charges under key = %d, want 1", got)
	}
}

func TestProcessingError(t *testing.T) {
	t.Parallel()
	e := newEnv(t, fakeprocessor.Config{})

	resp := e.post("/v1/charges", "proc-err", `{"amount":100,"currency":"USD","payment_method":"pm_card_processing_error"}`)
	if resp.status != http.StatusInternalServerError {
		t.Fatalf("status = %d: %s", resp.status, resp.body)
	}
	if ej := decodeError(t, resp); ej.Type != "api_error" {
		t.Errorf("error = %+v", ej)
	}
	if n := e.chargesUnder("proc-err"); n != 0 {
		t.Errorf("charges = %d, want 0", n)
	}
	if n := e.keyRows("proc-err"); n != 0 {
		t.Errorf("key rows = %d, want 0", n)
	}
	// Nothing was stored, so the key is free, even for other parameters.
	ok := e.post("/v1/charges", "proc-err", `{"amount":100,"currency":"USD","payment_method":"pm_card_visa"}`)
	if ok.status != http.StatusOK || ok.header.Get("Idempotent-Replayed") != "" {
		t.Errorf("retry: %d %s", ok.status, ok.body)
	}
}

func TestKeyExpiry(t *testing.T) {
	t.Parallel()
	c := &clock{now: time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)}
	e := newEnv(t, fakeprocessor.Config{KeyRetention: 24 * time.Hour, Now: c.Now})

	first := e.post("/v1/charges", "expiring", `{"amount":100,"currency":"USD","payment_method":"pm_card_visa"}`)
	if first.status != http.StatusOK {
		t.Fatalf("first: %d %s", first.status, first.body)
	}

	// Within retention the key is remembered.
	c.Advance(23 * time.Hour)
	reused := e.post("/v1/charges", "expiring", `{"amount":200,"currency":"USD","payment_method":"pm_card_visa"}`)
	if reused.status != http.StatusBadRequest {
		t.Fatalf("within retention: %d %s", reused.status, reused.body)
	}

	// Past it, the key is absent and its use is a new request.
	c.Advance(time.Hour)
	fresh := e.post("/v1/charges", "expiring", `{"amount":200,"currency":"USD","payment_method":"pm_card_visa"}`)
	if fresh.status != http.StatusOK || fresh.header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("after expiry: %d %s", fresh.status, fresh.body)
	}
	if got := decode[chargeJSON](t, fresh).Amount; got != 200 {
		t.Errorf("amount = %d, want 200", got)
	}
	if n := e.chargesUnder("expiring"); n != 2 {
		t.Errorf("charges under key = %d, want 2", n)
	}
	replay := e.post("/v1/charges", "expiring", `{"amount":200,"currency":"USD","payment_method":"pm_card_visa"}`)
	if !bytes.Equal(replay.body, fresh.body) || replay.header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("replay of the new request: %d %s", replay.status, replay.body)
	}
}
