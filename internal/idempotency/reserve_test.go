package idempotency_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/example/payments/internal/database"
	"github.com/example/payments/internal/idempotency"
)

// insertThing writes a thing after its key, only with a key reserved for it.
const insertThing = `INSERT INTO things (id, key_id)
SELECT $1, id FROM idempotency_keys WHERE tenant_id = $2 AND key = $3 AND resource_id = $1`

// start runs the first phase of an operation that makes things, in the one
// shape every operation's first phase has: Lookup answers a key that exists,
// by one read; a new key is reserved in a transaction, in one batch with the
// operation's thing, and commits. A thing whose id is taken fails the phase
// after the key's insert.
func start(ctx context.Context, s *idempotency.Store, req idempotency.Request, thing string) (idempotency.Lease, error) {
	lease, err := s.Lookup(ctx, req)
	if !errors.Is(err, idempotency.ErrNotFound) {
		return lease, err
	}
	return reserve(ctx, s, req, idempotency.ResourceRef{Type: "thing", ID: thing}, nil)
}

// reserve is start's transaction, once Lookup found no key: the key, the
// thing it names, if any, and the COMMIT in one batch.
func reserve(ctx context.Context, s *idempotency.Store, req idempotency.Request, res idempotency.ResourceRef, final *idempotency.Response) (idempotency.Lease, error) {
	tx, err := database.Begin(ctx, s.DB)
	if err != nil {
		return idempotency.Lease{}, err
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	batch := &pgx.Batch{}
	key, err := s.Reserve(batch, req, res, final)
	if err != nil {
		return idempotency.Lease{}, err
	}
	if res.ID != "" {
		batch.Queue(insertThing, res.ID, req.TenantID, req.Key)
	}
	if err := tx.CommitWith(ctx, batch); err != nil {
		_ = tx.Rollback(ctx)
		return key.Lease(ctx, err)
	}
	return key.Lease(ctx, nil)
}

func TestReserve(t *testing.T) {
	t.Parallel()
	runStoreCases(t,
		storeCase{"NewKeyAndItsRowsInOneTransaction", reserveNewKeyAndItsRowsInOneTransaction},
		storeCase{"FailedPhaseLeavesNoKey", reserveFailedPhaseLeavesNoKey},
		storeCase{"Final", reserveFinal},
		storeCase{"NoLockWithoutWaiting", reserveNoLockWithoutWaiting},
		storeCase{"ConcurrentDuplicates", reserveConcurrentDuplicates},
	)
}

// reserveNewKeyAndItsRowsInOneTransaction: a new key and its thing commit
// together; a retry runs nothing, and a finished key replays.
func reserveNewKeyAndItsRowsInOneTransaction(t *testing.T, s *idempotency.Store) {
	ctx := context.Background()
	req := request(t, "k", "/v1/things", `{"a":1}`)
	lease, err := start(ctx, s, req, "thing_1")
	if err != nil || !lease.Created || lease.Key.Resource.ID != "thing_1" || lease.Key.LockedAt == nil ||
		lease.Key.RecoveryPoint != idempotency.RecoveryStarted {
		t.Fatalf("start = %+v, %v", lease, err)
	}
	var keyID int64
	if err := s.DB.QueryRow(ctx, `SELECT key_id FROM things WHERE id = 'thing_1'`).Scan(&keyID); err != nil || keyID != lease.Key.ID {
		t.Fatalf("thing's key = %d, %v", keyID, err)
	}

	// A retry runs nothing: held, in use; another body, a mismatch.
	if _, err := start(ctx, s, req, "thing_2"); !errors.Is(err, idempotency.ErrKeyInUse) {
		t.Fatalf("while held: %v, want ErrKeyInUse", err)
	}
	if _, err := start(ctx, s, request(t, "k", "/v1/things", `{"a":2}`), "thing_3"); !errors.Is(err, idempotency.ErrKeyMismatch) {
		t.Fatalf("other body: %v, want ErrKeyMismatch", err)
	}
	if _, err := start(ctx, s, request(t, "k", "/v1/other", `{"a":1}`), "thing_3"); !errors.Is(err, idempotency.ErrKeyMismatch) {
		t.Fatalf("other path: %v, want ErrKeyMismatch", err)
	}
	finish(t, s, lease.Key.ID, idempotency.RecoveryStarted)
	replay, err := start(ctx, s, req, "thing_4")
	if err != nil || replay.Created || !replay.Key.Finished() || string(replay.Key.Response.Body) != `{"done":true}` ||
		replay.Key.Response.Header["Location"] != "/v1/things/1" {
		t.Fatalf("replay = %+v, %v", replay, err)
	}
	// Finishing cleared the lock.
	if replay.Key.LockedAt != nil {
		t.Fatalf("finished key still locked at %v", replay.Key.LockedAt)
	}
	if things := count(t, s, `SELECT count(*) FROM things`); things != 1 {
		t.Fatalf("things = %d; want only the first", things)
	}
}

// reserveFailedPhaseLeavesNoKey: a first phase that fails after the key's
// insert leaves no key.
func reserveFailedPhaseLeavesNoKey(t *testing.T, s *idempotency.Store) {
	ctx := context.Background()
	if _, err := start(ctx, s, request(t, "a", "/v1/things", `{}`), "thing_1"); err != nil {
		t.Fatal(err)
	}
	// The key's insert succeeds, the thing's fails: neither stays.
	if _, err := start(ctx, s, request(t, "b", "/v1/things", `{}`), "thing_1"); err == nil {
		t.Fatal("a duplicate thing was accepted")
	}
	if _, err := s.Get(ctx, "ten_1", "b"); !errors.Is(err, idempotency.ErrNotFound) {
		t.Fatalf("key after a failed phase: %v", err)
	}
}

// reserveFinal: a first phase that decides the final answer (a refusal)
// reserves the key finished with it, unlocked, even for a request that
// waits.
func reserveFinal(t *testing.T, s *idempotency.Store) {
	ctx := context.Background()
	req := request(t, "k", "/v1/things", `{}`)
	refused := idempotency.Response{Status: 409, Header: map[string]string{"Content-Type": "application/problem+json"}, Body: []byte(`{"no":1}`)}
	lease, err := reserve(ctx, s, req, idempotency.ResourceRef{}, &refused)
	if err != nil || !lease.Created || !lease.Key.Finished() || lease.Key.LockedAt != nil || lease.Key.Response.Status != 409 {
		t.Fatalf("reserve finished = %+v, %v", lease, err)
	}
	stored, err := s.Get(ctx, req.TenantID, req.Key)
	if err != nil || !stored.Finished() || stored.FinishedAt == nil || stored.ExpiresAt == nil || !stored.ExpiresAt.After(*stored.FinishedAt) ||
		stored.LockedAt != nil || stored.Response.Header["Content-Type"] != "application/problem+json" {
		t.Fatalf("stored = %+v, %v", stored, err)
	}
	// Nothing to release; a retry replays the refusal.
	if err := s.Release(ctx, lease); err != nil {
		t.Fatal(err)
	}
	replay, err := s.Lookup(ctx, req)
	if err != nil || !replay.Key.Finished() || replay.Key.Response.Status != 409 || replay.Key.Resource != (idempotency.ResourceRef{}) {
		t.Fatalf("replay = %+v, %v", replay, err)
	}
}

// reserveNoLockWithoutWaiting: a request that does not wait reserves its
// key unlocked.
func reserveNoLockWithoutWaiting(t *testing.T, s *idempotency.Store) {
	ctx := context.Background()
	req := request(t, "k", "/v1/things", `{}`)
	req.Wait = false
	lease, err := start(ctx, s, req, "thing_1")
	if err != nil || !lease.Created || lease.Key.LockedAt != nil {
		t.Fatalf("start without waiting = %+v, %v", lease, err)
	}
	// Nothing holds the key: a retry that does not wait gets it as it
	// stands, one that waits takes its lock, and then one is refused.
	again, err := start(ctx, s, req, "thing_2")
	if err != nil || again.Created || again.Key.ID != lease.Key.ID || again.Key.LockedAt != nil {
		t.Fatalf("retry without waiting = %+v, %v", again, err)
	}
	req.Wait = true
	waiting, err := start(ctx, s, req, "thing_3")
	if err != nil || waiting.Created || waiting.Key.LockedAt == nil {
		t.Fatalf("retry that waits = %+v, %v", waiting, err)
	}
	req.Wait = false
	if _, err := start(ctx, s, req, "thing_4"); !errors.Is(err, idempotency.ErrKeyInUse) {
		t.Fatalf("while a waiting retry holds it: %v, want ErrKeyInUse", err)
	}
}

// reserveConcurrentDuplicates: concurrent first requests under one key,
// each past its Lookup before any commits: the unique index decides, one
// creates the key and its thing, and every other is refused or, not
// waiting, told the key as it stands.
func reserveConcurrentDuplicates(t *testing.T, s *idempotency.Store) {
	ctx := context.Background()
	for round := range 20 {
		key := fmt.Sprintf("k%d", round)
		var (
			wg                     sync.WaitGroup
			mu                     sync.Mutex
			created, inUse, others int
		)
		for i := range 8 {
			wg.Go(func() {
				req := request(t, key, "/v1/things", `{}`)
				req.Wait = i%2 == 0
				lease, err := start(ctx, s, req, fmt.Sprintf("thing_%d_%d", round, i))
				mu.Lock()
				defer mu.Unlock()
				switch {
				case errors.Is(err, idempotency.ErrKeyInUse):
					inUse++
				case err != nil:
					t.Errorf("start: %v", err)
				case lease.Created:
					created++
				default:
					others++
				}
			})
		}
		wg.Wait()
		things := count(t, s, `SELECT count(*) FROM things t JOIN idempotency_keys k ON k.id = t.key_id WHERE k.key = $1`, key)
		if created != 1 || things != 1 || created+inUse+others != 8 {
			t.Fatalf("round %d: created %d, in use %d, others %d, things %d", round, created, inUse, others, things)
		}
	}
}

// TestReserveRacesTheLookup: a key committed by another request between a
// request's Lookup and its Reserve is answered as it stands, and the losing
// transaction writes nothing.
func TestReserveRacesTheLookup(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	req := request(t, "k", "/v1/things", `{}`)
	if _, err := s.Lookup(ctx, req); !errors.Is(err, idempotency.ErrNotFound) {
		t.Fatalf("Lookup of a new key: %v", err)
	}
	first, err := start(ctx, s, req, "thing_1")
	if err != nil || !first.Created {
		t.Fatalf("first = %+v, %v", first, err)
	}
	finish(t, s, first.Key.ID, idempotency.RecoveryStarted)

	for _, tc := range []struct {
		name string
		req  idempotency.Request
		want error
	}{{"Same", req, nil}, {"OtherBody", request(t, "k", "/v1/things", `{"x":1}`), idempotency.ErrKeyMismatch}} {
		lease, err := reserve(ctx, s, tc.req, idempotency.ResourceRef{Type: "thing", ID: "thing_2"}, nil)
		if !errors.Is(err, tc.want) || (tc.want == nil && (lease.Created || !lease.Key.Finished() || lease.Key.ID != first.Key.ID)) {
			t.Fatalf("%s: reserve after another committed = %+v, %v", tc.name, lease, err)
		}
	}
	if things := count(t, s, `SELECT count(*) FROM things`); things != 1 {
		t.Fatalf("things = %d; want only the first", things)
	}
}
