package client

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/example/payments/internal/signing"
)

// serverSigned returns the headers the server's signer sets on a delivery
// of body sent at, one signature per secret.
func serverSigned(t *testing.T, at time.Time, body []byte, secrets ...string) http.Header {
	t.Helper()
	s, err := signing.ParseSecrets(strings.Join(secrets, ","))
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{}
	if err := s.Sign(h, "evt_1", at, body); err != nil {
		t.Fatal(err)
	}
	return h
}

func TestWebhookVerify(t *testing.T) {
	t.Parallel()
	current, old, other := signing.NewSecret(), signing.NewSecret(), signing.NewSecret()
	now := time.Unix(1_700_000_000, 0)
	body := []byte(`{"id":"evt_1","object":"event","type":"payment.succeeded"}`)

	with := func(h http.Header, name, value string) http.Header {
		h = h.Clone()
		if value == "" {
			h.Del(name)
		} else {
			h.Set(name, value)
		}
		return h
	}
	signed := serverSigned(t, now, body, current)
	tests := []struct {
		name    string
		secrets []string
		header  http.Header
		body    []byte
		want    error
	}{
		{name: "OK", secrets: []string{current}, header: signed, body: body},
		{name: "PrefixLeftOut", secrets: []string{strings.TrimPrefix(current, "whsec_")}, header: signed, body: body},
		{name: "RotationOldVerifies", secrets: []string{old}, header: serverSigned(t, now, body, old, current), body: body},
		{name: "RotationNewVerifies", secrets: []string{current}, header: serverSigned(t, now, body, old, current), body: body},
		{name: "ReceiverHoldsBoth", secrets: []string{old, current}, header: signed, body: body},
		{name: "EdgeOfTolerance", secrets: []string{current}, header: serverSigned(t, now.Add(-WebhookTolerance), body, current), body: body},
		{name: "OtherVersionsSkipped", secrets: []string{current}, header: with(signed, HeaderWebhookSignature, "v1a,AAAA v2,"+strings.TrimPrefix(signed.Get(HeaderWebhookSignature), "v1,")+" "+signed.Get(HeaderWebhookSignature)), body: body},
		{name: "ErrBodyChanged", secrets: []string{current}, header: signed, body: []byte(`{"id":"evt_1","object":"event","type":"payment.failed"}`), want: ErrWebhookSignature},
		{name: "ErrBodyTruncated", secrets: []string{current}, header: signed, body: body[:len(body)-1], want: ErrWebhookSignature},
		{name: "ErrWrongSecret", secrets: []string{other}, header: signed, body: body, want: ErrWebhookSignature},
		{name: "ErrTooOld", secrets: []string{current}, header: serverSigned(t, now.Add(-WebhookTolerance-time.Second), body, current), body: body, want: ErrWebhookTimestamp},
		{name: "ErrTooNew", secrets: []string{current}, header: serverSigned(t, now.Add(WebhookTolerance+time.Second), body, current), body: body, want: ErrWebhookTimestamp},
		{name: "ErrOldAndWrongSecret", secrets: []string{other}, header: serverSigned(t, now.Add(-time.Hour), body, current), body: body, want: ErrWebhookSignature},
		{name: "ErrTimestampChanged", secrets: []string{current}, header: with(signed, HeaderWebhookTimestamp, fmt.Sprint(now.Unix()+1)), body: body, want: ErrWebhookSignature},
		{name: "ErrTimestampNotNumber", secrets: []string{current}, header: with(signed, HeaderWebhookTimestamp, "yesterday"), body: body, want: ErrWebhookSignature},
		{name: "ErrIDChanged", secrets: []string{current}, header: with(signed, HeaderWebhookID, "evt_2"), body: body, want: ErrWebhookSignature},
		{name: "ErrNoID", secrets: []string{current}, header: with(signed, HeaderWebhookID, ""), body: body, want: ErrWebhookSignature},
		{name: "ErrNoTimestamp", secrets: []string{current}, header: with(signed, HeaderWebhookTimestamp, ""), body: body, want: ErrWebhookSignature},
		{name: "ErrNoSignature", secrets: []string{current}, header: with(signed, HeaderWebhookSignature, ""), body: body, want: ErrWebhookSignature},
		{name: "ErrNoHeaders", secrets: []string{current}, header: http.Header{}, body: body, want: ErrWebhookSignature},
		{name: "ErrSignatureNotBase64", secrets: []string{current}, header: with(signed, HeaderWebhookSignature, "v1,not*base64"), body: body, want: ErrWebhookSignature},
		{name: "ErrSignatureWithoutVersion", secrets: []string{current}, header: with(signed, HeaderWebhookSignature, strings.TrimPrefix(signed.Get(HeaderWebhookSignature), "v1,")), body: body, want: ErrWebhookSignature},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			w, err := NewWebhook(tt.secrets...)
			if err != nil {
				t.Fatal(err)
			}
			err = w.VerifyAt(tt.header, tt.body, now)
			if tt.want == nil && err != nil || tt.want != nil && !errors.Is(err, tt.want) {
				t.Errorf("VerifyAt = %v, want %v", err, tt.want)
			}
		})
	}
}

// TestWebhookVerifyTheSpec signs as the Standard Webhooks specification
// writes it, without the server's signer, and verifies with the real clock.
func TestWebhookVerifyTheSpec(t *testing.T) {
	t.Parallel()
	key := []byte("0123456789abcdef0123456789abcdef")
	secret := "whsec_" + base64.StdEncoding.EncodeToString(key)
	body := []byte(`{"id":"evt_9"}`)
	ts := fmt.Sprint(time.Now().Unix())
	mac := hmac.New(sha256.New, key)
	fmt.Fprintf(mac, "evt_9.%s.%s", ts, body)
	h := http.Header{}
	h.Set("Webhook-Id", "evt_9")
	h.Set("Webhook-Timestamp", ts)
	h.Set("Webhook-Signature", "v1,"+base64.StdEncoding.EncodeToString(mac.Sum(nil)))

	if err := VerifySignature(secret, h, body); err != nil {
		t.Errorf("VerifySignature = %v, want nil", err)
	}
	if err := VerifySignature(secret, h, append(body, ' ')); !errors.Is(err, ErrWebhookSignature) {
		t.Errorf("VerifySignature of a changed body = %v, want ErrWebhookSignature", err)
	}
}

func TestNewWebhook(t *testing.T) {
	t.Parallel()
	good := signing.NewSecret()
	if _, err := NewWebhook(good, good); err != nil {
		t.Errorf("NewWebhook(two secrets) = %v", err)
	}
	for _, tt := range []struct {
		name    string
		secrets []string
	}{
		{"ErrNone", nil},
		{"ErrEmpty", []string{""}},
		{"ErrPrefixOnly", []string{"whsec_"}},
		{"ErrNotBase64", []string{"whsec_not*base64"}},
		{"ErrOneBad", []string{good, good + "*"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := NewWebhook(tt.secrets...)
			if err == nil {
				t.Fatal("NewWebhook accepted it")
			}
			if strings.Contains(err.Error(), strings.TrimPrefix(good, "whsec_")[:8]) {
				t.Errorf("the error shows the secret: %v", err)
			}
		})
	}
	if err := VerifySignature("whsec_*", http.Header{}, nil); err == nil || errors.Is(err, ErrWebhookSignature) {
		t.Errorf("VerifySignature with a bad secret = %v, want the secret's error", err)
	}
}
