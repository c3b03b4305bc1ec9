package fake

import (
	"fmt"
	"net/http"
	"regexp"
	"time"

	"github.com/example/payments/internal/gateway"
	"github.com/example/payments/internal/operation"
	"github.com/example/payments/internal/signing"
)

// Adapter declares the fake processor to the service: PROCESSOR=fake.
var Adapter = gateway.Adapter{
	Name:     "fake",
	Summary:  "the stand-in processor (tools/fakeprocessor), for the demo and the tests",
	Settings: func() gateway.Settings { return &Settings{} },
}

// Settings are the fake processor's settings, as the worker and the API read
// them with PROCESSOR=fake.
type Settings struct {
	URL string `envconfig:"PROCESSOR_URL" default:"http://127.0.0.1:8090" desc:"the fake processor's API"`
	// KeyRetention is the processor's own setting of that name: the worker
	// refuses to start if it is too short to be safe.
	KeyRetention time.Duration `envconfig:"PROCESSOR_KEY_RETENTION" default:"168h" desc:"how long the fake processor remembers its idempotency keys: the value it runs with"`
	// WebhookSecret prints as the number of secrets it holds, never them.
	WebhookSecret signing.Secrets `envconfig:"PROCESSOR_WEBHOOK_SECRET" desc:"the fake processor's webhook signing secrets, whsec_..., comma-separated during a rotation (unset: every processor webhook is refused)"`
}

// paymentMethods is the fake processor's payment method tokens:
// pm_card_visa, pm_card_declined and the others it knows.
var paymentMethods = regexp.MustCompile(`^pm_[A-Za-z0-9_]+$`)

// Processor implements gateway.Settings: the fake processor finds what was
// made under a key, closes keys, lists its ledger in pages of up to
// DefaultPageSize and settles every operation at once.
func (s *Settings) Processor() operation.Processor {
	return operation.Processor{Name: Adapter.Name, Lookup: operation.LookupQuery, Fence: true, Ledger: true,
		LedgerPage: DefaultPageSize, KeyRetention: s.KeyRetention,
		PaymentMethod: operation.Format{Pattern: paymentMethods, Example: "pm_card_visa"}}
}

// Calls implements gateway.Settings: the Client of the processor at URL.
func (s *Settings) Calls(opts gateway.Options) (any, error) {
	if s.URL == "" {
		return nil, fmt.Errorf("PROCESSOR_URL is required with PROCESSOR=fake")
	}
	c := New(s.URL, opts.Timeout).Paced(opts.Pace).Traced(opts.Tracer)
	c.PageSize = opts.PageSize
	return c, nil
}

// Webhooks implements gateway.Settings: deliveries signed as the service
// signs its own (Standard Webhooks, package webhook) with WebhookSecret,
// one event each, answered with its receipt as JSON.
func (s *Settings) Webhooks() (gateway.Webhooks, error) {
	return webhooks{secrets: s.WebhookSecret}, nil
}

// webhooks reads the fake processor's webhooks.
type webhooks struct{ secrets signing.Secrets }

// Verify implements gateway.Webhooks; with no secret, every delivery is
// refused.
func (w webhooks) Verify(body []byte, h http.Header, now time.Time) error {
	if w.secrets.Empty() {
		return fmt.Errorf("%w: PROCESSOR_WEBHOOK_SECRET is unset", signing.ErrSignature)
	}
	_, err := w.secrets.Verify(body, h, now)
	return err
}

// Events implements gateway.Webhooks: the one event of a delivery, whose id
// is its webhook-id.
func (webhooks) Events(body []byte, h http.Header) ([]gateway.Event, error) {
	ev, err := ParseEvent(body)
	return gateway.Single(ev, err, h.Get(signing.HeaderID))
}

// Answer implements gateway.Webhooks.
func (webhooks) Answer(w http.ResponseWriter, receipts []gateway.Receipt) {
	gateway.AnswerJSON(w, receipts)
}
