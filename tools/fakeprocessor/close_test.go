package fakeprocessor_test

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/example/payments/tools/fakeprocessor"
	"github.com/example/payments/tools/testwait"
)

// closureJSON is the answer of a close as tests read it.
type closureJSON struct {
	Object         string                `json:"object"`
	IdempotencyKey string                `json:"idempotency_key"`
	Charge         *fakeprocessor.Charge `json:"charge"`
	Refund         *fakeprocessor.Refund `json:"refund"`
}

// close closes key at path ("/v1/charges/close" or "/v1/refunds/close") and
// fails unless the processor answers a closure of key.
func (e *env) close(path, key string) (closureJSON, response) {
	e.t.Helper()
	resp := e.post(path, "", `{"idempotency_key":"`+key+`"}`)
	if resp.status != http.StatusOK {
		e.t.Fatalf("close %s: %d %s", key, resp.status, resp.body)
	}
	cl := decode[closureJSON](e.t, resp)
	if cl.Object != "key_closure" || cl.IdempotencyKey != key {
		e.t.Fatalf("closure = %s", resp.body)
	}
	return cl, resp
}

// closeTwice closes key at path twice and fails unless the second answer is
// the first's: a close is idempotent.
func (e *env) closeTwice(t *testing.T, path, key string) closureJSON {
	t.Helper()
	cl, first := e.close(path, key)
	if _, again := e.close(path, key); !bytes.Equal(first.body, again.body) {
		t.Errorf("closes differ:\n%s\n%s", first.body, again.body)
	}
	return cl
}

// closedKey reports whether key's row says it is closed and never expires.
func (e *env) closedKey(key string) bool {
	e.t.Helper()
	return e.count(`SELECT count(*) FROM processor.idempotency_keys
		WHERE key = $1 AND closed_at IS NOT NULL AND expires_at = 'infinity'`, key) == 1
}

// wantClosedRefusal fails unless resp refuses a closed key.
func wantClosedRefusal(t *testing.T, resp response) {
	t.Helper()
	wantError(t, resp, http.StatusBadRequest, "idempotency_error", "idempotency_key_closed")
	if ej := decodeError(t, resp); !strings.Contains(ej.Message, "closed") {
		t.Errorf("error = %+v", ej)
	}
}

func TestCloseCharge(t *testing.T) {
	t.Parallel()
	e := newEnv(t, fakeprocessor.Config{})

	t.Run("BeforeCharge", func(t *testing.T) {
		t.Parallel()
		cl, _ := e.close("/v1/charges/close", "cc-before")
		if cl.Charge != nil {
			t.Fatalf("closure charge = %+v, want null", cl.Charge)
		}
		if !e.closedKey("cc-before") {
			t.Error("key row is not closed")
		}
		wantClosedRefusal(t, e.post("/v1/charges", "cc-before", visaBody))
		// The refusal is final: a retry is refused the same, never charged.
		wantClosedRefusal(t, e.post("/v1/charges", "cc-before", visaBody))
		e.wantChargesUnder(t, "cc-before", 0)
	})
	t.Run("AfterCharge", func(t *testing.T) {
		t.Parallel()
		charged := e.post("/v1/charges", "cc-after", visaBody)
		want := decode[fakeprocessor.Charge](t, charged)
		cl, _ := e.close("/v1/charges/close", "cc-after")
		if cl.Charge == nil || cl.Charge.ID != want.ID || cl.Charge.Status != "succeeded" || cl.Charge.IdempotencyKey != "cc-after" {
			t.Fatalf("closure charge = %+v, want %s", cl.Charge, want.ID)
		}
		// The charge's own retries still replay it.
		wantReplayOf(t, e.post("/v1/charges", "cc-after", visaBody), charged)
		if !e.closedKey("cc-after") {
			t.Error("key row is not closed")
		}
	})
	t.Run("AfterDecline", func(t *testing.T) {
		t.Parallel()
		id := e.charge("cc-declined", "pm_card_declined")
		cl, _ := e.close("/v1/charges/close", "cc-declined")
		if c := cl.Charge; c == nil || c.ID != id || c.Status != "failed" || c.FailureCode == nil || *c.FailureCode != "card_declined" {
			t.Fatalf("closure charge = %+v, want the declined %s", cl.Charge, id)
		}
	})
	t.Run("AfterProcessingError", func(t *testing.T) {
		t.Parallel()
		const body = `{"amount":100,"currency":"USD","payment_method":"pm_card_processing_error"}`
		if resp := e.post("/v1/charges", "cc-5xx", body); resp.status != http.StatusInternalServerError {
			t.Fatalf("charge: %d %s", resp.status, resp.body)
		}
		// The 5xx rolled back and left the key free, so the close fences it.
		cl, _ := e.close("/v1/charges/close", "cc-5xx")
		if cl.Charge != nil {
			t.Fatalf("closure charge = %+v, want null", cl.Charge)
		}
		wantClosedRefusal(t, e.post("/v1/charges", "cc-5xx", visaBody))
		e.wantChargesUnder(t, "cc-5xx", 0)
		if !e.closedKey("cc-5xx") {
			t.Error("key row is not closed")
		}
	})
	t.Run("Twice", func(t *testing.T) {
		t.Parallel()
		e.closeTwice(t, "/v1/charges/close", "cc-twice-none")
		e.charge("cc-twice-made", "pm_card_visa")
		e.closeTwice(t, "/v1/charges/close", "cc-twice-made")
	})
	t.Run("RefusesRefunds", func(t *testing.T) {
		t.Parallel()
		ch := e.charge("cc-refund-target", "pm_card_visa")
		e.close("/v1/charges/close", "cc-any")
		// A key is closed for every operation, whichever close closed it.
		wantClosedRefusal(t, e.post("/v1/refunds", "cc-any", `{"charge":"`+ch+`"}`))
		e.wantRefunded(t, ch, 0)
	})
}

// TestCloseNeverExpires checks that a closed key outlives its retention: an
// expired key is taken over by the next POST, a closed one never is.
func TestCloseNeverExpires(t *testing.T) {
	t.Parallel()
	c := &clock{start: time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)}
	e := newEnv(t, fakeprocessor.Config{KeyRetention: time.Hour, Now: c.Now})

	e.close("/v1/charges/close", "ne-fence")
	e.charge("ne-made", "pm_card_visa")
	e.close("/v1/charges/close", "ne-made")
	c.Advance(1000 * time.Hour)

	wantClosedRefusal(t, e.post("/v1/charges", "ne-fence", visaBody))
	// Other parameters under the closed key of a charge are a reuse, never a
	// second charge.
	other := e.post("/v1/charges", "ne-made", `{"amount":5,"currency":"USD","payment_method":"pm_card_visa"}`)
	wantError(t, other, http.StatusBadRequest, "idempotency_error", "idempotency_key_reused")
	e.wantChargesUnder(t, "ne-fence", 0)
	e.wantChargesUnder(t, "ne-made", 1)
}

// TestCloseInFlight closes a key while an operation under it is executing
// inside the processor: the close waits for the operation to commit and
// answers with it.
func TestCloseInFlight(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name, path, close string
		// body returns the operation's body; it may create what it needs.
		body func(e *env) string
	}{
		{"Charge", "/v1/charges", "/v1/charges/close", func(*env) string { return visaBody }},
		{"Refund", "/v1/refunds", "/v1/refunds/close", func(e *env) string {
			return `{"charge":"` + e.charge("inflight-charge", "pm_card_visa") + `","amount":100}`
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, fakeprocessor.Config{Chaos: fakeprocessor.Chaos{ExecLatency: 2 * time.Second}})
			body := tt.body(e)
			// Only a transaction begun from now on is the operation's: one
			// that made what its body needs is not.
			var since time.Time
			if err := e.db.Pool.QueryRow(context.Background(), `SELECT clock_timestamp()`).Scan(&since); err != nil {
				t.Fatal(err)
			}

			answered := e.postAsync(tt.path, "inflight", body)
			// The operation's transaction has reserved the key and is
			// executing: its last statement was the key's insert.
			testwait.For(t, "the operation to hold its key", func() bool {
				return e.count(`SELECT count(*) FROM pg_stat_activity
					WHERE datname = current_database() AND state = 'idle in transaction' AND xact_start > $1
					  AND query LIKE '%INSERT INTO processor.idempotency_keys%'`, since) >= 1
			})
			if n := e.keyRows("inflight"); n != 0 {
				t.Fatalf("key rows = %d before the close, want 0 (uncommitted)", n)
			}

			cl, _ := e.close(tt.close, "inflight")
			resp := <-answered
			wantFresh(t, resp)
			id := decode[struct {
				ID string `json:"id"`
			}](t, resp).ID
			switch {
			case tt.name == "Charge" && (cl.Charge == nil || cl.Charge.ID != id):
				t.Fatalf("closure charge = %+v, want the charge in flight %s", cl.Charge, id)
			case tt.name == "Refund" && (cl.Refund == nil || cl.Refund.ID != id):
				t.Fatalf("closure refund = %+v, want the refund in flight %s", cl.Refund, id)
			}
			if !e.closedKey("inflight") {
				t.Error("key is not closed")
			}
		})
	}
}

func TestCloseRefund(t *testing.T) {
	t.Parallel()
	e := newEnv(t, fakeprocessor.Config{})

	t.Run("Made", func(t *testing.T) {
		t.Parallel()
		ch := e.charge("cr-made-charge", "pm_card_visa")
		refunded := e.post("/v1/refunds", "cr-made", `{"charge":"`+ch+`","amount":250}`)
		want := decode[fakeprocessor.Refund](t, refunded)
		cl := e.closeTwice(t, "/v1/refunds/close", "cr-made")
		if r := cl.Refund; r == nil || r.ID != want.ID || r.Amount != 250 || r.Status != "succeeded" || r.IdempotencyKey != "cr-made" {
			t.Fatalf("closure refund = %+v, want %s", cl.Refund, want.ID)
		}
		wantReplayOf(t, e.post("/v1/refunds", "cr-made", `{"charge":"`+ch+`","amount":250}`), refunded)
	})
	t.Run("None", func(t *testing.T) {
		t.Parallel()
		ch := e.charge("cr-none-charge", "pm_card_visa")
		cl, _ := e.close("/v1/refunds/close", "cr-none")
		if cl.Refund != nil {
			t.Fatalf("closure refund = %+v, want null", cl.Refund)
		}
		wantClosedRefusal(t, e.post("/v1/refunds", "cr-none", `{"charge":"`+ch+`"}`))
		if n := e.count(`SELECT count(*) FROM processor.refunds WHERE idempotency_key = 'cr-none'`); n != 0 {
			t.Errorf("refunds under key = %d, want 0", n)
		}
		e.wantRefunded(t, ch, 0)
	})
}

func TestCloseInvalid(t *testing.T) {
	t.Parallel()
	e := newEnv(t, fakeprocessor.Config{})

	tests := []struct {
		name     string
		body     string
		wantCode string
	}{
		{"ErrKeyMissing", `{}`, "parameter_missing"},
		{"ErrKeyEmpty", `{"idempotency_key":""}`, "parameter_missing"},
		{"ErrKeyTooLong", `{"idempotency_key":"` + strings.Repeat("k", 256) + `"}`, "parameter_invalid"},
		{"ErrUnknownField", `{"idempotency_key":"k","charge":"ch_1"}`, "parameter_invalid"},
		{"ErrMalformed", `{"idempotency_key":`, "parameter_invalid"},
	}
	for _, path := range []string{"/v1/charges/close", "/v1/refunds/close"} {
		for _, tt := range tests {
			t.Run(strings.Split(path, "/")[2]+tt.name, func(t *testing.T) {
				t.Parallel()
				wantError(t, e.post(path, "", tt.body), http.StatusBadRequest, "invalid_request_error", tt.wantCode)
			})
		}
	}
	if n := e.count(`SELECT count(*) FROM processor.idempotency_keys`); n != 0 {
		t.Errorf("key rows = %d, want 0", n)
	}
}

func TestCloseChaos(t *testing.T) {
	t.Parallel()

	t.Run("Fail", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, fakeprocessor.Config{Chaos: fakeprocessor.Chaos{FailRate: 1}})
		resp := e.post("/v1/charges/close", "", `{"idempotency_key":"chaos-fail"}`)
		if resp.status != http.StatusInternalServerError {
			t.Fatalf("status = %d: %s", resp.status, resp.body)
		}
		if n := e.keyRows("chaos-fail"); n != 0 {
			t.Errorf("key rows = %d, want 0: nothing is closed", n)
		}
	})
	t.Run("Drop", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, fakeprocessor.Config{Chaos: fakeprocessor.Chaos{DropRate: 1}})
		e.postUnanswered(context.Background(), "/v1/refunds/close", "", `{"idempotency_key":"chaos-drop"}`)
		// The close committed before its answer was dropped.
		if !e.closedKey("chaos-drop") {
			t.Error("key is not closed")
		}
	})
	t.Run("Latency", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, fakeprocessor.Config{Chaos: fakeprocessor.Chaos{Latency: 100 * time.Millisecond}})
		start := time.Now()
		e.close("/v1/charges/close", "chaos-latency")
		if elapsed := time.Since(start); elapsed < 100*time.Millisecond {
			t.Errorf("answered after %v, want at least the latency", elapsed)
		}
	})
}
