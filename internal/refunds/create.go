package refunds

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/example/payments/internal/database"
	"github.com/example/payments/internal/idempotency"
	"github.com/example/payments/internal/operation"
	"github.com/example/payments/internal/payments"
)

// held counts what refunds already took or are taking from a payment. It is
// a statement of its own, after the payment's lock in the same batch: its
// snapshot must be taken once the lock is held, so that it sees every refund
// committed by the transaction that held it before (a subquery of the locking
// statement would keep that statement's older snapshot).
const held = `SELECT coalesce(sum(amount), 0) FROM refunds WHERE payment_id = $1 AND status <> 'failed'`

// Create validates nr and starts a refund of payment paymentID under req's
// key (see operation.Service.Start). Its first phase locks the payment
// first, to decide what the refund may take. A refusal that depends on the
// payment (not refundable, too large) is final: the key is reserved naming
// nothing and finished with it in the same transaction, and it is replayed.
// An unknown payment is an error that leaves the key free.
func Create(ctx context.Context, s *operation.Service, req idempotency.Request, paymentID string, nr NewRefund) (idempotency.Lease, error) {
	if err := nr.Validate(); err != nil {
		return idempotency.Lease{}, err
	}
	if !operation.ValidID(payments.Names.Prefix, paymentID) {
		return idempotency.Lease{}, payments.ErrNotFound
	}
	return s.Start(ctx, req, operation.Steps{Plan: func(ctx context.Context, tx pgx.Tx) (operation.Plan, error) {
		var (
			p     payments.Payment
			taken int64
			b     = &pgx.Batch{}
		)
		payments.QueueLock(b, req.TenantID, paymentID, &p)
		b.Queue(held, paymentID).QueryRow(func(row pgx.Row) error { return row.Scan(&taken) })
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return operation.Plan{}, fmt.Errorf("lock payment: %w", err)
		}
		amount, refusal := amountOf(p, taken, nr)
		if e := s.Processor.CheckAmount(p.Currency, amount, false); refusal == nil && e != nil {
			refusal = operation.Invalid([]operation.FieldError{*e})
		}
		id := operation.NewID(Names.Prefix)
		return operation.Plan{
			Resource: idempotency.ResourceRef{Type: Names.Type, ID: id},
			Operation: &operation.Row{Amount: amount, Currency: p.Currency, Columns: []operation.Column{
				{Name: "payment_id", Value: p.ID}, {Name: "reason", Value: nr.Reason}}},
			Refusal: refusal,
		}, nil
	}})
}

// columns are read from refunds aliased r, so that a query may join.
const columns = `r.id, r.tenant_id, r.payment_id, r.idempotency_key_id, r.amount, r.reason, r.status,
	r.failure_code, r.processor_refund_id, r.created_at, r.updated_at`

const getRefund = `SELECT ` + columns + ` FROM refunds r WHERE r.tenant_id = $1 AND r.id = $2`

// Get returns the tenant's refund, or ErrNotFound.
func Get(ctx context.Context, db database.DBTX, tenantID, id string) (Refund, error) {
	if !operation.ValidID(Names.Prefix, id) {
		return Refund{}, ErrNotFound
	}
	return scan(db.QueryRow(ctx, getRefund, tenantID, id))
}

// scan reads the refund columns.
func scan(row pgx.Row) (Refund, error) {
	var r Refund
	err := row.Scan(&r.ID, &r.TenantID, &r.PaymentID, &r.KeyID, &r.Amount, &r.Reason, &r.Status, &r.FailureCode,
		&r.ProcessorRefundID, &r.CreatedAt, &r.UpdatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return Refund{}, ErrNotFound
	}
	if err != nil {
		return Refund{}, fmt.Errorf("scan refund: %w", err)
	}
	r.Object = Names.Type
	r.CreatedAt, r.UpdatedAt = r.CreatedAt.UTC(), r.UpdatedAt.UTC()
	return r, nil
}
