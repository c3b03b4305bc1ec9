package payments

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/example/payments/internal/database"
	"github.com/example/payments/internal/idempotency"
)

// JobQueue stages follow-up work with the rows that need it, so that the
// job exists exactly when they do (a transactional outbox).
type JobQueue interface {
	// ChargeJobs is SQL for a data-modifying common table expression that
	// queues the charge job of each payment whose id the relation from
	// yields, in a payment's first statement.
	ChargeJobs(from string) string
	// Queued wakes the workers once jobs queued by SQL have committed; a
	// burst of calls may wake them once.
	Queued()
	// EnqueueRefund stages the refund job of a refund inside tx.
	EnqueueRefund(ctx context.Context, tx pgx.Tx, refundID string) error
}

// Service creates and reads payments.
type Service struct {
	DB   database.DBTX
	Keys *idempotency.Store
	Jobs JobQueue
	// Render renders the refusals that are stored as final responses.
	Render Renderer
	// Crash, when set, is called at CrashAfterFirstPhase; the crash tests
	// make it kill the process. It is nil in production.
	Crash func(point string)
}

// CrashAfterFirstPhase is reached when the first phase has committed and the
// request has not started waiting.
const CrashAfterFirstPhase = "after_first_phase"

// ResourceType names payments as the resource of an idempotency key.
const ResourceType = "payment"

// insertPayment is the payment's part of its first statement: it runs only
// when the statement inserted the key (new_key, see idempotency.Statement).
const insertPayment = `,
payment AS (
	INSERT INTO payments (id, tenant_id, idempotency_key_id, amount, currency, payment_method, description,
		metadata, status, created_at, updated_at)
	SELECT resource_id, tenant_id, id, $10::bigint, $11::text, $12::text, $13::text, $14::jsonb, '` + StatusProcessing + `', created_at, created_at
	FROM new_key
	RETURNING id
)`

// Create validates np and then starts req's key. For a new key, the first
// phase writes the key, the payment and its charge job in one statement, and
// returns the payment as it was created; otherwise the lease says what the
// key holds, and the payment is nil. When the lease is held, the caller must
// release it.
func (s *Service) Create(ctx context.Context, req idempotency.Request, np NewPayment) (idempotency.Lease, *Payment, error) {
	if err := np.Validate(); err != nil {
		return idempotency.Lease{}, nil, err
	}
	p := Payment{ID: newID("pay_"), Object: "payment", TenantID: req.TenantID, Amount: *np.Amount,
		Currency: strings.ToUpper(np.Currency), PaymentMethod: np.PaymentMethod, Description: np.Description,
		Metadata: np.metadata(), Status: StatusProcessing}
	lease, err := s.Keys.Start(ctx, req, idempotency.Statement{
		Resource: idempotency.Resource{Type: ResourceType, ID: p.ID},
		CTEs:     insertPayment + ",\ncharge_job AS (" + s.Jobs.ChargeJobs("payment") + ")",
		Args:     []any{p.Amount, p.Currency, p.PaymentMethod, p.Description, p.Metadata},
	})
	if err != nil || !lease.Created {
		return lease, nil, err
	}
	s.Jobs.Queued()
	if s.Crash != nil {
		s.Crash(CrashAfterFirstPhase)
	}
	p.KeyID = &lease.Key.ID
	p.CreatedAt, p.UpdatedAt = lease.Key.CreatedAt, lease.Key.CreatedAt
	return lease, &p, nil
}

const paymentColumns = `id, tenant_id, idempotency_key_id, amount, currency, payment_method, description,
	metadata, status, failure_code, failure_message, processor_charge_id, amount_refunded, created_at, updated_at`

const getPayment = `SELECT ` + paymentColumns + ` FROM payments WHERE tenant_id = $1 AND id = $2`

// Get returns the tenant's payment, or ErrNotFound.
func (s *Service) Get(ctx context.Context, tenantID, id string) (Payment, error) {
	if !validID("pay_", id) {
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
