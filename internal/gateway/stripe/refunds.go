package stripe

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	stripego "github.com/stripe/stripe-go/v83"

	"github.com/example/payments/internal/gateway"
	"github.com/example/payments/internal/operation"
	"github.com/example/payments/internal/refunds"
)

// Refunds are the calls the client makes for refunds: all four.
func (c *Client) Refunds() operation.Calls[refunds.Request] {
	return operation.Calls[refunds.Request]{Make: c.Refund, Find: c.FindRefund, Close: c.CloseRefund, Ledger: c.LedgerRefunds}
}

// Refund refunds req.Amount of the PaymentIntent req.ChargeID under
// req.IdempotencyKey, or returns the refund Stripe already made under it:
// a success or a failure with the refund's ID, a definite refusal
// (charge_already_refunded, an amount too large) with none, or an error
// wrapping operation.ErrProcessorUnknown. A refund still pending is
// retrieved once, and else unknown.
func (c *Client) Refund(ctx context.Context, req refunds.Request) (operation.Outcome, error) {
	if req.IdempotencyKey == "" {
		return operation.Outcome{}, errors.New("refund: idempotency key is required")
	}
	params := &stripego.RefundCreateParams{
		PaymentIntent: stripego.String(req.ChargeID),
		Amount:        stripego.Int64(toStripe(req.Currency, req.Amount)),
		Metadata:      map[string]string{metaDownstreamKey: req.IdempotencyKey},
	}
	params.SetIdempotencyKey(req.IdempotencyKey)
	r, err := c.api.V1Refunds.Create(ctx, params)
	if err != nil {
		out, err := refusal(err)
		if err != nil {
			return operation.Outcome{}, fmt.Errorf("refund: %w", err)
		}
		return out, nil
	}
	if r.ID == "" || r.Status == "" {
		return operation.Outcome{}, fmt.Errorf("refund: %w", gateway.Unknownf("the answer is not a refund"))
	}
	if out, ok := refundOutcome(r); ok {
		return out, nil
	}
	out, err := c.currentRefund(ctx, r.ID)
	if err != nil {
		return operation.Outcome{}, fmt.Errorf("refund: %w", err)
	}
	return out, nil
}

// refundOutcome is a refund's outcome, and whether it is final: succeeded,
// failed or canceled, with its failure_reason. pending and requires_action
// may still move.
func refundOutcome(r *stripego.Refund) (operation.Outcome, bool) {
	switch r.Status {
	case stripego.RefundStatusSucceeded:
		return operation.Outcome{ID: r.ID, Succeeded: true}, true
	case stripego.RefundStatusFailed, stripego.RefundStatusCanceled:
		return operation.Outcome{ID: r.ID, FailureCode: firstOf(string(r.FailureReason), string(r.Status))}, true
	}
	return operation.Outcome{}, false
}

// currentRefund retrieves refund id and returns its outcome: unknown while
// it is not final.
func (c *Client) currentRefund(ctx context.Context, id string) (operation.Outcome, error) {
	r, err := c.api.V1Refunds.Retrieve(ctx, id, nil)
	switch {
	case err != nil:
		return operation.Outcome{}, unknown(err)
	case r.ID != id:
		return operation.Outcome{}, gateway.Unknownf("retrieving refund %s answered %q", id, r.ID)
	}
	if out, ok := refundOutcome(r); ok {
		return out, nil
	}
	return operation.Outcome{}, gateway.Unknownf("refund %s is %s: not final", id, r.Status)
}

// FindRefund reports the refund made under key: the newest refund of the
// payment's PaymentIntent whose metadata names key, as Stripe lists the
// PaymentIntent's refunds (one request, however long the refund was
// pending). found is false only when the list holds none; a refund not
// final is unknown.
func (c *Client) FindRefund(ctx context.Context, req refunds.Request) (operation.Outcome, bool, error) {
	key := req.IdempotencyKey
	r, err := c.findRefund(ctx, req)
	if err != nil {
		return operation.Outcome{}, false, fmt.Errorf("find refund %s: %w", key, unknown(err))
	}
	if r == nil {
		return operation.Outcome{}, false, nil
	}
	out, ok := refundOutcome(r)
	if !ok {
		return operation.Outcome{}, false, fmt.Errorf("find refund %s: %w", key, gateway.Unknownf("refund %s is %s: not final", r.ID, r.Status))
	}
	return out, true, nil
}

// findRefund lists the refunds of req's PaymentIntent, newest first, until
// the first whose metadata names req's key: the newest made under it. nil
// means none; a PaymentIntent has few refunds, so that is one request.
func (c *Client) findRefund(ctx context.Context, req refunds.Request) (*stripego.Refund, error) {
	if req.ChargeID == "" {
		return nil, gateway.Unknownf("the refund names no payment intent to list the refunds of")
	}
	params := &stripego.RefundListParams{
		ListParams:    stripego.ListParams{Context: ctx, Limit: stripego.Int64(maxPageSize)},
		PaymentIntent: stripego.String(req.ChargeID),
	}
	for {
		page, err := c.refundPage(params)
		if err != nil {
			return nil, err
		}
		for _, r := range page.Data {
			if r != nil && r.Metadata[metaDownstreamKey] == req.IdempotencyKey {
				return r, nil
			}
		}
		switch {
		case !page.HasMore:
			return nil, nil
		case len(page.Data) == 0 || page.Data[len(page.Data)-1] == nil:
			return nil, gateway.Unknownf("a refund page says more follow and has no last refund")
		}
		params.StartingAfter = stripego.String(page.Data[len(page.Data)-1].ID)
	}
}

// refundPage is one page of the refunds params asks for, newest first. An
// answer with no data is not a list: an empty list must be said.
func (c *Client) refundPage(params *stripego.RefundListParams) (*stripego.RefundList, error) {
	var page stripego.RefundList
	if err := c.get("/v1/refunds", params, &page); err != nil {
		return nil, err
	}
	if page.Data == nil {
		return nil, gateway.Unknownf("the answer is not a list of refunds")
	}
	return &page, nil
}

// LedgerRefunds lists one page of the refunds created at or after since,
// oldest first (refunds.Processor), those this service made only (their
// metadata names a refund's downstream key); an entry's Reference is the
// refund its downstream key names, its amount in ISO 4217 minor units. The
// pages are found as LedgerCharges's are.
func (c *Client) LedgerRefunds(ctx context.Context, since time.Time, cursor string) ([]operation.LedgerEntry, string, error) {
	return c.ledger(ctx, "refunds", since, cursor, func(lp stripego.ListParams, created *stripego.RangeQueryParams) ([]row, bool, error) {
		page, err := c.refundPage(&stripego.RefundListParams{ListParams: lp, CreatedRange: created})
		if err != nil {
			return nil, false, err
		}
		rows := make([]row, len(page.Data))
		for i, r := range page.Data {
			if r == nil {
				return nil, false, gateway.Unknownf("a null refund in a list")
			}
			rows[i].id = r.ID
			key := r.Metadata[metaDownstreamKey]
			if ours, ok := strings.CutPrefix(key, refunds.Names.DownstreamKey("")); ok && ours != "" {
				cur := strings.ToUpper(string(r.Currency))
				rows[i].entry = &operation.LedgerEntry{ID: r.ID, IdempotencyKey: key, Reference: ours,
					Succeeded: r.Status == stripego.RefundStatusSucceeded, Amount: fromStripe(cur, r.Amount),
					Currency: cur, CreatedAt: time.Unix(r.Created, 0).UTC()}
			}
		}
		return rows, page.HasMore, nil
	})
}

// CloseRefund closes key for good at Stripe with the fence, as CloseCharge
// does, and returns the refund made under it, if any, as the refund list
// finds it. A refund still pending is unknown: a refund cannot be canceled.
func (c *Client) CloseRefund(ctx context.Context, req refunds.Request) (operation.Outcome, bool, error) {
	return c.closeKey(ctx, "refund", req.IdempotencyKey, req.CreatedAt, func(used bool) (operation.Outcome, bool, error) {
		return c.closeRefund(ctx, req, used)
	})
}

// closeRefund is CloseRefund once the fence has taken the key.
func (c *Client) closeRefund(ctx context.Context, req refunds.Request, used bool) (operation.Outcome, bool, error) {
	r, err := c.findRefund(ctx, req)
	switch {
	case err != nil:
		return operation.Outcome{}, false, unknown(err)
	case r == nil && !used:
		return operation.Outcome{}, false, nil
	case r == nil:
		return operation.Outcome{}, false, gateway.Unknownf("the key was used, and no refund of payment intent %s names it", req.ChargeID)
	}
	out, ok := refundOutcome(r)
	if !ok {
		return operation.Outcome{}, false, gateway.Unknownf("refund %s is %s: not final, and a refund cannot be canceled", r.ID, r.Status)
	}
	return out, true, nil
}
