// Package stripesim is a stateful, in-memory simulator of the part of
// Stripe's v1 API that the service's Stripe adapter uses: PaymentIntents
// (create, confirm with a test card, retrieve, cancel, list, search),
// Refunds (create, retrieve, list) and Customers (create, retrieve,
// delete). A Server is an http.Handler that speaks Stripe's wire format, so
// that stripe-go works against it unchanged: form-encoded parameters, JSON
// answers with their object field, lists and search results paged as
// Stripe pages them, errors as Stripe shapes them, a Request-Id on every
// answer. Command stripesim (cmd/stripesim) serves one on an address of its
// own.
//
// # Requests
//
// Every request needs an API key, "Authorization: Bearer sk_…" (or HTTP
// Basic with the key as the user); any key starting with sk_ is taken, and
// every key sees the same objects. A request is then, in order: counted;
// refused 401 without a key; refused 429 over Options.RateLimit; given the
// Fault that Options.Fault or Options.FaultRates choose; checked against its
// Idempotency-Key (a POST's: replayed, refused, or reserved); validated;
// executed; answered.
//
// # Idempotency
//
// As Stripe documents it: a POST with an Idempotency-Key saves the status
// and body of its answer once its endpoint began executing, and a retry
// with the same key, method, path and parameters (compared as decoded form
// values, in any order) gets that answer again, with Idempotent-Replayed:
// true and Original-Request naming the first request. The same key with
// other parameters or on another endpoint is a 400 idempotency_error; a
// request with a key whose first request is still executing is a 409
// idempotency_key_in_use. A request refused before it executed (no key,
// the rate limit, a parameter, an amount rule, any 400 invalid_request_error)
// saves nothing, and a retry is validated again. Keys are scoped to the API
// key and forgotten Options.KeyRetention after their first use, after which
// a request with one is executed anew.
//
// # Test cards
//
// A PaymentIntent created with confirm=true runs its payment method at once:
//
//   - pm_card_visa, and every other pm_… not listed here: succeeded;
//   - pm_card_chargeDeclined (generic_decline), pm_card_insufficientFunds
//     (insufficient_funds), and the other decline cards of cards.go: a 402
//     card_error card_declined carrying the PaymentIntent, left in
//     requires_payment_method with its last_payment_error;
//   - pm_card_authenticationRequired: with error_on_requires_action=true a
//     402 card_error authentication_required, the PaymentIntent left in
//     requires_payment_method; without it, requires_action;
//   - pm_card_processing (the simulator's own): processing, then succeeded
//     Options.ProcessingFor later;
//   - pm_card_refundFail: succeeded; a refund of it succeeds at once and
//     fails Options.RefundPendingFor later (expired_or_canceled_card).
//
// A payment method that does not start with pm_ does not exist (400
// resource_missing). Created without confirm, a PaymentIntent is
// requires_confirmation with a payment method and requires_payment_method
// without one.
//
// # Time
//
// The simulator has a clock of its own (Server.Now): it starts at
// Options.Start and follows real time, plus whatever Server.Advance added;
// with Options.ManualClock it moves only by Advance. Every created is its
// Unix second, and every delayed change (a processing PaymentIntent, a
// pending refund, the search index, key retention, the rate limit) is
// decided on it, and applied when anything next reads the state: a request,
// an inspection, Advance, or a tick every 100ms of real time while the
// clock follows it.
//
// # Faults
//
// Options.Fault (or, when it is nil, Options.FaultRates drawn from
// Options.Seed) gives each authenticated request one Fault: a 500 before
// executing, a 500 saved under the key, an answer lost after the request
// executed and saved it, added latency while the key is held, or a 429.
//
// # Webhooks
//
// With Options.WebhookURL, each event (payment_intent.created, .succeeded,
// .payment_failed, .canceled, .processing, .requires_action; refund.created,
// .updated, .failed; charge.refunded) is posted from a goroutine, signed in
// Stripe-Signature with Options.WebhookSecret and the simulator clock's
// time, maybe dropped, duplicated or delayed as Options say, and retried on
// a non-2xx answer. Close stops them.
package stripesim
