package stripe

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	stripego "github.com/stripe/stripe-go/v83"

	"github.com/example/payments/internal/gateway"
	"github.com/example/payments/internal/operation"
)

// fence creates the fence, a Customer, under key, with a body that never
// changes for the key: it moves no money and has no amount, so no currency
// rule of the account can refuse it. used is true when Stripe refused it
// because another request used the key (a 400 idempotency_error): the
// caller looks up what was made. used false with no error means the fence
// holds the key, made now or found again (Stripe replays it, or a 5xx it
// saved for the fence's own request: Stripe replays only a request with the
// same endpoint and parameters): nothing can be made under the key from now
// on.
func (c *Client) fence(ctx context.Context, key string) (used bool, err error) {
	if key == "" {
		return false, errors.New("the key is required")
	}
	params := &stripego.CustomerCreateParams{
		Description: stripego.String("fence: nothing is ever made under downstream key " + key),
		Metadata:    map[string]string{metaFence: "true", metaDownstreamKey: key},
	}
	params.SetIdempotencyKey(key)
	cu, err := c.api.V1Customers.Create(ctx, params)
	if se, ok := stripeError(err); ok && savedFailure(se) {
		return false, nil
	}
	switch {
	case keyUsed(err):
		return true, nil
	case err != nil:
		return false, unknown(err)
	case cu.ID == "":
		return false, gateway.Unknownf("the answer to the fence is not a customer")
	}
	return false, nil
}

// closeKey closes the key of what, an operation created at created, for
// good with the fence, and returns what was made under it, as made finds it
// (used: whether another request held the key first). made is not asked
// when Stripe still keeps every key used since the operation's creation and
// none held this one: then nothing was, or ever will be, made under it. A
// failure is wrapped naming the key, and the close is asked again later.
func (c *Client) closeKey(ctx context.Context, what, key string, created time.Time,
	made func(used bool) (operation.Outcome, bool, error)) (operation.Outcome, bool, error) {
	used, err := c.fence(ctx, key)
	out, ok := operation.Outcome{}, false
	switch {
	case err != nil:
	case !used && remembered(created):
	default:
		out, ok, err = made(used)
	}
	if err != nil {
		return operation.Outcome{}, false, fmt.Errorf("close %s key %s: %w", what, key, err)
	}
	return out, ok, nil
}

// remembered reports whether Stripe still keeps every key used since
// created, an operation's creation: KeyRetention from the key's first use,
// which came after, less clockSkew for the clocks.
func remembered(created time.Time) bool {
	return time.Since(created) < KeyRetention-clockSkew
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
