package http_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/example/payments/internal/idempotency"
	"github.com/example/payments/internal/operation"
	"github.com/example/payments/internal/payments"
	"github.com/example/payments/tools/stacktest"
)

const visa = `{"amount": 1999, "currency": "USD", "payment_method": "pm_card_visa", "description": "T-shirt", "metadata": {"order": "42"}}`

// decodeMember reads a T from a body, or from the named member of a problem
// (a 402 carries the failed payment or refund there).
func decodeMember[T any](t *testing.T, body []byte, member string) T {
	t.Helper()
	var problem map[string]json.RawMessage
	if err := json.Unmarshal(body, &problem); err == nil && problem[member] != nil {
		body = problem[member]
	}
	var v T
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatalf("decode %s: %v", body, err)
	}
	return v
}

func decodePayment(t *testing.T, body []byte) payments.Payment {
	t.Helper()
	return decodeMember[payments.Payment](t, body, "payment")
}

func decodeProblem(t *testing.T, body []byte) map[string]any {
	t.Helper()
	var p map[string]any
	if err := json.Unmarshal(body, &p); err != nil {
		t.Fatalf("decode %s: %v", body, err)
	}
	return p
}

func TestCreatePayment(t *testing.T) {
	t.Parallel()

	t.Run("OK", func(t *testing.T) {
		t.Parallel()
		s := startStack(t, stacktest.Options{})

		first := created(t, s, acme, "order-42", visa)
		p := decodePayment(t, first.Body)
		if p.Status != operation.StatusSucceeded || p.Amount != 1999 || p.Currency != "USD" || p.ProcessorChargeID == nil || p.Metadata["order"] != "42" {
			t.Fatalf("payment = %+v", p)
		}
		if got := first.Header.Get("Location"); got != "/v1/payments/"+p.ID {
			t.Errorf("Location = %q", got)
		}
		if got := first.Header.Get("Idempotency-Key"); got != "order-42" {
			t.Errorf("echoed Idempotency-Key = %q", got)
		}
		if first.Header.Get("Idempotent-Replayed") != "" {
			t.Error("first response marked as replayed")
		}
		wantCharges(t, s, p.ID, 1)

		// The same body with other key order and spacing is the same request.
		replay := s.Pay(acme, "order-42", `{"payment_method":"pm_card_visa","metadata":{"order":"42"},"description":"T-shirt","currency":"USD","amount":1999}`)
		wantReplay(t, replay, first)
		if got := replay.Header.Get("Location"); got != first.Header.Get("Location") {
			t.Errorf("replay Location = %q, want the first's", got)
		}
		wantCharges(t, s, p.ID, 1)
		if n := s.Count(`SELECT count(*) FROM events WHERE resource_id = $1 AND type = 'payment.succeeded'`, p.ID); n != 1 {
			t.Errorf("events = %d, want 1", n)
		}

		got := s.Request(http.MethodGet, "/v1/payments/"+p.ID, acme, "")
		if got.Status != http.StatusOK || decodePayment(t, got.Body).Status != operation.StatusSucceeded {
			t.Errorf("GET = %d %s", got.Status, got.Body)
		}

		wantMetrics(t, s.APIMetrics(),
			`payments_http_requests_total{method="POST",route="/v1/payments",status="2xx"} 2`,
			`payments_http_requests_total{method="GET",route="/v1/payments/{id}",status="2xx"} 1`,
			`payments_idempotent_replays_total 1`,
		)
	})

	t.Run("QuotedKeyIsTheBareKey", func(t *testing.T) {
		t.Parallel()
		s := startStack(t, stacktest.Options{})
		first := created(t, s, acme, `"abc-123"`, visa)
		wantReplay(t, s.Pay(acme, `abc-123`, visa), first)
	})

	t.Run("Declined", func(t *testing.T) {
		t.Parallel()
		s := startStack(t, stacktest.Options{})
		for _, tc := range []struct{ method, code string }{
			{"pm_card_declined", "card_declined"},
			{"pm_card_insufficient_funds", "insufficient_funds"},
		} {
			body := fmt.Sprintf(`{"amount": 500, "currency": "EUR", "payment_method": %q}`, tc.method)
			first := s.Pay(acme, tc.method, body)
			if first.Status != http.StatusPaymentRequired || first.Header.Get("Content-Type") != "application/problem+json" {
				t.Fatalf("%s: status = %d %s", tc.method, first.Status, first.Body)
			}
			problem := decodeProblem(t, first.Body)
			p := decodePayment(t, first.Body)
			if problem["code"] != tc.code || p.Status != operation.StatusFailed || p.FailureCode == nil || *p.FailureCode != tc.code {
				t.Fatalf("%s: problem = %s", tc.method, first.Body)
			}
			wantReplay(t, s.Pay(acme, tc.method, body), first)
			wantCharges(t, s, p.ID, 1)
		}
	})

	t.Run("ErrKeyMismatch", func(t *testing.T) {
		t.Parallel()
		s := startStack(t, stacktest.Options{})
		created(t, s, acme, "k1", visa)
		res := s.Pay(acme, "k1", strings.Replace(visa, "1999", "2000", 1))
		if res.Status != http.StatusUnprocessableEntity || decodeProblem(t, res.Body)["code"] != "idempotency_key_mismatch" {
			t.Fatalf("other amount: %d %s", res.Status, res.Body)
		}
		if n := s.Count(`SELECT count(*) FROM payments`); n != 1 {
			t.Fatalf("payments = %d, want 1", n)
		}
	})

	t.Run("TenantsAreIsolated", func(t *testing.T) {
		t.Parallel()
		s := startStack(t, stacktest.Options{})
		a := s.Pay(acme, "shared-key", visa)
		g := s.Pay(globex, "shared-key", visa)
		if a.Status != http.StatusCreated || g.Status != http.StatusCreated || g.Header.Get("Idempotent-Replayed") != "" {
			t.Fatalf("acme %d, globex %d %v", a.Status, g.Status, g.Header)
		}
		pa, pg := decodePayment(t, a.Body), decodePayment(t, g.Body)
		if pa.ID == pg.ID {
			t.Fatal("two tenants got one payment")
		}
		if res := s.Request(http.MethodGet, "/v1/payments/"+pa.ID, globex, ""); res.Status != http.StatusNotFound {
			t.Errorf("globex reads acme's payment: %d", res.Status)
		}
		if res := s.Request(http.MethodGet, "/v1/idempotency-keys/shared-key", globex, ""); res.Status != http.StatusOK ||
			!strings.Contains(string(res.Body), pg.ID) || strings.Contains(string(res.Body), pa.ID) {
			t.Errorf("globex's key shows %s", res.Body)
		}
		list := s.Request(http.MethodGet, "/v1/payments", globex, "")
		if !strings.Contains(string(list.Body), pg.ID) || strings.Contains(string(list.Body), pa.ID) {
			t.Errorf("globex's list = %s", list.Body)
		}
		wantCharges(t, s, pa.ID, 1)
		wantCharges(t, s, pg.ID, 1)
	})
}

// TestRejectedRequestsChangeNothing proves that a request failing
// authentication, key parsing or validation leaves no trace, so the same key
// can be used again with a corrected request.
func TestRejectedRequestsChangeNothing(t *testing.T) {
	t.Parallel()
	s := stacktest.New(t, stacktest.Options{})
	long := strings.Repeat("k", idempotency.MaxKeyLength+1)
	for _, tc := range []struct {
		name    string
		apiKey  string
		headers []string
		body    string
		status  int
		code    string
	}{
		{"ErrUnauthorized", "", []string{"Idempotency-Key", "k"}, visa, 401, "unauthorized"},
		{"ErrUnknownAPIKey", "sk_test_nobody", []string{"Idempotency-Key", "k"}, visa, 401, "unauthorized"},
		{"ErrKeyMissing", acme, nil, visa, 400, "idempotency_key_missing"},
		{"ErrKeyEmpty", acme, []string{"Idempotency-Key", `""`}, visa, 400, "idempotency_key_invalid"},
		{"ErrKeyTooLong", acme, []string{"Idempotency-Key", long}, visa, 400, "idempotency_key_invalid"},
		{"ErrKeyMalformed", acme, []string{"Idempotency-Key", `"unterminated`}, visa, 400, "idempotency_key_invalid"},
		{"ErrMediaType", acme, []string{"Idempotency-Key", "k", "Content-Type", "text/plain"}, visa, 415, "unsupported_media_type"},
		{"ErrTooLarge", acme, []string{"Idempotency-Key", "k"}, `{"description": "` + strings.Repeat("x", 70<<10) + `"}`, 413, "payload_too_large"},
		{"ErrMalformedJSON", acme, []string{"Idempotency-Key", "k"}, `{"amount": `, 400, "invalid_request"},
		{"ErrUnknownField", acme, []string{"Idempotency-Key", "k"}, `{"amount": 1, "currency": "USD", "payment_method": "pm_card_visa", "tip": 1}`, 400, "invalid_request"},
		{"ErrFieldCase", acme, []string{"Idempotency-Key", "k"}, `{"AMOUNT": 1, "currency": "USD", "payment_method": "pm_card_visa"}`, 400, "invalid_request"},
		{"ErrAmountType", acme, []string{"Idempotency-Key", "k"}, `{"amount": 10.5, "currency": "USD", "payment_method": "pm_card_visa"}`, 400, "invalid_request"},
		{"ErrAmountRequired", acme, []string{"Idempotency-Key", "k"}, `{"currency": "USD", "payment_method": "pm_card_visa"}`, 400, "invalid_request"},
		{"ErrAmountZero", acme, []string{"Idempotency-Key", "k"}, `{"amount": 0, "currency": "USD", "payment_method": "pm_card_visa"}`, 400, "invalid_request"},
		{"ErrAmountTooLarge", acme, []string{"Idempotency-Key", "k"}, `{"amount": 100000000, "currency": "USD", "payment_method": "pm_card_visa"}`, 400, "invalid_request"},
		{"ErrCurrency", acme, []string{"Idempotency-Key", "k"}, `{"amount": 1, "currency": "XYZ", "payment_method": "pm_card_visa"}`, 400, "invalid_request"},
		{"ErrPaymentMethod", acme, []string{"Idempotency-Key", "k"}, `{"amount": 1, "currency": "USD", "payment_method": "visa"}`, 400, "invalid_request"},
		{"ErrMetadata", acme, []string{"Idempotency-Key", "k"}, `{"amount": 1, "currency": "USD", "payment_method": "pm_card_visa", "metadata": {"a": 1}}`, 400, "invalid_request"},
		{"ErrDescription", acme, []string{"Idempotency-Key", "k"}, `{"amount": 1, "currency": "USD", "payment_method": "pm_card_visa", "description": "` + strings.Repeat("é", 1001) + `"}`, 400, "invalid_request"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := s.Request(http.MethodPost, "/v1/payments", tc.apiKey, tc.body, tc.headers...)
			if res.Status != tc.status {
				t.Fatalf("status = %d, want %d: %s", res.Status, tc.status, res.Body)
			}
			if ct := res.Header.Get("Content-Type"); ct != "application/problem+json" {
				t.Errorf("Content-Type = %q", ct)
			}
			if p := decodeProblem(t, res.Body); p["code"] != tc.code || p["status"] != float64(tc.status) || p["type"] == "" {
				t.Errorf("problem = %s", res.Body)
			}
		})
	}
	for _, table := range []string{"idempotency_keys", "payments", "operation_outbox", "river_job"} {
		if n := s.Count(`SELECT count(*) FROM ` + table); n != 0 {
			t.Errorf("%s has %d rows after rejected requests", table, n)
		}
	}

	// The key stayed free: the corrected request goes through.
	s.StartWorker()
	if res := s.Pay(acme, "k", visa); res.Status != http.StatusCreated || res.Header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("corrected request: %d %s", res.Status, res.Body)
	}
	if res := s.Request(http.MethodGet, "/v1/payments/pay_unknown", acme, ""); res.Status != http.StatusNotFound {
		t.Errorf("unknown payment: %d", res.Status)
	}
}

// TestConcurrentDuplicates sends one new key 50 times at once.
func TestConcurrentDuplicates(t *testing.T) {
	t.Parallel()
	s := startStack(t, stacktest.Options{})

	const n = 50
	responses := make([]stacktest.Response, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			responses[i] = s.Pay(acme, "race", visa)
		})
	}
	close(start)
	wg.Wait()

	var final []byte
	created, conflicts := 0, 0
	for _, res := range responses {
		switch res.Status {
		case http.StatusCreated:
			created++
			if final == nil {
				final = res.Body
			}
			if !bytes.Equal(res.Body, final) {
				t.Errorf("two different final responses:\n%s\n%s", final, res.Body)
			}
		case http.StatusConflict:
			conflicts++
			if res.Header.Get("Retry-After") == "" || decodeProblem(t, res.Body)["code"] != "idempotency_key_in_use" {
				t.Errorf("409 without Retry-After or code: %v %s", res.Header, res.Body)
			}
		default:
			t.Errorf("unexpected response %d %s", res.Status, res.Body)
		}
	}
	t.Logf("%d created or replayed, %d conflicts", created, conflicts)
	if created == 0 {
		t.Fatal("no request got the final response")
	}
	if got := s.Count(`SELECT count(*) FROM payments`); got != 1 {
		t.Fatalf("payments = %d, want 1", got)
	}
	wantCharges(t, s, decodePayment(t, final).ID, 1)
}

// TestResume stops payments at each recovery point with no worker running,
// then starts the worker and proves each ends with exactly one charge.
func TestResume(t *testing.T) {
	t.Parallel()

	t.Run("FromStarted", func(t *testing.T) {
		t.Parallel()
		s := stacktest.New(t, stacktest.Options{})
		res := s.Pay(acme, "resume-started", visa, "Prefer", "respond-async")
		if res.Status != http.StatusAccepted || res.Header.Get("Retry-After") == "" {
			t.Fatalf("status = %d %v %s", res.Status, res.Header, res.Body)
		}
		p := decodePayment(t, res.Body)
		if p.Status != operation.StatusProcessing || res.Header.Get("Location") != "/v1/payments/"+p.ID {
			t.Fatalf("202 body %s, Location %q", res.Body, res.Header.Get("Location"))
		}
		if point := s.RecoveryPoint("ten_acme", "resume-started"); point != "started" {
			t.Fatalf("recovery point = %q", point)
		}
		// Staged in the outbox with the key, and moved to River by the relay.
		if n := s.Count(`SELECT count(*) FROM operation_outbox WHERE resource_id = $1`, p.ID); n != 1 {
			t.Fatalf("staged jobs = %d, want 1", n)
		}
		s.Relayed()
		if n := s.Count(`SELECT count(*) FROM river_job WHERE state = 'available' AND id = (SELECT job_id FROM idempotency_keys WHERE key = 'resume-started')`); n != 1 {
			t.Fatalf("pending jobs named on the key = %d, want 1", n)
		}
		if n := s.Count(`SELECT count(*) FROM operation_outbox`); n != 0 {
			t.Fatalf("staged jobs after the relay = %d, want 0", n)
		}
		// Not charged before the worker runs.
		wantCharges(t, s, p.ID, 0)

		s.StartWorker()
		final := s.Pay(acme, "resume-started", visa)
		if final.Status != http.StatusCreated || final.Header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("retry = %d %s", final.Status, final.Body)
		}
		wantCharges(t, s, p.ID, 1)
	})

	t.Run("FromChargeCreated", func(t *testing.T) {
		t.Parallel()
		s := stacktest.New(t, stacktest.Options{})
		res := s.Pay(acme, "resume-charged", visa, "Prefer", "respond-async")
		p := decodePayment(t, res.Body)
		if err := s.Ops.LearnOutcome(context.Background(), payments.Names.Type, p.ID); err != nil {
			t.Fatal(err)
		}
		if point := s.RecoveryPoint("ten_acme", "resume-charged"); point != payments.Names.CreatedPoint() {
			t.Fatalf("recovery point = %q", point)
		}
		wantCharges(t, s, p.ID, 1)
		// Running the phase again finds the key past it and calls nothing.
		if err := s.Ops.LearnOutcome(context.Background(), payments.Names.Type, p.ID); err != nil {
			t.Fatal(err)
		}

		s.StartWorker()
		stacktest.WaitFor(t, "the key to finish", func() bool { return s.RecoveryPoint("ten_acme", "resume-charged") == "finished" })
		final := s.Pay(acme, "resume-charged", visa)
		if final.Status != http.StatusCreated || decodePayment(t, final.Body).Status != operation.StatusSucceeded {
			t.Fatalf("retry = %d %s", final.Status, final.Body)
		}
		wantCharges(t, s, p.ID, 1)
		// River completes the job once its work returns, a moment after the
		// key finished; no other job ran.
		stacktest.WaitFor(t, "the job to be completed", func() bool {
			return s.Count(`SELECT count(*) FROM river_job WHERE state = 'completed'`) == 1
		})
		if n := s.Count(`SELECT count(*) FROM river_job WHERE state <> 'completed'`); n != 0 {
			t.Errorf("jobs not completed = %d, want 0", n)
		}
	})

	t.Run("StaleLockIsTakenOver", func(t *testing.T) {
		t.Parallel()
		s := stacktest.New(t, stacktest.Options{})
		res := s.Pay(acme, "stale", visa, "Prefer", "respond-async")
		if res.Status != http.StatusAccepted {
			t.Fatalf("status = %d", res.Status)
		}
		// An API process that died while waiting leaves its lock behind.
		if _, err := s.DB.Pool.Exec(context.Background(),
			`UPDATE idempotency_keys SET locked_at = now() WHERE key = 'stale'`); err != nil {
			t.Fatal(err)
		}
		held := s.Pay(acme, "stale", visa, "Prefer", "respond-async")
		if held.Status != http.StatusConflict || held.Header.Get("Retry-After") == "" {
			t.Fatalf("while locked: %d %s", held.Status, held.Body)
		}

		if view := decodeProblem(t, s.Request(http.MethodGet, "/v1/idempotency-keys/stale", acme, "").Body); view["locked"] != true {
			t.Fatalf("a live lock shown as %v", view["locked"])
		}
		// The lock's age is the database's clock: move the lock back in time.
		s.Exec(`UPDATE idempotency_keys SET locked_at = locked_at - $1::interval WHERE key = 'stale'`, stacktest.LockTimeout+time.Second)
		if view := decodeProblem(t, s.Request(http.MethodGet, "/v1/idempotency-keys/stale", acme, "").Body); view["locked"] != false {
			t.Fatalf("a stale lock shown as %v", view["locked"])
		}
		s.StartWorker()
		final := s.Pay(acme, "stale", visa)
		if final.Status != http.StatusCreated {
			t.Fatalf("after the lock went stale: %d %s", final.Status, final.Body)
		}
		if n := s.Count(`SELECT count(*) FROM idempotency_keys WHERE key = 'stale' AND locked_at IS NULL`); n != 1 {
			t.Errorf("the taken-over lock was not released")
		}
		wantCharges(t, s, decodePayment(t, final.Body).ID, 1)
	})
}
