package signing

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
)

// TestSignatureIsTheSpecs computes the signature as the Standard Webhooks
// specification writes it, without the library, and finds it in the header.
func TestSignatureIsTheSpecs(t *testing.T) {
	t.Parallel()
	secret := NewSecret()
	s, err := ParseSecrets(secret)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Unix(1_700_000_000, 0)
	body := []byte(`{"id":"evt_1","type":"charge.succeeded"}`)
	h := http.Header{}
	if err := s.Sign(h, "evt_1", at, body); err != nil {
		t.Fatal(err)
	}
	key, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	mac := hmac.New(sha256.New, key)
	fmt.Fprintf(mac, "%s.%d.%s", "evt_1", at.Unix(), body)
	want := "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
	if got := h.Get("webhook-signature"); got != want {
		t.Errorf("webhook-signature = %q, want %q", got, want)
	}
	if h.Get("webhook-id") != "evt_1" || h.Get("webhook-timestamp") != "1700000000" {
		t.Errorf("headers = %v", h)
	}
}

func TestVerify(t *testing.T) {
	t.Parallel()
	old, current := NewSecret(), NewSecret()
	both, err := ParseSecrets(old + "," + current)
	if err != nil {
		t.Fatal(err)
	}
	onlyOld, _ := ParseSecrets(old)
	onlyNew, _ := ParseSecrets(current)
	other, _ := ParseSecrets(NewSecret())

	now := time.Unix(1_700_000_000, 0)
	body := []byte(`{"id":"evt_2"}`)
	signed := func(s Secrets, at time.Time) http.Header {
		h := http.Header{}
		if err := s.Sign(h, "evt_2", at, body); err != nil {
			t.Fatal(err)
		}
		return h
	}
	type verifyCase struct {
		name    string
		secrets Secrets
		header  http.Header
		body    []byte
		want    error
	}
	cases := []verifyCase{
		{"signed with the one secret", onlyNew, signed(onlyNew, now), body, nil},
		{"rotation: both sign, the old verifies", onlyOld, signed(both, now), body, nil},
		{"rotation: both sign, the new verifies", onlyNew, signed(both, now), body, nil},
		{"rotation: the receiver holds both", both, signed(onlyNew, now), body, nil},
		{"at the edge of the tolerance", onlyNew, signed(onlyNew, now.Add(-Tolerance)), body, nil},
		{"another secret", onlyNew, signed(other, now), body, ErrSignature},
		{"no secret at the receiver", Secrets{}, signed(onlyNew, now), body, ErrSignature},
		{"body changed", onlyNew, signed(onlyNew, now), []byte(`{"id":"evt_3"}`), ErrSignature},
		{"body truncated", onlyNew, signed(onlyNew, now), body[:len(body)-1], ErrSignature},
		{"too old", onlyNew, signed(onlyNew, now.Add(-Tolerance-time.Second)), body, ErrStale},
		{"too new", onlyNew, signed(onlyNew, now.Add(Tolerance+time.Second)), body, ErrStale},
		{"no headers", onlyNew, http.Header{}, body, ErrSignature},
	}
	tampered := signed(onlyNew, now)
	tampered.Set("webhook-timestamp", fmt.Sprint(now.Unix()+1))
	cases = append(cases, verifyCase{"timestamp changed after signing", onlyNew, tampered, body, ErrSignature})
	renamed := signed(onlyNew, now)
	renamed.Set("webhook-id", "evt_other")
	cases = append(cases, verifyCase{"id changed after signing", onlyNew, renamed, body, ErrSignature})

	for _, c := range cases {
		id, err := c.secrets.Verify(c.body, c.header, now)
		if !errors.Is(err, c.want) && !(err == nil && c.want == nil) {
			t.Errorf("%s: err = %v, want %v", c.name, err, c.want)
		}
		if err == nil && id != "evt_2" {
			t.Errorf("%s: id = %q", c.name, id)
		}
	}
}

func TestParseSecrets(t *testing.T) {
	t.Parallel()
	a, b := NewSecret(), NewSecret()
	for _, s := range []string{a, a + "," + b, a + " " + b, ""} {
		if _, err := ParseSecrets(s); err != nil {
			t.Errorf("ParseSecrets(%q) = %v", s, err)
		}
	}
	short := "whsec_" + base64.StdEncoding.EncodeToString([]byte("too short"))
	for _, s := range []string{strings.TrimPrefix(a, "whsec_"), "whsec_not*base64", short, a + ",nope"} {
		if _, err := ParseSecrets(s); err == nil {
			t.Errorf("ParseSecrets(%q) accepted", s)
		} else if strings.Contains(err.Error(), strings.TrimPrefix(a, "whsec_")) {
			t.Errorf("the error shows the secret: %v", err)
		}
	}
	s, _ := ParseSecrets(a + "," + b)
	if got := fmt.Sprint(s); strings.Contains(got, "whsec_") || got != "(2 secrets)" {
		t.Errorf("printed secrets = %q", got)
	}
}
