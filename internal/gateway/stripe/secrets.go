package stripe

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
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
