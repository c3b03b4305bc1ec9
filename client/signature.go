package client

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The Standard Webhooks headers of a webhook delivery.
const (
	HeaderWebhookID        = "webhook-id"
	HeaderWebhookTimestamp = "webhook-timestamp"
	HeaderWebhookSignature = "webhook-signature"
)

// WebhookTolerance is how far a delivery's webhook-timestamp may be from
// the receiver's clock, either way: a delivery replayed later is refused.
const WebhookTolerance = 5 * time.Minute

var (
	// ErrWebhookSignature reports a delivery with a missing or malformed
	// header, or without a signature made with any of the secrets.
	ErrWebhookSignature = errors.New("webhook signature invalid")
	// ErrWebhookTimestamp reports a correctly signed delivery whose
	// timestamp is more than WebhookTolerance away from now.
	ErrWebhookTimestamp = errors.New("webhook timestamp outside the tolerance")
)

// secretPrefix starts every secret the API shows; the rest is the key, in
// base64.
const secretPrefix = "whsec_"

// Webhook verifies deliveries of an endpoint as Standard Webhooks define
// them. It holds the endpoint's secrets: two while one is rotated out. It is
// safe for concurrent use.
type Webhook struct {
	keys [][]byte
}

// NewWebhook returns a Webhook that accepts a delivery signed with any of
// secrets, each "whsec_" and the key in standard base64, as the API shows it
// (the prefix may be left out).
func NewWebhook(secrets ...string) (*Webhook, error) {
	if len(secrets) == 0 {
		return nil, errors.New("webhook: no secret")
	}
	w := &Webhook{}
	for i, s := range secrets {
		key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(s, secretPrefix))
		if err != nil || len(key) == 0 {
			// The error would show part of the secret: say only which.
			return nil, fmt.Errorf("webhook: secret %d is not %s followed by a key in base64", i+1, secretPrefix)
		}
		w.keys = append(w.keys, key)
	}
	return w, nil
}

// VerifySignature checks a delivery of body, the raw request body, with its
// headers against one secret, as Webhook.Verify does.
func VerifySignature(secret string, header http.Header, body []byte) error {
	w, err := NewWebhook(secret)
	if err != nil {
		return err
	}
	return w.Verify(header, body)
}

// Verify checks a delivery of body, the raw request body, with its headers:
// one of the signatures of webhook-signature must be the HMAC-SHA256 of
// "{webhook-id}.{webhook-timestamp}.{body}" with one of the secrets, and the
// timestamp must be within WebhookTolerance of now. It returns an error
// wrapping ErrWebhookSignature or ErrWebhookTimestamp otherwise. Deduplicate
// verified deliveries by their webhook-id.
func (w *Webhook) Verify(header http.Header, body []byte) error {
	return w.VerifyAt(header, body, time.Now())
}

// VerifyAt is Verify on a receiver whose clock reads now.
func (w *Webhook) VerifyAt(header http.Header, body []byte, now time.Time) error {
	id, ts, sigs := header.Get(HeaderWebhookID), header.Get(HeaderWebhookTimestamp), header.Get(HeaderWebhookSignature)
	for _, h := range []struct{ name, value string }{
		{HeaderWebhookID, id}, {HeaderWebhookTimestamp, ts}, {HeaderWebhookSignature, sigs},
	} {
		if h.value == "" {
			return fmt.Errorf("%w: no %s header", ErrWebhookSignature, h.name)
		}
	}
	unix, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return fmt.Errorf("%w: %s is not Unix seconds", ErrWebhookSignature, HeaderWebhookTimestamp)
	}
	if !w.signed(id, ts, body, sigs) {
		return ErrWebhookSignature
	}
	// The signature is checked first, so that a timestamp is only refused
	// on a delivery that is genuine.
	if d := now.Sub(time.Unix(unix, 0)); d > WebhookTolerance || d < -WebhookTolerance {
		return fmt.Errorf("%w: %v off", ErrWebhookTimestamp, d.Abs().Round(time.Second))
	}
	return nil
}

// signed reports whether one of the space-separated signatures sigs is
// the v1 signature of the message with one of w's keys.
func (w *Webhook) signed(id, ts string, body []byte, sigs string) bool {
	for _, key := range w.keys {
		mac := hmac.New(sha256.New, key)
		mac.Write([]byte(id + "." + ts + "."))
		mac.Write(body)
		want := mac.Sum(nil)
		for _, sig := range strings.Fields(sigs) {
			version, value, ok := strings.Cut(sig, ",")
			if !ok || version != "v1" {
				// Other versions, such as v1a, are not HMAC: skip them.
				continue
			}
			got, err := base64.StdEncoding.DecodeString(value)
			if err == nil && hmac.Equal(got, want) {
				return true
			}
		}
	}
	return false
}
