package fakeprocessor

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/jackc/pgx/v5"
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
func (s *Server) createRefund(ctx context.Context, tx pgx.Tx, key string, p refundParams) (outcome, error) {
	c, err := getChargeForUpdate(ctx, tx, p.Charge)
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
	if err := insertRefund(ctx, tx, ref); err != nil {
		return outcome{}, err
	}
	return outcome{status: http.StatusOK, body: marshal(ref), event: &event{eventRefundSucceeded, ref}}, nil
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
	return outcome{status: status, body: errorBody(e), event: &event{eventRefundFailed, refused}}
}
