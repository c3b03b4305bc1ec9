package webhooks

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/example/payments/internal/database"
)

const logAttempt = `
INSERT INTO webhook_delivery_attempts (delivery_id, endpoint_id, event_id, attempt, status_code, duration_ms, error, next_retry_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, CASE WHEN $8::bigint > 0 THEN now() + make_interval(secs => $8::bigint / 1000.0) END)`

// countAttempt counts the attempt recorded, number $2 of chain $3
// (claimAttempt): once, and only in the chain it was made in.
const countAttempt = `
UPDATE webhook_deliveries SET attempts = $2, updated_at = now()
WHERE id = $1 AND chain = $3 AND attempts = $2 - 1`

// deliver ends a delivery delivered, whichever chain's attempt got the
// 2xx: a 2xx is never thrown away.
const deliver = `
UPDATE webhook_deliveries SET status = 'delivered', delivered_at = now(), updated_at = now()
WHERE id = $1 AND status <> 'delivered'`

// fail ends a delivery failed: only by its chain's own last attempt, while
// pending (a resend since started another chain).
const fail = `
UPDATE webhook_deliveries SET status = 'failed', updated_at = now()
WHERE id = $1 AND chain = $2 AND attempts = $3 AND status = 'pending'`

// disableGone disables the endpoint on a 410, only as it was when the
// attempt was sent ($2, its version).
const disableGone = `
UPDATE webhook_endpoints SET status = 'disabled', disabled_reason = 'gone', version = version + 1, updated_at = now()
WHERE id = $1 AND status = 'enabled' AND version = $2`

// healthy records the endpoint's 2xx, which ends its run of failures: at
// once while a run is on (failing_since at or after the last 2xx recorded),
// else at most once a minute, so that the attempts to a healthy endpoint do
// not queue on its row.
const healthy = `
UPDATE webhook_endpoints SET last_success_at = now()
WHERE id = $1 AND (last_success_at IS NULL OR last_success_at < now() - interval '1 minute'
	OR failing_since >= last_success_at)`

// failing starts the endpoint's run of failures, when none runs since its
// last 2xx, and disables it once the run has lasted $2 (database clock); in
// between, a failure writes nothing.
const failing = `
UPDATE webhook_endpoints
SET failing_since = CASE WHEN failing_since IS NULL OR failing_since < last_success_at THEN now() ELSE failing_since END,
	status = CASE WHEN failing_since >= coalesce(last_success_at, '-infinity') AND failing_since <= now() - $2::interval
		THEN 'disabled' ELSE status END,
	disabled_reason = CASE WHEN failing_since >= coalesce(last_success_at, '-infinity') AND failing_since <= now() - $2::interval
		THEN 'failing' ELSE disabled_reason END,
	version = version + CASE WHEN failing_since >= coalesce(last_success_at, '-infinity') AND failing_since <= now() - $2::interval
		THEN 1 ELSE 0 END
WHERE id = $1 AND status = 'enabled'
	AND (failing_since IS NULL OR failing_since < last_success_at OR failing_since <= now() - $2::interval)
RETURNING status = 'disabled'`

// record writes the attempt to the delivery log, counts it and, when the
// delivery is over, writes its end, in one transaction, with what the
// attempt says of the endpoint (endOf). The attempt's place in flight is
// given up with it (passOn). The transaction spends three round trips
// whatever the outcome (database.Tx): the log line, the count, the tenant's
// lock and the place's hand-on go with the BEGIN, the next delivery's job
// with River's insert, and the rest with the COMMIT.
func (d *Deliverer) record(ctx context.Context, a attempt, out outcome) error {
	tx, err := database.Begin(ctx, d.DB)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx) //nolint:errcheck // a no-op after Commit
	var errText *string
	if out.err != "" {
		errText = &out.err
	}
	log := &pgx.Batch{}
	log.Queue(logAttempt, a.id, a.endpoint, a.eventID, a.number, out.statusCode,
		out.duration.Milliseconds(), errText, out.wait.Milliseconds())
	log.Queue(countAttempt, a.id, a.number, a.chain)
	tx.Queue(log)
	if err := d.passOn(ctx, tx, a); err != nil {
		return err
	}
	disabled := false
	if err := tx.CommitWith(ctx, d.endOf(a, out, &disabled)); err != nil {
		return fmt.Errorf("record attempt: %w", err)
	}
	if d.Observer != nil {
		d.Observer.Attempted(ctx, out.result, out.duration)
		if disabled {
			d.Observer.Disabled(ReasonFailing)
		}
	}
	return nil
}

// endOf is what the attempt's outcome writes with the COMMIT: the delivery's
// end, when it is over, and what the attempt says of the endpoint: a 410
// disables it, a 2xx ends its run of failures, a failure continues it (and
// may disable it, which sets disabled once the COMMIT is read).
func (d *Deliverer) endOf(a attempt, out outcome, disabled *bool) *pgx.Batch {
	end := &pgx.Batch{}
	switch out.result {
	case ResultDelivered:
		end.Queue(deliver, a.id)
		end.Queue(healthy, a.endpoint)
	case ResultGone:
		end.Queue(fail, a.id, a.chain, a.number)
		end.Queue(disableGone, a.endpoint, a.version)
	case ResultDisabled, ResultFailed, ResultRetrying:
		if out.result != ResultRetrying {
			end.Queue(fail, a.id, a.chain, a.number)
		}
		if out.result != ResultDisabled {
			end.Queue(failing, a.endpoint, d.DisableAfter).Query(func(rows pgx.Rows) error {
				for rows.Next() {
					if err := rows.Scan(disabled); err != nil {
						return err
					}
				}
				return rows.Err()
			})
		}
	}
	return end
}

// ReasonFailing is the reason of an endpoint disabled after failing for
// DisableAfter; ReasonGone after a 410.
const (
	ReasonFailing = "failing"
	ReasonGone    = "gone"
)
