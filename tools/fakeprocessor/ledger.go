package fakeprocessor

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/example/payments/internal/database"
)

// errNotFound reports a charge or a refund that does not exist.
var errNotFound = errors.New("not found")

// Charge statuses.
const (
	statusSucceeded = "succeeded"
	statusFailed    = "failed"
)

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

// newID returns prefix followed by 24 random hex digits.
func newID(prefix string) string {
	b := make([]byte, 12)
	_, _ = rand.Read(b) // never fails, per crypto/rand
	return prefix + hex.EncodeToString(b)
}

// optional maps "" to SQL NULL and JSON null.
func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

const insertChargeSQL = `
INSERT INTO processor.charges (id, idempotency_key, payment_id, amount, currency, payment_method,
    description, status, failure_code, failure_message, amount_refunded, created_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`

// insertCharge records a charge.
func insertCharge(ctx context.Context, db database.DBTX, c charge) error {
	_, err := db.Exec(ctx, insertChargeSQL, c.ID, c.IdempotencyKey, c.PaymentID, c.Amount, c.Currency,
		c.PaymentMethod, c.Description, c.Status, c.FailureCode, c.FailureMessage, c.AmountRefunded, c.CreatedAt)
	if err != nil {
		return fmt.Errorf("insert charge: %w", err)
	}
	return nil
}

// scanCharge reads the columns every charge query selects, in their order.
func scanCharge(row pgx.Row) (charge, error) {
	c := charge{Object: "charge"}
	err := row.Scan(&c.ID, &c.IdempotencyKey, &c.PaymentID, &c.Amount, &c.Currency, &c.PaymentMethod,
		&c.Description, &c.Status, &c.FailureCode, &c.FailureMessage, &c.AmountRefunded, &c.CreatedAt)
	c.CreatedAt = c.CreatedAt.UTC()
	return c, err
}

const getChargeSQL = `
SELECT id, idempotency_key, payment_id, amount, currency, payment_method,
    description, status, failure_code, failure_message, amount_refunded, created_at
FROM processor.charges
WHERE id = $1`

// getCharge reads one charge, or returns errNotFound.
func getCharge(ctx context.Context, db database.DBTX, id string) (charge, error) {
	c, err := scanCharge(db.QueryRow(ctx, getChargeSQL, id))
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return charge{}, errNotFound
	case err != nil:
		return charge{}, fmt.Errorf("get charge: %w", err)
	}
	return c, nil
}

const getChargeForUpdateSQL = `
SELECT id, idempotency_key, payment_id, amount, currency, payment_method,
    description, status, failure_code, failure_message, amount_refunded, created_at
FROM processor.charges
WHERE id = $1
FOR UPDATE`

// getChargeForUpdate reads and locks one charge, so that concurrent refunds
// of it are serialised, or returns errNotFound.
func getChargeForUpdate(ctx context.Context, db database.DBTX, id string) (charge, error) {
	c, err := scanCharge(db.QueryRow(ctx, getChargeForUpdateSQL, id))
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return charge{}, errNotFound
	case err != nil:
		return charge{}, fmt.Errorf("get charge for update: %w", err)
	}
	return c, nil
}

const insertRefundSQL = `
INSERT INTO processor.refunds (id, charge_id, amount, status, idempotency_key, created_at)
VALUES ($1, $2, $3, $4, $5, $6)`

const addRefundedSQL = `
UPDATE processor.charges
SET amount_refunded = amount_refunded + $2
WHERE id = $1`

// insertRefund records a refund and adds its amount to the charge's
// amount_refunded. The caller holds the charge's row lock.
func insertRefund(ctx context.Context, db database.DBTX, r refund) error {
	if _, err := db.Exec(ctx, insertRefundSQL, r.ID, r.Charge, r.Amount, r.Status, r.IdempotencyKey, r.CreatedAt); err != nil {
		return fmt.Errorf("insert refund: %w", err)
	}
	if _, err := db.Exec(ctx, addRefundedSQL, r.Charge, r.Amount); err != nil {
		return fmt.Errorf("add refunded amount: %w", err)
	}
	return nil
}

// scanRefund reads the columns every refund query selects, in their order.
func scanRefund(row pgx.Row) (refund, error) {
	r := refund{Object: "refund"}
	err := row.Scan(&r.ID, &r.Charge, &r.Amount, &r.Status, &r.IdempotencyKey, &r.CreatedAt)
	r.CreatedAt = r.CreatedAt.UTC()
	return r, err
}

const newestChargeByKeySQL = `
SELECT id, idempotency_key, payment_id, amount, currency, payment_method,
    description, status, failure_code, failure_message, amount_refunded, created_at
FROM processor.charges
WHERE idempotency_key = $1
ORDER BY created_at DESC, id DESC
LIMIT 1`

// newestChargeByKey reads the last charge made under an idempotency key, or
// returns errNotFound.
func newestChargeByKey(ctx context.Context, db database.DBTX, key string) (charge, error) {
	c, err := scanCharge(db.QueryRow(ctx, newestChargeByKeySQL, key))
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return charge{}, errNotFound
	case err != nil:
		return charge{}, fmt.Errorf("newest charge by key: %w", err)
	}
	return c, nil
}

const newestRefundByKeySQL = `
SELECT id, charge_id, amount, status, idempotency_key, created_at
FROM processor.refunds
WHERE idempotency_key = $1
ORDER BY created_at DESC, id DESC
LIMIT 1`

// newestRefundByKey reads the last refund made under an idempotency key, or
// returns errNotFound.
func newestRefundByKey(ctx context.Context, db database.DBTX, key string) (refund, error) {
	r, err := scanRefund(db.QueryRow(ctx, newestRefundByKeySQL, key))
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return refund{}, errNotFound
	case err != nil:
		return refund{}, fmt.Errorf("newest refund by key: %w", err)
	}
	return r, nil
}
