package stacktest_test

import (
	"bufio"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.uber.org/goleak"

	"github.com/example/payments/tools/stacktest"
	"github.com/example/payments/tools/testio"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// TestOnePaymentOneTrace: one payment whose first processor call fails is
// one trace, across the three processes and every hop: the API's request,
// the charge job's attempts (the first a child of the request, each retry
// linked to it), the gateway's call and the processor's handling of it, the
// processor's webhook, the API's receipt of it and the job that settles it,
// and the delivery of the payment's event to the merchant, whose request
// carries the trace too. Every log line of the charge job's attempts
// carries the trace's id.
func TestOnePaymentOneTrace(t *testing.T) {
	t.Parallel()
	rec := tracetest.NewSpanRecorder()
	var logs testio.Buffer // the processes' logs
	// Retries come every 10 to 50 ms while the processor is down: a large
	// budget keeps the payment with the worker until it is back.
	s := stacktest.New(t, stacktest.Options{Spans: rec, Logs: &logs, MaxAttempts: 50, ProcessorWebhooks: true})

	var (
		mu           sync.Mutex
		traceparents []string
	)
	merchant := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		traceparents = append(traceparents, r.Header.Get("traceparent"))
		mu.Unlock()
	}))
	t.Cleanup(merchant.Close)
	if res := s.Request(http.MethodPost, "/v1/webhook_endpoints", stacktest.Acme,
		`{"url":"`+merchant.URL+`/hooks","enabled_events":["payment.succeeded"]}`, "Idempotency-Key", "we-trace"); res.Status != http.StatusCreated {
		t.Fatalf("register the merchant's endpoint: %d %s", res.Status, res.Body)
	}

	s.ProcessorDown(true)
	s.StartWorker()
	res := s.Pay(stacktest.Acme, "trace-1", `{"amount":1500,"currency":"USD","payment_method":"pm_card_visa"}`, "Prefer", "respond-async")
	if res.Status != http.StatusAccepted {
		t.Fatalf("pay: %d %s", res.Status, res.Body)
	}
	var payment struct{ ID string }
	if err := json.Unmarshal(res.Body, &payment); err != nil || payment.ID == "" {
		t.Fatalf("pay: %s", res.Body)
	}
	stacktest.WaitFor(t, "the charge's first attempt to fail", func() bool {
		return find(rec, "worker", "job drive_operation", attribute.Int("river.job.attempt", 1)) != nil
	})
	s.ProcessorDown(false)
	stacktest.WaitFor(t, "the payment's event delivered to the merchant", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(traceparents) > 0 && find(rec, "worker", "job deliver_webhook", attribute.String("river.job.outcome", "ok")) != nil &&
			find(rec, "worker", "job settle_processor_event", attribute.String("river.job.outcome", "ok")) != nil
	})

	request := find(rec, "api", "POST /v1/payments", attribute.String("payments.payment_id", payment.ID))
	if request == nil {
		t.Fatalf("no API span for the payment; spans:\n%s", describe(rec.Ended()))
	}
	for _, want := range []attribute.KeyValue{attribute.String("idempotency.key", "trace-1"), attribute.String("tenant.id", stacktest.AcmeID),
		attribute.String("http.route", "/v1/payments")} {
		if !has(request, want) {
			t.Errorf("API span lacks %v: %v", want, request.Attributes())
		}
	}
	traceID := request.SpanContext().TraceID()
	inTrace := func(s sdktrace.ReadOnlySpan) bool { return s.SpanContext().TraceID() == traceID }

	attempts := chargeAttempts(t, rec, request, payment.ID)

	// The processor's handling of the call, and every hop of the webhooks.
	for _, want := range []struct{ service, name string }{
		{"fakeprocessor", "POST /v1/charges"},
		{"fakeprocessor", "webhook charge.succeeded"},
		{"api", "POST /v1/processor/webhooks"},
		{"worker", "job settle_processor_event"},
		{"worker", "job deliver_webhook"},
	} {
		if span := find(rec, want.service, want.name); span == nil || !inTrace(span) {
			t.Errorf("no %s span %q in the payment's trace; spans:\n%s", want.service, want.name, describe(rec.Ended()))
		}
	}
	if charge := find(rec, "fakeprocessor", "POST /v1/charges"); charge != nil && !has(charge, attribute.String("idempotency.key", "charge_"+payment.ID)) {
		t.Errorf("processor span lacks the downstream key: %v", charge.Attributes())
	}
	mu.Lock()
	if !strings.Contains(traceparents[0], traceID.String()) {
		t.Errorf("the merchant's delivery carried traceparent %q, not trace %s", traceparents[0], traceID)
	}
	mu.Unlock()

	// The phases' events, and which path settled the payment.
	var advanced, settled bool
	for _, span := range rec.Ended() {
		for _, ev := range span.Events() {
			advanced = advanced || (inTrace(span) && ev.Name == "recovery point advanced")
			settled = settled || (inTrace(span) && ev.Name == "operation settled")
		}
	}
	if !advanced || !settled {
		t.Errorf("span events: recovery point advanced %t, operation settled %t", advanced, settled)
	}

	// An attempt's line is written after its span ends, so the lines are
	// waited for.
	stacktest.WaitFor(t, "a log line for each attempt", func() bool {
		return stacktest.LogLines(logs.String(), `"msg":"job attempt"`, `"payment_id":"`+payment.ID+`"`) >= len(attempts)
	})
	checkLogLines(t, logs.String(), payment.ID, traceID.String(), len(attempts))
}

// chargeAttempts are the attempts of the charge job of payment id, checked:
// attempt 1 a child of the API's request, each retry a sibling linked to
// it, the last one ok.
func chargeAttempts(t *testing.T, rec *tracetest.SpanRecorder, request sdktrace.ReadOnlySpan, id string) []sdktrace.ReadOnlySpan {
	t.Helper()
	traceID := request.SpanContext().TraceID()
	attempts := all(rec, "worker", "job drive_operation", attribute.String("payments.payment_id", id))
	t.Logf("trace %s: %d attempts of the charge job, %d spans in all:\n%s", traceID, len(attempts), len(rec.Ended()), describe(rec.Ended()))
	if len(attempts) < 2 {
		t.Fatalf("%d attempts of the charge job, want a failed one and a retry", len(attempts))
	}
	for _, a := range attempts {
		n := attr(a, "river.job.attempt").AsInt64()
		switch {
		case a.SpanContext().TraceID() != traceID:
			t.Errorf("attempt %d in another trace", n)
		case a.Parent().SpanID() != request.SpanContext().SpanID():
			t.Errorf("attempt %d's parent is %s, not the request's span", n, a.Parent().SpanID())
		case n == 1 && (len(a.Links()) != 0 || attr(a, "river.job.outcome").AsString() != "error"):
			t.Errorf("attempt 1: links %v, outcome %v", a.Links(), attr(a, "river.job.outcome"))
		case n > 1 && (len(a.Links()) != 1 || a.Links()[0].SpanContext.SpanID() != request.SpanContext().SpanID()):
			t.Errorf("attempt %d: links %v, want one to the request's span", n, a.Links())
		}
	}
	if last := attempts[len(attempts)-1]; attr(last, "river.job.outcome").AsString() != "ok" {
		t.Errorf("last attempt's outcome %v", attr(last, "river.job.outcome"))
	}
	return attempts
}

// checkLogLines checks the processes' logs: one line for each of the
// attempts of payment id's charge job, each with the trace's id; and the
// access logs of both servers joined up too.
func checkLogLines(t *testing.T, logs, id, traceID string, attempts int) {
	t.Helper()
	var jobLines, accessLines int
	sc := bufio.NewScanner(strings.NewReader(logs))
	for sc.Scan() {
		var line map[string]any
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("log line %q: %v", sc.Text(), err)
		}
		switch {
		case line["msg"] == "job attempt" && line["payment_id"] == id:
			jobLines++
			if line["process"] != "worker" || line["trace_id"] != traceID || line["kind"] != "drive_operation" {
				t.Errorf("job attempt line %s", sc.Text())
			}
		case line["msg"] == "request" && (line["path"] == "/v1/payments" || line["path"] == "/v1/charges") && line["method"] == "POST":
			accessLines++
			if line["trace_id"] != traceID {
				t.Errorf("access line %s, want trace_id %s", sc.Text(), traceID)
			}
		}
	}
	if jobLines != attempts || accessLines < 2 {
		t.Errorf("%d job attempt lines for %d attempts, %d access lines", jobLines, attempts, accessLines)
	}
}

// all lists the ended spans of service named name with every attribute of
// attrs, in the order they ended.
func all(rec *tracetest.SpanRecorder, service, name string, attrs ...attribute.KeyValue) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		svc, _ := s.Resource().Set().Value("service.name")
		if svc.AsString() != service || s.Name() != name {
			continue
		}
		matches := true
		for _, a := range attrs {
			matches = matches && has(s, a)
		}
		if matches {
			out = append(out, s)
		}
	}
	return out
}

// find is the first span all finds; nil when there is none.
func find(rec *tracetest.SpanRecorder, service, name string, attrs ...attribute.KeyValue) sdktrace.ReadOnlySpan {
	if spans := all(rec, service, name, attrs...); len(spans) > 0 {
		return spans[0]
	}
	return nil
}

func has(s sdktrace.ReadOnlySpan, want attribute.KeyValue) bool {
	return attr(s, string(want.Key)) == want.Value
}

func attr(s sdktrace.ReadOnlySpan, key string) attribute.Value {
	for _, a := range s.Attributes() {
		if string(a.Key) == key {
			return a.Value
		}
	}
	return attribute.Value{}
}

// describe lists spans for a failure message.
func describe(spans []sdktrace.ReadOnlySpan) string {
	var b strings.Builder
	for _, s := range spans {
		svc, _ := s.Resource().Set().Value("service.name")
		kind := s.SpanKind()
		b.WriteString(svc.AsString() + " " + kind.String() + " " + s.Name() + " trace=" + s.SpanContext().TraceID().String() +
			" parent=" + s.Parent().SpanID().String() + "\n")
	}
	return b.String()
}
