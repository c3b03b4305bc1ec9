package stripe

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	stripego "github.com/stripe/stripe-go/v83"

	"github.com/example/payments/internal/gateway"
	"github.com/example/payments/internal/operation"
	"github.com/example/payments/internal/payments"
)

// Charges are the calls the client makes for charges: all four.
func (c *Client) Charges() operation.Calls[payments.ChargeRequest] {
	return operation.Calls[payments.ChargeRequest]{Make: c.Charge, Find: c.FindCharge, Close: c.CloseCharge, Ledger: c.LedgerCharges}
}

// Failure codes of PaymentIntents that say none of their own.
const (
	// codePaymentFailed is a declined PaymentIntent's whose error names no
	// code.
	codePaymentFailed = "payment_failed"
	// codeCanceled is a canceled PaymentIntent's.
	codeCanceled = "canceled"
)

// methodCard is the only payment method type a charge's PaymentIntent
// takes: a card needs no return_url, and a PaymentIntent confirmed with one
// settles without a redirect.
const methodCard = "card"

// Charge creates and confirms a PaymentIntent under req.IdempotencyKey, or
// returns the one Stripe already made under it, as the package doc
// classifies its answer: a success or a decline with the PaymentIntent's
// ID, a definite refusal with none, or an error wrapping
// operation.ErrProcessorUnknown.
func (c *Client) Charge(ctx context.Context, req payments.ChargeRequest) (operation.Outcome, error) {
	if req.IdempotencyKey == "" {
		return operation.Outcome{}, errors.New("charge: idempotency key is required")
	}
	params := &stripego.PaymentIntentCreateParams{
		Amount:   stripego.Int64(toStripe(req.Currency, req.Amount)),
		Currency: stripego.String(strings.ToLower(req.Currency)),
		Confirm:  stripego.Bool(true),
		// A card that needs authentication (3-D Secure) fails the attempt,
		// a decline with its code, instead of stopping at an action nothing
		// here can complete.
		ErrorOnRequiresAction: stripego.Bool(true),
		PaymentMethod:         stripego.String(req.PaymentMethod),
		PaymentMethodTypes:    []*string{stripego.String(methodCard)},
		Metadata:              map[string]string{metaDownstreamKey: req.IdempotencyKey},
	}
	if req.PaymentID != "" {
		params.Metadata[metaPaymentID] = req.PaymentID
	}
	if req.Description != "" {
		params.Description = stripego.String(req.Description)
	}
	params.SetIdempotencyKey(req.IdempotencyKey)
	pi, err := c.api.V1PaymentIntents.Create(ctx, params)
	var out operation.Outcome
	if err != nil {
		out, err = declined(err)
	} else {
		out, err = c.settled(ctx, pi)
	}
	if err != nil {
		return operation.Outcome{}, fmt.Errorf("charge: %w", err)
	}
	return out, nil
}

// declined classifies the error answer of a charge. A PaymentIntent it
// carries, made and left failed by the attempt, was declined: a 402
// card_error's, or a definite refusal's in requires_payment_method or
// canceled. Without one, the error is a refusal or unknown.
func declined(err error) (operation.Outcome, error) {
	se, ok := stripeError(err)
	if !ok {
		return operation.Outcome{}, unknown(err)
	}
	pi := se.PaymentIntent
	switch {
	case pi == nil || pi.ID == "":
		return refusal(err)
	case se.Type == stripego.ErrorTypeCard && se.HTTPStatusCode == http.StatusPaymentRequired:
	case definite(se) && (pi.Status == stripego.PaymentIntentStatusRequiresPaymentMethod ||
		pi.Status == stripego.PaymentIntentStatusCanceled):
	default:
		return operation.Outcome{}, unknown(err)
	}
	return operation.Outcome{ID: pi.ID, FailureCode: firstOf(string(se.DeclineCode), string(se.Code), codePaymentFailed),
		FailureMessage: se.Msg}, nil
}

// paymentOutcome is a PaymentIntent's outcome, and whether it is final:
// succeeded, declined (requires_payment_method with the error of the
// attempt) or canceled. Any other status may still move.
func paymentOutcome(pi *stripego.PaymentIntent) (operation.Outcome, bool) {
	switch pi.Status {
	case stripego.PaymentIntentStatusSucceeded:
		return operation.Outcome{ID: pi.ID, Succeeded: true}, true
	case stripego.PaymentIntentStatusCanceled:
		return operation.Outcome{ID: pi.ID, FailureCode: codeCanceled}, true
	case stripego.PaymentIntentStatusRequiresPaymentMethod:
		if e := pi.LastPaymentError; e != nil {
			return operation.Outcome{ID: pi.ID, FailureCode: firstOf(string(e.DeclineCode), string(e.Code), codePaymentFailed),
				FailureMessage: e.Msg}, true
		}
	}
	return operation.Outcome{}, false
}

// settled is the outcome of pi, the PaymentIntent a call answered: as it
// stands if final, else as retrieving it finds it.
func (c *Client) settled(ctx context.Context, pi *stripego.PaymentIntent) (operation.Outcome, error) {
	if pi == nil || pi.ID == "" || pi.Status == "" {
		return operation.Outcome{}, gateway.Unknownf("the answer is not a payment intent")
	}
	if out, ok := paymentOutcome(pi); ok {
		return out, nil
	}
	return c.currentPayment(ctx, pi.ID)
}

// currentPayment retrieves PaymentIntent id and returns its outcome:
// unknown while it is not final.
func (c *Client) currentPayment(ctx context.Context, id string) (operation.Outcome, error) {
	pi, err := c.api.V1PaymentIntents.Retrieve(ctx, id, nil)
	switch {
	case err != nil:
		return operation.Outcome{}, unknown(err)
	case pi.ID != id:
		return operation.Outcome{}, gateway.Unknownf("retrieving payment intent %s answered %q", id, pi.ID)
	}
	if out, ok := paymentOutcome(pi); ok {
		return out, nil
	}
	return operation.Outcome{}, gateway.Unknownf("payment intent %s is %s: not final", id, pi.Status)
}

// FindCharge reports the charge made under key, fence PaymentIntents
// aside, as it stands: what the search finds, or else the list of the
// PaymentIntents created just around the charge's creation, where its
// first call made it (findPayment). found false means neither shows one,
// which is safe for what the runner does with it: before the deadline it
// makes the call again under the key, which Stripe answers with the
// original while it keeps the key (KeyRetention), and past it it closes
// the key, and CloseCharge lists every PaymentIntent that could have been
// made. A PaymentIntent not final is unknown.
func (c *Client) FindCharge(ctx context.Context, req payments.ChargeRequest) (operation.Outcome, bool, error) {
	key := req.IdempotencyKey
	pi, _, err := c.findPayment(ctx, req, false)
	switch {
	case err != nil:
		return operation.Outcome{}, false, fmt.Errorf("find charge %s: %w", key, unknown(err))
	case pi == nil:
		return operation.Outcome{}, false, nil
	}
	if out, ok := paymentOutcome(pi); ok {
		return out, true, nil
	}
	return operation.Outcome{}, false, fmt.Errorf("find charge %s: %w", key, gateway.Unknownf("payment intent %s is %s: not final", pi.ID, pi.Status))
}

// findPayment returns the newest PaymentIntent made under req's key, as it
// stands, nil when none is found, and whether a fence PaymentIntent holds
// the key (as an earlier fence made them). The search is a shortcut only:
// it is eventually consistent, and missing on some accounts (India's), and
// what it finds is retrieved, its own copy possibly stale. What it does not
// find, the lists show, which Stripe keeps consistent: the PaymentIntents
// created within nearSeconds of the charge's creation, and with every
// true, the rest of the time calls could be made under the key too (to the
// end of KeyRetention, clockSkew either side): then none found means none
// was made.
func (c *Client) findPayment(ctx context.Context, req payments.ChargeRequest, every bool) (pi *stripego.PaymentIntent, fenced bool, err error) {
	if found, err := c.searchPayment(ctx, req.IdempotencyKey); err == nil && found != nil {
		pi, err := c.api.V1PaymentIntents.Retrieve(ctx, found.ID, nil)
		switch {
		case err != nil:
			return nil, false, err
		case pi.ID != found.ID:
			return nil, false, gateway.Unknownf("retrieving payment intent %s answered %q", found.ID, pi.ID)
		}
		return pi, false, nil
	}
	if req.CreatedAt.IsZero() {
		return nil, false, gateway.Unknownf("the charge's creation time is required to list what was made under its key")
	}
	created := req.CreatedAt.Unix()
	windows := [][2]int64{{created - nearSeconds, created + nearSeconds}}
	if every {
		last := min(req.CreatedAt.Add(KeyRetention).Unix(), time.Now().Unix()) + clockSkewSeconds
		windows = append(windows, [2]int64{created + nearSeconds + 1, last}, [2]int64{created - clockSkewSeconds, created - nearSeconds - 1})
	}
	for _, window := range windows {
		if window[0] > window[1] {
			continue
		}
		found, fence, err := c.listPayment(ctx, req.IdempotencyKey, window[0], window[1])
		fenced = fenced || fence
		if err != nil || found != nil {
			return found, false, err
		}
	}
	return nil, fenced, nil
}

// nearSeconds is the window either side of a charge's creation its lookup
// lists: its first call, queued with it, is made within it.
const nearSeconds = 30

// listPayment pages the PaymentIntents created from second from to second
// to, newest first, for the first made under key: the newest. fenced
// reports a fence PaymentIntent under key among them.
func (c *Client) listPayment(ctx context.Context, key string, from, to int64) (pi *stripego.PaymentIntent, fenced bool, err error) {
	params := &stripego.PaymentIntentListParams{
		ListParams:   stripego.ListParams{Context: ctx, Limit: stripego.Int64(maxPageSize)},
		CreatedRange: &stripego.RangeQueryParams{GreaterThanOrEqual: from, LesserThanOrEqual: to},
	}
	for {
		var page stripego.PaymentIntentList
		if err := c.get("/v1/payment_intents", params, &page); err != nil {
			return nil, false, err
		}
		if page.Data == nil {
			return nil, false, gateway.Unknownf("the answer is not a list of payment intents")
		}
		for _, p := range page.Data {
			switch {
			case p == nil || p.Metadata[metaDownstreamKey] != key:
			case isFence(p):
				fenced = true
			default:
				return p, false, nil
			}
		}
		switch {
		case !page.HasMore:
			return nil, fenced, nil
		case len(page.Data) == 0 || page.Data[len(page.Data)-1] == nil:
			return nil, false, gateway.Unknownf("a payment intent page says more follow and has no last one")
		}
		params.StartingAfter = stripego.String(page.Data[len(page.Data)-1].ID)
	}
}

// searchQuote escapes a value in a search query's quotes.
var searchQuote = strings.NewReplacer(`\`, `\\`, `'`, `\'`)

// searchPayment returns the newest PaymentIntent, fence PaymentIntents
// aside, whose metadata names key, as Stripe's search has it indexed; nil
// when it finds none. A result whose metadata is not exactly key's (the
// search may match loosely) is another operation's.
func (c *Client) searchPayment(ctx context.Context, key string) (*stripego.PaymentIntent, error) {
	params := &stripego.PaymentIntentSearchParams{SearchParams: stripego.SearchParams{
		Context: ctx,
		Query:   fmt.Sprintf("metadata['%s']:'%s'", metaDownstreamKey, searchQuote.Replace(key)),
		Limit:   stripego.Int64(maxPageSize),
	}}
	var newest *stripego.PaymentIntent
	for {
		var page stripego.PaymentIntentSearchResult
		if err := c.get("/v1/payment_intents/search", params, &page); err != nil {
			return nil, err
		}
		if page.Data == nil {
			return nil, gateway.Unknownf("the answer is not a search result")
		}
		for _, pi := range page.Data {
			if pi == nil || pi.Metadata[metaDownstreamKey] != key || isFence(pi) {
				continue
			}
			if newest == nil || pi.Created > newest.Created {
				newest = pi
			}
		}
		if !page.HasMore {
			return newest, nil
		}
		if page.NextPage == nil || *page.NextPage == "" {
			return nil, gateway.Unknownf("a search page says more follow and names no next page")
		}
		params.Page = page.NextPage
	}
}

// isFence reports whether pi is a fence PaymentIntent, as the fence was
// made before it became a Customer: it holds a key, was never confirmed,
// and moves no money.
func isFence(pi *stripego.PaymentIntent) bool {
	return pi.Metadata[metaFence] == "true"
}

// LedgerCharges lists one page of the PaymentIntents created at or after
// since, oldest first (payments.Processor), those this service made only:
// a PaymentIntent whose metadata names no downstream key was made
// elsewhere (the Dashboard, Checkout), and a fence PaymentIntent moves no
// money. An entry's Reference is the payment its metadata names, its
// amount in ISO 4217 minor units.
func (c *Client) LedgerCharges(ctx context.Context, since time.Time, cursor string) ([]operation.LedgerEntry, string, error) {
	return c.ledger(ctx, "payment intents", since, cursor, func(lp stripego.ListParams, created *stripego.RangeQueryParams) ([]row, bool, error) {
		params := &stripego.PaymentIntentListParams{ListParams: lp, CreatedRange: created}
		var page stripego.PaymentIntentList
		if err := c.get("/v1/payment_intents", params, &page); err != nil {
			return nil, false, err
		}
		if page.Data == nil {
			return nil, false, gateway.Unknownf("the answer is not a list of payment intents")
		}
		rows := make([]row, len(page.Data))
		for i, pi := range page.Data {
			if pi == nil {
				return nil, false, gateway.Unknownf("a null payment intent in a list")
			}
			rows[i].id = pi.ID
			if key := pi.Metadata[metaDownstreamKey]; key != "" && !isFence(pi) {
				cur := strings.ToUpper(string(pi.Currency))
				rows[i].entry = &operation.LedgerEntry{ID: pi.ID, IdempotencyKey: key,
					Reference: pi.Metadata[metaPaymentID], Succeeded: pi.Status == stripego.PaymentIntentStatusSucceeded,
					Amount: fromStripe(cur, pi.Amount), Currency: cur, CreatedAt: time.Unix(pi.Created, 0).UTC()}
			}
		}
		return rows, page.HasMore, nil
	})
}

// CloseCharge closes key for good at Stripe with the fence (the package
// doc), and returns the charge made under it, if any. made is false only
// when the fence holds the key: nothing was, or ever will be, made under
// it. A PaymentIntent made under the key and still cancelable is canceled,
// and reported failed. Anything short of a definite answer wraps
// operation.ErrProcessorUnknown, and the close is asked again later.
func (c *Client) CloseCharge(ctx context.Context, req payments.ChargeRequest) (operation.Outcome, bool, error) {
	return c.closeKey(ctx, "charge", req.IdempotencyKey, req.CreatedAt, func(used bool) (operation.Outcome, bool, error) {
		return c.closeCharge(ctx, req, used)
	})
}

// closeCharge is CloseCharge once the fence has taken the key.
func (c *Client) closeCharge(ctx context.Context, req payments.ChargeRequest, used bool) (operation.Outcome, bool, error) {
	// The key was used, or Stripe may have forgotten it, and what was made
	// under it: every PaymentIntent that could have been is listed.
	found, fenced, err := c.findPayment(ctx, req, true)
	switch {
	case err != nil:
		return operation.Outcome{}, false, unknown(err)
	case found == nil && (!used || fenced):
		// Held by this fence, or by a fence PaymentIntent made before.
		return operation.Outcome{}, false, nil
	case found == nil:
		return operation.Outcome{}, false, gateway.Unknownf("the key was used, and nothing made under it is listed yet")
	}
	pi := found
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
