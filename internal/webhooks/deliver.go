package webhooks

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/example/payments/internal/crash"
	"github.com/example/payments/internal/operation"
	"github.com/example/payments/internal/signing"
)

// AttemptTimeout bounds one attempt: the receiver has this long to answer.
const AttemptTimeout = 15 * time.Second

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
	Cipher signing.Box
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
	// (purgePlaces), not when their until passes. Zero: none, and only until
	// frees them.
	Worker int32
}

// attempt is a claimed attempt of a delivery.
type attempt struct {
	id                          int64
	tenantID, endpoint, eventID string
	chain, number               int
	url, status                 string
	version                     int64
	sealed                      [][]byte
	// worker holds the place in flight (claimAttempt); zero: nobody.
	worker int32
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

// errBusy reports a delivery whose endpoint or tenant has its share of
// attempts in flight: it waits in line.
var errBusy = errors.New("the endpoint or its tenant has its share of attempts in flight")

// CrashAfterClaim is the worker's crash point once a delivery's attempt is
// claimed, before anything is sent.
const CrashAfterClaim = "webhook_after_claim"

// Deliver makes the next attempt of delivery id, by its job (a River job's
// ID), and records it. It returns how long to wait before the next attempt
// (the job snoozes that long), or zero when the job is over: the delivery
// delivered, failed, or nothing to do (an endpoint deleted, a delivery
// already done), or waiting in line: a delivery over its share of attempts
// in flight waits there without a job, its attempt not spent, until an
// attempt hands it its place and inserts its next job (or SweepLine does,
// for a place that expired). Whatever fails once the event is read (a
// secret that does not decrypt, the POST) is that attempt's outcome, logged
// and on the schedule. A job that is not the delivery's own any more
// (enqueue) does nothing, and is over. An error is the service's own (the
// database, while claiming, reading the event or recording), and the job
// is retried as any other, the attempt not counted (claimAttempt).
func (d *Deliverer) Deliver(ctx context.Context, id, job int64) (time.Duration, error) {
	a, err := d.claim(ctx, id, job)
	switch {
	case errors.Is(err, pgx.ErrNoRows), errors.Is(err, errBusy):
		return 0, nil
	case err != nil:
		return 0, fmt.Errorf("claim delivery %d: %w", id, err)
	}
	crash.At(CrashAfterClaim)
	if a.status != StatusEnabled {
		return 0, d.record(ctx, a, outcome{result: ResultDisabled, err: "the endpoint is disabled"})
	}
	out, err := d.attempt(ctx, a)
	if err != nil {
		return 0, fmt.Errorf("delivery %d: %w", id, err)
	}
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
