package payments

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/example/payments/internal/operation"
	"github.com/example/payments/internal/render"
)

// Processor is the processor as the payment sees it: its adapter's calls
// for charges, each given what the charge sends. The charge is made at most
// once per downstream key; what else the processor can do (a lookup, a
// fence, a ledger, where an entry's Reference is the payment's id) is its
// declaration's to say (operation.Processor), and its calls have it there.
type Processor interface {
	Charges() operation.Calls[ChargeRequest]
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
	operation.Calls[ChargeRequest]
}

// New declares the payment, its charges made by p's calls. Its first phase
// refuses nothing but an invalid request. The API, which makes no processor
// call, passes nil.
func New(p Processor) Kind {
	k := Kind{Declared: operation.Declare(Names, Payment{}, NewPayment{})}
	if p != nil {
		k.Calls = p.Charges()
	}
	return k
}

// loadCharge reads what a charge sends beyond what every operation has.
const loadCharge = `SELECT payment_method, coalesce(description, '') FROM payments WHERE id = $1`

// Call implements operation.Kind.
func (k Kind) Call(b *pgx.Batch, id string) func(*operation.Pending) {
	req := ChargeRequest{IdempotencyKey: Names.DownstreamKey(id), PaymentID: id}
	b.Queue(loadCharge, id).QueryRow(func(row pgx.Row) error { return row.Scan(&req.PaymentMethod, &req.Description) })
	return func(p *operation.Pending) {
		req.Amount, req.Currency, req.CreatedAt = p.Amount, p.Currency, p.CreatedAt
		k.Bind(p, req)
	}
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
