package payments

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/example/payments/internal/database"
	"github.com/example/payments/internal/operation"
	"github.com/example/payments/internal/render"
)

// Processor is the processor as the payment sees it: a charge made at most
// once per downstream key. What else it can do is its declaration's to say
// (operation.Processor), and its adapter then has the matching calls too: a
// lookup (ChargeFinder), a fence (ChargeCloser), a ledger (ChargeLedger).
type Processor interface {
	// Charge creates a charge, or returns the one already created under
	// req.IdempotencyKey. A decline, or any other definite refusal, is an
	// Outcome that did not succeed, not an error; an unknown outcome wraps
	// operation.ErrProcessorUnknown, a closed key operation.ErrKeyClosed.
	Charge(ctx context.Context, req ChargeRequest) (operation.Outcome, error)
}

// ChargeFinder is a processor's lookup of a charge (operation.Pending.Find),
// given what the charge sent.
type ChargeFinder interface {
	FindCharge(ctx context.Context, req ChargeRequest) (operation.Outcome, bool, error)
}

// ChargeCloser is a processor's fence on a charge's key
// (operation.Pending.Close), given what the charge sent.
type ChargeCloser interface {
	CloseCharge(ctx context.Context, req ChargeRequest) (operation.Outcome, bool, error)
}

// ChargeLedger is a processor's ledger of charges (Kind.Ledger); an entry's
// Reference is the payment's id.
type ChargeLedger interface {
	LedgerCharges(ctx context.Context, since time.Time, cursor string) ([]operation.LedgerEntry, string, error)
}

// ChargeRequest is what the charge phase sends to the processor, and what
// its lookup and its fence are given.
type ChargeRequest struct {
	// IdempotencyKey is the downstream key: stable for this payment and
	// unique across tenants, derived from the payment, never the client's.
	IdempotencyKey string
	PaymentID      string
	Amount         int64
	Currency       string
	PaymentMethod  string
	Description    string
	// CreatedAt is when the payment was created, by the database clock.
	CreatedAt time.Time
}

// Kind declares the payment to the machinery (operation.Kind); New makes it.
type Kind struct {
	operation.Declared
	processor Processor
	// What p has of a lookup, a fence and a ledger: nil where it has none.
	finder ChargeFinder
	closer ChargeCloser
	ledger ChargeLedger
}

// New declares the payment, its charges made by p, and looked up, closed
// and listed by p where it has those calls. Its first phase refuses nothing
// but an invalid request. The API, which makes no processor call, passes
// nil.
func New(p Processor) Kind {
	k := Kind{Declared: operation.Declare(Names, Payment{}, NewPayment{}), processor: p}
	k.finder, _ = p.(ChargeFinder)
	k.closer, _ = p.(ChargeCloser)
	k.ledger, _ = p.(ChargeLedger)
	return k
}

// loadPayment reads what the charge phase needs of a payment, in the order
// operation.ScanPending reads, then its charge's payment method and
// description.
const loadPayment = `
SELECT tenant_id, idempotency_key_id, amount, currency, status, processor_charge_id, failure_code,
	created_at, now() >= created_at + $2::interval,
	(SELECT k.recovery_point FROM idempotency_keys k WHERE k.id = payments.idempotency_key_id),
	payment_method, coalesce(description, '')
FROM payments WHERE id = $1`

// Load implements operation.Kind.
func (k Kind) Load(ctx context.Context, db database.DBTX, id string, deadline time.Duration) (operation.Pending, error) {
	req := ChargeRequest{IdempotencyKey: Names.DownstreamKey(id), PaymentID: id}
	p, err := operation.ScanPending(db.QueryRow(ctx, loadPayment, id, deadline), Names.Type, &req.PaymentMethod, &req.Description)
	if err != nil {
		return operation.Pending{}, err
	}
	req.Amount, req.Currency, req.CreatedAt = p.Amount, p.Currency, p.CreatedAt
	p.Make = func(ctx context.Context) (operation.Outcome, error) { return k.processor.Charge(ctx, req) }
	if k.finder != nil {
		p.Find = func(ctx context.Context) (operation.Outcome, bool, error) { return k.finder.FindCharge(ctx, req) }
	}
	if k.closer != nil {
		p.Close = func(ctx context.Context) (operation.Outcome, bool, error) { return k.closer.CloseCharge(ctx, req) }
	}
	return p, nil
}

const recordCharge = `
UPDATE payments
SET status = $2, processor_charge_id = $3, failure_code = $4, failure_message = $5, settled_by = $6, updated_at = now()
WHERE id = $1`

// Record implements operation.Kind.
func (Kind) Record(b *pgx.Batch, id, status string, out operation.Outcome, path string) {
	operation.QueueRecord(b, Names.Type, recordCharge, id, status, operation.Nullable(out.ID),
		operation.Nullable(out.FailureCode), operation.Nullable(out.FailureMessage), path)
}

const getPaymentByID = `SELECT ` + columns + ` FROM payments WHERE id = $1`

// Final implements operation.Kind: the payment in its state, rendered as
// the state says (render.FinalResponse).
func (k Kind) Final(ctx context.Context, tx pgx.Tx, id string) (operation.Final, error) {
	p, err := scan(tx.QueryRow(ctx, getPaymentByID, id))
	if err != nil {
		return operation.Final{}, err
	}
	st, err := k.State(p.Status)
	if err != nil {
		return operation.Final{}, err
	}
	message := "The payment failed."
	if p.FailureMessage != nil {
		message = *p.FailureMessage
	}
	resp := render.FinalResponse(Names, st, p.ID, p, p.FailureCode, render.Declined{Title: "Payment declined", Detail: message})
	return operation.Final{TenantID: p.TenantID, Status: p.Status, Object: p, Response: resp}, nil
}

// Ledger implements operation.Kind.
func (k Kind) Ledger(ctx context.Context, since time.Time, cursor string) ([]operation.LedgerEntry, string, error) {
	if k.ledger == nil {
		return nil, "", operation.ErrNoLedger
	}
	return k.ledger.LedgerCharges(ctx, since, cursor)
}

const accountedPayments = `SELECT id, status, processor_charge_id, amount, currency FROM payments WHERE id = ANY($1)`

// Accounted implements operation.Kind.
func (Kind) Accounted(ctx context.Context, db database.DBTX, ids []string) (map[string]operation.Accounted, error) {
	return operation.QueryAccounted(ctx, db, accountedPayments, ids)
}
