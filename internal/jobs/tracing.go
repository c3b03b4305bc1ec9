package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strconv"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/example/payments/internal/tracing"
)

// tracerName names the spans this package makes.
const tracerName = "github.com/example/payments/internal/jobs"

// TraceInsert is River insert middleware that carries the trace of the code
// inserting a job to the job: the span context in the inserting context is
// written into each job's metadata (River's public InsertParams.Metadata,
// JSON) as traceparent and tracestate, next to whatever else the metadata
// holds, and the inserting span notes each job inserted. A context with no
// span inserts the job unchanged.
type TraceInsert struct {
	river.MiddlewareDefaults
}

// InsertMany implements rivertype.JobInsertMiddleware.
func (*TraceInsert) InsertMany(ctx context.Context, many []*rivertype.JobInsertParams, doInner func(context.Context) ([]*rivertype.JobInsertResult, error)) ([]*rivertype.JobInsertResult, error) {
	carrier := propagation.MapCarrier{}
	tracing.Propagator.Inject(ctx, carrier)
	if len(carrier) > 0 {
		for _, params := range many {
			if md, ok := withTraceContext(params.Metadata, carrier); ok {
				params.Metadata = md
			}
		}
	}
	results, err := doInner(ctx)
	if span := trace.SpanFromContext(ctx); err == nil && span.IsRecording() {
		for _, res := range results {
			attrs := append(messagingAttrs(res.Job.Queue, res.Job.ID, semconv.MessagingOperationTypeCreate, "insert"),
				attribute.String("river.job.kind", res.Job.Kind), attribute.Int64("river.job.id", res.Job.ID))
			span.AddEvent("job inserted", trace.WithAttributes(attrs...))
		}
	}
	return results, err
}

// messagingSystem is messaging.system for River: the semantic conventions
// name no value for it, and allow a system's own.
const messagingSystem = "river"

// messagingAttrs are OpenTelemetry's messaging attributes of a job, a
// message in River's queue: what is done with it (op, River's name for it
// opName), the queue (messaging.destination.name) and the job's id
// (messaging.message.id).
func messagingAttrs(queue string, id int64, op attribute.KeyValue, opName string) []attribute.KeyValue {
	return []attribute.KeyValue{
		semconv.MessagingSystemKey.String(messagingSystem),
		op,
		semconv.MessagingOperationName(opName),
		semconv.MessagingDestinationName(queue),
		semconv.MessagingMessageID(strconv.FormatInt(id, 10)),
	}
}

// withTraceContext returns metadata, a JSON object, with carrier's entries
// added; false when metadata is not an object, which is then left alone:
// tracing never fails an insert.
func withTraceContext(metadata []byte, carrier propagation.MapCarrier) ([]byte, bool) {
	fields := map[string]json.RawMessage{}
	if len(metadata) > 0 {
		if err := json.Unmarshal(metadata, &fields); err != nil || fields == nil {
			return nil, false
		}
	}
	for k, v := range carrier {
		b, err := json.Marshal(v)
		if err != nil {
			return nil, false
		}
		fields[k] = b
	}
	out, err := json.Marshal(fields)
	return out, err == nil
}

// traceContextOf reads the entries a TraceInsert wrote into a job's
// metadata: its string members.
func traceContextOf(metadata []byte) propagation.MapCarrier {
	var fields map[string]json.RawMessage
	carrier := propagation.MapCarrier{}
	if json.Unmarshal(metadata, &fields) != nil {
		return carrier
	}
	for _, key := range tracing.Propagator.Fields() {
		var v string
		if raw, ok := fields[key]; ok && json.Unmarshal(raw, &v) == nil {
			carrier[key] = v
		}
	}
	return carrier
}

// The outcomes of a job attempt, as TraceWork logs them.
const (
	OutcomeOK        = "ok"
	OutcomeError     = "error"
	OutcomeSnoozed   = "snoozed"
	OutcomeCancelled = "cancelled"
	OutcomePanic     = "panic"
)

// Outcomes lists every outcome, for metrics that start at zero.
var Outcomes = []string{OutcomeOK, OutcomeError, OutcomeSnoozed, OutcomeCancelled, OutcomePanic}

// TraceWork is River worker middleware that makes a span of each attempt of
// a job, in the trace of the code that inserted it (TraceInsert), logs the
// attempt on one line with that span's ids, and, once Timed, times it.
//
// The first attempt's span is a child of the inserting span. A retry
// (attempt 2 and later) is a span of its own in the same trace, beside the
// first rather than inside it, with a link to the inserting span marked as
// a retry: each attempt is one short span however long the retries take,
// and all of them are found from the operation's trace. A snoozed job
// (a webhook delivery waiting for its next try) keeps its attempt number,
// so each run of it is a child.
type TraceWork struct {
	river.MiddlewareDefaults
	// Tracer makes the spans; Logger gets the attempts' lines.
	Tracer trace.Tracer
	Logger *slog.Logger

	runs *runMetrics
}

// NewTraceWork returns the worker middleware, its spans made by tp (nil:
// the global provider) and its lines written to logger.
func NewTraceWork(tp trace.TracerProvider, logger *slog.Logger) *TraceWork {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &TraceWork{Tracer: tracing.Or(tp).Tracer(tracerName), Logger: logger}
}

// Work implements rivertype.WorkerMiddleware.
func (m *TraceWork) Work(ctx context.Context, job *rivertype.JobRow, doInner func(context.Context) error) (err error) {
	ctx = tracing.Propagator.Extract(ctx, traceContextOf(job.Metadata))
	op := operationOf(job)
	attrs := append(messagingAttrs(job.Queue, job.ID, semconv.MessagingOperationTypeProcess, "process"),
		attribute.String("river.job.kind", job.Kind),
		attribute.Int64("river.job.id", job.ID),
		attribute.Int("river.job.attempt", job.Attempt),
		attribute.Int("river.job.max_attempts", job.MaxAttempts),
		attribute.String("river.queue", job.Queue))
	attrs = append(attrs, op.spanAttrs()...)
	opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindConsumer), trace.WithAttributes(attrs...)}
	if inserter := trace.SpanContextFromContext(ctx); job.Attempt > 1 && inserter.IsValid() {
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: inserter,
			Attributes: []attribute.KeyValue{attribute.String("river.link", "retry_of")}}))
	}
	ctx, span := m.Tracer.Start(ctx, "job "+job.Kind, opts...)
	start := time.Now()
	defer func() {
		if p := recover(); p != nil {
			span.SetStatus(codes.Error, "panic")
			span.End()
			m.done(ctx, job, op, OutcomePanic, time.Since(start), errors.New("panic"))
			panic(p)
		}
	}()

	err = doInner(ctx)
	outcome := outcomeOf(err)
	span.SetAttributes(attribute.String("river.job.outcome", outcome))
	switch outcome {
	case OutcomeError:
		span.RecordError(err)
		span.SetStatus(codes.Error, "attempt failed")
		if job.Attempt < job.MaxAttempts {
			span.AddEvent("retry scheduled", trace.WithAttributes(attribute.Int("river.job.next_attempt", job.Attempt+1)))
		}
	case OutcomeCancelled:
		span.RecordError(err)
		span.AddEvent("job cancelled: no more attempts")
	case OutcomeSnoozed:
		var snooze *rivertype.JobSnoozeError
		errors.As(err, &snooze)
		span.AddEvent("job snoozed", trace.WithAttributes(attribute.String("river.job.snooze", snooze.Duration.String())))
	}
	span.End()
	m.done(ctx, job, op, outcome, time.Since(start), err)
	return err
}

// done times an attempt and writes its one line.
func (m *TraceWork) done(ctx context.Context, job *rivertype.JobRow, op operationArgs, outcome string, d time.Duration, err error) {
	if m.runs != nil {
		m.runs.observe(ctx, job.Kind, outcome, d)
	}
	m.log(ctx, job, op, outcome, d, err)
}

// log writes the one line of an attempt.
func (m *TraceWork) log(ctx context.Context, job *rivertype.JobRow, op operationArgs, outcome string, d time.Duration, err error) {
	level := slog.LevelInfo
	attrs := append([]slog.Attr{
		slog.String("kind", job.Kind),
		slog.Int64("job_id", job.ID),
		slog.Int("attempt", job.Attempt),
	}, op.logAttrs()...)
	attrs = append(attrs, slog.String("outcome", outcome), slog.Duration("duration", d))
	if outcome == OutcomeError || outcome == OutcomeCancelled || outcome == OutcomePanic {
		level = slog.LevelWarn
		attrs = append(attrs, slog.String("err", err.Error()))
	}
	m.Logger.LogAttrs(ctx, level, "job attempt", attrs...)
}

// outcomeOf classifies what a worker returned.
func outcomeOf(err error) string {
	var (
		snooze *rivertype.JobSnoozeError
		cancel *rivertype.JobCancelError
	)
	switch {
	case err == nil:
		return OutcomeOK
	case errors.As(err, &snooze):
		return OutcomeSnoozed
	case errors.As(err, &cancel):
		return OutcomeCancelled
	}
	return OutcomeError
}

// operationArgs are the ids the jobs of this package carry in their args
// (OperationArgs, ProcessorEventArgs, DeliveryArgs): whichever the job has
// names what it works on.
type operationArgs struct {
	ResourceType string `json:"resource_type"`
	ID           string `json:"id"`
	EventID      string `json:"event_id"`
	DeliveryID   int64  `json:"delivery_id"`
}

// operationOf reads the operation's id from a job's args; none for a job
// that has none, or args that cannot be read.
func operationOf(job *rivertype.JobRow) operationArgs {
	var op operationArgs
	_ = json.Unmarshal(job.EncodedArgs, &op)
	return op
}

func (op operationArgs) spanAttrs() []attribute.KeyValue {
	var attrs []attribute.KeyValue
	for _, kv := range op.pairs() {
		attrs = append(attrs, attribute.String(kv[0], kv[1]))
	}
	return attrs
}

func (op operationArgs) logAttrs() []slog.Attr {
	var attrs []slog.Attr
	for _, kv := range op.pairs() {
		attrs = append(attrs, slog.String(kv[2], kv[1]))
	}
	return attrs
}

// pairs lists the ids set: span attribute, value, log key. An operation's id
// is named for its kind (payments.payment_id, payment_id), whatever the kind.
func (op operationArgs) pairs() [][3]string {
	var out [][3]string
	if op.ResourceType != "" && op.ID != "" {
		out = append(out, [3]string{"payments." + op.ResourceType + "_id", op.ID, op.ResourceType + "_id"})
	}
	if op.EventID != "" {
		out = append(out, [3]string{"payments.processor_event_id", op.EventID, "event_id"})
	}
	if op.DeliveryID != 0 {
		out = append(out, [3]string{"webhooks.delivery_id", strconv.FormatInt(op.DeliveryID, 10), "delivery_id"})
	}
	return out
}
