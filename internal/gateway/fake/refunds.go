package fake

import (
	"context"
	"strings"
	"time"

	"github.com/example/payments/internal/operation"
	"github.com/example/payments/internal/refunds"
)

// Refunds are the calls the client makes for refunds: all four.
func (c *Client) Refunds() operation.Calls[refunds.Request] {
	return callsOf(c, refundObjects, c.Refund, func(req refunds.Request) string { return req.IdempotencyKey })
}

// refundObjects are the processor's refunds.
var refundObjects = objects[RefundObject]{name: "refunds", member: "refund"}

// RefundObject is a refund as the processor returns it.
type RefundObject struct {
	ID     string `json:"id"`
	Object string `json:"object"`
	Charge string `json:"charge"`
	Amount int64  `json:"amount"`
	Status string `json:"status"`
	// FailureCode says why a refund failed: only in the object of a
	// refund.failed event, whose id is null, since nothing was refunded.
	FailureCode    string    `json:"failure_code"`
	IdempotencyKey string    `json:"idempotency_key"`
	CreatedAt      time.Time `json:"created_at"`
}

// Succeeded reports whether the refund went through.
func (r RefundObject) Succeeded() bool { return r.Status == "succeeded" }

// entry is the refund as an entry of the processor's ledger. The
// processor's refund names no currency and no refund of ours: its
// Reference is its downstream key's refund, none for a refund made under a
// key of no refund of ours.
func (r RefundObject) entry() operation.LedgerEntry {
	ours, ok := strings.CutPrefix(r.IdempotencyKey, refunds.Names.DownstreamKey(""))
	if !ok {
		ours = ""
	}
	return operation.LedgerEntry{ID: r.ID, IdempotencyKey: r.IdempotencyKey, Reference: ours,
		Succeeded: r.Succeeded(), Amount: r.Amount, CreatedAt: r.CreatedAt}
}

// outcome is the refund as an operation's outcome.
func (r RefundObject) outcome() operation.Outcome {
	return operation.Outcome{ID: r.ID, Succeeded: r.Succeeded(), FailureCode: r.FailureCode}
}

// refundRequest is the body of POST /v1/refunds.
type refundRequest struct {
	Charge string `json:"charge"`
	Amount int64  `json:"amount"`
}

// Refund refunds part of a charge under req.IdempotencyKey, or returns the
// refund the processor already made under it. A 4xx refusal (an unknown
// charge, an amount too large, a charge not refundable, a key used before
// with other parameters) is an Outcome with no ID: nothing was refunded. A
// closed key wraps operation.ErrKeyClosed; a timeout, connection error, 5xx,
// 409 or 429 wraps operation.ErrProcessorUnknown.
func (c *Client) Refund(ctx context.Context, req refunds.Request) (operation.Outcome, error) {
	return refundObjects.create(ctx, c, req.IdempotencyKey, refundRequest{Charge: req.ChargeID, Amount: req.Amount}, nil)
}

// RefundsByIdempotencyKey lists the refunds the processor made under key,
// oldest first: none when it never made one with that key.
func (c *Client) RefundsByIdempotencyKey(ctx context.Context, key string) ([]RefundObject, error) {
	return refundObjects.byKey(ctx, c, key)
}
