package fakeprocessor

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/url"
	"time"

	"go.opentelemetry.io/otel/propagation"

	"github.com/jackc/pgx/v5"

	"github.com/example/payments/internal/database"
)

// States of a webhook event; see migrations/00007_processor_webhooks.sql.
const (
	eventPending   = "pending"
	eventDelivered = "delivered"
	eventDropped   = "dropped"
	eventAbandoned = "abandoned"
)

// event is what an operation tells the service by webhook: its type and the
// object it made, or refused to make.
type event struct {
	typ    string
	object any
}

// eventJSON is the body of a webhook, as Stripe shapes it, its object a T.
type eventJSON[T any] struct {
	ID      string `json:"id"`
	Type    string `json:"type"`
	Created int64  `json:"created"`
	Data    struct {
		Object T `json:"object"`
	} `json:"data"`
}

// validateWebhooks fills in the defaults of w and rejects settings out of
// range. Webhooks without a URL are off, and nothing else is checked.
func validateWebhooks(w *Webhooks) error {
	if w.URL == "" {
		return nil
	}
	u, err := url.Parse(w.URL)
	switch {
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		return fmt.Errorf("webhook URL %q is not an http or https URL", w.URL)
	case w.Secrets.Empty():
		// An unsigned webhook could not be told from a forged one.
		return errors.New("webhook URL set without a secret")
	}
	if err := outOfRange(
		notNegative("webhook retry horizon", w.RetryHorizon),
		notNegative("webhook poll interval", w.PollInterval),
		notNegative("webhook retry backoff", w.RetryBackoff),
	); err != nil {
		return err
	}
	w.RetryHorizon = cmp.Or(w.RetryHorizon, DefaultRetryHorizon)
	w.PollInterval = cmp.Or(w.PollInterval, DefaultPollInterval)
	w.RetryBackoff = cmp.Or(w.RetryBackoff, DefaultRetryBackoff)
	return nil
}

// webhooksOn reports whether events are recorded and sent.
func (s *Server) webhooksOn() bool { return s.cfg.Webhooks.URL != "" }

// recordEvent queues in b the insert of ev, for the transaction of the
// operation it tells of, so that the event exists exactly when the operation
// does. Its body is encoded once, here: every attempt sends the same bytes.
// The chaos knobs decide now whether it is dropped, or when it is first due.
// The traceparent of ctx's span, the request's, is kept with it, for its
// deliveries to send.
func (s *Server) recordEvent(ctx context.Context, b *pgx.Batch, ev event) {
	now := s.now()
	id := newID("evt_")
	payload := eventJSON[any]{ID: id, Type: ev.typ, Created: now.Unix()}
	payload.Data.Object = ev.object
	body := marshal(payload)
	state, due := eventPending, &now
	c := s.cfg.Chaos
	switch {
	case s.chance(c.WebhookDropRate):
		state, due = eventDropped, nil
	case c.WebhookDelay > 0:
		delayed := now.Add(time.Duration(c.Rand() * float64(c.WebhookDelay)))
		due = &delayed
	}
	carrier := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, carrier)
	b.Queue(insertEventSQL, id, ev.typ, body, now, state, due, optional(carrier.Get("traceparent")))
}

const insertEventSQL = `
INSERT INTO processor.webhook_events (id, type, body, created_at, state, next_attempt_at, traceparent)
VALUES ($1, $2, $3, $4, $5, $6, $7)`

// wake nudges the webhook sender, without waiting: a wake-up already
// pending covers this one too.
func (s *Server) wake() {
	select {
	case s.nudge <- struct{}{}:
	default:
	}
}

const countEventsSQL = `SELECT state, count(*) FROM processor.webhook_events GROUP BY state`

// CountWebhookEvents counts the processor's webhook events by state
// (pending, delivered, dropped, abandoned).
func CountWebhookEvents(ctx context.Context, db database.DBTX) (map[string]int, error) {
	rows, err := db.Query(ctx, countEventsSQL)
	if err != nil {
		return nil, fmt.Errorf("count webhook events: %w", err)
	}
	defer rows.Close()
	counts := map[string]int{eventPending: 0, eventDelivered: 0, eventDropped: 0, eventAbandoned: 0}
	for rows.Next() {
		var (
			state string
			n     int
		)
		if err := rows.Scan(&state, &n); err != nil {
			return nil, fmt.Errorf("count webhook events: %w", err)
		}
		counts[state] = n
	}
	return counts, rows.Err()
}
