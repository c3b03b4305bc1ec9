package stripe

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	stripego "github.com/stripe/stripe-go/v83"

	"github.com/example/payments/internal/gateway"
	"github.com/example/payments/internal/operation"
	"github.com/example/payments/internal/payments"
	"github.com/example/payments/internal/refunds"
)

// The fence PaymentIntent's amount and currency: the smallest a card
// payment in usd may ask. It is never confirmed, and moves no money.
const (
	fenceAmount   = 50
	fenceCurrency = "usd"
)

// CloseCharge closes key for good at Stripe with the fence (the package
// doc), and returns the charge made under it, if any. made is false only
// when the fence holds the key: nothing was, or ever will be, made under
// it. A PaymentIntent made under the key and still cancelable is canceled,
// and reported failed. Anything short of a definite answer wraps
// operation.ErrProcessorUnknown, and the close is asked again later.
func (c *Client) CloseCharge(ctx context.Context, req payments.ChargeRequest) (operation.Outcome, bool, error) {
	key := req.IdempotencyKey
	out, made, err := c.closeCharge(ctx, key)
	if err != nil {
		return operation.Outcome{}, false, fmt.Errorf("close charge key %s: %w", key, err)
	}
	return out, made, nil
}

// closeCharge is CloseCharge.
func (c *Client) closeCharge(ctx context.Context, key string) (operation.Outcome, bool, error) {
	used, err := c.fence(ctx, key)
	if err != nil {
		return operation.Outcome{}, false, err
	}
	// Searched even when the fence holds the key: Stripe may have forgotten
	// a key older than KeyRetention, and the PaymentIntent made under it.
	found, err := c.searchPayment(ctx, key)
	switch {
	case err != nil:
		return operation.Outcome{}, false, unknown(err)
	case found == nil && !used:
		return operation.Outcome{}, false, nil
	case found == nil:
		return operation.Outcome{}, false, gateway.Unknownf("the key was used, and the search finds nothing made under it yet")
	}
	pi, err := c.api.V1PaymentIntents.Retrieve(ctx, found.ID, nil)
	switch {
	case err != nil:
		return operation.Outcome{}, false, unknown(err)
	case pi.ID != found.ID:
		return operation.Outcome{}, false, gateway.Unknownf("retrieving payment intent %s answered %q", found.ID, pi.ID)
	}
	if out, ok := paymentOutcome(pi); ok {
		return out, true, nil
	}
	switch pi.Status {
	case stripego.PaymentIntentStatusRequiresPaymentMethod, stripego.PaymentIntentStatusRequiresConfirmation,
		stripego.PaymentIntentStatusRequiresAction, stripego.PaymentIntentStatusRequiresCapture:
	default:
		return operation.Outcome{}, false, gateway.Unknownf("payment intent %s is %s: not final", pi.ID, pi.Status)
	}
	after, canceled, err := c.cancel(ctx, pi.ID)
	switch {
	case err != nil:
		return operation.Outcome{}, false, err
	case canceled:
		return operation.Outcome{ID: pi.ID, FailureCode: codeCanceled}, true, nil
	}
	// The cancel was refused: it moved on meanwhile (succeeded, say).
	if out, ok := paymentOutcome(after); ok {
		return out, true, nil
	}
	return operation.Outcome{}, false, gateway.Unknownf("payment intent %s is %s: the cancel was refused", pi.ID, after.Status)
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

// fence creates the fence PaymentIntent under key, with a body that never
// changes, and cancels it. used is true when Stripe refused it because
// another request used the key (a 400 idempotency_error): the caller looks
// up what was made. used false with no error means the fence, made now or
// before, holds the key: nothing was made under it, and nothing can be.
func (c *Client) fence(ctx context.Context, key string) (used bool, err error) {
	if key == "" {
		return false, errors.New("the key is required")
	}
	params := &stripego.PaymentIntentCreateParams{
		Amount:             stripego.Int64(fenceAmount),
		Currency:           stripego.String(fenceCurrency),
		Confirm:            stripego.Bool(false),
		PaymentMethodTypes: []*string{stripego.String(methodCard)},
		Metadata:           map[string]string{metaFence: "true", metaDownstreamKey: key},
	}
	params.SetIdempotencyKey(key)
	pi, err := c.api.V1PaymentIntents.Create(ctx, params)
	switch {
	case keyUsed(err):
		return true, nil
	case err != nil:
		return false, unknown(err)
	case pi.ID == "":
		return false, gateway.Unknownf("the answer to the fence is not a payment intent")
	}
	// A replayed answer shows the fence as it was made: cancel it whatever
	// it says, and take "already canceled" for done.
	after, canceled, err := c.cancel(ctx, pi.ID)
	switch {
	case err != nil:
		return false, err
	case !canceled && after.Status != stripego.PaymentIntentStatusCanceled:
		return false, gateway.Unknownf("fence payment intent %s is %s, and was not canceled", pi.ID, after.Status)
	}
	return false, nil
}

// cancel cancels PaymentIntent id. canceled is true when Stripe canceled it
// now. When Stripe refuses because of its state
// (payment_intent_unexpected_state: canceled already, or succeeded), pi is
// the PaymentIntent as it stands, as the error carries it or a retrieval
// finds it. Any other failure wraps operation.ErrProcessorUnknown.
func (c *Client) cancel(ctx context.Context, id string) (pi *stripego.PaymentIntent, canceled bool, err error) {
	pi, err = c.api.V1PaymentIntents.Cancel(ctx, id, nil)
	if err == nil {
		return pi, true, nil
	}
	se, ok := stripeError(err)
	if !ok || se.HTTPStatusCode != http.StatusBadRequest || se.Code != stripego.ErrorCodePaymentIntentUnexpectedState {
		return nil, false, unknown(err)
	}
	if p := se.PaymentIntent; p != nil && p.ID == id && p.Status != "" {
		return p, false, nil
	}
	pi, err = c.api.V1PaymentIntents.Retrieve(ctx, id, nil)
	switch {
	case err != nil:
		return nil, false, unknown(err)
	case pi.ID != id:
		return nil, false, gateway.Unknownf("retrieving payment intent %s answered %q", id, pi.ID)
	}
	return pi, false, nil
}
