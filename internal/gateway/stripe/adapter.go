package stripe

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/example/payments/internal/gateway"
	"github.com/example/payments/internal/operation"
	"github.com/example/payments/internal/secret"
	"github.com/example/payments/internal/signing"
)

// Adapter declares Stripe to the service: PROCESSOR=stripe.
var Adapter = gateway.Adapter{
	Name:     "stripe",
	Summary:  "Stripe's v1 API, through stripe-go",
	Settings: func() gateway.Settings { return &Settings{} },
}

// Settings are Stripe's settings, as the worker and the API read them with
// PROCESSOR=stripe.
type Settings struct {
	// APIKey is a secret.String, so that the configuration logged at start
	// shows it masked.
	APIKey  secret.String `envconfig:"STRIPE_API_KEY" desc:"Stripe's secret key (sk_test_… or sk_live_…): required by the worker"`
	APIBase string        `envconfig:"STRIPE_API_BASE" desc:"Stripe's API (unset: https://api.stripe.com; a local stripe-mock in tests)"`
	// WebhookSecret verifies Stripe's webhooks; it may hold the old and the
	// new secret during a rotation.
	WebhookSecret Secrets `envconfig:"STRIPE_WEBHOOK_SECRET" desc:"the signing secrets of Stripe's webhook endpoint, whsec_... as its dashboard shows them, comma-separated during a rotation (unset: every processor webhook is refused)"`
}

// paymentMethods is Stripe's PaymentMethod ids and test tokens: pm_…
var paymentMethods = regexp.MustCompile(`^pm_[A-Za-z0-9_]+$`)

// Processor implements gateway.Settings: Stripe is asked what was made under
// a key (its lists), has the fence of the package doc, lists its ledger in
// pages of up to DefaultPageSize, keeps its keys KeyRetention, takes
// RateLimit requests a second in the key's mode, takes the amounts of
// amountRule and settles charges and refunds at once (a status
// not final is retrieved, then unknown, then settled by the webhook).
func (s *Settings) Processor() operation.Processor {
	return operation.Processor{Name: Adapter.Name, Lookup: operation.LookupQuery, Fence: true, Ledger: true,
		LedgerPage: DefaultPageSize, KeyRetention: KeyRetention, RateLimit: RateLimit(string(s.APIKey)),
		PaymentMethod: operation.Format{Pattern: paymentMethods, Example: "pm_card_visa"}, Amounts: amountRule}
}

// RateLimit is Stripe's rate limit for the account whose key is apiKey, in
// requests a second, for every worker together: 100 in live mode (a live
// key, sk_live_… or rk_live_…), 25 in test mode.
func RateLimit(apiKey string) float64 {
	if strings.Contains(apiKey, "_live_") {
		return 100
	}
	return 25
}

// Calls implements gateway.Settings: the Client of the Stripe API the
// settings name.
func (s *Settings) Calls(opts gateway.Options) (any, error) {
	if s.APIKey == "" {
		return nil, errors.New("STRIPE_API_KEY is required with PROCESSOR=stripe")
	}
	c, err := New(Config{APIKey: string(s.APIKey), APIBase: s.APIBase, Timeout: opts.Timeout, PageSize: opts.PageSize,
		Pace: opts.Pace})
	if err != nil {
		return nil, err
	}
	return c.Traced(opts.Tracer), nil
}

// Webhooks implements gateway.Settings: deliveries signed in
// Stripe-Signature with WebhookSecret (Verify), one event each, answered
// with its receipt as JSON.
func (s *Settings) Webhooks() (gateway.Webhooks, error) {
	return webhooks{secrets: s.WebhookSecret}, nil
}

// webhooks reads Stripe's webhooks.
type webhooks struct{ secrets Secrets }

// Verify implements gateway.Webhooks with Verify: a refusal wraps the
// service's signing.ErrSignature, or signing.ErrStale for one correctly
// signed outside the tolerance; with no secrets, every delivery is refused.
func (w webhooks) Verify(body []byte, h http.Header, now time.Time) error {
	err := Verify(body, h, w.secrets, now)
	switch {
	case errors.Is(err, ErrStale):
		return fmt.Errorf("%w: %w", signing.ErrStale, err)
	case err != nil:
		return fmt.Errorf("%w: %w", signing.ErrSignature, err)
	}
	return nil
}

// Events implements gateway.Webhooks: the one event of a delivery, whose id
// Stripe sends in the body.
func (webhooks) Events(body []byte, _ http.Header) ([]gateway.Event, error) {
	var envelope struct {
		ID string `json:"id"`
	}
	// A body that is not JSON, or names no id, is ParseEvent's to refuse.
	_ = json.Unmarshal(body, &envelope)
	ev, err := ParseEvent(body)
	return gateway.Single(ev, err, envelope.ID)
}

// Answer implements gateway.Webhooks.
func (webhooks) Answer(w http.ResponseWriter, receipts []gateway.Receipt) {
	gateway.AnswerJSON(w, receipts)
}
