package fakeprocessor

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/jackc/pgx/v5"

	"github.com/example/payments/internal/database"
)

// refundParams is the body of POST /v1/refunds. A nil Amount refunds what is
// left of the charge.
type refundParams struct {
	Charge string `json:"charge"`
	Amount *int64 `json:"amount,omitempty"`
}

// validate checks what can be checked without the ledger.
func (p refundParams) validate() error {
	switch {
	case p.Charge == "":
		return errors.New("charge is required")
	case p.Amount != nil && *p.Amount <= 0:
		return errors.New("amount must be a positive integer in minor units")
	}
	return nil
}

// createRefund refunds part or all of what is left of a succeeded charge.
// Its 4xx answers are definite and stored under the key like a success, and
// told by a refund.failed event as a success is by refund.succeeded.
func (s *Server) createRefund(ctx context.Context, tx *database.Tx, key string, p refundParams) (outcome, error) {
	c, err := getCharge(ctx, tx, getChargeForUpdateSQL, p.Charge)
	if errors.Is(err, errNotFound) {
		var requested int64
		if p.Amount != nil {
			requested = *p.Amount
		}
		return s.refuseRefund(key, p.Charge, requested, http.StatusNotFound,
			invalid("resource_missing", "No such charge: '"+p.Charge+"'.")), nil
	}
	if err != nil {
		return outcome{}, err
	}
	left := c.Amount - c.AmountRefunded
	amount := left
	if p.Amount != nil {
		amount = *p.Amount
	}
	switch {
	case c.Status != statusSucceeded:
		return s.refuseRefund(key, c.ID, amount, http.StatusBadRequest, invalid("charge_not_refundable",
			"Charge "+c.ID+" did not succeed, so there is nothing to refund.")), nil
	case left == 0:
		return s.refuseRefund(key, c.ID, amount, http.StatusBadRequest, invalid("charge_already_refunded",
			"Charge "+c.ID+" has already been refunded in full.")), nil
	case amount > left:
		return s.refuseRefund(key, c.ID, amount, http.StatusBadRequest, invalid("amount_too_large",
			fmt.Sprintf("Refund amount %d is greater than the %d left to refund on charge %s.", amount, left, c.ID))), nil
	}

	ref := refund{
		ID:             newID("re_"),
		Object:         "refund",
		Charge:         c.ID,
		Amount:         amount,
		Status:         statusSucceeded,
		IdempotencyKey: key,
		CreatedAt:      s.now(),
	}
	queueRefund(tx, ref)
	return outcome{status: http.StatusOK, body: marshal(ref), event: &event{"refund." + statusSucceeded, ref}}, nil
}

// refuseRefund is the outcome of a refund refused with status and e: the
// error answer, and a refund.failed event whose refund, never made, has no
// id and carries the refusal's code. amount is what was asked for, or what
// was left to refund when nothing was.
func (s *Server) refuseRefund(key, chargeID string, amount int64, status int, e apiError) outcome {
	refused := failedRefund{refund: refund{
		Object:         "refund",
		Charge:         chargeID,
		Amount:         amount,
		Status:         statusFailed,
		IdempotencyKey: key,
		CreatedAt:      s.now(),
		FailureCode:    &e.Code,
	}}
	return outcome{status: status, body: errorBody(e), event: &event{"refund." + statusFailed, refused}}
}

// refunds are the processor's refunds: POST /v1/refunds, its close and its
// listings.
var refunds = object{
	failureCodes: []string{"resource_missing", "charge_not_refundable", "charge_already_refunded", "amount_too_large"},
	routes: func(r chi.Router, s *Server) {
		r.Post("/refunds", handleCreate(s, "refunded", s.createRefund))
		r.Post("/refunds/close", s.handleClose(closeOf("/v1/refunds/close", "refund", refundTable)))
		r.Get("/refunds", handleList(s, refundTable))
	},
}

// refund is a row of processor.refunds and the refund object of the API.
type refund struct {
	ID             string    `json:"id"`
	Object         string    `json:"object"`
	Charge         string    `json:"charge"`
	Amount         int64     `json:"amount"`
	Status         string    `json:"status"`
	IdempotencyKey string    `json:"idempotency_key"`
	CreatedAt      time.Time `json:"created_at"`
	// FailureCode is set only on the refused refund of a refund.failed
	// event (the code of the refusal), so that a refund made reads as
	// before.
	FailureCode *string `json:"failure_code,omitempty"`
}

// failedRefund is the object of a refund.failed event: a refund that was
// refused and so never made, which has no id. Its own ID, always null,
// shadows the embedded refund's in JSON.
type failedRefund struct {
	ID *string `json:"id"`
	refund
}

// refundColumns are the columns of processor.refunds that every refund
// query writes or selects, in the order of (*refund).columns.
const refundColumns = `id, charge_id, amount, status, idempotency_key, created_at`

// columns are pointers to r's members in the order of refundColumns: what a
// refund is inserted from and scanned into.
func (r *refund) columns() []any {
	return []any{&r.ID, &r.Charge, &r.Amount, &r.Status, &r.IdempotencyKey, &r.CreatedAt}
}

// scanRefund reads a row of refundColumns.
func scanRefund(row pgx.Row) (refund, error) {
	return scanObject(row, refund{Object: "refund"})
}

const insertRefundSQL = `
INSERT INTO processor.refunds (` + refundColumns + `)
VALUES ($1, $2, $3, $4, $5, $6)`

const addRefundedSQL = `
UPDATE processor.charges
SET amount_refunded = amount_refunded + $2
WHERE id = $1`

// queueRefund queues in tx the insert of a refund and the addition of its
// amount to the charge's amount_refunded. The caller holds the charge's row
// lock.
func queueRefund(tx *database.Tx, r refund) {
	b := &pgx.Batch{}
	b.Queue(insertRefundSQL, r.columns()...)
	b.Queue(addRefundedSQL, r.Charge, r.Amount)
	tx.Queue(b)
}

// refundTable reads processor.refunds, listed by idempotency_key or
// created_after.
var refundTable = table[refund]{
	scan:         scanRefund,
	byKeySQL:     listRefundsByKeySQL,
	createdAtSQL: refundCreatedAtSQL,
	pageSQL:      pageRefundsSQL,
}

const refundCreatedAtSQL = `SELECT created_at FROM processor.refunds WHERE id = $1`

// pageRefundsSQL is pageChargesSQL for refunds.
const pageRefundsSQL = `
SELECT ` + refundColumns + `
FROM processor.refunds
WHERE created_at > $1
  AND (created_at, id) > ($2::timestamptz, $3::text)
ORDER BY created_at, id
LIMIT $4`

// listRefundsByKeySQL is the refunds made under an idempotency key, oldest
// first. There is at most one unless the key expired and was used again.
const listRefundsByKeySQL = `
SELECT ` + refundColumns + `
FROM processor.refunds
WHERE idempotency_key = $1
ORDER BY created_at, id`
