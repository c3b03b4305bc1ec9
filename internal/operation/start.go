package operation

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/example/payments/internal/crash"
	"github.com/example/payments/internal/database"
	"github.com/example/payments/internal/idempotency"
	"github.com/example/payments/internal/outbox"
)

// JobQueue puts jobs in the queue inside the transaction that needs them, so
// that a job exists exactly when what it works on does. Package jobs
// implements it with River's InsertTx.
type JobQueue interface {
	// EnqueueProcessorEvent stages the job that settles what the processor
	// event eventID says.
	EnqueueProcessorEvent(ctx context.Context, tx pgx.Tx, eventID string) error
}

// Refuser renders a refusal decided in a first phase as the final response
// stored on the key (package render).
type Refuser interface {
	Error(err error) idempotency.Response
}

// Service starts operations and answers for them: the first phase of every
// idempotent POST (Start), the processor's webhooks, and the events.
type Service struct {
	DB    *pgxpool.Pool
	Keys  *idempotency.Store
	Jobs  JobQueue
	Kinds *Registry
	// Doorbell, when set, wakes the relays once a first phase has staged a
	// job; without it they find the job at their next poll.
	Doorbell *outbox.Doorbell
	// Render renders the refusals a first phase stores.
	Render Refuser
	// Processor is what the service's processor takes: the kinds' first
	// phases check their requests against it (a payment method's format).
	Processor Processor
}

// Plan is what a first phase writes, decided inside its transaction.
type Plan struct {
	// Resource is what the key names; the zero value for a refusal. When
	// its type is a declared kind, the job that drives the operation is
	// staged in the outbox after the key, for the relay to put in the job
	// queue and name on the key for the sweep.
	Resource idempotency.ResourceRef
	// Operation is the row of the operation the key names, when its type is
	// a declared kind: the machinery writes it after the key (see Row).
	Operation *Row
	// Rows queues the statements that write anything else, after the key's
	// insert and the operation's, in one batch: each finds its key by
	// tenant, key and resource (a key another request reserved names
	// another resource, and the rows are not written).
	Rows func(b *pgx.Batch)
	// Refusal, when set, is the final answer of the first phase: stored on
	// the key, which names nothing, and replayed.
	Refusal error
	// Response, when set, finishes the key in the first phase with it (an
	// operation with no later phase, such as a webhook endpoint's change).
	Response func() idempotency.Response
}

// Steps are an operation's own steps in its first phase, around the shape
// Start keeps.
type Steps struct {
	// Before, when set, runs once the key is known to be new and before the
	// transaction: work that must hold no connection, such as resolving a
	// URL.
	Before func(ctx context.Context) error
	// Plan runs first in the transaction: it may lock and read rows, and
	// decides what the phase writes. An error rolls everything back and
	// leaves the key free.
	Plan func(ctx context.Context, tx pgx.Tx) (Plan, error)
}

// Start runs the first phase of an operation under req's key, in the shape
// every idempotent POST has:
//
//   - A retry is answered by one read of its key, before any transaction
//     (Keys.Lookup): the stored response of a finished key, or the key as it
//     stands. A caller that has just made that read says so (req.Unseen).
//   - A new key is one transaction of as few round trips as its statements
//     allow: the operation plans what it writes (it may lock another
//     operation first), and the key, the operation's rows, its job's row in
//     the outbox and the COMMIT go in one batch; the BEGIN goes with the
//     transaction's first statement (database.Tx). A payment's first phase is
//     the read and that batch. If another request committed the key since the
//     read, the key's insert fails on the unique index, nothing is written,
//     and the lease answers for that key. Once it commits, the Doorbell wakes
//     the relays, which move the job to the job queue (outbox.Relay).
//
// The lease's Created tells whether this request ran the first phase. When
// the lease is held, the caller must release it.
func (s *Service) Start(ctx context.Context, req idempotency.Request, steps Steps) (idempotency.Lease, error) {
	if !req.Unseen {
		lease, err := s.Keys.Lookup(ctx, req)
		if !errors.Is(err, idempotency.ErrNotFound) {
			return lease, err
		}
	}
	if steps.Before != nil {
		if err := steps.Before(ctx); err != nil {
			return idempotency.Lease{}, err
		}
	}
	tx, err := database.Begin(ctx, s.DB)
	if err != nil {
		return idempotency.Lease{}, err
	}
	defer tx.Rollback(ctx) //nolint:errcheck // a no-op once committed
	plan, err := steps.Plan(ctx, tx)
	if err != nil {
		return idempotency.Lease{}, err
	}
	var final *idempotency.Response
	switch {
	case plan.Refusal != nil:
		plan.Resource, plan.Operation, plan.Rows = idempotency.ResourceRef{}, nil, nil
		refusal := s.Render.Error(plan.Refusal)
		final = &refusal
	case plan.Response != nil:
		response := plan.Response()
		final = &response
	}
	batch := &pgx.Batch{}
	key, err := s.Keys.Reserve(batch, req, plan.Resource, final)
	if err != nil {
		return idempotency.Lease{}, err
	}
	k, kindErr := s.Kinds.Kind(plan.Resource.Type)
	staged := kindErr == nil
	switch {
	case staged && plan.Operation == nil:
		return idempotency.Lease{}, fmt.Errorf("%s %s: its first phase plans no row", plan.Resource.Type, plan.Resource.ID)
	case staged:
		if err := queueInsert(batch, k.Names(), plan.Resource.ID, req.TenantID, req.Key, *plan.Operation); err != nil {
			return idempotency.Lease{}, err
		}
	case plan.Operation != nil:
		return idempotency.Lease{}, fmt.Errorf("%q is no declared kind, and has no operation's row", plan.Resource.Type)
	}
	if plan.Rows != nil {
		plan.Rows(batch)
	}
	if staged {
		outbox.Stage(ctx, batch, req.TenantID, req.Key, plan.Resource.Type, plan.Resource.ID)
	}
	if err = tx.CommitWith(ctx, batch); err != nil {
		// The transaction ends before the key is read again: a second
		// connection held with the first could wait on a full pool.
		_ = tx.Rollback(ctx)
		err = fmt.Errorf("reserve key and write rows: %w", err)
	}
	lease, err := key.Lease(ctx, err)
	if err != nil || !lease.Created {
		return lease, err
	}
	if staged {
		crash.At(CrashAfterFirstPhase)
		s.Doorbell.Ring()
	}
	return lease, nil
}
