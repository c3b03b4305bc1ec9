package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/example/payments/internal/database"
	"github.com/example/payments/internal/operation"
	"github.com/example/payments/internal/timer"
)

// Pace keeps the requests to a processor within its rate limit across every
// worker: Rate requests a second, one every 1/Rate, their turns counted in
// the database the workers share (table processor_pace), by its clock. A
// request takes the next free turn and waits for it; the turns are a
// single row's theoretical arrival time (GCRA with no burst), so in any
// second at most Rate+1 requests leave, whichever worker sends them.
//
// The calls that make operations go first (operation.ShareCall): a call
// takes a turn within half the time its context has left, at most callWait.
// A lookup or a fence takes one only within lookupWait, a ledger page within
// ledgerWait: under a backlog of calls their turns lie further out than
// that, and the capacity the calls leave, all of it once they are quiet, is
// theirs. A request that gets no turn is never sent: it fails with
// operation.ErrNotSent, asking to be tried again once the turn it missed
// has come, and an operation's job does so without spending its budget.
type Pace struct {
	DB *pgxpool.Pool
	// Processor names the row the turns are counted in.
	Processor string
	// Rate is the requests a second, above zero.
	Rate float64
}

// How long each share may wait for its turn (Pace).
const (
	callWait   = 10 * time.Second
	lookupWait = time.Second
	ledgerWait = 100 * time.Millisecond
)

// takeTurn takes the processor's next free turn, unless it is more than $3
// away, and returns how far away it is; no row when it is too far. $2 is the
// time between turns.
const takeTurn = `
INSERT INTO processor_pace AS p (processor, next_turn) VALUES ($1, clock_timestamp() + $2::interval)
ON CONFLICT (processor) DO UPDATE SET next_turn = greatest(p.next_turn, clock_timestamp()) + $2::interval
	WHERE greatest(p.next_turn, clock_timestamp()) <= clock_timestamp() + $3::interval
RETURNING extract(epoch FROM next_turn - $2::interval - clock_timestamp())::float8`

// Wait waits for the next turn of a request whose context is ctx, or fails
// with operation.ErrNotSent when it would come too late for its share (or
// the database cannot give one). The turn is taken in one round trip, its
// commit not waiting for the disk (database.AsyncCommit): a crash may
// forget the last turns, which lets a few requests in early once.
func (p *Pace) Wait(ctx context.Context) error {
	every := time.Duration(float64(time.Second) / p.Rate)
	longest := p.longest(ctx)
	var (
		away float64
		got  bool
	)
	err := database.CommitAsync(ctx, p.DB, func(b *pgx.Batch) {
		b.Queue(takeTurn, p.Processor, every, longest).Query(func(rows pgx.Rows) error {
			for rows.Next() {
				got = true
				if err := rows.Scan(&away); err != nil {
					return err
				}
			}
			return rows.Err()
		})
	})
	if err != nil {
		return operation.NotSent(fmt.Errorf("take a turn of the processor's rate limit: %w", err), 0)
	}
	if !got {
		return operation.NotSent(fmt.Errorf("%w (%g a second, waiting at most %s)", errNoTurn, p.Rate, longest), longest)
	}
	if err := timer.Sleep(ctx, time.Duration(max(away, 0)*float64(time.Second))); err != nil {
		return operation.NotSent(fmt.Errorf("wait for a turn of the processor's rate limit: %w", err), 0)
	}
	return nil
}

// longest is how long a request under ctx may wait for its turn.
func (p *Pace) longest(ctx context.Context) time.Duration {
	switch operation.ShareOf(ctx) {
	case operation.ShareCall:
		wait := callWait
		if deadline, ok := ctx.Deadline(); ok {
			wait = min(wait, time.Until(deadline)/2)
		}
		return max(wait, 0)
	case operation.ShareLedger:
		return ledgerWait
	}
	return lookupWait
}

// errNoTurn is the cause of a request not sent for want of a turn.
var errNoTurn = errors.New("no turn of the processor's rate limit in time: not sent")

// Paced is next, each request waiting first for its turn of pace; next
// itself when pace is nil (a processor with no rate limit).
func Paced(next http.RoundTripper, pace *Pace) http.RoundTripper {
	if pace == nil {
		return next
	}
	return paced{next: next, pace: pace}
}

// paced is a RoundTripper that waits for each request's turn.
type paced struct {
	next http.RoundTripper
	pace *Pace
}

// RoundTrip implements http.RoundTripper. A request that got no turn returns
// an error wrapping operation.ErrNotSent, which an adapter returns as it is
// (Unknown keeps it).
func (p paced) RoundTrip(r *http.Request) (*http.Response, error) {
	if err := p.pace.Wait(r.Context()); err != nil {
		if r.Body != nil {
			r.Body.Close()
		}
		return nil, err
	}
	return p.next.RoundTrip(r)
}
