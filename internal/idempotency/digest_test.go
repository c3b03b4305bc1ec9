package idempotency_test

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/example/payments/internal/idempotency"
)

// TestLookupByDigest: a retry whose bytes are the stored request's is matched
// by their digest alone, its body never canonicalized; any other retry is
// matched by its canonical fingerprint, as every retry under a key stored
// without a digest is. Each subtest breaks the branch it does not test.
func TestLookupByDigest(t *testing.T) {
	t.Parallel()
	const (
		path      = "/v1/things"
		body      = `{"a":1,"b":[1,2]}`
		reordered = `{ "b": [1, 2], "a": 1 }`
		other     = `{"a":2,"b":[1,2]}`
	)
	ctx := context.Background()
	// stored finishes a key for body, reserved as the API reserves one.
	stored := func(t *testing.T, s *idempotency.Store) idempotency.Key {
		t.Helper()
		lease, err := start(ctx, s, request(t, "k", path, body), "thing_1")
		if err != nil || !lease.Created {
			t.Fatalf("start = %+v, %v", lease, err)
		}
		finish(t, s, lease.Key.ID, idempotency.RecoveryStarted)
		key, err := s.Get(ctx, "ten_1", "k")
		if err != nil {
			t.Fatal(err)
		}
		fp, err := idempotency.Fingerprint("POST", path, []byte(body))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(key.Digest, idempotency.Digest("POST", path, []byte(body))) || !bytes.Equal(key.Fingerprint, fp) {
			t.Fatalf("stored digest %x and fingerprint %x, want those of %s", key.Digest, key.Fingerprint, body)
		}
		return key
	}
	exec := func(t *testing.T, s *idempotency.Store, sql string) {
		t.Helper()
		if _, err := s.DB.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}

	// With the stored fingerprint spoiled, only the digest can match: the
	// same bytes replay, the same JSON spelled otherwise no longer does.
	t.Run("SameBytesByDigest", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		stored(t, s)
		exec(t, s, `UPDATE idempotency_keys SET request_fingerprint = '\x00'`)
		replay, err := s.Lookup(ctx, request(t, "k", path, body))
		if err != nil || !replay.Key.Finished() || replay.Key.Response.Status != 201 {
			t.Fatalf("same bytes = %+v, %v; want the replay", replay, err)
		}
		if _, err := s.Lookup(ctx, request(t, "k", path, reordered)); !errors.Is(err, idempotency.ErrKeyMismatch) {
			t.Fatalf("reordered: %v, want ErrKeyMismatch (the fingerprint decides)", err)
		}
	})

	// A key stored without a digest (before there were any) is matched by
	// its fingerprint alone, as before.
	t.Run("NoDigest", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		stored(t, s)
		exec(t, s, `UPDATE idempotency_keys SET request_digest = NULL`)
		for _, b := range []string{body, reordered} {
			if replay, err := s.Lookup(ctx, request(t, "k", path, b)); err != nil || !replay.Key.Finished() {
				t.Fatalf("%s = %+v, %v; want the replay", b, replay, err)
			}
		}
		if _, err := s.Lookup(ctx, request(t, "k", path, other)); !errors.Is(err, idempotency.ErrKeyMismatch) {
			t.Fatalf("other body: %v, want ErrKeyMismatch", err)
		}
		// A request with no digest of its own is matched by fingerprint too.
		req := request(t, "k", path, reordered)
		req.Digest = nil
		if replay, err := s.Lookup(ctx, req); err != nil || !replay.Key.Finished() {
			t.Fatalf("no digest = %+v, %v; want the replay", replay, err)
		}
	})

	// A body that is not JSON matches no key it was not stored under (it
	// cannot be canonicalized), and reserves no key.
	t.Run("NotJSON", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		stored(t, s)
		for _, b := range []string{`{"a":1,`, `{"a":1,"a":1,"b":[1,2]}`} {
			_, err := s.Lookup(ctx, request(t, "k", path, b))
			if err == nil || errors.Is(err, idempotency.ErrKeyMismatch) || errors.Is(err, idempotency.ErrNotFound) {
				t.Fatalf("%s: %v, want the body's error", b, err)
			}
			batch := &pgx.Batch{}
			if _, err := s.Reserve(batch, request(t, "new", path, b), idempotency.Resource{}, nil); err == nil || batch.Len() != 0 {
				t.Fatalf("reserve %s: %v, %d statements queued; want an error and none", b, err, batch.Len())
			}
		}
	})

	// A tombstone keeps the digest with the fingerprint: the same bytes are
	// told the key expired, another body is still a mismatch.
	t.Run("Tombstone", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		s.TombstoneRetention = 30 * 24 * time.Hour
		key := stored(t, s)
		exec(t, s, `UPDATE idempotency_keys SET expires_at = now() - interval '1 second'`)
		if expired, _, err := s.Reap(ctx, idempotency.ReapPace{Batch: 10}); err != nil || expired != 1 {
			t.Fatalf("reap: %d expired, %v", expired, err)
		}
		tomb, err := s.Get(ctx, "ten_1", "k")
		if err != nil || !tomb.Expired() || !bytes.Equal(tomb.Digest, key.Digest) || !bytes.Equal(tomb.Fingerprint, key.Fingerprint) {
			t.Fatalf("tombstone = %+v, %v; want the key's digest and fingerprint", tomb, err)
		}
		exec(t, s, `UPDATE idempotency_keys SET request_fingerprint = '\x00'`)
		var expired *idempotency.ExpiredError
		if _, err := s.Lookup(ctx, request(t, "k", path, body)); !errors.As(err, &expired) || expired.Resource.ID != "thing_1" {
			t.Fatalf("same bytes: %v, want ExpiredError naming thing_1", err)
		}
		if _, err := s.Lookup(ctx, request(t, "k", path, other)); !errors.Is(err, idempotency.ErrKeyMismatch) {
			t.Fatalf("other body: %v, want ErrKeyMismatch", err)
		}
	})
}
