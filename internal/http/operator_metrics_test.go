package http_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/example/payments/tools/stacktest"
	"github.com/example/payments/tools/testio"
)

// value is the value of the series named exactly series (with its labels)
// in a scrape; -1 when it is absent.
func value(t *testing.T, scrape, series string) float64 {
	t.Helper()
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`).FindStringSubmatch(scrape)
	if m == nil {
		return -1
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestOperatorMetrics moves each operator series by making it move: a key
// created and replayed, an operation whose processor calls have unknown
// outcomes until its budget is spent and it is handed to the reconciler
// (the backlog gauges rise, then fall once it settles), an open review case,
// and the API failing closed. River's queue gauges: outbox's
// TestBacklog.
func TestOperatorMetrics(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := stacktest.New(t, stacktest.Options{DBProxy: true, ReapInterval: 100 * time.Millisecond})
	body := `{"amount":700,"currency":"USD","payment_method":"pm_card_visa"}`

	// The processor unreachable: every attempt's outcome is unknown, until
	// the budget (3) is spent and the reconciler has it.
	s.ProcessorDown(true)
	s.StartWorker()
	s.Pay(acme, "op-1", body, "Prefer", "respond-async")
	stacktest.WaitFor(t, "the payment handed to the reconciler", func() bool {
		return value(t, s.WorkerMetrics(), `payments_reconciliations_total{result="scheduled"}`) == 1
	})
	w := s.WorkerMetrics()
	if value(t, w, `payments_operation_attempts_total{resource_type="payment",result="unknown_outcome"}`) != 3 ||
		value(t, w, "payments_reconciliations_pending") != 1 || value(t, w, "payments_idempotency_keys_in_progress") != 1 ||
		value(t, w, "payments_oldest_unsettled_operation_seconds") <= 0 {
		t.Fatalf("after the budget:\n%s", grep(w, "payments_operation_attempts|payments_reconciliations|payments_idempotency_keys|payments_oldest"))
	}
	// Its key quiet for longer than RECONCILE_STUCK_AFTER (a minute here):
	// a zombie, until the reconciler settles it.
	s.Exec(`UPDATE idempotency_keys SET updated_at = now() - interval '2 minutes' WHERE key = 'op-1'`)
	if v := value(t, s.WorkerMetrics(), "payments_idempotency_keys_stale"); v != 1 {
		t.Fatalf("stale keys = %v", v)
	}
	s.ProcessorDown(false)
	if _, err := s.Reconciler.Run(ctx); err != nil {
		t.Fatal(err)
	}
	// The reconciler's report reaches the metrics through its job; run by
	// hand here, the gauges show it settled. The queue's gauge falls once no
	// job waits: a periodic job River's leader inserts meanwhile (the
	// reaper's, the sweep's) is available for a moment too.
	w = s.WorkerMetrics()
	if value(t, w, "payments_reconciliations_pending") != 0 || value(t, w, "payments_oldest_unsettled_operation_seconds") != 0 ||
		value(t, w, "payments_idempotency_keys_in_progress") != 0 || value(t, w, "payments_idempotency_keys_stale") != 0 {
		t.Fatalf("after settling:\n%s", grep(w, "payments_reconciliations|payments_oldest|payments_idempotency_keys|payments_queue"))
	}
	stacktest.WaitFor(t, "no job available in the queue", func() bool {
		return value(t, s.WorkerMetrics(), "payments_queue_jobs_available") == 0
	})

	// Its key past its retention: the reaper makes it a tombstone.
	s.Exec(`UPDATE idempotency_keys SET expires_at = now() - interval '1 second' WHERE key = 'op-1'`)
	stacktest.WaitFor(t, "the key reaped", func() bool {
		return value(t, s.WorkerMetrics(), `payments_idempotency_keys_reaped_total{stage="expired"}`) == 1
	})

	s.Exec(`INSERT INTO needs_review (kind, reference, detail) VALUES ('unknown_charge', 'ch_x', 'x')`)
	if v := value(t, s.WorkerMetrics(), `payments_needs_review_open{kind="unknown_charge"}`); v != 1 {
		t.Fatalf("open review cases = %v", v)
	}

	s.Pay(acme, "op-3", body, "Prefer", "wait=10")
	s.Pay(acme, "op-3", body, "Prefer", "wait=10") // a replay
	a := s.APIMetrics()
	if value(t, a, "payments_idempotency_keys_created_total") != 2 || value(t, a, "payments_idempotent_replays_total") != 1 {
		t.Fatalf("API key counts:\n%s", grep(a, "payments_idempotency|payments_idempotent"))
	}
	s.Proxy.Cut()
	if res := s.Pay(acme, "op-2", body); res.Status != http.StatusServiceUnavailable {
		t.Fatalf("with the store cut off: %d", res.Status)
	}
	s.Proxy.Restore()
	if v := value(t, s.APIMetrics(), `payments_api_failures_total{kind="store_unavailable"}`); v < 1 {
		t.Fatalf("store failures = %v", v)
	}
}

// grep keeps the lines of a scrape matching pattern, for failure messages.
func grep(scrape, pattern string) string {
	re := regexp.MustCompile(pattern)
	var out []byte
	for _, line := range regexp.MustCompile(`\n`).Split(scrape, -1) {
		if re.MatchString(line) && line != "" && line[0] != '#' {
			out = append(out, line...)
			out = append(out, '\n')
		}
	}
	return string(out)
}

// TestRequestLinesJoinUp: the API's line for a request names its request
// id, trace id, tenant, idempotency key and the payment it made, so that it
// joins the worker's lines for the same operation.
func TestRequestLinesJoinUp(t *testing.T) {
	t.Parallel()
	var logs testio.Buffer
	// Spans makes a real provider, as the binaries' tracing setup does;
	// with none, spans are no-ops and have no trace id.
	s := stacktest.New(t, stacktest.Options{Logs: &logs, Spans: tracetest.NewSpanRecorder()})
	s.StartWorker()
	res := s.Pay(acme, "joined", `{"amount":700,"currency":"USD","payment_method":"pm_card_visa"}`, "Prefer", "wait=10")
	if res.Status != http.StatusCreated {
		t.Fatalf("payment: %d %s", res.Status, res.Body)
	}
	id := decode[struct{ ID string }](t, res).ID
	stacktest.WaitFor(t, "the request's line", func() bool { return strings.Contains(logs.String(), `"payment_id":"`+id+`"`) })
	var line map[string]any
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, `"msg":"request"`) && strings.Contains(l, `"payment_id":"`+id+`"`) {
			if err := json.Unmarshal([]byte(l), &line); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, k := range []string{"request_id", "trace_id", "span_id"} {
		if s, _ := line[k].(string); s == "" {
			t.Errorf("the request's line has no %s: %v", k, line)
		}
	}
	if line["tenant_id"] != stacktest.AcmeID || line["idempotency_key"] != "joined" {
		t.Errorf("the request's line: %v", line)
	}
	// The worker's line for the payment's job carries the same trace. The
	// worker writes it once the attempt returns, which can be after the
	// payment finished and the API answered, so it is waited for.
	trace := `"trace_id":"` + fmt.Sprint(line["trace_id"]) + `"`
	stacktest.WaitFor(t, "a worker line with the trace id "+trace, func() bool {
		return stacktest.LogLines(logs.String(), `"msg":"job attempt"`, trace) > 0
	})
}
