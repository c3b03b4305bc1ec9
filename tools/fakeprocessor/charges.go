package fakeprocessor

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"github.com/jackc/pgx/v5"

	"github.com/example/payments/internal/database"
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
func (s *Server) createCharge(_ context.Context, tx *database.Tx, key string, p chargeParams) (outcome, error) {
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
	queueCharge(tx, c)
	if c.Status == statusFailed {
		return outcome{status: http.StatusPaymentRequired, body: errorBody(apiError{
			Type: typeCard, Code: *c.FailureCode, Message: *c.FailureMessage, Charge: c.ID,
		}), event: &event{"charge." + statusFailed, c}}, nil
	}
	return outcome{status: http.StatusOK, body: marshal(c), hang: p.PaymentMethod == pmTimeout,
		event: &event{"charge." + statusSucceeded, c}}, nil
}

// handleGetCharge is GET /v1/charges/{id}.
func (s *Server) handleGetCharge(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "id")
	c, err := getCharge(r.Context(), s.pool, getChargeSQL, id)
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

// charges are the processor's charges: POST /v1/charges, its close, its
// listings and GET /v1/charges/{id}.
var charges = object{
	failureCodes: []string{declines[pmDeclined].code, declines[pmInsufficient].code, invalidMethod.code},
	routes: func(r chi.Router, s *Server) {
		r.Post("/charges", handleCreate(s, "charged", s.createCharge))
		r.Post("/charges/close", s.handleClose(closeOf("/v1/charges/close", "charge", chargeTable)))
		r.Get("/charges", handleList(s, chargeTable))
		r.Get("/charges/{id}", s.handleGetCharge)
	},
}

// charge is a row of processor.charges and the charge object of the API.
// Optional members are null in JSON when absent.
type charge struct {
	ID             string    `json:"id"`
	Object         string    `json:"object"`
	Amount         int64     `json:"amount"`
	Currency       string    `json:"currency"`
	PaymentMethod  string    `json:"payment_method"`
	PaymentID      *string   `json:"payment_id"`
	Description    *string   `json:"description"`
	Status         string    `json:"status"`
	FailureCode    *string   `json:"failure_code"`
	FailureMessage *string   `json:"failure_message"`
	AmountRefunded int64     `json:"amount_refunded"`
	IdempotencyKey string    `json:"idempotency_key"`
	CreatedAt      time.Time `json:"created_at"`
}

// chargeColumns are the columns of processor.charges that every charge
// query writes or selects, in the order of (*charge).columns.
const chargeColumns = `id, idempotency_key, payment_id, amount, currency, payment_method,
    description, status, failure_code, failure_message, amount_refunded, created_at`

// columns are pointers to c's members in the order of chargeColumns: what a
// charge is inserted from and scanned into.
func (c *charge) columns() []any {
	return []any{&c.ID, &c.IdempotencyKey, &c.PaymentID, &c.Amount, &c.Currency, &c.PaymentMethod,
		&c.Description, &c.Status, &c.FailureCode, &c.FailureMessage, &c.AmountRefunded, &c.CreatedAt}
}

// scanCharge reads a row of chargeColumns.
func scanCharge(row pgx.Row) (charge, error) {
	return scanObject(row, charge{Object: "charge"})
}

const insertChargeSQL = `
INSERT INTO processor.charges (` + chargeColumns + `)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`

// queueCharge queues in tx the insert of a charge.
func queueCharge(tx *database.Tx, c charge) {
	b := &pgx.Batch{}
	b.Queue(insertChargeSQL, c.columns()...)
	tx.Queue(b)
}

const getChargeSQL = `
SELECT ` + chargeColumns + `
FROM processor.charges
WHERE id = $1`

const getChargeForUpdateSQL = `
SELECT ` + chargeColumns + `
FROM processor.charges
WHERE id = $1
FOR UPDATE`

// getCharge reads one charge with query, getChargeSQL, or
// getChargeForUpdateSQL to lock it too, so that concurrent refunds of it are
// serialised. It returns errNotFound when there is no such charge.
func getCharge(ctx context.Context, db database.DBTX, query, id string) (charge, error) {
	c, err := scanCharge(db.QueryRow(ctx, query, id))
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return charge{}, errNotFound
	case err != nil:
		return charge{}, fmt.Errorf("get charge: %w", err)
	}
	return c, nil
}

// chargeTable reads processor.charges, listed by idempotency_key,
// payment_id or created_after.
var chargeTable = table[charge]{
	scan:         scanCharge,
	byKeySQL:     listChargesByKeySQL,
	filters:      []filter{{"payment_id", listChargesByPaymentSQL}},
	createdAtSQL: chargeCreatedAtSQL,
	pageSQL:      pageChargesSQL,
}

const chargeCreatedAtSQL = `SELECT created_at FROM processor.charges WHERE id = $1`

// pageChargesSQL is one page of charges: created after $1, and after the
// cursor row ($2, $3) in the order of the index on (created_at, id).
const pageChargesSQL = `
SELECT ` + chargeColumns + `
FROM processor.charges
WHERE created_at > $1
  AND (created_at, id) > ($2::timestamptz, $3::text)
ORDER BY created_at, id
LIMIT $4`

// listChargesByKeySQL is the charges made under an idempotency key, oldest
// first. There is at most one unless the key expired and was used again.
const listChargesByKeySQL = `
SELECT ` + chargeColumns + `
FROM processor.charges
WHERE idempotency_key = $1
ORDER BY created_at, id`

// listChargesByPaymentSQL is the charges referencing a payment, oldest first.
const listChargesByPaymentSQL = `
SELECT ` + chargeColumns + `
FROM processor.charges
WHERE payment_id = $1
ORDER BY created_at, id`
