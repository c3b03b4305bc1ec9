package refunds

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/example/payments/internal/operation"
	"github.com/example/payments/internal/payments"
	"github.com/example/payments/internal/render"
)

// Processor is the processor as the refund sees it: its adapter's calls
// for refunds, each given what the refund sends, as for
// payments.Processor. A processor that settles refunds only later, by its
// webhook, answers a refund it took with an outcome that waits
// (operation.Outcome.Waiting): the refund is then pending. A ledger entry's
// Reference is the refund's id, its Currency empty where the processor
// names none.
type Processor interface {
	Refunds() operation.Calls[Request]
}

// Request is what the refund phase sends to the processor, and what its
// lookup and its fence are given.
type Request struct {
	// IdempotencyKey is the downstream key, derived from the refund's id.
	IdempotencyKey string
	// ChargeID is the processor's id of the payment's charge.
	ChargeID string
	Amount   int64
	// Currency is the payment's.
	Currency string
	// CreatedAt is when the refund was created, by the database clock.
	CreatedAt time.Time
}

// Kind declares the refund to the machinery (operation.Kind); New makes it.
type Kind struct {
	operation.Declared
	operation.Calls[Request]
}

// New declares the refund, its refunds made by p's calls and its first
// phase's refusals answered as rules says. The API, which makes no
// processor call, passes nil.
func New(p Processor) Kind {
	k := Kind{Declared: operation.Declare(Names, Refund{}, NewRefund{}, rules...).WithStates(States...)}
	if p != nil {
		k.Calls = p.Refunds()
	}
	return k
}

// StatusPending is the status of a refund the processor took and settles
// later, by its webhook (operation.Processor.ByWebhook).
const StatusPending = "pending"

// States are the refund's: succeeded, which also stages payment.refunded
// about the payment it refunded, with the amount refunded counted, and
// which the processor's later word that the refund failed moves on to
// failed (the amount then free to refund again); failed;
// and pending, a refund the processor took and settles later by its
// webhook (answered 202), which holds its amount against the payment's
// until then.
var States = []operation.State{
	{Status: operation.StatusSucceeded, Succeeded: true, Reversible: true, Answer: http.StatusCreated, Event: "refund.succeeded", Parent: "payment.refunded"},
	{Status: operation.StatusFailed, Answer: http.StatusPaymentRequired, Event: "refund.failed"},
	{Status: StatusPending, Succeeded: true, Waiting: true, Answer: http.StatusAccepted, Event: "refund.pending"},
}

// loadCharge reads the refund's payment, and the charge it refunds.
const loadCharge = `
SELECT r.payment_id, p.processor_charge_id
FROM refunds r JOIN payments p ON p.id = r.payment_id
WHERE r.id = $1`

// Call implements operation.Kind. What a refund takes is counted on its
// payment by the refunds table's own trigger, as its status is recorded.
func (k Kind) Call(b *pgx.Batch, id string) func(*operation.Pending) {
	var (
		paymentID string
		chargeID  *string
	)
	b.Queue(loadCharge, id).QueryRow(func(row pgx.Row) error { return row.Scan(&paymentID, &chargeID) })
	return func(p *operation.Pending) {
		req := Request{IdempotencyKey: Names.DownstreamKey(id), Amount: p.Amount, Currency: p.Currency, CreatedAt: p.CreatedAt}
		if chargeID == nil {
			// Refunds are taken only of succeeded payments, which have one.
			k.Bind(p, req)
			p.Make = func(context.Context) (operation.Outcome, error) {
				return operation.Outcome{}, fmt.Errorf("payment %s has no processor charge to refund", paymentID)
			}
			return
		}
		req.ChargeID = *chargeID
		k.Bind(p, req)
	}
}

const getRefundByID = `SELECT ` + columns + ` FROM refunds r WHERE r.id = $1`

// Final implements operation.Kind: the refund in its state, rendered as
// the state says (render.FinalResponse).
func (k Kind) Final(ctx context.Context, tx pgx.Tx, id string) (operation.Final, error) {
	ref, err := scan(tx.QueryRow(ctx, getRefundByID, id))
	if err != nil {
		return operation.Final{}, err
	}
	st, err := k.State(ref.Status)
	if err != nil {
		return operation.Final{}, err
	}
	resp := render.FinalResponse(Names, st, ref.ID, ref, ref.FailureCode,
		render.Declined{Title: "Refund failed", Detail: "The processor refused the refund."})
	final := operation.Final{TenantID: ref.TenantID, Status: ref.Status, Object: ref, Response: resp}
	if st.Parent != "" {
		p, err := payments.Get(ctx, tx, ref.TenantID, ref.PaymentID)
		if err != nil {
			return operation.Final{}, fmt.Errorf("read the payment of refund %s: %w", ref.ID, err)
		}
		final.Parent = &operation.Parent{ID: p.ID, Object: p}
	}
	return final, nil
}
