package payments

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/example/payments/internal/crash"
	"github.com/example/payments/internal/database"
	"github.com/example/payments/internal/idempotency"
)

// JobQueue stages the job that drives an operation inside the transaction of
// the operation's first phase, so that the job exists exactly when the
// operation does (a transactional outbox).
type JobQueue interface {
	// Enqueue stages the job of operation id, of resourceType, inside tx and
	// returns the job's id.
	Enqueue(ctx context.Context, tx pgx.Tx, resourceType, id string) (int64, error)
}

// Service starts payments and refunds, and reads them.
type Service struct {
	DB   *pgxpool.Pool
	Keys *idempotency.Store
	Jobs JobQueue
	// Render renders the refusals that are stored as final responses.
	Render Renderer
}

// CrashAfterFirstPhase is the API's crash point (see package crash), reached
// when a payment's first phase has committed and the request has not
// started waiting.
const CrashAfterFirstPhase = "after_first_phase"

// PaymentResourceType names payments as the resource of an idempotency key.
const PaymentResourceType = "payment"

// insertPayment writes the payment of a first phase after its key, which
// it refers to: only when the key was reserved for this payment (another
// request's key names another resource, and the payment is not written).
const insertPayment = `
INSERT INTO payments (id, tenant_id, idempotency_key_id, job_id, amount, currency, payment_method, description,
	metadata, status, created_at, updated_at)
SELECT $1, $2, k.id, $4, $5, $6, $7, $8, $9, '` + StatusProcessing + `', now(), now()
FROM idempotency_keys k WHERE k.tenant_id = $2 AND k.key = $3 AND k.resource_id = $1`

// Create validates np and starts a payment under req's key. Every idempotent
// operation starts in this shape:
//
//   - A retry is answered by one read of its key, before any transaction
//     (Keys.Lookup): the stored response of a finished key, or the key as it
//     stands.
//   - A new key is the operation's first phase, one transaction: stage the
//     job that will drive it (River's InsertTx), reserve the key and write
//     the operation's rows in one batch, and commit. If another request
//     reserved the key first, the lease answers for that key and nothing is
//     written.
//
// The payment is returned as it was created; it is nil when the lease answers
// for an existing key. When the lease is held, the caller must release it.
func (s *Service) Create(ctx context.Context, req idempotency.Request, np NewPayment) (idempotency.Lease, *Payment, error) {
	if err := np.Validate(); err != nil {
		return idempotency.Lease{}, nil, err
	}
	lease, err := s.Keys.Lookup(ctx, req)
	if !errors.Is(err, idempotency.ErrNotFound) {
		return lease, nil, err
	}

	p := Payment{ID: NewID("pay_"), Object: "payment", TenantID: req.TenantID, Amount: *np.Amount,
		Currency: strings.ToUpper(np.Currency), PaymentMethod: np.PaymentMethod, Description: np.Description,
		Metadata: np.metadata(), Status: StatusProcessing}
	tx, err := s.DB.Begin(ctx)
	if err != nil {
		return idempotency.Lease{}, nil, fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	jobID, err := s.Jobs.Enqueue(ctx, tx, PaymentResourceType, p.ID)
	if err != nil {
		return idempotency.Lease{}, nil, fmt.Errorf("enqueue charge: %w", err)
	}
	batch := &pgx.Batch{}
	key := s.Keys.Reserve(batch, req, idempotency.Resource{Type: PaymentResourceType, ID: p.ID})
	batch.Queue(insertPayment, p.ID, p.TenantID, req.Key, jobID, p.Amount, p.Currency, p.PaymentMethod,
		p.Description, p.Metadata)
	if err := tx.SendBatch(ctx, batch).Close(); err != nil {
		return idempotency.Lease{}, nil, fmt.Errorf("reserve key and insert payment: %w", err)
	}
	if lease, err = key.Lease(ctx, tx); err != nil || !lease.Created {
		return lease, nil, err
	}
	if err := tx.Commit(ctx); err != nil {
		return idempotency.Lease{}, nil, fmt.Errorf("commit payment: %w", err)
	}
	crash.At(CrashAfterFirstPhase)
	// The key and the payment were written in one transaction: one now().
	p.KeyID = &lease.Key.ID
	p.CreatedAt, p.UpdatedAt = lease.Key.CreatedAt, lease.Key.CreatedAt
	return lease, &p, nil
}

const paymentColumns = `id, tenant_id, idempotency_key_id, amount, currency, payment_method, description,
	metadata, status, failure_code, failure_message, processor_charge_id, amount_refunded, created_at, updated_at`

const getPayment = `SELECT ` + paymentColumns + ` FROM payments WHERE tenant_id = $1 AND id = $2`

// Get returns the tenant's payment, or ErrNotFound.
func (s *Service) Get(ctx context.Context, tenantID, id string) (Payment, error) {
	if !ValidID("pay_", id) {
		return Payment{}, ErrNotFound
	}
	return scanPayment(s.DB.QueryRow(ctx, getPayment, tenantID, id))
}

const listPayments = `
SELECT ` + paymentColumns + ` FROM payments
WHERE tenant_id = $1
	AND ($2::text IS NULL OR (created_at, id) < (SELECT created_at, id FROM payments WHERE tenant_id = $1 AND id = $2))
ORDER BY created_at DESC, id DESC
LIMIT $3`

// List returns up to limit of the tenant's payments, newest first, starting
// after the payment startingAfter when it is not empty, and whether more follow.
func (s *Service) List(ctx context.Context, tenantID string, limit int, startingAfter string) ([]Payment, bool, error) {
	if startingAfter != "" {
		if _, err := s.Get(ctx, tenantID, startingAfter); err != nil {
			return nil, false, err
		}
	}
	return listPage(ctx, s.DB, listPayments, tenantID, startingAfter, limit, func(row pgx.CollectableRow) (Payment, error) {
		return scanPayment(row)
	})
}

// listPage runs a list query that takes (tenant, starting after, limit) and
// reads one row more than limit to tell whether more follow.
func listPage[T any](ctx context.Context, db database.DBTX, sql, tenantID, startingAfter string, limit int, scan pgx.RowToFunc[T]) ([]T, bool, error) {
	var after *string
	if startingAfter != "" {
		after = &startingAfter
	}
	rows, err := db.Query(ctx, sql, tenantID, after, limit+1)
	if err != nil {
		return nil, false, fmt.Errorf("list: %w", err)
	}
	page, err := pgx.CollectRows(rows, scan)
	if err != nil {
		return nil, false, fmt.Errorf("list: %w", err)
	}
	if len(page) > limit {
		return page[:limit], true, nil
	}
	return page, false, nil
}

// scanPayment reads the payment columns, then any extra columns into extra.
func scanPayment(row pgx.Row, extra ...any) (Payment, error) {
	var (
		p        Payment
		metadata []byte
	)
	err := row.Scan(append([]any{&p.ID, &p.TenantID, &p.KeyID, &p.Amount, &p.Currency, &p.PaymentMethod, &p.Description,
		&metadata, &p.Status, &p.FailureCode, &p.FailureMessage, &p.ProcessorChargeID, &p.AmountRefunded,
		&p.CreatedAt, &p.UpdatedAt}, extra...)...)
	if errors.Is(err, pgx.ErrNoRows) {
		return Payment{}, ErrNotFound
	}
	if err != nil {
		return Payment{}, fmt.Errorf("scan payment: %w", err)
	}
	if err := json.Unmarshal(metadata, &p.Metadata); err != nil {
		return Payment{}, fmt.Errorf("decode metadata: %w", err)
	}
	p.Object = "payment"
	p.CreatedAt, p.UpdatedAt = p.CreatedAt.UTC(), p.UpdatedAt.UTC()
	return p, nil
}
