package fakeprocessor

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/example/payments/internal/database"
	"github.com/example/payments/internal/tracing"
)

const (
	// sendTimeout bounds one POST of a webhook, answer included.
	sendTimeout = 10 * time.Second
	// claimLease is how far a claim pushes an event's next attempt: the
	// sender records the result well before, unless it died, in which case
	// the event is claimed again once the lease passes. It exceeds the send
	// timeout, so that a slow attempt is never sent twice at once.
	claimLease = 30 * time.Second
	// recordTimeout bounds the update recording an attempt's result.
	recordTimeout = 10 * time.Second
	// maxSends bounds the deliveries in flight, so that a slow receiver
	// does not pile up goroutines and connections.
	maxSends = 64
	// maxDrain is how much of an answer is read, so that its connection can
	// be reused; the rest is not wanted.
	maxDrain = 64 << 10
)

// newWebhookClient returns the client sending webhooks: a transport of its
// own, whose idle connections SendWebhooks closes when it stops, and
// redirects not followed, since a receiver that moved is misconfigured and a
// 3xx is a failed attempt. Each POST is a client span, and carries its
// context as traceparent.
func newWebhookClient(tp trace.TracerProvider) *http.Client {
	return &http.Client{
		Transport: tracing.Transport(&http.Transport{
			Proxy:               http.ProxyFromEnvironment,
			DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			MaxIdleConnsPerHost: maxSends,
			IdleConnTimeout:     90 * time.Second,
		}, tp),
		Timeout: sendTimeout,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
}

// SendWebhooks delivers the webhook queue until ctx ends. It claims the
// events due, sends each concurrently and records the result: delivered on
// a 2xx, otherwise retried with exponential backoff until the retry horizon,
// then abandoned. It wakes as soon as an operation commits an event, and
// polls for events that came due later (retries, delayed events, and those
// left by a processor that stopped or died). When ctx ends it stops claiming
// and returns once the deliveries in flight have finished, each bounded by
// the send timeout. With webhooks off it returns at once.
//
// Several processors may send from one database: a claim takes each event
// for one of them only, until its lease passes.
func (s *Server) SendWebhooks(ctx context.Context) {
	if !s.webhooksOn() {
		return
	}
	var sends sync.WaitGroup
	defer s.client.CloseIdleConnections()
	defer sends.Wait()
	// slots holds one token per delivery in flight.
	slots := make(chan struct{}, maxSends)
	poll := time.NewTicker(s.cfg.Webhooks.PollInterval)
	defer poll.Stop()
	for {
		s.sendDue(ctx, &sends, slots)
		select {
		case <-ctx.Done():
			return
		case <-poll.C:
		case <-s.nudge:
		}
	}
}

// sendDue claims due events while there are free slots and starts a
// delivery for each. Deliveries outlive ctx: an attempt that started is
// finished and recorded.
func (s *Server) sendDue(ctx context.Context, sends *sync.WaitGroup, slots chan struct{}) {
	for {
		// Only this goroutine takes slots, so at least this many are free.
		free := cap(slots) - len(slots)
		if free == 0 {
			return
		}
		now := s.now()
		events, err := claimEvents(ctx, s.pool, now, now.Add(claimLease), free)
		if err != nil {
			if ctx.Err() == nil {
				s.logger.Error("claim webhook events", "err", err)
			}
			return
		}
		for _, e := range events {
			slots <- struct{}{}
			sends.Go(func() {
				defer func() { <-slots }()
				s.deliver(context.WithoutCancel(ctx), e)
			})
		}
		if len(events) < free {
			return
		}
	}
}

// claimed is an event claimed for one attempt.
type claimed struct {
	id, typ   string
	body      []byte
	createdAt time.Time
	// attempt is the number of this attempt; only the claim that counted it
	// may record its result.
	attempt int
	// traceparent is the trace of the operation the event tells of; "" for
	// none.
	traceparent string
}

// claimEventsSQL takes up to $3 pending events due at $1, oldest due first,
// skipping those another sender is claiming, counts the attempt and pushes
// the next one to $2, the end of the lease.
const claimEventsSQL = `
UPDATE processor.webhook_events
SET attempts = attempts + 1,
    next_attempt_at = $2
WHERE id IN (
    SELECT id
    FROM processor.webhook_events
    WHERE state = 'pending' AND next_attempt_at <= $1
    ORDER BY next_attempt_at
    LIMIT $3
    FOR UPDATE SKIP LOCKED)
RETURNING id, type, body, created_at, attempts, coalesce(traceparent, '')`

// claimEvents claims up to limit events due at now, leased until leaseEnd.
func claimEvents(ctx context.Context, db database.DBTX, now, leaseEnd time.Time, limit int) ([]claimed, error) {
	rows, err := db.Query(ctx, claimEventsSQL, now, leaseEnd, limit)
	if err != nil {
		return nil, fmt.Errorf("claim webhook events: %w", err)
	}
	defer rows.Close()
	var events []claimed
	for rows.Next() {
		var e claimed
		if err := rows.Scan(&e.id, &e.typ, &e.body, &e.createdAt, &e.attempt, &e.traceparent); err != nil {
			return nil, fmt.Errorf("scan webhook event: %w", err)
		}
		events = append(events, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("claim webhook events: %w", err)
	}
	return events, nil
}

// deliver makes one attempt at e and records its result. The chaos
// duplicate rate sends the attempt twice at once, with the same id and
// signature, as a processor retrying a delivery it wrongly thought lost
// would; the attempt succeeded if either copy did. The attempt is a span in
// the trace of the operation the event tells of.
func (s *Server) deliver(ctx context.Context, e claimed) {
	ctx = propagation.TraceContext{}.Extract(ctx, propagation.MapCarrier{"traceparent": e.traceparent})
	ctx, span := s.tracer.Start(ctx, "webhook "+e.typ, trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(attribute.String("webhook.event_id", e.id), attribute.Int("webhook.attempt", e.attempt)))
	defer span.End()
	at := s.now()
	copies := 1
	if s.chance(s.cfg.Chaos.WebhookDuplicateRate) {
		copies = 2
	}
	errs := make([]error, copies)
	var wg sync.WaitGroup
	for i := range copies {
		wg.Go(func() { errs[i] = s.post(ctx, e, at, i > 0) })
	}
	wg.Wait()
	var err error
	for _, copyErr := range errs {
		if copyErr == nil {
			err = nil
			break
		}
		err = copyErr
	}
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
	}
	s.recordAttempt(ctx, e, err)
}

// post sends e once, signed as of at, and logs the attempt. It returns nil
// on a 2xx answer.
func (s *Server) post(ctx context.Context, e claimed, at time.Time, duplicate bool) error {
	start := time.Now()
	status, err := s.send(ctx, e, at)
	level := slog.LevelInfo
	attrs := []slog.Attr{
		slog.String("event_id", e.id),
		slog.String("type", e.typ),
		slog.Int("attempt", e.attempt),
		slog.Int("status", status),
		slog.Duration("duration", time.Since(start)),
	}
	if duplicate {
		attrs = append(attrs, slog.Bool("duplicate", true))
	}
	if err != nil {
		level = slog.LevelWarn
		attrs = append(attrs, slog.String("err", err.Error()))
	}
	s.logger.LogAttrs(ctx, level, "webhook attempt", attrs...)
	return err
}

// send POSTs e's body to the webhook URL and returns the answer's status,
// 0 when there was none.
func (s *Server) send(ctx context.Context, e claimed, at time.Time) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.cfg.Webhooks.URL, bytes.NewReader(e.body))
	if err != nil {
		return 0, fmt.Errorf("new request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	if err := s.cfg.Webhooks.Secrets.Sign(req.Header, e.id, at, e.body); err != nil {
		return 0, err
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxDrain))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return resp.StatusCode, fmt.Errorf("answered %s", resp.Status)
	}
	return resp.StatusCode, nil
}

// recordAttempt records the result of e's attempt: delivered when sendErr
// is nil, otherwise due again after a backoff, or abandoned when that would
// fall past the retry horizon. A claim made since, once the lease passed,
// owns the event: this result is then ignored.
func (s *Server) recordAttempt(ctx context.Context, e claimed, sendErr error) {
	ctx, cancel := context.WithTimeout(ctx, recordTimeout)
	defer cancel()
	now := s.now()
	var (
		recorded bool
		err      error
	)
	next := now.Add(s.backoff(e.attempt))
	horizon := e.createdAt.Add(s.cfg.Webhooks.RetryHorizon)
	switch {
	case sendErr == nil:
		recorded, err = finishEvent(ctx, s.pool, e, eventDelivered, &now, "")
	case next.After(horizon):
		recorded, err = finishEvent(ctx, s.pool, e, eventAbandoned, nil, sendErr.Error())
		if recorded {
			s.logger.ErrorContext(ctx, "webhook abandoned", "event_id", e.id, "type", e.typ, "attempts", e.attempt,
				"created_at", e.createdAt, "err", sendErr)
		}
	default:
		recorded, err = retryEvent(ctx, s.pool, e, next, sendErr.Error())
	}
	switch {
	case err != nil:
		// The lease passes and the event is sent again.
		s.logger.ErrorContext(ctx, "record webhook attempt", "event_id", e.id, "attempt", e.attempt, "err", err)
	case !recorded:
		s.logger.WarnContext(ctx, "webhook attempt superseded by a later claim", "event_id", e.id, "attempt", e.attempt)
	}
}

// backoff is the delay after the attempt-th attempt failed: the retry
// backoff doubled for each attempt before, capped, of which a random half is
// taken off, so that events failing together do not retry together.
func (s *Server) backoff(attempt int) time.Duration {
	d := s.cfg.Webhooks.RetryBackoff
	for i := 1; i < attempt && d < MaxRetryBackoff; i++ {
		d *= 2
	}
	d = min(d, MaxRetryBackoff)
	return d/2 + time.Duration(rand.Float64()*float64(d/2))
}

// finishEventSQL ends the attempt $2 of event $1 in the state $3: delivered
// at $4, or abandoned after the error $5. It does nothing when the attempt
// is no longer the event's latest.
const finishEventSQL = `
UPDATE processor.webhook_events
SET state = $3, delivered_at = $4, last_error = $5, next_attempt_at = NULL
WHERE id = $1 AND attempts = $2 AND state = 'pending'`

// finishEvent ends e in state, and reports whether its attempt was still
// the latest. lastErr "" is stored as NULL.
func finishEvent(ctx context.Context, db database.DBTX, e claimed, state string, deliveredAt *time.Time, lastErr string) (bool, error) {
	tag, err := db.Exec(ctx, finishEventSQL, e.id, e.attempt, state, deliveredAt, optional(lastErr))
	if err != nil {
		return false, fmt.Errorf("finish webhook event: %w", err)
	}
	return tag.RowsAffected() == 1, nil
}

// retryEventSQL makes event $1, after its failed attempt $2, due again at
// $3, keeping the error $4.
const retryEventSQL = `
UPDATE processor.webhook_events
SET next_attempt_at = $3, last_error = $4
WHERE id = $1 AND attempts = $2 AND state = 'pending'`

// retryEvent schedules e's next attempt at next, and reports whether its
// attempt was still the latest.
func retryEvent(ctx context.Context, db database.DBTX, e claimed, next time.Time, lastErr string) (bool, error) {
	tag, err := db.Exec(ctx, retryEventSQL, e.id, e.attempt, next, lastErr)
	if err != nil {
		return false, fmt.Errorf("retry webhook event: %w", err)
	}
	return tag.RowsAffected() == 1, nil
}
