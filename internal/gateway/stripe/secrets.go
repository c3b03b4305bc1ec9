package stripe

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	signing "github.com/example/payments/internal/webhook"
)

// Secrets are the signing secrets of Stripe's webhook endpoint
// (STRIPE_WEBHOOK_SECRET: whsec_…, comma-separated during a rotation), used
// as Stripe shows them. Formatted or logged, they show only how many there
// are.
type Secrets []string

// Decode reads comma-separated whsec_ secrets (envconfig.Decoder).
func (s *Secrets) Decode(v string) error {
	var secrets Secrets
	for _, part := range strings.Split(v, ",") {
		part = strings.TrimSpace(part)
		if !strings.HasPrefix(part, "whsec_") || len(part) == len("whsec_") {
			return errors.New("each secret is a whsec_… string, as Stripe's dashboard shows it")
		}
		secrets = append(secrets, part)
	}
	*s = secrets
	return nil
}

// String masks the secrets.
func (s Secrets) String() string { return fmt.Sprintf("(%d secrets)", len(s)) }

// GoString masks the secrets for %#v.
func (s Secrets) GoString() string { return s.String() }

// LogValue masks the secrets for slog.
func (s Secrets) LogValue() slog.Value { return slog.StringValue(s.String()) }

// Verify checks a delivery of Stripe's webhook as the API does every
// processor's (Verify, on the raw body, before anything reads it) and
// returns the event's id, which Stripe sends in the body, not a header. A
// refusal wraps the service's webhook.ErrSignature, or webhook.ErrStale for
// one correctly signed outside the tolerance; with no secrets, every
// delivery is refused.
func (s Secrets) Verify(body []byte, h http.Header, now time.Time) (string, error) {
	err := Verify(body, h, s, now)
	switch {
	case errors.Is(err, ErrStale):
		return "", fmt.Errorf("%w: %w", signing.ErrStale, err)
	case err != nil:
		return "", fmt.Errorf("%w: %w", signing.ErrSignature, err)
	}
	var ev struct {
		ID string `json:"id"`
	}
	// An event that is not JSON, or names no id, is ParseEvent's to refuse.
	_ = json.Unmarshal(body, &ev)
	return ev.ID, nil
}
