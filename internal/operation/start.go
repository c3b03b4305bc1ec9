package operation

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/example/payments/internal/crash"
	"github.com/example/payments/internal/idempotency"
)

// JobQueue stages jobs inside the transaction that needs them, so that a job
// exists exactly when what it works on does (a transactional outbox). Package
// outbox implements it with River's InsertTx.
type JobQueue interface {
	// EnqueueOperation stages the job that drives operation id of
	// resourceType, and returns the job's id.
	EnqueueOperation(ctx context.Context, tx pgx.Tx, resourceType, id string) (int64, error)
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
	// Render renders the refusals a first phase stores.
	Render Refuser
}

// Plan is what a first phase writes, decided inside its transaction.
type Plan struct {
	// Resource is what the key names; the zero value for a refusal. When
	// its type is a declared kind, the job that drives the operation is
	// staged first, and its id kept on the key for the sweep.
	Resource idempotency.Resource
	// Rows queues the statements that write the resource, after the key's
	// insert in one batch: each finds its key by tenant, key and resource
	// (a key another request reserved names another resource, and the rows
	// are not written).
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
//     stands.
//   - A new key is one transaction: the operation plans what it writes (it
//     may lock another operation first), its job is staged with River's
//     InsertTx, the key and the operation's rows go in one batch, and the
//     transaction commits. If another request reserved the key since the
//     read, the lease answers for that key and nothing is written.
//
// The lease's Created tells whether this request ran the first phase. When
// the lease is held, the caller must release it.
func (s *Service) Start(ctx context.Context, req idempotency.Request, steps Steps) (idempotency.Lease, error) {
	lease, err := s.Keys.Lookup(ctx, req)
	if !errors.Is(err, idempotency.ErrNotFound) {
		return lease, err
	}
	if steps.Before != nil {
		if err := steps.Before(ctx); err != nil {
			return idempotency.Lease{}, err
		}
	}
	tx, err := s.DB.Begin(ctx)
	if err != nil {
		return idempotency.Lease{}, fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // a no-op after Commit
	plan, err := steps.Plan(ctx, tx)
	if err != nil {
		return idempotency.Lease{}, err
	}
	var jobID *int64
	if plan.Refusal != nil {
		plan.Resource, plan.Rows = idempotency.Resource{}, nil
	} else if _, err := s.Kinds.Kind(plan.Resource.Type); err == nil {
		id, err := s.Jobs.EnqueueOperation(ctx, tx, plan.Resource.Type, plan.Resource.ID)
		if err != nil {
			return idempotency.Lease{}, fmt.Errorf("enqueue %s: %w", plan.Resource.Type, err)
		}
		jobID = &id
	}
	batch := &pgx.Batch{}
	key := s.Keys.Reserve(batch, req, plan.Resource, jobID)
	if plan.Rows != nil {
		plan.Rows(batch)
	}
	if err := tx.SendBatch(ctx, batch).Close(); err != nil {
		return idempotency.Lease{}, fmt.Errorf("reserve key and write rows: %w", err)
	}
	if lease, err = key.Lease(ctx, tx); err != nil || !lease.Created {
		return lease, err
	}
	switch {
	case plan.Refusal != nil:
		lease, err = s.Keys.FinishNow(ctx, tx, lease, s.Render.Error(plan.Refusal))
	case plan.Response != nil:
		lease, err = s.Keys.FinishNow(ctx, tx, lease, plan.Response())
	}
	if err != nil {
		return idempotency.Lease{}, err
	}
	if err := tx.Commit(ctx); err != nil {
		return idempotency.Lease{}, fmt.Errorf("commit: %w", err)
	}
	if jobID != nil {
		crash.At(CrashAfterFirstPhase)
	}
	return lease, nil
}
