package endpoints

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/example/payments/internal/database"
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
type Observer interface {
	// Attempted counts an attempt by result, and times it: d is the POST
	// to the endpoint (zero for no POST), ctx its job's, with its span.
	Attempted(ctx context.Context, result string, d time.Duration)
	// Disabled counts an endpoint the deliveries disabled, by reason.
	Disabled(reason string)
}

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
	// EndpointInFlight and TenantInFlight bound the attempts in flight to
	// one endpoint and for one tenant, across every worker: a delivery over
	// either waits its turn without spending an attempt, so that a slow or
	// failing endpoint delays only its own tenant's events.
	EndpointInFlight, TenantInFlight int
	// DisableAfter disables an endpoint whose attempts have all failed for
	// this long ('failing').
	DisableAfter time.Duration
	// Jobs inserts the job of a delivery handed a place, in the transaction
	// that hands it.
	Jobs Jobs
	// Worker is the database.Presence ID of the process making the
	// attempts, recorded with each place it holds, so that the places of a
	// process that died are freed as soon as any worker next looks
	// (purgeSlots), not when their until passes. Zero: none, and only until
	// frees them.
	Worker int32
}

// SlotHeld is the longest an attempt holds its place among the attempts in
// flight: the attempt's timeout and a margin for the claim and the event's
// read. A delivery's job runs no longer (outbox.DeliveryWorker's timeout),
// so no attempt outlives its place. A place handed to a delivery whose job
// never came for it stops counting after it, and SweepLine hands it on; a
// place whose worker died is freed sooner, as soon as its presence is gone
// (purgeSlots).
const SlotHeld = AttemptTimeout + 5*time.Second

// deliveryOf reads who a pending delivery is for, and, without a lock,
// whether job $4 is its job (enqueue), whether it holds a place already
// (handed to it, or left by an attempt of its own that never recorded),
// whether it may take one (its endpoint and its tenant have room, places
// past their until not counting: $2, $3) and whether it waits in line: a
// job of a delivery in line that may not (a resend's, say) leaves it there
// without a write or the tenant's lock.
const deliveryOf = `
SELECT d.tenant_id, d.endpoint_id, d.job IS NULL OR d.job = $4,
	EXISTS (SELECT 1 FROM webhook_sending s WHERE s.delivery_id = d.id AND s.until > now()),
	(SELECT count(*) FROM webhook_sending s WHERE s.endpoint_id = d.endpoint_id AND s.until > now()) < $2
		AND (SELECT count(*) FROM webhook_sending s WHERE s.tenant_id = d.tenant_id AND s.until > now()) < $3,
	EXISTS (SELECT 1 FROM webhook_waiting w WHERE w.delivery_id = d.id)
FROM webhook_deliveries d WHERE d.id = $1 AND d.status = 'pending'`

// takeSlot takes a place among the attempts in flight: the delivery's own
// (handed to it, or left by an attempt of its own that never recorded),
// else a new one when the endpoint ($3) and the tenant ($2) each have fewer
// than their share ($4, $5). It runs under the tenant's lock
// (lockTenantSlots), so that two workers cannot both take the last place,
// after purgeSlots has dropped the tenant's places that no longer count:
// past their until, or held by a worker whose presence is gone (killed,
// its session ended: database.Presence), which the purge's transaction
// learns by taking that worker's presence lock ($2 its class), as only a
// lock nobody holds can be taken. A delivery that finds no place joins the line (wait, keeping
// its place there if it had one), in the same transaction, and its job
// ends; one that takes a place leaves the line (claimAttempt).
const (
	lockTenantSlots = `SELECT pg_advisory_xact_lock(hashtextextended('webhook_sending:' || $1, 0))`
	purgeSlots      = `
DELETE FROM webhook_sending WHERE tenant_id = $1
	AND (until <= now() OR (worker IS NOT NULL AND pg_try_advisory_xact_lock($2, worker)))`
	takeSlot = `
INSERT INTO webhook_sending (delivery_id, endpoint_id, tenant_id, until)
SELECT $1, $3, $2, now() + $6::interval
WHERE EXISTS (SELECT 1 FROM webhook_sending WHERE delivery_id = $1)
	OR ((SELECT count(*) FROM webhook_sending WHERE endpoint_id = $3) < $4
		AND (SELECT count(*) FROM webhook_sending WHERE tenant_id = $2) < $5)
ON CONFLICT (delivery_id) DO UPDATE SET until = excluded.until, worker = NULL`
	wait = `
INSERT INTO webhook_waiting (delivery_id, endpoint_id, tenant_id)
SELECT $1, $2, $3 WHERE NOT EXISTS (SELECT 1 FROM webhook_deliveries WHERE id = $1 AND job <> $4)
ON CONFLICT (delivery_id) DO NOTHING`
	// dropSlot gives up a place handed to a delivery that is not pending
	// any more, when job $2 is its job; SweepLine hands it on.
	dropSlot = `
DELETE FROM webhook_sending
WHERE delivery_id = $1 AND NOT EXISTS (SELECT 1 FROM webhook_deliveries WHERE id = $1 AND job <> $2)`
)

// handOn hands the place of attempt $1, to endpoint $2, to the delivery to
// that endpoint that has waited longest in line, and returns it; no row when
// none waits (or each is being handed a place by another attempt), or the
// attempt holds no place any more (past its until, purged). It needs no
// lock: the place stays with its endpoint and its tenant, and their counts
// do not change. The place moves first, so that a delivery leaves the line
// only when it has one. A place handed on has no worker until its
// delivery's job claims it.
const handOn = `
WITH next AS (
	SELECT delivery_id FROM webhook_waiting WHERE endpoint_id = $2
	ORDER BY since LIMIT 1 FOR UPDATE SKIP LOCKED),
moved AS (
	UPDATE webhook_sending s SET delivery_id = next.delivery_id, until = now() + $3::interval, worker = NULL
	FROM next WHERE s.delivery_id = $1
	RETURNING s.delivery_id)
DELETE FROM webhook_waiting w USING moved WHERE w.delivery_id = moved.delivery_id
RETURNING w.delivery_id`

// handOver is handOn when no delivery to the attempt's endpoint waits: the
// place of attempt $1 goes to the delivery of its tenant $2 that has waited
// longest among those whose endpoint has room under its share ($3), and
// moves to that endpoint. It runs under the tenant's lock, as every change
// of the counts does.
const handOver = `
WITH next AS (
	SELECT w.delivery_id, w.endpoint_id FROM webhook_waiting w
	WHERE w.tenant_id = $2 AND (SELECT count(*) FROM webhook_sending s WHERE s.endpoint_id = w.endpoint_id) < $3
	ORDER BY w.since LIMIT 1 FOR UPDATE SKIP LOCKED),
moved AS (
	UPDATE webhook_sending s SET delivery_id = next.delivery_id, endpoint_id = next.endpoint_id, until = now() + $4::interval,
		worker = NULL
	FROM next WHERE s.delivery_id = $1
	RETURNING s.delivery_id)
DELETE FROM webhook_waiting w USING moved WHERE w.delivery_id = moved.delivery_id
RETURNING w.delivery_id`

// handFree gives a free place of tenant $1 to the delivery that has waited
// longest in line among those whose endpoint ($2) and tenant ($3) have room,
// and returns it; no row when there is none. It runs under the tenant's
// lock, after purgeSlots, one place a statement so that each sees the last.
// The tenant's places are counted once, by endpoint, not once for each
// delivery in a line that may be thousands long.
const handFree = `
WITH held AS (
	SELECT endpoint_id, count(*) AS n FROM webhook_sending WHERE tenant_id = $1 GROUP BY endpoint_id),
next AS (
	SELECT w.delivery_id, w.endpoint_id FROM webhook_waiting w LEFT JOIN held h ON h.endpoint_id = w.endpoint_id
	WHERE w.tenant_id = $1 AND coalesce(h.n, 0) < $2
		AND (SELECT coalesce(sum(n), 0) FROM held) < $3
	ORDER BY w.since LIMIT 1 FOR UPDATE OF w SKIP LOCKED),
taken AS (
	INSERT INTO webhook_sending (delivery_id, endpoint_id, tenant_id, until)
	SELECT delivery_id, endpoint_id, $1, now() + $4::interval FROM next
	ON CONFLICT (delivery_id) DO UPDATE SET until = excluded.until, worker = NULL
	RETURNING delivery_id)
DELETE FROM webhook_waiting w USING taken WHERE w.delivery_id = taken.delivery_id
RETURNING w.delivery_id`

// SweepLineInterval is how often every worker sweeps the lines
// (SweepLines): a second, so that a line whose places all died waits
// little longer than they count; a sweep with no line is one read.
const SweepLineInterval = time.Second

// SweepLines runs SweepLine every interval until ctx ends. Every worker
// runs it, not River's leader alone, so that neither a dead leader's term
// nor a new leader's election holds a line up: sweeps of several workers may
// overlap, each tenant's taken under its lock.
func (d *Deliverer) SweepLines(ctx context.Context, interval time.Duration, logger *slog.Logger) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		handed, err := d.SweepLine(ctx)
		if err != nil && ctx.Err() == nil {
			logger.WarnContext(ctx, "sweep the webhook lines", "err", err)
		}
		if handed > 0 {
			logger.InfoContext(ctx, "webhook places handed to deliveries in line", "handed", handed)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// linesWaiting lists the tenants with deliveries in line.
const linesWaiting = `SELECT DISTINCT tenant_id FROM webhook_waiting`

// SweepLine hands the free places of every tenant with deliveries in line,
// those a dead worker left among them (purgeSlots), to the deliveries
// that have waited longest, and inserts their jobs: the backstop of
// handOver, which hands on only the places of attempts that end. Every
// worker runs it (SweepLines). It returns how many places it handed.
func (d *Deliverer) SweepLine(ctx context.Context) (int, error) {
	rows, _ := d.DB.Query(ctx, linesWaiting)
	tenants, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return 0, fmt.Errorf("list the lines: %w", err)
	}
	handed := 0
	for _, tenant := range tenants {
		var ids []int64
		err := pgx.BeginFunc(ctx, d.DB, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, lockTenantSlots, tenant); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, purgeSlots, tenant, database.PresenceClass); err != nil {
				return err
			}
			for {
				var id int64
				err := tx.QueryRow(ctx, handFree, tenant, d.EndpointInFlight, d.TenantInFlight, SlotHeld).Scan(&id)
				if errors.Is(err, pgx.ErrNoRows) {
					return enqueue(ctx, d.Jobs, tx, ids...)
				}
				if err != nil {
					return err
				}
				ids = append(ids, id)
			}
		})
		if err != nil {
			return handed, fmt.Errorf("sweep the line of tenant %s: %w", tenant, err)
		}
		handed += len(ids)
	}
	return handed, nil
}

// claimAttempt counts an attempt of a pending delivery that holds a place
// ($1's, whose until it moves on by $2, now held by worker $3: zero for
// none), by its job ($4: enqueue), takes it out of the line, and reads
// what it needs: its chain, its endpoint as it stands (with the version a
// 410 disables) and the secrets that sign now (database clock). No row when
// the delivery is not pending, holds no place, or is another job's: that
// job's attempt may be in flight on the place, which this one leaves alone.
const claimAttempt = `
WITH held AS (
	UPDATE webhook_sending SET until = now() + $2::interval, worker = nullif($3::integer, 0)
	WHERE delivery_id = $1 AND until > now()
		AND NOT EXISTS (SELECT 1 FROM webhook_deliveries WHERE id = $1 AND job <> $4)
	RETURNING delivery_id),
left_line AS (DELETE FROM webhook_waiting WHERE delivery_id IN (SELECT delivery_id FROM held)),
d AS (
	UPDATE webhook_deliveries SET attempts = attempts + 1, updated_at = now()
	WHERE id = $1 AND status = 'pending' AND EXISTS (SELECT 1 FROM held)
	RETURNING tenant_id, endpoint_id, event_id, chain, attempts)
SELECT d.tenant_id, d.endpoint_id, d.event_id, d.chain, d.attempts, e.url, e.status, e.version,
	ARRAY(SELECT s.ciphertext FROM webhook_endpoint_secrets s
		WHERE s.endpoint_id = e.id AND (s.expires_at IS NULL OR s.expires_at > now()) ORDER BY s.id)
FROM d JOIN webhook_endpoints e ON e.id = d.endpoint_id`

// attempt is a claimed attempt of a delivery.
type attempt struct {
	id                          int64
	tenantID, endpoint, eventID string
	chain, number               int
	url, status                 string
	version                     int64
	sealed                      [][]byte
}

// errBusy reports a delivery whose endpoint or tenant has its share of
// attempts in flight: it waits in line.
var errBusy = errors.New("the endpoint or its tenant has its share of attempts in flight")

// Deliver makes the next attempt of delivery id, by its job (a River job's
// ID), and records it. It returns how long to wait before the next attempt
// (the job snoozes that long), or zero when the job is over: the delivery
// delivered, failed, or nothing to do (an endpoint deleted, a delivery
// already done), or waiting in line: a delivery over its share of attempts
// in flight waits there without a job, its attempt not spent, until an
// attempt hands it its place and inserts its next job (or SweepLine does,
// for a place that expired). Whatever fails once the attempt is counted (the
// event's read, a secret that does not decrypt, the POST) is that attempt's
// outcome, logged and on the schedule. A job that is not the delivery's own
// any more (enqueue) does nothing, and is over. An error is the service's
// own (the database, while claiming or recording), and the job is retried as
// any other.
func (d *Deliverer) Deliver(ctx context.Context, id, job int64) (time.Duration, error) {
	a, err := d.claim(ctx, id, job)
	switch {
	case errors.Is(err, pgx.ErrNoRows), errors.Is(err, errBusy):
		return 0, nil
	case err != nil:
		return 0, fmt.Errorf("claim delivery %d: %w", id, err)
	}
	if a.status != StatusEnabled {
		return 0, d.record(ctx, a, outcome{result: ResultDisabled, err: "the endpoint is disabled"})
	}
	out := d.attempt(ctx, a)
	// The attempt is recorded even when the job's own time ran out during
	// it (River cancels ctx at JOB_TIMEOUT, which may be shorter than
	// AttemptTimeout): its log line, its place among the attempts in flight
	// and its schedule never depend on the job's deadline.
	rec, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
	defer cancel()
	return out.wait, d.record(rec, a, out)
}

// recordTimeout bounds the recording of an attempt whose job has run out of
// time.
const recordTimeout = 10 * time.Second

// claim takes a place among the attempts in flight and counts the attempt
// of job; pgx.ErrNoRows when the delivery is not pending or not job's, and
// errBusy when it waits in line instead. A delivery handed a place (most of
// them, once a line has formed) is claimed in one round trip, the claim
// and the read of who the delivery is for sent together; one that must take
// a place takes it in two more, under its tenant's lock for one of them:
// the BEGIN, the lock, the purge, the take and the claim go together, and
// the COMMIT (with the join of the line, when it found no place) or the
// ROLLBACK, when the delivery stopped pending or became another job's
// since it was read, after them, so that the tenant's deliveries do not
// queue on its lock for longer than that.
func (d *Deliverer) claim(ctx context.Context, id, job int64) (attempt, error) {
	a := attempt{id: id}
	var (
		tenant, endpoint        string
		mine, own, may, waiting bool
		claimErr, whoseErr      error
	)
	b := &pgx.Batch{}
	b.Queue(claimAttempt, id, SlotHeld, d.Worker, job).QueryRow(func(row pgx.Row) error {
		claimErr = d.scanAttempt(row, &a)
		return nil
	})
	b.Queue(deliveryOf, id, d.EndpointInFlight, d.TenantInFlight, job).QueryRow(func(row pgx.Row) error {
		whoseErr = row.Scan(&tenant, &endpoint, &mine, &own, &may, &waiting)
		return nil
	})
	if err := d.DB.SendBatch(ctx, b).Close(); err != nil {
		return a, err
	}
	switch {
	case claimErr == nil:
		return a, nil // its place was handed to it: no count changes, no lock
	case !errors.Is(claimErr, pgx.ErrNoRows):
		return a, claimErr
	case errors.Is(whoseErr, pgx.ErrNoRows):
		return a, d.notPending(ctx, id, job)
	case whoseErr != nil:
		return a, whoseErr
	case !mine:
		return a, pgx.ErrNoRows // another job's now: this one is over
	case !may && waiting:
		return a, errBusy
	}
	// No place of its own (or it expired since): it takes one as any other.
	a.tenantID, a.endpoint = tenant, endpoint
	tx, err := database.Begin(ctx, d.DB)
	if err != nil {
		return a, err
	}
	defer tx.Rollback(ctx) //nolint:errcheck // a no-op after Commit
	var taken pgconn.CommandTag
	take := &pgx.Batch{}
	take.Queue(lockTenantSlots, a.tenantID)
	take.Queue(purgeSlots, a.tenantID, database.PresenceClass)
	take.Queue(takeSlot, id, a.tenantID, a.endpoint, d.EndpointInFlight, d.TenantInFlight, SlotHeld).Exec(func(tag pgconn.CommandTag) error {
		taken = tag
		return nil
	})
	take.Queue(claimAttempt, id, SlotHeld, d.Worker, job).QueryRow(func(row pgx.Row) error {
		claimErr = d.scanAttempt(row, &a)
		return nil
	})
	if err := tx.SendBatch(ctx, take).Close(); err != nil {
		return a, err
	}
	switch {
	case taken.RowsAffected() == 0:
		// No place: it joins the line, unless another job's since.
		end := &pgx.Batch{}
		end.Queue(wait, id, a.endpoint, a.tenantID, job)
		if err := tx.CommitWith(ctx, end); err != nil {
			return a, err
		}
		return a, errBusy
	case errors.Is(claimErr, pgx.ErrNoRows):
		// No longer pending, or another job's, since it was read: the place
		// taken goes back with the ROLLBACK, and one handed to it goes too
		// when it is not pending.
		if err := tx.Rollback(ctx); err != nil {
			return a, err
		}
		return a, d.notPending(ctx, id, job)
	case claimErr != nil:
		return a, claimErr
	}
	return a, tx.Commit(ctx)
}

// notPending gives up any place delivery id holds, which is not pending,
// when job is its job: handed to it, or taken as it stopped pending; the
// sweep hands it on. It returns pgx.ErrNoRows, or the error that kept the
// place.
func (d *Deliverer) notPending(ctx context.Context, id, job int64) error {
	if _, err := d.DB.Exec(ctx, dropSlot, id, job); err != nil {
		return err
	}
	return pgx.ErrNoRows
}

// scanAttempt reads claimAttempt's row into a.
func (d *Deliverer) scanAttempt(row pgx.Row, a *attempt) error {
	return row.Scan(&a.tenantID, &a.endpoint, &a.eventID, &a.chain, &a.number, &a.url, &a.status, &a.version, &a.sealed)
}

// attempt makes a's attempt: the event read, signed and POSTed.
func (d *Deliverer) attempt(ctx context.Context, a attempt) outcome {
	ev, err := d.Events.GetEvent(ctx, a.tenantID, a.eventID)
	if err != nil {
		return d.retry(a, outcome{err: "the event could not be read"}, 0)
	}
	secrets, err := d.secrets(a)
	if err != nil {
		return d.retry(a, outcome{err: "the endpoint's signing secrets could not be read"}, 0)
	}
	return d.post(ctx, a, d.Encode(ev), secrets)
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
		out.err = sendError(err)
	default:
		out.err = "the receiver answered " + strconv.Itoa(status)
	}
	if status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable {
		return d.retry(a, out, retryAfter)
	}
	return d.retry(a, out, 0)
}

// sendError says why a POST got no answer, in words of the service's own:
// the log never shows an error's text, which can name the resolver, the
// addresses a host resolved to or the network inside.
func sendError(err error) string {
	var (
		dns     *net.DNSError
		netErr  net.Error
		certErr *tls.CertificateVerificationError
		recErr  tls.RecordHeaderError
	)
	switch {
	case errors.As(err, &dns):
		return "the URL's host did not resolve"
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &netErr) && netErr.Timeout():
		return "the receiver did not answer in time"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "the receiver refused the connection"
	case errors.As(err, &certErr), errors.As(err, &recErr):
		return "the TLS handshake failed"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "the receiver closed the connection without an answer"
	}
	return "the request could not be sent"
}

// retry is a failed attempt's outcome: another attempt after the schedule's
// wait (or the receiver's Retry-After, when it gave one), or the delivery
// failed when a was its chain's last.
func (d *Deliverer) retry(a attempt, out outcome, retryAfter time.Duration) outcome {
	if a.number > len(d.Schedule) {
		out.result = ResultFailed
		return out
	}
	out.result, out.wait = ResultRetrying, jitter(d.Schedule[a.number-1])
	if retryAfter > 0 {
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

// releaseSlot gives up the attempt's place among those in flight.
const releaseSlot = `DELETE FROM webhook_sending WHERE delivery_id = $1`

// disableGone disables the endpoint on a 410, only as it was when the
// attempt was sent ($2, its version).
const disableGone = `
UPDATE webhook_endpoints SET status = 'disabled', disabled_reason = 'gone', version = version + 1, updated_at = now()
WHERE id = $1 AND status = 'enabled' AND version = $2`

// healthy records the endpoint's 2xx, which ends its run of failures: at
// most once a minute, so that attempts to one endpoint do not queue on its
// row (a run ends within a minute of the 2xx that ends it).
const healthy = `
UPDATE webhook_endpoints SET last_success_at = now()
WHERE id = $1 AND (last_success_at IS NULL OR last_success_at < now() - interval '1 minute')`

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

// record writes the attempt to the delivery log and, when the delivery is
// over, its end, in one transaction, with what the attempt says of the
// endpoint: a 410 disables it, a 2xx ends its run of failures, a failure
// continues it (and may disable it). The attempt's place in flight is
// given up with it. The transaction spends three round trips whatever the
// outcome (database.Tx): the log line goes with the BEGIN and the place's
// hand-on, the next delivery's job with River's insert, and the rest with
// the COMMIT.
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
	tx.Queue(log)
	if err := d.passOn(ctx, tx, a); err != nil {
		return err
	}
	end := &pgx.Batch{}
	disabled := false
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
					if err := rows.Scan(&disabled); err != nil {
						return err
					}
				}
				return rows.Err()
			})
		}
	}
	if err := tx.CommitWith(ctx, end); err != nil {
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

// passOn hands a's place to the next delivery in line, to its endpoint
// (handOn) or, under the tenant's lock, to another (handOver), and inserts
// that delivery's job; or releases the place when nobody waits who could
// take it. What tx has queued goes with the hand-on; the release is
// queued, to go with the COMMIT.
func (d *Deliverer) passOn(ctx context.Context, tx *database.Tx, a attempt) error {
	var next int64
	err := tx.QueryRow(ctx, handOn, a.id, a.endpoint, SlotHeld).Scan(&next)
	if errors.Is(err, pgx.ErrNoRows) {
		lock := &pgx.Batch{}
		lock.Queue(lockTenantSlots, a.tenantID)
		tx.Queue(lock)
		err = tx.QueryRow(ctx, handOver, a.id, a.tenantID, d.EndpointInFlight, SlotHeld).Scan(&next)
	}
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		release := &pgx.Batch{}
		release.Queue(releaseSlot, a.id)
		tx.Queue(release)
		return nil
	case err != nil:
		return fmt.Errorf("hand the place on: %w", err)
	}
	if err := enqueue(ctx, d.Jobs, tx, next); err != nil {
		return fmt.Errorf("hand the place on: %w", err)
	}
	return nil
}

// ReasonFailing is the reason of an endpoint disabled after failing for
// DisableAfter; ReasonGone after a 410.
const (
	ReasonFailing = "failing"
	ReasonGone    = "gone"
)
