package http_test

import (
	"bytes"
	"net/http"
	"strings"
	"testing"

	"github.com/example/payments/tools/stacktest"
)

// visaReordered is visa with its keys in another order and other spacing:
// the same request by fingerprint, other bytes.
const visaReordered = `{"payment_method":"pm_card_visa","metadata":{"order":"42"},"description":"T-shirt","currency":"USD","amount":1999}`

// TestReplayByDigest: a retry of the very bytes a key was stored with is
// matched by their digest, without its body being canonicalized; any other
// retry by the canonical fingerprint, as before. Each subtest breaks, in the
// database, the match it does not test.
func TestReplayByDigest(t *testing.T) {
	t.Parallel()

	// paid stores a payment under key k, and checks that the key has a digest.
	paid := func(t *testing.T) (*stacktest.Stack, stacktest.Response) {
		t.Helper()
		s := stacktest.New(t, stacktest.Options{})
		s.StartWorker()
		first := created(t, s, acme, "k", visa)
		if n := s.Count(`SELECT count(*) FROM idempotency_keys WHERE key = 'k' AND length(request_digest) = 32`); n != 1 {
			t.Fatalf("%d keys with a digest, want 1", n)
		}
		return s, first
	}
	replayed := func(t *testing.T, res, first stacktest.Response) {
		t.Helper()
		if res.Status != first.Status || !bytes.Equal(res.Body, first.Body) || res.Header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("retry = %d %s, want the replay of %d %s", res.Status, res.Body, first.Status, first.Body)
		}
	}
	mismatch := func(t *testing.T, res stacktest.Response) {
		t.Helper()
		if res.Status != http.StatusUnprocessableEntity || decodeProblem(t, res.Body)["code"] != "idempotency_key_mismatch" {
			t.Fatalf("retry = %d %s, want 422 idempotency_key_mismatch", res.Status, res.Body)
		}
	}

	// With the canonical fingerprint spoiled, only the digest matches: the
	// same bytes replay, the same JSON spelled otherwise is a mismatch.
	t.Run("SameBytesByDigest", func(t *testing.T) {
		t.Parallel()
		s, first := paid(t)
		s.Exec(`UPDATE idempotency_keys SET request_fingerprint = '\x00' WHERE key = 'k'`)
		replayed(t, s.Pay(acme, "k", visa), first)
		mismatch(t, s.Pay(acme, "k", visaReordered))
	})

	// A key with no digest (stored before there were any) is matched by its
	// fingerprint alone: key order and spacing do not matter, a value does.
	t.Run("NoDigest", func(t *testing.T) {
		t.Parallel()
		s, first := paid(t)
		s.Exec(`UPDATE idempotency_keys SET request_digest = NULL WHERE key = 'k'`)
		replayed(t, s.Pay(acme, "k", visaReordered), first)
		replayed(t, s.Pay(acme, "k", visa), first)
		mismatch(t, s.Pay(acme, "k", strings.Replace(visa, "1999", "2000", 1)))
	})

	// A body that is not JSON, under a finished key, is a 400 as it always
	// was, digest or none: malformed (refused by decoding) or with a name
	// twice (decoded, refused by canonicalization).
	t.Run("NotJSON", func(t *testing.T) {
		t.Parallel()
		s, _ := paid(t)
		for _, digest := range []bool{true, false} {
			if !digest {
				s.Exec(`UPDATE idempotency_keys SET request_digest = NULL WHERE key = 'k'`)
			}
			for body, detail := range map[string]string{
				`{"amount": `: "The request body must be a JSON object.",
				strings.Replace(visa, `"amount": 1999`, `"amount": 1999, "amount": 1999`, 1): "The request body is not valid JSON.",
			} {
				res := s.Pay(acme, "k", body)
				if p := decodeProblem(t, res.Body); res.Status != http.StatusBadRequest || p["code"] != "invalid_request" || p["detail"] != detail {
					t.Fatalf("digest %v, %s: %d %s, want 400 invalid_request: %s", digest, body, res.Status, res.Body, detail)
				}
			}
		}
		if n := s.Count(`SELECT count(*) FROM payments`); n != 1 {
			t.Fatalf("payments = %d, want 1", n)
		}
	})
}
