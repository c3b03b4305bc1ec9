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

// Client makes the refund's processor calls.
var (
	_ refunds.Processor    = (*Client)(nil)
	_ refunds.RefundFinder = (*Client)(nil)
	_ refunds.RefundCloser = (*Client)(nil)
	_ refunds.RefundLedger = (*Client)(nil)
)

// refundWindow is how far back FindRefund looks: a refund made under a key
// is younger than the key, which Stripe keeps KeyRetention, and the hour
// more covers clocks apart.
const refundWindow = KeyRetention + time.Hour

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
		Amount:        stripego.Int64(req.Amount),
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
// last KeyRetention and an hour whose metadata names key. found is false
// only when the whole window was listed without it; a refund not final is
// unknown.
func (c *Client) FindRefund(ctx context.Context, req refunds.Request) (operation.Outcome, bool, error) {
	key := req.IdempotencyKey
	r, err := c.findRefund(ctx, key)
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

// findRefund lists the refunds created in refundWindow, newest first, page
// by page, until the first whose metadata names key: the newest made under
// it. nil means none in the window; there is no search for refunds, so that
// answer costs one request per page of every refund in the window.
func (c *Client) findRefund(ctx context.Context, key string) (*stripego.Refund, error) {
	params := &stripego.RefundListParams{
		ListParams:   stripego.ListParams{Context: ctx, Limit: stripego.Int64(maxPageSize)},
		CreatedRange: &stripego.RangeQueryParams{GreaterThanOrEqual: time.Now().Add(-refundWindow).Unix()},
	}
	for {
		page, err := c.refundPage(params)
		if err != nil {
			return nil, err
		}
		for _, r := range page.Data {
			if r != nil && r.Metadata[metaDownstreamKey] == key {
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
// oldest first (refunds.Processor); an entry's Reference is the refund its
// downstream key names, empty for a refund made under no key of ours. The
// first page walks the window as LedgerCharges's does.
func (c *Client) LedgerRefunds(ctx context.Context, since time.Time, cursor string) ([]operation.LedgerEntry, string, error) {
	return c.ledger(ctx, "refunds", cursor, func(lp stripego.ListParams) ([]row, bool, error) {
		page, err := c.refundPage(&stripego.RefundListParams{ListParams: lp,
			CreatedRange: &stripego.RangeQueryParams{GreaterThanOrEqual: since.Unix()}})
		if err != nil {
			return nil, false, err
		}
		rows := make([]row, len(page.Data))
		for i, r := range page.Data {
			if r == nil {
				return nil, false, gateway.Unknownf("a null refund in a list")
			}
			key := r.Metadata[metaDownstreamKey]
			ours, ok := strings.CutPrefix(key, refunds.Names.DownstreamKey(""))
			if !ok {
				ours = ""
			}
			rows[i] = row{id: r.ID, entry: &operation.LedgerEntry{ID: r.ID, IdempotencyKey: key, Reference: ours,
				Succeeded: r.Status == stripego.RefundStatusSucceeded, Amount: r.Amount,
				Currency: strings.ToUpper(string(r.Currency)), CreatedAt: time.Unix(r.Created, 0).UTC()}}
		}
		return rows, page.HasMore, nil
	})
}

// CloseRefund closes key for good at Stripe with the fence, as CloseCharge
// does, and returns the refund made under it, if any, as the refund list
// finds it. A refund still pending is unknown: a refund cannot be canceled.
func (c *Client) CloseRefund(ctx context.Context, req refunds.Request) (operation.Outcome, bool, error) {
	key := req.IdempotencyKey
	out, made, err := c.closeRefund(ctx, key)
	if err != nil {
		return operation.Outcome{}, false, fmt.Errorf("close refund key %s: %w", key, err)
	}
	return out, made, nil
}

// closeRefund is CloseRefund.
func (c *Client) closeRefund(ctx context.Context, key string) (operation.Outcome, bool, error) {
	used, err := c.fence(ctx, key)
	if err != nil {
		return operation.Outcome{}, false, err
	}
	// Listed even when the fence holds the key, as for a charge.
	r, err := c.findRefund(ctx, key)
	switch {
	case err != nil:
		return operation.Outcome{}, false, unknown(err)
	case r == nil && !used:
		return operation.Outcome{}, false, nil
	case r == nil:
		return operation.Outcome{}, false, gateway.Unknownf("the key was used, and no refund of the last %s names it", refundWindow)
	}
	out, ok := refundOutcome(r)
	if !ok {
		return operation.Outcome{}, false, gateway.Unknownf("refund %s is %s: not final, and a refund cannot be canceled", r.ID, r.Status)
	}
	return out, true, nil
}
