package payments

import (
	"context"
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

// lockPayment locks a payment, so that the refunds of one payment are
// decided one at a time.
const lockPayment = `SELECT ` + paymentColumns + ` FROM payments WHERE tenant_id = $1 AND id = $2 FOR UPDATE`

// refundsHeld counts what refunds already took or are taking from a
// payment. It is a statement of its own, after the lock: its snapshot must
// be taken once the lock is held, so that it sees every refund committed by
// the transaction that held it before (a subquery of the locking statement
// would keep that statement's older snapshot).
const refundsHeld = `SELECT coalesce(sum(amount), 0) FROM refunds WHERE payment_id = $1 AND status <> 'failed'`

// insertRefund writes the refund of a first phase after its key, as
// insertPayment does.
const insertRefund = `
INSERT INTO refunds (id, tenant_id, payment_id, idempotency_key_id, job_id, amount, reason, status, created_at, updated_at)
SELECT $1, $2, $4, k.id, $5, $6, $7, 'processing', now(), now()
FROM idempotency_keys k WHERE k.tenant_id = $2 AND k.key = $3 AND k.resource_id = $1`

// CreateRefund validates nr and starts a refund of payment paymentID under
// req's key, in the shape of Create. Its first phase locks the payment first,
// to decide what the refund may take. A refusal that depends on the payment
// (not refundable, too large) is final: the key is reserved naming nothing
// and finished with it in the same transaction, and it is replayed. An
// unknown payment is an error that leaves the key free.
func (s *Service) CreateRefund(ctx context.Context, req idempotency.Request, paymentID string, nr NewRefund) (idempotency.Lease, error) {
	if err := nr.Validate(); err != nil {
		return idempotency.Lease{}, err
	}
	if !ValidID("pay_", paymentID) {
		return idempotency.Lease{}, ErrNotFound
	}
	lease, err := s.Keys.Lookup(ctx, req)
	if !errors.Is(err, idempotency.ErrNotFound) {
		return lease, err
	}

	tx, err := s.DB.Begin(ctx)
	if err != nil {
		return idempotency.Lease{}, fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	p, err := scanPayment(tx.QueryRow(ctx, lockPayment, req.TenantID, paymentID))
	if err != nil {
		return idempotency.Lease{}, err
	}
	var held int64
	if err := tx.QueryRow(ctx, refundsHeld, p.ID).Scan(&held); err != nil {
		return idempotency.Lease{}, fmt.Errorf("sum refunds: %w", err)
	}
	amount, refusal := refundAmount(p, held, nr)
	var (
		ref   idempotency.Resource
		jobID int64
	)
	if refusal == nil {
		ref = idempotency.Resource{Type: RefundResourceType, ID: NewID("re_")}
		if jobID, err = s.Jobs.Enqueue(ctx, tx, RefundResourceType, ref.ID); err != nil {
			return idempotency.Lease{}, fmt.Errorf("enqueue refund: %w", err)
		}
	}
	batch := &pgx.Batch{}
	key := s.Keys.Reserve(batch, req, ref)
	if refusal == nil {
		batch.Queue(insertRefund, ref.ID, req.TenantID, req.Key, p.ID, jobID, amount, nr.Reason)
	}
	if err := tx.SendBatch(ctx, batch).Close(); err != nil {
		return idempotency.Lease{}, fmt.Errorf("reserve key and insert refund: %w", err)
	}
	if lease, err = key.Lease(ctx, tx); err != nil || !lease.Created {
		return lease, err
	}
	if refusal != nil {
		if lease, err = s.Keys.FinishNow(ctx, tx, lease, s.Render.Error(refusal)); err != nil {
			return idempotency.Lease{}, err
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return idempotency.Lease{}, fmt.Errorf("commit refund: %w", err)
	}
	return lease, nil
}

// refundAmount decides how much nr refunds of payment p, of which refunds
// already hold held, or the refusal that is its final answer: a payment that
// did not succeed, or a refund larger than what is left.
func refundAmount(p Payment, held int64, nr NewRefund) (int64, error) {
	if p.Status != StatusSucceeded {
		return 0, fmt.Errorf("%w; payment %s is %s", ErrNotRefundable, p.ID, p.Status)
	}
	left := p.Amount - held
	amount := left
	if nr.Amount != nil {
		amount = *nr.Amount
	}
	if left == 0 || amount > left {
		return 0, fmt.Errorf("%w: %d %s left to refund on payment %s", ErrRefundExceedsPayment, left, p.Currency, p.ID)
	}
	return amount, nil
}

// refundColumns are read from refunds aliased r, so that a query may join.
const refundColumns = `r.id, r.tenant_id, r.payment_id, r.idempotency_key_id, r.amount, r.reason, r.status,
	r.failure_code, r.processor_refund_id, r.created_at, r.updated_at`

const getRefund = `SELECT ` + refundColumns + ` FROM refunds r WHERE r.tenant_id = $1 AND r.id = $2`

// GetRefund returns the tenant's refund, or ErrRefundNotFound.
func (s *Service) GetRefund(ctx context.Context, tenantID, id string) (Refund, error) {
	if !ValidID("re_", id) {
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
