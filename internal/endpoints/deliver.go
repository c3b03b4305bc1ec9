package endpoints

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/example/payments/internal/operation"
	"github.com/example/payments/internal/safehttp"
	"github.com/example/payments/internal/webhook"
)

// AttemptTimeout bounds one attempt: the receiver has this long to answer.
const AttemptTimeout = 15 * time.Second

// DefaultSchedule is the wait before each retry, after a first attempt made
// at once: Standard Webhooks' schedule, about three days in all.
var DefaultSchedule = Schedule{5 * time.Second, 5 * time.Minute, 30 * time.Minute, 2 * time.Hour,
	5 * time.Hour, 10 * time.Hour, 14 * time.Hour, 20 * time.Hour, 24 * time.Hour}

// Results of a delivery attempt, the values of the metrics' result label.
const (
	ResultDelivered = "delivered"
	// ResultRetrying is a failed attempt with another to come.
	ResultRetrying = "retrying"
	// ResultFailed is a failed last attempt: the delivery failed.
	ResultFailed = "failed"
	// ResultGone is a 410: the endpoint was disabled.
	ResultGone = "gone"
	// ResultDisabled is a delivery to an endpoint disabled since.
	ResultDisabled = "endpoint_disabled"
)

// Schedule is the wait before each retry of a delivery, read from the
// environment as comma-separated durations.
type Schedule []time.Duration

// Decode lets envconfig read a Schedule: 1 to 20 positive durations.
func (s *Schedule) Decode(value string) error {
	var out Schedule
	for _, part := range strings.Split(value, ",") {
		d, err := time.ParseDuration(strings.TrimSpace(part))
		if err != nil || d <= 0 {
			return fmt.Errorf("%q is not a positive duration", part)
		}
		out = append(out, d)
	}
	if len(out) == 0 || len(out) > 20 {
		return errors.New("must list 1 to 20 durations")
	}
	*s = out
	return nil
}

// Results lists every result, for metrics that start at zero.
var Results = []string{ResultDelivered, ResultRetrying, ResultFailed, ResultGone, ResultDisabled}

// Observer counts what deliveries do, for metrics.
type Observer interface{ Attempted(result string) }

// Deliverer makes the attempts of deliveries, as their jobs run.
type Deliverer struct {
	DB     *pgxpool.Pool
	Cipher webhook.Box
	// Client sends the POSTs; safehttp's, so that no attempt reaches the
	// inside network, whatever a URL resolves to by then.
	Client *http.Client
	// Schedule is the wait before each retry; len(Schedule)+1 attempts.
	Schedule Schedule
	// Events reads the event delivered, and Encode encodes it, exactly as
	// GET /v1/events/{id} answers it.
	Events interface {
		GetEvent(ctx context.Context, tenantID, id string) (operation.Event, error)
	}
	Encode   func(v any) []byte
	Observer Observer
}

// claimAttempt counts an attempt of a pending delivery and reads what it
// needs: its endpoint and the secrets that sign now (database clock).
const claimAttempt = `
WITH d AS (
	UPDATE webhook_deliveries SET attempts = attempts + 1, updated_at = now()
	WHERE id = $1 AND status = 'pending'
	RETURNING tenant_id, endpoint_id, event_id, attempts)
SELECT d.tenant_id, d.endpoint_id, d.event_id, d.attempts, e.url, e.status,
	ARRAY(SELECT s.ciphertext FROM webhook_endpoint_secrets s
		WHERE s.endpoint_id = e.id AND (s.expires_at IS NULL OR s.expires_at > now()) ORDER BY s.id)
FROM d JOIN webhook_endpoints e ON e.id = d.endpoint_id`

// attempt is a claimed attempt of a delivery.
type attempt struct {
	id                          int64
	tenantID, endpoint, eventID string
	number                      int
	url, status                 string
	sealed                      [][]byte
}

// Deliver makes the next attempt of delivery id and records it. It returns
// how long to wait before the next attempt (the job snoozes that long), or
// zero when the delivery is over: delivered, failed, or nothing to do (an
// endpoint deleted, a delivery already done). An error is the service's own
// (the database), and the job is retried as any other.
func (d *Deliverer) Deliver(ctx context.Context, id int64) (time.Duration, error) {
	a := attempt{id: id}
	err := d.DB.QueryRow(ctx, claimAttempt, id).Scan(&a.tenantID, &a.endpoint, &a.eventID, &a.number, &a.url, &a.status, &a.sealed)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("claim delivery %d: %w", id, err)
	}
	if a.status != StatusEnabled {
		return 0, d.record(ctx, a, outcome{result: ResultDisabled, err: "the endpoint is disabled"})
	}
	ev, err := d.Events.GetEvent(ctx, a.tenantID, a.eventID)
	if err != nil {
		return 0, err
	}
	secrets, err := d.secrets(a)
	if err != nil {
		return 0, err
	}
	out := d.post(ctx, a, d.Encode(ev), secrets)
	return out.wait, d.record(ctx, a, out)
}

// secrets decrypts the secrets that sign a's delivery.
func (d *Deliverer) secrets(a attempt) (webhook.Secrets, error) {
	var list []byte
	for i, sealed := range a.sealed {
		plain, err := d.Cipher.Open(a.endpoint, sealed)
		if err != nil {
			return webhook.Secrets{}, err
		}
		if i > 0 {
			list = append(list, ',')
		}
		list = append(list, plain...)
	}
	return webhook.ParseSecrets(string(list))
}

// outcome is what an attempt came to.
type outcome struct {
	result     string
	statusCode *int
	duration   time.Duration
	err        string
	// wait is the delay before the next attempt; zero when there is none.
	wait time.Duration
}

// post makes the attempt: body signed with secrets, POSTed to the
// endpoint's URL, and classifies the answer.
func (d *Deliverer) post(ctx context.Context, a attempt, body []byte, secrets webhook.Secrets) outcome {
	start := time.Now()
	out := outcome{}
	status, retryAfter, err := d.send(ctx, a, body, secrets)
	out.duration = time.Since(start)
	if status > 0 {
		out.statusCode = &status
	}
	switch {
	case err == nil && status >= 200 && status <= 299:
		out.result = ResultDelivered
		return out
	case status == http.StatusGone:
		out.result, out.err = ResultGone, "the receiver answered 410 Gone: the endpoint is disabled"
		return out
	case errors.Is(err, safehttp.ErrForbiddenURL):
		// The text would show the address it resolved to.
		out.err = "refused: the URL resolves to an address that is not public"
	case err != nil:
		out.err = err.Error()
	default:
		out.err = "the receiver answered " + strconv.Itoa(status)
	}
	if a.number > len(d.Schedule) {
		out.result = ResultFailed
		return out
	}
	out.result, out.wait = ResultRetrying, jitter(d.Schedule[a.number-1])
	if retryAfter > 0 && (status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable) {
		out.wait = min(retryAfter, 24*time.Hour)
	}
	return out
}

// jitter spreads d by up to a tenth either way, so that deliveries that
// failed together do not retry together.
func jitter(d time.Duration) time.Duration {
	return d + time.Duration((rand.Float64()*0.2-0.1)*float64(d))
}

// send POSTs body to a's URL and returns the answer's status (0 when there
// was none) and its Retry-After.
func (d *Deliverer) send(ctx context.Context, a attempt, body []byte, secrets webhook.Secrets) (int, time.Duration, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.url, bytes.NewReader(body))
	if err != nil {
		return 0, 0, fmt.Errorf("request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "payments-webhooks/1")
	if err := secrets.Sign(req.Header, a.eventID, time.Now(), body); err != nil {
		return 0, 0, err
	}
	resp, err := d.Client.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	return resp.StatusCode, retryAfter(resp.Header.Get("Retry-After")), nil
}

// retryAfter reads a Retry-After header: seconds, or an HTTP date; zero when
// absent or unreadable.
func retryAfter(v string) time.Duration {
	if v == "" {
		return 0
	}
	if s, err := strconv.Atoi(v); err == nil && s > 0 {
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(time.Until(t), 0)
	}
	return 0
}

const logAttempt = `
INSERT INTO webhook_delivery_attempts (delivery_id, endpoint_id, event_id, attempt, status_code, duration_ms, error, next_retry_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, CASE WHEN $8::bigint > 0 THEN now() + make_interval(secs => $8::bigint / 1000.0) END)`

const endDelivery = `
UPDATE webhook_deliveries
SET status = $3, delivered_at = CASE WHEN $3 = 'delivered' THEN now() END, updated_at = now()
WHERE id = $1 AND attempts = $2 AND status = 'pending'`

const disableGone = `
UPDATE webhook_endpoints SET status = 'disabled', disabled_reason = 'gone', updated_at = now()
WHERE id = $1 AND status = 'enabled'`

// record writes the attempt to the delivery log and, when the delivery is
// over, its end, in one transaction; a 410 disables the endpoint with it.
func (d *Deliverer) record(ctx context.Context, a attempt, out outcome) error {
	tx, err := d.DB.Begin(ctx)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // a no-op after Commit
	var errText *string
	if out.err != "" {
		errText = &out.err
	}
	if _, err := tx.Exec(ctx, logAttempt, a.id, a.endpoint, a.eventID, a.number, out.statusCode,
		out.duration.Milliseconds(), errText, out.wait.Milliseconds()); err != nil {
		return fmt.Errorf("log attempt: %w", err)
	}
	if out.result != ResultRetrying {
		status := DeliveryFailed
		if out.result == ResultDelivered {
			status = DeliveryDelivered
		}
		if _, err := tx.Exec(ctx, endDelivery, a.id, a.number, status); err != nil {
			return fmt.Errorf("end delivery: %w", err)
		}
	}
	if out.result == ResultGone {
		if _, err := tx.Exec(ctx, disableGone, a.endpoint); err != nil {
			return fmt.Errorf("disable endpoint: %w", err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	if d.Observer != nil {
		d.Observer.Attempted(out.result)
	}
	return nil
}
