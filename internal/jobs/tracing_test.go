package jobs_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/example/payments/internal/jobs"
	"github.com/example/payments/internal/outbox"
	"github.com/example/payments/internal/payments"
	"github.com/example/payments/internal/process"
	"github.com/example/payments/internal/tracing"
)

// recorder is a TracerProvider of the test's own, recording in memory.
func recorder(t *testing.T) (*sdktrace.TracerProvider, *tracetest.SpanRecorder) {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return tp, rec
}

// insertThrough runs the insert middleware over params, as River would.
func insertThrough(ctx context.Context, t *testing.T, params ...*rivertype.JobInsertParams) {
	t.Helper()
	_, err := (&jobs.TraceInsert{}).InsertMany(ctx, params, func(context.Context) ([]*rivertype.JobInsertResult, error) {
		var res []*rivertype.JobInsertResult
		for i, p := range params {
			res = append(res, &rivertype.JobInsertResult{Job: &rivertype.JobRow{ID: int64(i + 1), Kind: p.Kind, Metadata: p.Metadata}})
		}
		return res, nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestTraceInsert: the inserting span's context is added to each job's
// metadata, beside what was there; with no span, the metadata is left as it
// was.
func TestTraceInsert(t *testing.T) {
	t.Parallel()
	tp, rec := recorder(t)
	ctx, span := tp.Tracer("test").Start(context.Background(), "POST /v1/payments")
	params := []*rivertype.JobInsertParams{
		{Kind: "drive_operation", Metadata: []byte(`{"keep":{"a":1}}`)},
		{Kind: "drive_operation", Metadata: []byte(`{}`)},
	}
	insertThrough(ctx, t, params...)
	span.End()
	want := "00-" + span.SpanContext().TraceID().String() + "-" + span.SpanContext().SpanID().String() + "-01"
	for i, p := range params {
		var md map[string]any
		if err := json.Unmarshal(p.Metadata, &md); err != nil {
			t.Fatal(err)
		}
		if md["traceparent"] != want {
			t.Errorf("job %d metadata %s, want traceparent %s", i, p.Metadata, want)
		}
		if i == 0 && md["keep"] == nil {
			t.Errorf("job 0 lost its own metadata: %s", p.Metadata)
		}
	}
	if events := rec.Ended()[0].Events(); len(events) != 2 || events[0].Name != "job inserted" ||
		!hasAttr(events[0].Attributes, attribute.String("messaging.operation.type", "create")) ||
		!hasAttr(events[0].Attributes, attribute.String("messaging.message.id", "1")) {
		t.Errorf("inserting span's events %v, want two 'job inserted' with messaging attributes", events)
	}

	untouched := &rivertype.JobInsertParams{Kind: "reconcile", Metadata: []byte(`{}`)}
	insertThrough(context.Background(), t, untouched)
	if string(untouched.Metadata) != `{}` {
		t.Errorf("metadata without a span: %s", untouched.Metadata)
	}
}

// TestTraceWork: the first attempt's span is a child of the inserting span;
// a retry is in the same trace, beside it, with a link to the inserting
// span; each attempt is one log line with the outcome, the operation's id
// and the attempt span's trace_id.
func TestTraceWork(t *testing.T) {
	t.Parallel()
	tp, rec := recorder(t)
	ctx, inserting := tp.Tracer("test").Start(context.Background(), "POST /v1/payments")
	params := &rivertype.JobInsertParams{Kind: "drive_operation", Metadata: []byte(`{}`)}
	insertThrough(ctx, t, params)
	inserting.End()
	insertingSC := inserting.SpanContext()

	var logs bytes.Buffer
	mw := jobs.NewTraceWork(tp, process.NewLogger(&logs, "json", slog.LevelInfo))
	for _, tt := range []struct {
		attempt int
		err     error
		outcome string
	}{
		{1, errors.New("processor unknown"), jobs.OutcomeError},
		{2, nil, jobs.OutcomeOK},
		{3, river.JobSnooze(time.Second), jobs.OutcomeSnoozed},
		{4, river.JobCancel(errors.New("handed off")), jobs.OutcomeCancelled},
	} {
		job := &rivertype.JobRow{ID: 42, Kind: "drive_operation", Attempt: tt.attempt, MaxAttempts: 10, Queue: "default",
			EncodedArgs: []byte(`{"resource_type":"payment","id":"pay_123"}`), Metadata: params.Metadata}
		var inner trace.SpanContext
		err := mw.Work(context.Background(), job, func(ctx context.Context) error {
			inner = trace.SpanContextFromContext(ctx)
			return tt.err
		})
		if !errors.Is(err, tt.err) && err != tt.err {
			t.Fatalf("attempt %d returned %v, want %v", tt.attempt, err, tt.err)
		}
		if inner.TraceID() != insertingSC.TraceID() {
			t.Errorf("attempt %d worked in trace %s, want the inserting trace %s", tt.attempt, inner.TraceID(), insertingSC.TraceID())
		}
	}

	spans := rec.Ended()[1:] // after the inserting span
	if len(spans) != 4 {
		t.Fatalf("%d attempt spans, want 4", len(spans))
	}
	for i, s := range spans {
		if s.Parent().SpanID() != insertingSC.SpanID() {
			t.Errorf("attempt %d: parent %s, want the inserting span %s", i+1, s.Parent().SpanID(), insertingSC.SpanID())
		}
		links := s.Links()
		switch {
		case i == 0 && len(links) != 0:
			t.Errorf("attempt 1 has links %v", links)
		case i > 0 && (len(links) != 1 || links[0].SpanContext.SpanID() != insertingSC.SpanID()):
			t.Errorf("attempt %d links %v, want one to the inserting span", i+1, links)
		}
		if !hasAttr(s.Attributes(), attribute.String("payments.payment_id", "pay_123")) ||
			!hasAttr(s.Attributes(), attribute.Int("river.job.attempt", i+1)) {
			t.Errorf("attempt %d attributes %v", i+1, s.Attributes())
		}
		// OpenTelemetry's messaging semantic conventions, on a consumer span.
		for _, want := range []attribute.KeyValue{
			attribute.String("messaging.system", "river"), attribute.String("messaging.operation.type", "process"),
			attribute.String("messaging.operation.name", "process"), attribute.String("messaging.destination.name", "default"),
			attribute.String("messaging.message.id", "42"),
		} {
			if !hasAttr(s.Attributes(), want) || s.SpanKind() != trace.SpanKindConsumer {
				t.Errorf("attempt %d (%s) attributes %v lack %v", i+1, s.SpanKind(), s.Attributes(), want)
			}
		}
	}

	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	if len(lines) != 4 {
		t.Fatalf("%d log lines for 4 attempts:\n%s", len(lines), logs.String())
	}
	for i, want := range []string{"error", "ok", "snoozed", "cancelled"} {
		var line map[string]any
		if err := json.Unmarshal([]byte(lines[i]), &line); err != nil {
			t.Fatal(err)
		}
		if line["msg"] != "job attempt" || line["outcome"] != want || line["payment_id"] != "pay_123" ||
			line["job_id"] != float64(42) || line["attempt"] != float64(i+1) || line["kind"] != "drive_operation" ||
			line["trace_id"] != insertingSC.TraceID().String() || line["span_id"] != spans[i].SpanContext().SpanID().String() {
			t.Errorf("attempt %d line: %s", i+1, lines[i])
		}
	}
}

// TestTraceWorkNamesAnyKind: a job of any kind of operation names its
// operation on its span and its log line after its kind, widget or payment
// alike: no list of kinds stands between a new kind and its traces.
func TestTraceWorkNamesAnyKind(t *testing.T) {
	t.Parallel()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	var logs bytes.Buffer
	mw := jobs.NewTraceWork(tp, process.NewLogger(&logs, "json", slog.LevelInfo))
	job := &rivertype.JobRow{ID: 7, Kind: "drive_operation", Attempt: 1, MaxAttempts: 10, Queue: "default",
		EncodedArgs: []byte(`{"resource_type":"widget","id":"wid_1"}`)}
	if err := mw.Work(context.Background(), job, func(context.Context) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if spans := rec.Ended(); len(spans) != 1 || !hasAttr(spans[0].Attributes(), attribute.String("payments.widget_id", "wid_1")) {
		t.Fatalf("spans %v: want payments.widget_id", spans)
	}
	var line map[string]any
	if err := json.Unmarshal(logs.Bytes(), &line); err != nil || line["widget_id"] != "wid_1" {
		t.Fatalf("log line %s: want widget_id", logs.String())
	}
}

// TestTraceRoundTrip: a job staged in a traced first phase and enqueued by
// the relay, whose context has no trace, comes back from River with the
// first phase's trace context in its metadata, and its first attempt
// continues that trace.
func TestTraceRoundTrip(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q, db := newQueue(t)
	tp, rec := recorder(t)
	spanCtx, span := tp.Tracer("test").Start(ctx, "POST /v1/payments")
	staged := outbox.Staged{ResourceType: payments.Names.Type, ID: "pay_roundtrip", Trace: propagation.MapCarrier{}}
	tracing.Propagator.Inject(spanCtx, staged.Trace)
	id := enqueue(t, q, db, true, staged)[0]
	span.End()
	job, err := q.Client.JobGet(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if err := jobs.NewTraceWork(tp, nil).Work(ctx, job, func(context.Context) error { return nil }); err != nil {
		t.Fatal(err)
	}
	attempt := rec.Ended()[len(rec.Ended())-1]
	if attempt.Parent().SpanID() != span.SpanContext().SpanID() || attempt.SpanContext().TraceID() != span.SpanContext().TraceID() {
		t.Errorf("attempt span's parent %v, want the enqueuing span %v (metadata %s)", attempt.Parent(), span.SpanContext(), job.Metadata)
	}
}

func hasAttr(attrs []attribute.KeyValue, want attribute.KeyValue) bool {
	for _, a := range attrs {
		if a == want {
			return true
		}
	}
	return false
}
