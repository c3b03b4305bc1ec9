package demoreceiver

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// Tolerance is how far a delivery's timestamp may be from the receiver's
// clock, either way, as the Standard Webhooks library's Verify allows: a
// delivery captured and replayed later is refused.
const Tolerance = 5 * time.Minute

var (
	// ErrSignature reports a delivery with a missing or malformed header,
	// or no signature made with any of the secrets.
	ErrSignature = errors.New("webhook signature invalid")
	// ErrStale reports a correctly signed delivery whose timestamp is more
	// than Tolerance away from now: a replay, or a clock far off.
	ErrStale = errors.New("webhook timestamp outside the tolerance")
)

// secretPrefix starts every secret; the rest is the key, in base64.
const secretPrefix = "whsec_"

// Secrets are the signing secrets of one webhook endpoint, as the sender
// gave them ("whsec_" and the key in base64). A delivery signed with any of
// them is genuine: while the endpoint's secret rotates, list the old and the
// new. The zero value holds none. Printed, it shows how many it holds,
// never them.
type Secrets struct {
	keys []*standardwebhooks.Webhook
}

// ParseSecrets reads secrets separated by commas or spaces, each "whsec_"
// followed by 24 to 64 bytes in standard base64. An error never shows a
// secret.
func ParseSecrets(s string) (Secrets, error) {
	var out Secrets
	for _, secret := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' }) {
		// The library's NewWebhook takes a secret without its prefix too,
		// and any key, an empty one included: a secret mangled in
		// copying would be a key anyone can sign with. Refuse it here.
		key, ok := strings.CutPrefix(secret, secretPrefix)
		raw, err := base64.StdEncoding.DecodeString(key)
		if !ok || err != nil || len(raw) < 24 || len(raw) > 64 {
			return Secrets{}, fmt.Errorf("secret %d is not %s followed by 24 to 64 bytes in base64", len(out.keys)+1, secretPrefix)
		}
		wh, err := standardwebhooks.NewWebhook(secret)
		if err != nil {
			return Secrets{}, fmt.Errorf("secret %d: %w", len(out.keys)+1, err)
		}
		out.keys = append(out.keys, wh)
	}
	return out, nil
}

// String masks the secrets, so that a logged configuration shows only how
// many there are.
func (s Secrets) String() string { return fmt.Sprintf("(%d secrets)", len(s.keys)) }

// Empty reports whether s holds no secret.
func (s Secrets) Empty() bool { return len(s.keys) == 0 }

// Verify checks a delivery of body with headers h, received at now, and
// returns its webhook-id. One of its signatures must be made with one of the
// secrets (the library's VerifyIgnoringTimestamp, which compares in
// constant time), and then its timestamp must be within Tolerance of now.
// The library's Verify would check the timestamp first, against its own
// clock: ErrStale would then be said of a forged delivery as well, which
// is ErrSignature here, so that the answer tells nothing to a forger.
func (s Secrets) Verify(body []byte, h http.Header, now time.Time) (string, error) {
	genuine := slices.ContainsFunc(s.keys, func(wh *standardwebhooks.Webhook) bool {
		return wh.VerifyIgnoringTimestamp(body, h) == nil
	})
	if !genuine {
		return "", ErrSignature
	}
	ts, err := strconv.ParseInt(h.Get(standardwebhooks.HeaderWebhookTimestamp), 10, 64)
	if err != nil {
		return "", ErrSignature
	}
	if d := now.Sub(time.Unix(ts, 0)); d > Tolerance || d < -Tolerance {
		return "", ErrStale
	}
	return h.Get(standardwebhooks.HeaderWebhookID), nil
}
