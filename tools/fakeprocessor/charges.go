package fakeprocessor

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"github.com/jackc/pgx/v5"
)

// Test payment methods with an outcome of their own. Any other token is
// declined as invalid_payment_method.
const (
	pmVisa            = "pm_card_visa"
	pmMastercard      = "pm_card_mastercard"
	pmDeclined        = "pm_card_declined"
	pmInsufficient    = "pm_card_insufficient_funds"
	pmProcessingError = "pm_card_processing_error"
	pmTimeout         = "pm_card_timeout"
)

// decline is why a charge failed.
type decline struct {
	code, message string
}

// declines maps the test tokens that are declined to their reason.
var declines = map[string]decline{
	pmDeclined:     {"card_declined", "Your card was declined."},
	pmInsufficient: {"insufficient_funds", "Your card has insufficient funds."},
}

// invalidMethod is the decline of an unknown payment method.
var invalidMethod = decline{"invalid_payment_method", "The payment method is not valid."}

// chargeParams is the body of POST /v1/charges, and once validated and
// normalised, what its fingerprint is computed over.
type chargeParams struct {
	Amount        int64  `json:"amount"`
	Currency      string `json:"currency"`
	PaymentMethod string `json:"payment_method"`
	PaymentID     string `json:"payment_id,omitempty"`
	Description   string `json:"description,omitempty"`
}

// validate checks p and upper-cases its currency.
func (p *chargeParams) validate() error {
	p.Currency = strings.ToUpper(p.Currency)
	switch {
	case p.Amount <= 0:
		return errors.New("amount must be a positive integer in minor units")
	case !isCurrency(p.Currency):
		return errors.New("currency must be a three-letter ISO 4217 code")
	case p.PaymentMethod == "":
		return errors.New("payment_method is required")
	}
	return nil
}

// isCurrency reports whether s is three letters A to Z.
func isCurrency(s string) bool {
	if len(s) != 3 {
		return false
	}
	for _, c := range []byte(s) {
		if c < 'A' || c > 'Z' {
			return false
		}
	}
	return true
}

// createCharge decides the outcome of a charge from its payment method and
// records it in tx.
func (s *Server) createCharge(ctx context.Context, tx pgx.Tx, key string, p chargeParams) (outcome, error) {
	if p.PaymentMethod == pmProcessingError {
		return outcome{status: http.StatusInternalServerError, body: errorBody(apiError{
			Type: typeAPI, Code: "processing_error", Message: "An error occurred while processing the card; nothing was charged.",
		})}, nil
	}
	c := charge{
		ID:             newID("ch_"),
		Object:         "charge",
		Amount:         p.Amount,
		Currency:       p.Currency,
		PaymentMethod:  p.PaymentMethod,
		PaymentID:      optional(p.PaymentID),
		Description:    optional(p.Description),
		Status:         statusSucceeded,
		IdempotencyKey: key,
		CreatedAt:      s.now(),
	}
	switch p.PaymentMethod {
	case pmVisa, pmMastercard, pmTimeout:
	default:
		d, ok := declines[p.PaymentMethod]
		if !ok {
			d = invalidMethod
		}
		c.Status = statusFailed
		c.FailureCode = &d.code
		c.FailureMessage = &d.message
	}
	if err := insertCharge(ctx, tx, c); err != nil {
		return outcome{}, err
	}
	if c.Status == statusFailed {
		return outcome{status: http.StatusPaymentRequired, body: errorBody(apiError{
			Type: typeCard, Code: *c.FailureCode, Message: *c.FailureMessage, Charge: c.ID,
		}), event: &event{eventChargeFailed, c}}, nil
	}
	return outcome{status: http.StatusOK, body: marshal(c), hang: p.PaymentMethod == pmTimeout,
		event: &event{eventChargeSucceeded, c}}, nil
}

// handleGetCharge is GET /v1/charges/{id}.
func (s *Server) handleGetCharge(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "id")
	c, err := getCharge(r.Context(), s.pool, id)
	switch {
	case errors.Is(err, errNotFound):
		writeError(w, http.StatusNotFound, invalid("resource_missing", "No such charge: '"+id+"'."))
	case err != nil:
		s.internalError(w, r, err)
	default:
		writeJSON(w, http.StatusOK, c)
	}
}

// internalError logs err with the request id and answers a generic 500.
func (s *Server) internalError(w http.ResponseWriter, r *http.Request, err error) {
	s.logger.ErrorContext(r.Context(), "request failed", "request_id", middleware.GetReqID(r.Context()), "err", err)
	writeError(w, http.StatusInternalServerError, internalError)
}
