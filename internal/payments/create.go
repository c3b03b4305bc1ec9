package payments

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/example/payments/client"
	"github.com/example/payments/internal/database"
	"github.com/example/payments/internal/idempotency"
	"github.com/example/payments/internal/operation"
)

// Create validates np (its payment method in the format of the service's
// processor) and starts a payment under req's key (see
// operation.Service.Start). The payment is returned as it was created; it is
// nil when the lease answers for an existing key. When the lease is held,
// the caller must release it.
func Create(ctx context.Context, s *operation.Service, req idempotency.Request, np NewPayment) (idempotency.Lease, *Payment, error) {
	if err := np.Validate(s.Processor); err != nil {
		return idempotency.Lease{}, nil, err
	}
	var p Payment
	lease, err := s.Start(ctx, req, operation.Steps{Plan: func(context.Context, pgx.Tx) (operation.Plan, error) {
		p = Payment{Payment: client.Payment{ID: operation.NewID(Names.Prefix), Object: Names.Type, Amount: *np.Amount,
			Currency: strings.ToUpper(np.Currency), PaymentMethod: np.PaymentMethod, Description: np.Description,
			Metadata: np.metadata(), Status: operation.StatusProcessing}, TenantID: req.TenantID}
		return operation.Plan{
			Resource: idempotency.ResourceRef{Type: Names.Type, ID: p.ID},
			Operation: &operation.Row{Amount: p.Amount, Currency: p.Currency, Columns: []operation.Column{
				{Name: "payment_method", Value: p.PaymentMethod}, {Name: "description", Value: p.Description},
				{Name: "metadata", Value: p.Metadata}}},
		}, nil
	}})
	if err != nil || !lease.Created {
		return lease, nil, err
	}
	// The key and the payment were written in one transaction: one now().
	p.KeyID = &lease.Key.ID
	p.CreatedAt, p.UpdatedAt = lease.Key.CreatedAt, lease.Key.CreatedAt
	return lease, &p, nil
}

const columns = `id, tenant_id, idempotency_key_id, amount, currency, payment_method, description,
	metadata, status, failure_code, failure_message, processor_charge_id, amount_refunded, created_at, updated_at`

const getPayment = `SELECT ` + columns + ` FROM payments WHERE tenant_id = $1 AND id = $2`

// Get returns the tenant's payment, or ErrNotFound.
func Get(ctx context.Context, db database.DBTX, tenantID, id string) (Payment, error) {
	if !operation.ValidID(Names.Prefix, id) {
		return Payment{}, ErrNotFound
	}
	return scan(db.QueryRow(ctx, getPayment, tenantID, id))
}

const lockPayment = getPayment + ` FOR UPDATE`

// QueueLock queues in b the read and lock of the tenant's payment id into
// p, so that the payments that take from it are decided one at a time. The
// statements that must see the payment locked may follow in the same batch,
// and so the same round trip: each statement of a batch starts once the one
// before it has finished, with a snapshot of its own. Sending the batch
// returns ErrNotFound when the tenant has no such payment.
func QueueLock(b *pgx.Batch, tenantID, id string, p *Payment) {
	b.Queue(lockPayment, tenantID, id).QueryRow(func(row pgx.Row) (err error) {
		*p, err = scan(row)
		return err
	})
}

const listPayments = `
SELECT ` + columns + ` FROM payments
WHERE tenant_id = $1
	AND ($2::text IS NULL OR (created_at, id) < (SELECT created_at, id FROM payments WHERE tenant_id = $1 AND id = $2))
ORDER BY created_at DESC, id DESC
LIMIT $3`

// List returns up to limit of the tenant's payments, newest first, starting
// after the payment startingAfter when it is not empty, and whether more follow.
func List(ctx context.Context, db database.DBTX, tenantID string, limit int, startingAfter string) ([]Payment, bool, error) {
	if startingAfter != "" {
		if _, err := Get(ctx, db, tenantID, startingAfter); err != nil {
			return nil, false, err
		}
	}
	return operation.ListPage(ctx, db, listPayments, tenantID, startingAfter, limit, func(row pgx.CollectableRow) (Payment, error) {
		return scan(row)
	})
}

// scan reads the payment columns.
func scan(row pgx.Row) (Payment, error) {
	var (
		p        Payment
		metadata []byte
	)
	err := row.Scan(&p.ID, &p.TenantID, &p.KeyID, &p.Amount, &p.Currency, &p.PaymentMethod, &p.Description,
		&metadata, &p.Status, &p.FailureCode, &p.FailureMessage, &p.ProcessorChargeID, &p.AmountRefunded,
		&p.CreatedAt, &p.UpdatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return Payment{}, ErrNotFound
	}
	if err != nil {
		return Payment{}, fmt.Errorf("scan payment: %w", err)
	}
	if err := json.Unmarshal(metadata, &p.Metadata); err != nil {
		return Payment{}, fmt.Errorf("decode metadata: %w", err)
	}
	p.Object = Names.Type
	p.CreatedAt, p.UpdatedAt = p.CreatedAt.UTC(), p.UpdatedAt.UTC()
	return p, nil
}
