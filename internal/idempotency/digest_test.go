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

// The requests of TestLookupByDigest: the body of the key's request, the
// same JSON spelled otherwise, and another body, all at digestPath.
const (
	digestPath      = "/v1/things"
	digestBody      = `{"a":1,"b":[1,2]}`
	digestReordered = `{ "b": [1, 2], "a": 1 }`
	digestOther     = `{"a":2,"b":[1,2]}`
)

// TestLookupByDigest: a retry whose bytes are the stored request's is matched
// by their digest alone, its body never canonicalized; any other retry is
// matched by its canonical fingerprint, as every retry under a key stored
// without a digest is. Each subtest breaks the branch it does not test.
func TestLookupByDigest(t *testing.T) {
	t.Parallel()
	runStoreCases(t,
		storeCase{"SameBytesByDigest", lookupSameBytesByDigest},
		storeCase{"NoDigest", lookupWithNoDigest},
		storeCase{"NotJSON", lookupNotJSON},
		storeCase{"Tombstone", lookupTombstoneByDigest},
	)
}

// finishedKey finishes a key for digestBody, reserved as the API reserves
// one.
func finishedKey(t *testing.T, s *idempotency.Store) idempotency.Key {
	t.Helper()
	ctx := context.Background()
	lease, err := start(ctx, s, request(t, "k", digestPath, digestBody), "thing_1")
	if err != nil || !lease.Created {
		t.Fatalf("start = %+v, %v", lease, err)
	}
	finish(t, s, lease.Key.ID, idempotency.RecoveryStarted)
	key, err := s.Get(ctx, "ten_1", "k")
	if err != nil {
		t.Fatal(err)
	}
	fp, err := idempotency.Fingerprint("POST", digestPath, []byte(digestBody))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(key.Digest, idempotency.Digest("POST", digestPath, []byte(digestBody))) || !bytes.Equal(key.Fingerprint, fp) {
		t.Fatalf("stored digest %x and fingerprint %x, want those of %s", key.Digest, key.Fingerprint, digestBody)
	}
	return key
}

// lookupSameBytesByDigest: with the stored fingerprint spoiled, only the
// digest can match: the same bytes replay, the same JSON spelled otherwise
// does not.
func lookupSameBytesByDigest(t *testing.T, s *idempotency.Store) {
	ctx := context.Background()
	finishedKey(t, s)
	exec(t, s, `UPDATE idempotency_keys SET request_fingerprint = '\x00'`)
	replay, err := s.Lookup(ctx, request(t, "k", digestPath, digestBody))
	if err != nil || !replay.Key.Finished() || replay.Key.Response.Status != 201 {
		t.Fatalf("same bytes = %+v, %v; want the replay", replay, err)
	}
	if _, err := s.Lookup(ctx, request(t, "k", digestPath, digestReordered)); !errors.Is(err, idempotency.ErrKeyMismatch) {
		t.Fatalf("reordered: %v, want ErrKeyMismatch (the fingerprint decides)", err)
	}
}

// lookupWithNoDigest: a key stored without a digest is matched by its
// fingerprint alone.
func lookupWithNoDigest(t *testing.T, s *idempotency.Store) {
	ctx := context.Background()
	finishedKey(t, s)
	exec(t, s, `UPDATE idempotency_keys SET request_digest = NULL`)
	for _, b := range []string{digestBody, digestReordered} {
		if replay, err := s.Lookup(ctx, request(t, "k", digestPath, b)); err != nil || !replay.Key.Finished() {
			t.Fatalf("%s = %+v, %v; want the replay", b, replay, err)
		}
	}
	if _, err := s.Lookup(ctx, request(t, "k", digestPath, digestOther)); !errors.Is(err, idempotency.ErrKeyMismatch) {
		t.Fatalf("other body: %v, want ErrKeyMismatch", err)
	}
	// A request with no digest of its own is matched by fingerprint too.
	req := request(t, "k", digestPath, digestReordered)
	req.Digest = nil
	if replay, err := s.Lookup(ctx, req); err != nil || !replay.Key.Finished() {
		t.Fatalf("no digest = %+v, %v; want the replay", replay, err)
	}
}

// lookupNotJSON: a body that is not JSON matches no key it was not stored
// under (it cannot be canonicalized), and reserves no key.
func lookupNotJSON(t *testing.T, s *idempotency.Store) {
	ctx := context.Background()
	finishedKey(t, s)
	for _, b := range []string{`{"a":1,`, `{"a":1,"a":1,"b":[1,2]}`} {
		_, err := s.Lookup(ctx, request(t, "k", digestPath, b))
		if err == nil || errors.Is(err, idempotency.ErrKeyMismatch) || errors.Is(err, idempotency.ErrNotFound) {
			t.Fatalf("%s: %v, want the body's error", b, err)
		}
		batch := &pgx.Batch{}
		if _, err := s.Reserve(batch, request(t, "new", digestPath, b), idempotency.ResourceRef{}, nil); err == nil || batch.Len() != 0 {
			t.Fatalf("reserve %s: %v, %d statements queued; want an error and none", b, err, batch.Len())
		}
	}
}

// lookupTombstoneByDigest: a tombstone keeps the digest with the
// fingerprint: the same bytes are told the key expired, another body is
// still a mismatch.
func lookupTombstoneByDigest(t *testing.T, s *idempotency.Store) {
	ctx := context.Background()
	s.TombstoneRetention = 30 * 24 * time.Hour
	key := finishedKey(t, s)
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
	if _, err := s.Lookup(ctx, request(t, "k", digestPath, digestBody)); !errors.As(err, &expired) || expired.Resource.ID != "thing_1" {
		t.Fatalf("same bytes: %v, want ExpiredError naming thing_1", err)
	}
	if _, err := s.Lookup(ctx, request(t, "k", digestPath, digestOther)); !errors.Is(err, idempotency.ErrKeyMismatch) {
		t.Fatalf("other body: %v, want ErrKeyMismatch", err)
	}
}
