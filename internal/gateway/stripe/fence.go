package stripe

import (
	"context"
	"errors"
	"net/http"

	stripego "github.com/stripe/stripe-go/v83"

	"github.com/example/payments/internal/gateway"
)

// The fence PaymentIntent's amount and currency: the smallest a card
// payment in usd may ask. It is never confirmed, and moves no money.
const (
	fenceAmount   = 50
	fenceCurrency = "usd"
)

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
