package stripe_test

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/example/payments/internal/gateway/stripe"
	"github.com/example/payments/internal/signing"
)

// TestSecrets: STRIPE_WEBHOOK_SECRET reads whsec_ strings, comma-separated,
// never prints them, and verifies as the API verifies every processor's
// webhook (gateway.Webhooks): the event, or the service's ErrSignature or
// ErrStale.
func TestSecrets(t *testing.T) {
	t.Parallel()
	var s stripe.Secrets
	for _, bad := range []string{"", "sk_test_1", "whsec_", "whsec_a,,whsec_b"} {
		if err := s.Decode(bad); err == nil {
			t.Errorf("Decode(%q) taken", bad)
		}
	}
	if err := s.Decode("whsec_new, whsec_old"); err != nil || len(s) != 2 || s[1] != "whsec_old" {
		t.Fatalf("Decode = %v, %v", s, err)
	}
	if out := fmt.Sprintf("%v %#v %s", s, s, s); strings.Contains(out, "whsec") {
		t.Fatalf("the secrets print: %s", out)
	}
	wh, err := (&stripe.Settings{WebhookSecret: s}).Webhooks()
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(eventBody("payment_intent.succeeded", paymentIntent("pi_1", "succeeded", chargeKey, nil)))
	now := time.Now()
	if err := wh.Verify(body, signed(body, "whsec_old", now), now); err != nil {
		t.Fatalf("Verify = %v", err)
	}
	if events, err := wh.Events(body, nil); err != nil || len(events) != 1 || !strings.HasPrefix(events[0].ID, "evt_") {
		t.Fatalf("Events = %+v, %v; want the one event, its id", events, err)
	}
	for _, c := range []struct {
		name   string
		header http.Header
		want   error
	}{
		{"Forged", signed(body, "whsec_other", now), signing.ErrSignature},
		{"Stale", signed(body, "whsec_new", now.Add(-time.Hour)), signing.ErrStale},
	} {
		if err := wh.Verify(body, c.header, now); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
}
