package http_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/example/payments/tools/stacktest"
)

// TestFailClosed cuts the API off from Postgres: every state-changing request
// gets 503 with Retry-After and executes nothing, /readyz says not ready, and
// once the database is back the same API serves again without a restart.
func TestFailClosed(t *testing.T) {
	t.Parallel()
	s := stacktest.New(t, stacktest.Options{DBProxy: true})
	s.StartWorker()

	if res := s.Pay(acme, "before", visa); res.Status != http.StatusCreated {
		t.Fatalf("before the cut: %d %s", res.Status, res.Body)
	}
	s.Proxy.Cut()

	for _, key := range []string{"during-1", "during-2", "before"} {
		res := s.Pay(acme, key, visa)
		if res.Status != http.StatusServiceUnavailable || res.Header.Get("Retry-After") == "" ||
			!strings.Contains(string(res.Body), `"code":"service_unavailable"`) {
			t.Fatalf("%s during the cut: %d %v %s", key, res.Status, res.Header, res.Body)
		}
	}
	if res := s.Request(http.MethodGet, "/readyz", "", ""); res.Status != http.StatusServiceUnavailable {
		t.Errorf("/readyz during the cut: %d", res.Status)
	}
	if res := s.Request(http.MethodGet, "/healthz", "", ""); res.Status != http.StatusOK {
		t.Errorf("/healthz during the cut: %d (liveness must not depend on the database)", res.Status)
	}
	// Counted on the worker's side of the proxy, which still reaches Postgres.
	for table, want := range map[string]int{"idempotency_keys": 1, "payments": 1, "river_job": 1, "processor.charges": 1} {
		if n := s.Count(`SELECT count(*) FROM ` + table); n != want {
			t.Errorf("%s has %d rows after the cut, want %d", table, n, want)
		}
	}

	s.Proxy.Restore()
	stacktest.WaitFor(t, "the API to serve again", func() bool {
		return s.Request(http.MethodGet, "/readyz", "", "").Status == http.StatusOK
	})
	res := s.Pay(acme, "during-1", visa)
	if res.Status != http.StatusCreated || res.Header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("after the restore: %d %s", res.Status, res.Body)
	}
	if n := s.Count(`SELECT count(*) FROM processor.charges`); n != 2 {
		t.Errorf("processor charges = %d, want 2", n)
	}
}

// TestCommitAnswerLost loses the answer to the first phase's COMMIT: the
// payment is recorded, and the 503 must not say that nothing was executed.
// A retry under the same key finds the payment, charged once.
func TestCommitAnswerLost(t *testing.T) {
	t.Parallel()
	s := stacktest.New(t, stacktest.Options{DBProxy: true})
	s.StartWorker()

	s.Proxy.LoseCommitAnswer()
	res := s.Pay(acme, "lost-answer", visa)
	if res.Status != http.StatusServiceUnavailable || res.Header.Get("Retry-After") == "" ||
		!strings.Contains(string(res.Body), `"code":"outcome_unknown"`) {
		t.Fatalf("a payment whose commit's answer was lost: %d %v %s", res.Status, res.Header, res.Body)
	}
	if n := s.Count(`SELECT count(*) FROM idempotency_keys WHERE key = 'lost-answer'`); n != 1 {
		t.Fatalf("the lost answer's key: %d rows, want 1 (the commit happened)", n)
	}
	var again stacktest.Response
	stacktest.WaitFor(t, "the same key to answer with the payment", func() bool {
		again = s.Pay(acme, "lost-answer", visa)
		return again.Status == http.StatusCreated
	})
	if again.Header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("the retry was not a replay of the recorded payment: %v %s", again.Header, again.Body)
	}
	if n := s.Count(`SELECT count(*) FROM processor.charges`); n != 1 {
		t.Errorf("processor charges = %d, want 1", n)
	}
}
