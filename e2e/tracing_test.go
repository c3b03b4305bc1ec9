package e2e

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/example/payments/tools/testdb"
)

// span is a span as the console exporter writes it, a JSON line among the
// program's logs.
type span struct {
	Name        string
	SpanContext struct{ TraceID string }
	Attributes  []struct {
		Key   string
		Value struct{ Value any }
	}
	Resource []struct {
		Key   string
		Value struct{ Value any }
	}
}

func (s span) attr(key string) any {
	for _, a := range s.Attributes {
		if a.Key == key {
			return a.Value.Value
		}
	}
	return nil
}

// spansOf reads the spans a program wrote to its output.
func spansOf(out string) []span {
	var spans []span
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var s span
		if json.Unmarshal(sc.Bytes(), &s) == nil && s.SpanContext.TraceID != "" {
			spans = append(spans, s)
		}
	}
	return spans
}

// TestOnePaymentOneTrace runs the three binaries with the console exporter:
// a pm_card_timeout payment, whose first processor call times out and whose
// retry gets the charge, is one trace with spans from the API, both of the
// worker's attempts and the processor; and the worker's line for each
// attempt of its job carries that trace id.
func TestOnePaymentOneTrace(t *testing.T) {
	t.Parallel()
	console := "OTEL_TRACES_EXPORTER=console"
	s := startStack(t, testdb.New(t).URL, []string{console}, []string{console}, console, "PROCESSOR_TIMEOUT_HANG=30s")
	status, _, body := do(t, http.MethodPost, s.apiURL+"/v1/payments", "sk_test_acme", "traced",
		`{"amount":900,"currency":"USD","payment_method":"pm_card_timeout"}`, "Prefer", "wait=20")
	if status != http.StatusCreated {
		t.Fatalf("payment: %d %s", status, body)
	}
	// A graceful stop flushes each program's spans.
	s.api.stop(t)
	s.worker.stop(t)
	s.processor.stop(t)

	var trace string
	for _, sp := range spansOf(s.api.out.String()) {
		if sp.Name == "POST /v1/payments" {
			trace = sp.SpanContext.TraceID
		}
	}
	if trace == "" {
		t.Fatalf("no span of the API's POST /v1/payments in:\n%s", s.api.out.String())
	}
	attempts := map[float64]bool{}
	for _, sp := range spansOf(s.worker.out.String()) {
		if sp.SpanContext.TraceID == trace && sp.attr("river.job.kind") == "drive_operation" {
			if n, ok := sp.attr("river.job.attempt").(float64); ok {
				attempts[n] = true
			}
		}
	}
	if !attempts[1] || !attempts[2] {
		t.Fatalf("the worker's attempts in the payment's trace: %v\n%s", attempts, s.worker.out.String())
	}
	processor := 0
	for _, sp := range spansOf(s.processor.out.String()) {
		if sp.SpanContext.TraceID == trace {
			processor++
		}
	}
	if processor < 2 {
		t.Fatalf("%d processor spans in the payment's trace, want both calls", processor)
	}
	lines := 0
	sc := bufio.NewScanner(strings.NewReader(s.worker.out.String()))
	for sc.Scan() {
		var line map[string]any
		if json.Unmarshal(sc.Bytes(), &line) == nil && line["msg"] == "job attempt" && line["kind"] == "drive_operation" {
			if line["trace_id"] != trace {
				t.Errorf("a job attempt line with trace_id %v, want %s: %s", line["trace_id"], trace, sc.Text())
			}
			lines++
		}
	}
	if lines < 2 {
		t.Fatalf("%d job attempt lines for the charge", lines)
	}
}
