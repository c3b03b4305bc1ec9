package payments

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/example/payments/internal/idempotency"
)

// RecoveryRefundCreated is the recovery point after the processor's answer
// to a refund is recorded.
const RecoveryRefundCreated = "refund_created"

// RefundResourceType names refunds as the resource of an idempotency key.
const RefundResourceType = "refund"

// RefundReasons are the reasons a refund may give.
var RefundReasons = []string{"duplicate", "fraudulent", "requested_by_customer"}

var (
	// ErrNotRefundable reports a refund of a payment that did not succeed.
	ErrNotRefundable = errors.New("only a succeeded payment can be refunded")
	// ErrRefundExceedsPayment reports a refund larger than what is left.
	ErrRefundExceedsPayment = errors.New("the refund exceeds what is left to refund")
	// ErrRefundNotFound reports a refund that does not exist for the tenant.
	ErrRefundNotFound = errors.New("refund not found")
)

// Refund is a refund as the API shows it.
type Refund struct {
	ID                string    `json:"id"`
	Object            string    `json:"object"`
	PaymentID         string    `json:"payment_id"`
	Amount            int64     `json:"amount"`
	Reason            *string   `json:"reason"`
	Status            string    `json:"status"`
	FailureCode       *string   `json:"failure_code"`
	ProcessorRefundID *string   `json:"processor_refund_id"`
	CreatedAt         time.Time `json:"created_at"`
	UpdatedAt         time.Time `json:"updated_at"`

	TenantID string `json:"-"`
	KeyID    *int64 `json:"-"`
}

// NewRefund is the request to refund a payment.
type NewRefund struct {
	// Amount defaults to what is left to refund.
	Amount *int64  `json:"amount"`
	Reason *string `json:"reason"`
}

// Validate checks every field and reports all that are wrong at once.
func (r NewRefund) Validate() error {
	var errs []FieldError
	if r.Amount != nil && (*r.Amount < MinAmount || *r.Amount > MaxAmount) {
		errs = append(errs, FieldError{Field: "amount", Message: fmt.Sprintf("must be an integer from %d to %d, in minor units", MinAmount, MaxAmount)})
	}
	if r.Reason != nil && !slices.Contains(RefundReasons, *r.Reason) {
		errs = append(errs, FieldError{Field: "reason", Message: "must be one of " + strings.Join(RefundReasons, ", ")})
	}
	if len(errs) > 0 {
		return &ValidationError{Fields: errs}
	}
	return nil
}

const lockPayment = `SELECT ` + paymentColumns + ` FROM payments WHERE tenant_id = $1 AND id = $2 FOR UPDATE`

// refundsHeld counts what refunds already took or are taking from a payment.
const refundsHeld = `SELECT coalesce(sum(amount), 0) FROM refunds WHERE payment_id = $1 AND status <> 'failed'`

const insertRefund = `
INSERT INTO refunds (id, tenant_id, payment_id, idempotency_key_id, amount, reason, status, created_at, updated_at)
VALUES ($1, $2, $3, $4, $5, $6, 'processing', now(), now())`

// CreateRefund validates nr and reserves req's key. For a new key, the first
// phase locks the payment, checks what is left to refund, and writes the key,
// the refund and its job in one transaction. A refusal that depends on the
// payment (not refundable, too large) is final: it is stored on the key and
// replayed. An unknown payment is an error that leaves the key free.
func (s *Service) CreateRefund(ctx context.Context, req idempotency.Request, paymentID string, nr NewRefund) (idempotency.Lease, error) {
	if err := nr.Validate(); err != nil {
		return idempotency.Lease{}, err
	}
	if !validID("pay_", paymentID) {
		return idempotency.Lease{}, ErrNotFound
	}
	return s.Keys.Acquire(ctx, req, func(ctx context.Context, tx pgx.Tx, keyID int64) (idempotency.Resource, *idempotency.Response, error) {
		p, err := scanPayment(tx.QueryRow(ctx, lockPayment, req.TenantID, paymentID))
		if err != nil {
			return idempotency.Resource{}, nil, err
		}
		refused := func(err error) (idempotency.Resource, *idempotency.Response, error) {
			resp := s.Render.Error(err)
			return idempotency.Resource{}, &resp, nil
		}
		if p.Status != StatusSucceeded {
			return refused(fmt.Errorf("%w; payment %s is %s", ErrNotRefundable, p.ID, p.Status))
		}
		var held int64
		if err := tx.QueryRow(ctx, refundsHeld, p.ID).Scan(&held); err != nil {
			return idempotency.Resource{}, nil, fmt.Errorf("sum refunds: %w", err)
		}
		left := p.Amount - held
		amount := left
		if nr.Amount != nil {
			amount = *nr.Amount
		}
		if left == 0 || amount > left {
			return refused(fmt.Errorf("%w: %d %s left to refund on payment %s", ErrRefundExceedsPayment, left, p.Currency, p.ID))
		}

		id := newID("re_")
		if _, err := tx.Exec(ctx, insertRefund, id, req.TenantID, p.ID, keyID, amount, nr.Reason); err != nil {
			return idempotency.Resource{}, nil, fmt.Errorf("insert refund: %w", err)
		}
		if err := s.Jobs.EnqueueRefund(ctx, tx, id); err != nil {
			return idempotency.Resource{}, nil, fmt.Errorf("enqueue refund: %w", err)
		}
		return idempotency.Resource{Type: RefundResourceType, ID: id}, nil, nil
	})
}

// refundColumns are read from refunds aliased r, so that a query may join.
const refundColumns = `r.id, r.tenant_id, r.payment_id, r.idempotency_key_id, r.amount, r.reason, r.status,
	r.failure_code, r.processor_refund_id, r.created_at, r.updated_at`

const getRefund = `SELECT ` + refundColumns + ` FROM refunds r WHERE r.tenant_id = $1 AND r.id = $2`

// GetRefund returns the tenant's refund, or ErrRefundNotFound.
func (s *Service) GetRefund(ctx context.Context, tenantID, id string) (Refund, error) {
	if !validID("re_", id) {
		return Refund{}, ErrRefundNotFound
	}
	return scanRefund(s.DB.QueryRow(ctx, getRefund, tenantID, id))
}

// scanRefund reads the refund columns, then any extra columns into extra.
func scanRefund(row pgx.Row, extra ...any) (Refund, error) {
	var r Refund
	err := row.Scan(append([]any{&r.ID, &r.TenantID, &r.PaymentID, &r.KeyID, &r.Amount, &r.Reason, &r.Status, &r.FailureCode,
		&r.ProcessorRefundID, &r.CreatedAt, &r.UpdatedAt}, extra...)...)
	if errors.Is(err, pgx.ErrNoRows) {
		return Refund{}, ErrRefundNotFound
	}
	if err != nil {
		return Refund{}, fmt.Errorf("scan refund: %w", err)
	}
	r.Object = "refund"
	r.CreatedAt, r.UpdatedAt = r.CreatedAt.UTC(), r.UpdatedAt.UTC()
	return r, nil
}

// settleOperation stages the event of a finished operation and clears its
// reconciliation mark, if any, in one statement.
const settleOperation = `
WITH settled AS (DELETE FROM reconciliations WHERE resource_type = $6 AND resource_id = $4)
INSERT INTO events (id, tenant_id, type, resource_id, data, created_at)
VALUES ($1, $2, $3, $4, $5, now())`

// settle writes, in the finishing transaction tx, the immutable event about
// object, an operation of resourceType that finished, and clears the
// operation's reconciliation mark.
func settle(ctx context.Context, tx pgx.Tx, resourceType, tenantID, eventType, resourceID string, object any) error {
	data, err := json.Marshal(object)
	if err != nil {
		return fmt.Errorf("encode event: %w", err)
	}
	_, err = tx.Exec(ctx, settleOperation, newID("evt_"), tenantID, eventType, resourceID, data, resourceType)
	if err != nil {
		return fmt.Errorf("stage event and clear the reconciliation mark: %w", err)
	}
	return nil
}
