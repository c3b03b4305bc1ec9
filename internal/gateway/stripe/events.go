package stripe

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	stripego "github.com/stripe/stripe-go/v83"
	"github.com/stripe/stripe-go/v83/webhook"

	"github.com/example/payments/internal/operation"
)

// SignatureHeader is the header Stripe signs its webhooks in:
// t=<unix seconds>,v1=<hex HMAC-SHA256 of "{t}.{body}">, one v1 a secret
// during a rotation.
const SignatureHeader = "Stripe-Signature"

// SignatureTolerance is how far from now a webhook may have been signed:
// stripe-go's default, which bounds how long a captured webhook can be
// replayed.
const SignatureTolerance = webhook.DefaultTolerance

// ErrSignature reports a webhook not verified as Stripe's: no signature,
// none that any of the secrets makes, or one made more than
// SignatureTolerance from now (ErrStale too).
var ErrSignature = errors.New("stripe webhook signature invalid")

// ErrStale reports a webhook correctly signed more than SignatureTolerance
// from now: a replay of a captured one, or a clock far off.
var ErrStale = errors.New("stripe webhook signed outside the tolerance")

// Verify checks that body, with its headers, was signed by Stripe with one
// of secrets (the endpoint's whsec_… secrets: two during a rotation) within
// SignatureTolerance of now, on the raw bytes, before anything reads them:
// the signature first, so that only a correctly signed webhook is ever
// called stale. Anything unverified wraps ErrSignature.
func Verify(body []byte, header http.Header, secrets []string, now time.Time) error {
	sig := header.Get(SignatureHeader)
	if sig == "" {
		return fmt.Errorf("%w: %w", ErrSignature, webhook.ErrNotSigned)
	}
	err := webhook.ErrNoValidSignature
	for _, secret := range secrets {
		if secret == "" {
			continue
		}
		// The time is checked against now below: stripe-go's own check
		// reads the wall clock.
		if err = webhook.ValidatePayloadIgnoringTolerance(body, sig, secret); err == nil {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("%w: %w", ErrSignature, err)
	}
	signed, err := signedAt(sig)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrSignature, err)
	}
	if d := now.Sub(signed); d > SignatureTolerance || d < -SignatureTolerance {
		return fmt.Errorf("%w: %w: signed at %s, %s from now", ErrSignature, ErrStale, signed.UTC().Format(time.RFC3339), d)
	}
	return nil
}

// signedAt reads the time a Stripe-Signature header says it was signed at,
// its t, the last one as stripe-go reads it.
func signedAt(header string) (time.Time, error) {
	var (
		at    time.Time
		found bool
	)
	for _, pair := range strings.Split(header, ",") {
		k, v, ok := strings.Cut(pair, "=")
		if !ok {
			return time.Time{}, webhook.ErrInvalidHeader
		}
		if k != "t" {
			continue
		}
		sec, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return time.Time{}, webhook.ErrInvalidHeader
		}
		at, found = time.Unix(sec, 0), true
	}
	if !found {
		return time.Time{}, webhook.ErrInvalidHeader
	}
	return at, nil
}

// event is the envelope of Stripe's webhook, read only as far as every type
// has it: its object is read once the type says what it is.
type event struct {
	ID     string             `json:"id"`
	Object string             `json:"object"`
	Type   stripego.EventType `json:"type"`
	Data   struct {
		Object json.RawMessage `json:"object"`
	} `json:"data"`
}

// ParseEvent reads the body of a Stripe webhook, already verified, into the
// event about one operation. The types that settle one are
// payment_intent.succeeded (a success), payment_intent.payment_failed (a
// decline, its code the last_payment_error's decline_code, else its code)
// and payment_intent.canceled (failed, "canceled"), refund.created,
// refund.updated, refund.failed and charge.refund.updated about a refund
// whose status is final, and charge.refunded with its refunds embedded
// (the API versions before 2022-11-15). A refund not final yet, a fence
// PaymentIntent, a charge.refunded embedding none and every other type wrap
// operation.ErrEventNotHandled; a body that cannot be read as such an event,
// or an object naming no downstream_key, wraps operation.ErrEventMalformed.
func ParseEvent(body []byte) (operation.ProcessorEvent, error) {
	var e event
	switch err := json.Unmarshal(body, &e); {
	case err != nil:
		return operation.ProcessorEvent{}, fmt.Errorf("%w: %w", operation.ErrEventMalformed, err)
	case e.Object != "event":
		return operation.ProcessorEvent{}, fmt.Errorf("%w: the body is not an event", operation.ErrEventMalformed)
	case e.ID == "" || len(e.ID) > 255:
		return operation.ProcessorEvent{}, fmt.Errorf("%w: the id is missing or longer than 255 bytes", operation.ErrEventMalformed)
	}
	ev := operation.ProcessorEvent{ID: e.ID, Type: string(e.Type), Payload: body}
	var err error
	switch e.Type {
	case stripego.EventTypePaymentIntentSucceeded, stripego.EventTypePaymentIntentPaymentFailed,
		stripego.EventTypePaymentIntentCanceled:
		err = paymentEvent(&ev, e)
	case stripego.EventTypeRefundCreated, stripego.EventTypeRefundUpdated, stripego.EventTypeRefundFailed,
		stripego.EventTypeChargeRefundUpdated:
		err = refundEvent(&ev, e)
	case stripego.EventTypeChargeRefunded:
		err = chargeRefundedEvent(&ev, e)
	default:
		err = fmt.Errorf("%w: %q", operation.ErrEventNotHandled, e.Type)
	}
	if err != nil {
		return operation.ProcessorEvent{}, err
	}
	return ev, nil
}

// paymentEvent fills ev from e, an event about a PaymentIntent.
func paymentEvent(ev *operation.ProcessorEvent, e event) error {
	var pi stripego.PaymentIntent
	if err := json.Unmarshal(e.Data.Object, &pi); err != nil || pi.Object != "payment_intent" || pi.ID == "" {
		return fmt.Errorf("%w: data.object of a %s is not a payment intent", operation.ErrEventMalformed, e.Type)
	}
	if isFence(&pi) {
		return fmt.Errorf("%w: %s about fence payment intent %s", operation.ErrEventNotHandled, e.Type, pi.ID)
	}
	var ok bool
	switch e.Type {
	case stripego.EventTypePaymentIntentSucceeded:
		ok = pi.Status == stripego.PaymentIntentStatusSucceeded
		ev.Outcome = operation.Outcome{ID: pi.ID, Succeeded: true}
	case stripego.EventTypePaymentIntentCanceled:
		ok = pi.Status == stripego.PaymentIntentStatusCanceled
		ev.Outcome = operation.Outcome{ID: pi.ID, FailureCode: codeCanceled}
	default:
		ok = pi.Status != stripego.PaymentIntentStatusSucceeded
		ev.Outcome = operation.Outcome{ID: pi.ID, FailureCode: codePaymentFailed}
		if pe := pi.LastPaymentError; pe != nil {
			ev.Outcome.FailureCode = firstOf(string(pe.DeclineCode), string(pe.Code), codePaymentFailed)
			ev.Outcome.FailureMessage = pe.Msg
		}
	}
	if !ok {
		return fmt.Errorf("%w: a %s about a payment intent with status %q", operation.ErrEventMalformed, e.Type, pi.Status)
	}
	return keyed(ev, pi.Metadata, pi.Amount, pi.Currency)
}

// refundEvent fills ev from e, an event about a refund.
func refundEvent(ev *operation.ProcessorEvent, e event) error {
	var r stripego.Refund
	if err := json.Unmarshal(e.Data.Object, &r); err != nil || r.Object != "refund" || r.ID == "" {
		return fmt.Errorf("%w: data.object of a %s is not a refund", operation.ErrEventMalformed, e.Type)
	}
	out, final := refundOutcome(&r)
	if !final {
		return fmt.Errorf("%w: %s about refund %s, %q: not final", operation.ErrEventNotHandled, e.Type, r.ID, r.Status)
	}
	ev.Outcome = out
	return keyed(ev, r.Metadata, r.Amount, r.Currency)
}

// chargeRefundedEvent fills ev from e, a charge.refunded: the charge, with
// its refunds embedded on API versions before 2022-11-15, the only event of
// a card refund on versions before 2024-10-28 besides
// charge.refund.updated. Its newest refund made by this service settles
// that refund; a charge whose refunds are not embedded (the later
// versions, which send refund.* events too) is not handled, and a lookup
// by the payment settles the refund meanwhile.
func chargeRefundedEvent(ev *operation.ProcessorEvent, e event) error {
	var ch stripego.Charge
	if err := json.Unmarshal(e.Data.Object, &ch); err != nil || ch.Object != "charge" || ch.ID == "" {
		return fmt.Errorf("%w: data.object of a %s is not a charge", operation.ErrEventMalformed, e.Type)
	}
	if ch.Refunds == nil || len(ch.Refunds.Data) == 0 {
		return fmt.Errorf("%w: %s about charge %s embeds no refund: its refund.* events settle it", operation.ErrEventNotHandled, e.Type, ch.ID)
	}
	for _, r := range ch.Refunds.Data {
		if r == nil || r.Metadata[metaDownstreamKey] == "" {
			continue
		}
		out, final := refundOutcome(r)
		if !final {
			return fmt.Errorf("%w: %s about refund %s, %q: not final", operation.ErrEventNotHandled, e.Type, r.ID, r.Status)
		}
		ev.Outcome = out
		// The charge's currency: an embedded refund may omit its own.
		return keyed(ev, r.Metadata, r.Amount, firstOf(string(r.Currency), string(ch.Currency)))
	}
	return fmt.Errorf("%w: %s about charge %s: none of its refunds was made by this service", operation.ErrEventNotHandled, e.Type, ch.ID)
}

// keyed fills in ev the downstream key the object's metadata names, and
// what it asked for. An object whose metadata names none was made elsewhere
// (the Dashboard, Checkout, an invoice), and its event is not handled: a
// refusal would have Stripe send it again for days, and disable the
// endpoint.
func keyed[C ~string](ev *operation.ProcessorEvent, metadata map[string]string, amount int64, currency C) error {
	ev.DownstreamKey = metadata[metaDownstreamKey]
	if ev.DownstreamKey == "" {
		return fmt.Errorf("%w: %s about an object this service did not make: its metadata names no %s",
			operation.ErrEventNotHandled, ev.Type, metaDownstreamKey)
	}
	ev.Currency = strings.ToUpper(string(currency))
	ev.Amount = fromStripe(ev.Currency, amount)
	return nil
}
