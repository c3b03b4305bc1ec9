// Package stripe is the processor's adapter for Stripe (PROCESSOR=stripe,
// declared by Adapter, its settings Settings): a Client that makes every
// kind's processor calls, with their lookups, fences and ledgers
// (payments.Processor, ChargeFinder, ChargeCloser, ChargeLedger, and the
// refunds' likewise), on Stripe's v1 API through stripe-go, and the reader
// of Stripe's webhooks (Verify, ParseEvent). It keeps the ports every
// adapter keeps: a kind's call returns a definite operation.Outcome or an
// error wrapping operation.ErrProcessorUnknown, and its lookup, fence and
// ledger a definite answer or such an error.
//
// # Downstream keys
//
// A call's downstream key (req.IdempotencyKey) is sent as Stripe's
// Idempotency-Key and written in the object's metadata as downstream_key,
// with payment_id on a charge: Stripe's objects do not carry the key, and
// the webhooks, the lookups and the ledger map an object back by it.
//
// # Charges
//
// A charge is one PaymentIntent, created and confirmed in one call
// (confirm=true, the payment method, payment_method_types[]=card so that no
// return_url is needed, error_on_requires_action=true so that a card that
// needs authentication is declined, authentication_required, rather than
// left in requires_action, which no customer is there to complete). The
// answer is classified:
//
//   - a PaymentIntent succeeded: a success, its ID the PaymentIntent's;
//   - requires_payment_method with a last_payment_error: a decline, its code
//     the error's decline_code, else its code; canceled: failed, "canceled";
//   - any other status (processing, requires_action, requires_confirmation,
//     requires_capture) is not final: the PaymentIntent is retrieved once by
//     id (a replayed answer is the stored original, not the PaymentIntent as
//     it stands), and if still not final the call is unknown. The worker
//     retries: a replay then a retrieval polls it, and the webhook settles it
//     meanwhile;
//   - a 402 card_error carrying the PaymentIntent: a decline of it;
//   - another invalid_request_error (a bad payment method, an amount too
//     small): a definite refusal, an Outcome with no ID, since nothing was
//     made; or, should the error carry a PaymentIntent it made that failed,
//     a decline of that PaymentIntent;
//   - anything else is unknown: an idempotency_error (the key used with
//     other parameters or on another endpoint, as a key the fence closed
//     answers), 401 and 403 (a configuration to fix, not an answer), 409
//     (idempotency_key_in_use, lock_timeout), 429, a 5xx, a timeout, a
//     dropped connection, a body that cannot be read.
//
// Stripe does not say that a key was closed, only that it was used: this
// adapter never returns operation.ErrKeyClosed. A call made after the fence
// is unknown, never a refusal: the runner that closed the key recorded what
// the close learned, and a close asked again answers the same.
//
// # Refunds
//
// A refund is one Refund of the PaymentIntent (for this adapter a payment's
// processor id is its PaymentIntent's). succeeded is a success; failed and
// canceled fail with the refund's failure_reason; pending and
// requires_action are retrieved once, as a charge's, and else unknown. An
// invalid_request_error (charge_already_refunded, an amount too large) is a
// definite refusal; the rest is classified as a charge's answer.
//
// # Amounts
//
// The API's amounts are ISO 4217 minor units; Stripe's are the same but for
// ISK (sent times 100) and MGA (sent divided by 100), converted both ways
// (toStripe, fromStripe). Stripe's minimum charges and the three-decimal
// currencies' multiples of ten are declared (amountRule) for the API to
// check before a key is spent.
//
// # Saved failures
//
// Stripe saves the first answer under a key once its endpoint began
// executing, 5xx included, and replays it marked Idempotent-Replayed: a
// replayed 5xx wraps operation.ErrSavedFailure, and the machinery reviews
// the operation at once instead of asking again.
//
// # Lookups by key
//
// Stripe cannot retrieve an object by its idempotency key. FindCharge
// searches PaymentIntents (metadata['downstream_key']:'<key>') as a
// shortcut, retrieving what it finds, and what the search does not find
// (it lags about a minute, and some accounts, India's, have none) it looks
// for in the list of the PaymentIntents created within nearSeconds of the
// charge's creation, where its first call made it; the list is consistent
// and current. None found is safe for what the runner does with it: before
// the deadline it makes the call again under the key, which Stripe answers
// with the original while it keeps the key, and past it it closes the key.
// A PaymentIntent not final is unknown.
//
// FindRefund lists the refunds of the refund's PaymentIntent (one request,
// however long a refund stays pending) for the newest whose metadata names
// the key.
//
// # The fence
//
// CloseCharge and CloseRefund create a fence Customer under the key, with
// a body fixed for the key (a description and metadata fence=true and
// downstream_key; no amount, so no currency rule of the account can refuse
// it). Stripe refuses a key used on another endpoint or with other
// parameters, so:
//
//   - the fence made, or found again (replayed, or a 5xx Stripe saved for
//     the fence's own request, which it replays only to the same endpoint
//     and parameters): nothing can be made under the key from now on, since
//     a later call with it gets an idempotency_error, and, while Stripe
//     keeps every key used since the operation was created (KeyRetention
//     less clockSkew), nothing was: no request ever held the key. Past that,
//     the fence proves nothing about the past, and every PaymentIntent that
//     could have been made is listed (the operation's creation, clockSkew
//     before, to the end of KeyRetention), a refund's PaymentIntent's
//     refunds; none found, the close reports nothing made;
//   - an idempotency_error: a real call used the key (or a fence
//     PaymentIntent of an earlier version, which the list shows and which
//     holds it as well). Its object is looked up: not listed is unknown;
//     found and final, it is reported made; a PaymentIntent that can still
//     be canceled (requires_*) is canceled and reported failed, "canceled",
//     unless the cancel is refused because it has succeeded meanwhile, which
//     is then reported; a PaymentIntent processing, or a refund pending (a
//     refund cannot be canceled), is unknown;
//   - anything else (409, 429, a fresh 5xx, a timeout) is unknown.
//
// A close repeated answers the same: the fence is replayed, or the real
// object is found in the state the first close left.
//
// # The ledger
//
// LedgerCharges and LedgerRefunds page oldest first, as the reconciler
// needs, over lists Stripe gives newest first, the objects this service
// made only (their metadata names a downstream key; a fence moves no
// money). The first page is the whole window when it fits one, and
// otherwise is found by narrowing a range of creation times to one page;
// each later page asks for the objects just newer than the cursor
// (ending_before): about a request per page of the window.
//
// # Webhooks
//
// Verify checks Stripe-Signature against any of the endpoint's secrets and
// the time it was signed against now; ParseEvent maps the events that
// settle an operation: payment_intent.succeeded, .payment_failed and
// .canceled, refund.created, refund.updated, refund.failed and
// charge.refund.updated with a final status, and charge.refunded embedding
// its refunds (API versions before 2022-11-15). An event about an object this
// service did not make (one whose metadata names no downstream key: a
// refund from the Dashboard, a Checkout session's PaymentIntent) is not
// handled: answered 200, ignored, and counted so.
package stripe
