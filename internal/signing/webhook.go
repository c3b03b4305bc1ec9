// Package signing signs and verifies webhooks as Standard Webhooks
// specifies (https://www.standardwebhooks.com), with its maintained Go
// library: the headers webhook-id, webhook-timestamp and webhook-signature,
// the last holding one "v1,<base64 HMAC-SHA256>" per secret, over
// "{id}.{timestamp}.{body}". A set of secrets signs with each of them and
// verifies with any, so that a secret can be rotated without a moment in
// which one side refuses the other.
package signing

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// Tolerance is how far a delivery's timestamp may be from the receiver's
// clock, either way: a delivery captured and replayed later is refused.
const Tolerance = 5 * time.Minute

// The Standard Webhooks headers.
const (
	HeaderID        = standardwebhooks.HeaderWebhookID
	HeaderTimestamp = standardwebhooks.HeaderWebhookTimestamp
	HeaderSignature = standardwebhooks.HeaderWebhookSignature
)

var (
	// ErrSignature reports a delivery with a missing or malformed header, or
	// no signature made with any of the secrets.
	ErrSignature = errors.New("webhook signature invalid")
	// ErrStale reports a correctly signed delivery whose timestamp is more
	// than Tolerance away from now: a replay, or a clock far off.
	ErrStale = errors.New("webhook timestamp outside the tolerance")
)

// prefix starts every secret; the rest is the key, in base64.
const prefix = "whsec_"

// Secrets are the secrets of one webhook destination, the current one last.
// The zero value holds none. Printed, it shows how many it holds, never
// them.
type Secrets struct {
	keys []*standardwebhooks.Webhook
}

// ParseSecrets reads secrets separated by commas or spaces, each "whsec_"
// followed by 24 to 64 bytes in standard base64.
func ParseSecrets(s string) (Secrets, error) {
	var out Secrets
	for _, secret := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' }) {
		key, ok := strings.CutPrefix(secret, prefix)
		raw, err := base64.StdEncoding.DecodeString(key)
		if !ok || err != nil || len(raw) < 24 || len(raw) > 64 {
			return Secrets{}, fmt.Errorf("secret %d is not %s followed by 24 to 64 bytes in base64", len(out.keys)+1, prefix)
		}
		wh, err := standardwebhooks.NewWebhookRaw(raw)
		if err != nil {
			return Secrets{}, err
		}
		out.keys = append(out.keys, wh)
	}
	return out, nil
}

// NewSecret returns a fresh secret of 32 random bytes.
func NewSecret() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // never fails, per crypto/rand
	return prefix + base64.StdEncoding.EncodeToString(b)
}

// Decode lets envconfig read Secrets from the environment.
func (s *Secrets) Decode(value string) error {
	parsed, err := ParseSecrets(value)
	if err != nil {
		return err
	}
	*s = parsed
	return nil
}

// String masks the secrets, so that a logged configuration shows only how
// many there are.
func (s Secrets) String() string {
	return fmt.Sprintf("(%d secrets)", len(s.keys))
}

// Empty reports whether s holds no secret.
func (s Secrets) Empty() bool { return len(s.keys) == 0 }

// Sign sets the Standard Webhooks headers of a delivery of body with the
// message id id, sent at: one signature per secret.
func (s Secrets) Sign(h http.Header, id string, at time.Time, body []byte) error {
	if s.Empty() {
		return errors.New("sign webhook: no secret")
	}
	sigs := make([]string, 0, len(s.keys))
	for _, wh := range s.keys {
		sig, err := wh.Sign(id, at, body)
		if err != nil {
			return fmt.Errorf("sign webhook: %w", err)
		}
		sigs = append(sigs, sig)
	}
	h.Set(HeaderID, id)
	h.Set(HeaderTimestamp, strconv.FormatInt(at.Unix(), 10))
	h.Set(HeaderSignature, strings.Join(sigs, " "))
	return nil
}

// Verify checks a delivery of body with headers h, received at now: one of
// its signatures must be made with one of the secrets (compared in constant
// time, by the library), and then its timestamp must be within Tolerance of
// now. The signature is checked first, so that ErrStale is only ever said of
// a genuine delivery. It returns the delivery's id.
func (s Secrets) Verify(body []byte, h http.Header, now time.Time) (string, error) {
	verified := false
	for _, wh := range s.keys {
		if wh.VerifyIgnoringTimestamp(body, h) == nil {
			verified = true
			break
		}
	}
	if !verified {
		return "", ErrSignature
	}
	ts, err := strconv.ParseInt(h.Get(HeaderTimestamp), 10, 64)
	if err != nil {
		return "", ErrSignature
	}
	if d := now.Sub(time.Unix(ts, 0)); d > Tolerance || d < -Tolerance {
		return "", ErrStale
	}
	return h.Get(HeaderID), nil
}
