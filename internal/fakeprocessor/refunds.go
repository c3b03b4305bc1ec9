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
// Its 4xx answers are definite and stored under the key like a success.
func (s *Server) createRefund(ctx context.Context, tx pgx.Tx, key string, p refundParams) (outcome, error) {
	c, err := getChargeForUpdate(ctx, tx, p.Charge)
	if errors.Is(err, errNotFound) {
		return outcome{status: http.StatusNotFound, body: errorBody(invalid("resource_missing", "No such charge: '"+p.Charge+"'."))}, nil
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
		return outcome{status: http.StatusBadRequest, body: errorBody(invalid("charge_not_refundable",
			"Charge "+c.ID+" did not succeed, so there is nothing to refund."))}, nil
	case left == 0:
		return outcome{status: http.StatusBadRequest, body: errorBody(invalid("charge_already_refunded",
			"Charge "+c.ID+" has already been refunded in full."))}, nil
	case amount > left:
		return outcome{status: http.StatusBadRequest, body: errorBody(invalid("amount_too_large",
			fmt.Sprintf("Refund amount %d is greater than the %d left to refund on charge %s.", amount, left, c.ID)))}, nil
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
	return outcome{status: http.StatusOK, body: marshal(ref)}, nil
}
