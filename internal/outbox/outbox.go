// Package outbox is the service's transactional outbox: a first phase stages
// the job that drives its operation as a row of operation_outbox, in the
// transaction that writes the operation (Stage), and the relay (Relay) moves
// those rows to the job queue in bulk, each batch in one transaction, so
// that a job exists exactly when its row is gone. The Doorbell tells the
// relays that rows are waiting. The queue itself is behind an interface
// (Queue); package jobs implements it with River.
package outbox

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/propagation"

	"github.com/example/payments/internal/crash"
	"github.com/example/payments/internal/database"
	"github.com/example/payments/internal/timer"
	"github.com/example/payments/internal/tracing"
)

// Staged is an operation whose first phase committed and whose job is not
// in the job queue yet: a row of the service's own outbox.
type Staged struct {
	ResourceType, ID string
	// Trace is the first phase's trace context, for the job to carry on.
	Trace propagation.MapCarrier
}

// stagedChannel is the NOTIFY channel on which first phases tell the
// relays that they staged jobs (Doorbell).
const stagedChannel = "operation_staged"

// stageJob queues a first phase's job in the outbox, after its key, which it
// finds by (tenant, key) and resource as the operation's rows do.
const stageJob = `
INSERT INTO operation_outbox (key_id, resource_type, resource_id, trace)
SELECT k.id, $3, $4, $5 FROM idempotency_keys k WHERE k.tenant_id = $1 AND k.key = $2 AND k.resource_id = $4`

// Stage queues in b the outbox row of the job that drives the resource
// (resourceType, id), started under the tenant's key, with ctx's trace.
func Stage(ctx context.Context, b *pgx.Batch, tenantID, key, resourceType, id string) {
	var trace any // NULL: no trace
	carrier := propagation.MapCarrier{}
	if tracing.Propagator.Inject(ctx, carrier); len(carrier) > 0 {
		trace = carrier
	}
	b.Queue(stageJob, tenantID, key, resourceType, id, trace)
}

// Queue puts in the job queue, inside the relay's transaction, the jobs that
// drive the staged operations, and returns their ids in order.
type Queue interface {
	EnqueueOperations(ctx context.Context, tx pgx.Tx, staged []Staged) ([]int64, error)
}

// CrashInRelay is the crash point between the relay's insert of jobs into
// the queue and its commit.
const CrashInRelay = "in_relay"

// Relay moves the jobs first phases staged in the outbox to the job queue,
// in bulk, and names each job on its key, for the sweep: one transaction
// moves a batch, so that a job exists exactly when its row is gone. Relays
// in several workers share the outbox: each takes the rows no other holds
// (SKIP LOCKED), and a relay that dies mid-batch leaves its rows to the next.
type Relay struct {
	DB   *pgxpool.Pool
	Jobs Queue
	// BatchSize bounds the jobs one transaction moves.
	BatchSize int
	// Session, past any pooler, LISTENs for the first phases' doorbell.
	Session *pgxpool.Pool
	// Poll is how often the outbox is looked at when no doorbell rings: the
	// backstop for a lost notification.
	Poll   time.Duration
	Logger *slog.Logger
}

// takeStaged locks the oldest rows of the outbox that no other relay holds.
const takeStaged = `
SELECT id, key_id, resource_type, resource_id, trace FROM operation_outbox
ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED`

// relayed deletes the moved rows ($1) and names each job ($3) on its key ($2).
const relayed = `
WITH moved AS (DELETE FROM operation_outbox WHERE id = ANY($1))
UPDATE idempotency_keys k SET job_id = j.job_id
FROM unnest($2::bigint[], $3::bigint[]) AS j (key_id, job_id) WHERE k.id = j.key_id`

// Move moves one batch from the outbox to the job queue and returns how
// many jobs it moved.
func (r *Relay) Move(ctx context.Context) (int, error) {
	tx, err := database.Begin(ctx, r.DB)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback(ctx) //nolint:errcheck // a no-op once committed
	rows, err := tx.Query(ctx, takeStaged, r.BatchSize)
	if err != nil {
		return 0, fmt.Errorf("relay: take staged jobs: %w", err)
	}
	type row struct {
		id, keyID int64
		Staged
	}
	taken, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (row, error) {
		var x row
		return x, r.Scan(&x.id, &x.keyID, &x.ResourceType, &x.ID, &x.Trace)
	})
	if err != nil || len(taken) == 0 {
		return 0, wrapRelay("take staged jobs", err)
	}
	staged := make([]Staged, len(taken))
	for i, x := range taken {
		staged[i] = x.Staged
	}
	jobIDs, err := r.Jobs.EnqueueOperations(ctx, tx, staged)
	if err != nil {
		return 0, wrapRelay("enqueue", err)
	}
	rowIDs, keyIDs := make([]int64, len(taken)), make([]int64, len(taken))
	for i, x := range taken {
		rowIDs[i], keyIDs[i] = x.id, x.keyID
	}
	crash.At(CrashInRelay)
	b := &pgx.Batch{}
	b.Queue(relayed, rowIDs, keyIDs, jobIDs)
	if err := tx.CommitWith(ctx, b); err != nil {
		return 0, wrapRelay("commit", err)
	}
	return len(taken), nil
}

// wrapRelay names the relay's step that failed with err; nil stays nil.
func wrapRelay(step string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("relay: %s: %w", step, err)
}

// Drain moves batches until one comes back short, and returns how many jobs
// it moved.
func (r *Relay) Drain(ctx context.Context) (int, error) {
	total := 0
	for {
		n, err := r.Move(ctx)
		total += n
		if err != nil || n < r.BatchSize {
			return total, err
		}
	}
}

// Run moves the outbox's jobs until ctx ends: at once when a doorbell rings,
// and every Poll, each time until a batch comes back short.
func (r *Relay) Run(ctx context.Context) {
	rung := make(chan struct{}, 1)
	ring := func() {
		select {
		case rung <- struct{}{}:
		default:
		}
	}
	go database.Listen(ctx, r.Session, stagedChannel, r.Logger, ring, func(string) { ring() })
	poll := time.NewTicker(r.Poll)
	defer poll.Stop()
	for {
		if _, err := r.Drain(ctx); err != nil && ctx.Err() == nil {
			r.Logger.Warn("the staged jobs wait for the relay's next try", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-rung:
		case <-poll.C:
		}
	}
}

// Doorbell tells the relays that first phases staged jobs: at most one
// notification per cooldown, however many phases committed meanwhile, sent
// after their commits and outside them (a transaction that notifies holds
// Postgres's notification lock through its commit; see
// idempotency.Announcer). A lost ring costs the relay's Poll.
type Doorbell struct {
	db       *pgxpool.Pool
	cooldown time.Duration
	logger   *slog.Logger
	poke     chan struct{}
}

// NewDoorbell returns a doorbell that rings at most once per cooldown; Run
// rings it.
func NewDoorbell(pool *pgxpool.Pool, cooldown time.Duration, logger *slog.Logger) *Doorbell {
	return &Doorbell{db: pool, cooldown: cooldown, logger: logger, poke: make(chan struct{}, 1)}
}

// Ring asks for a ring: a first phase that staged a job has committed. It
// never blocks. A nil Doorbell does nothing.
func (d *Doorbell) Ring() {
	if d == nil {
		return
	}
	select {
	case d.poke <- struct{}{}:
	default: // a ring is already due
	}
}

// Run rings until ctx ends.
func (d *Doorbell) Run(ctx context.Context) {
	timer.Throttle(ctx, d.poke, d.cooldown, func(ctx context.Context) {
		if _, err := d.db.Exec(ctx, "NOTIFY "+stagedChannel); err != nil && ctx.Err() == nil {
			d.logger.Warn("ring the relays: they will poll", "err", err)
		}
	})
}
