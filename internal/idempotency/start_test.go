package idempotency_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/example/payments/internal/idempotency"
)

// thingStatement is an operation's first phase as one statement: it inserts
// a thing for the new key, and fails (after the key's insert) when the
// thing's id is taken.
func thingStatement(t *testing.T, s *idempotency.Store, id string) idempotency.Statement {
	t.Helper()
	if _, err := s.DB.Exec(context.Background(), `CREATE TABLE IF NOT EXISTS things (id text PRIMARY KEY, key_id bigint NOT NULL, note text NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	return idempotency.Statement{
		Resource: idempotency.Resource{Type: "thing", ID: id},
		CTEs:     `, thing AS (INSERT INTO things (id, key_id, note) SELECT resource_id, id, $10::text FROM new_key)`,
		Args:     []any{"made by " + id},
	}
}

func TestStart(t *testing.T) {
	t.Parallel()

	t.Run("NewKeyAndItsRowsInOneStatement", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		ctx := context.Background()
		req := request(t, "k", "/v1/things", `{"a":1}`)
		lease, err := s.Start(ctx, req, thingStatement(t, s, "thing_1"))
		if err != nil || !lease.Created || lease.Key.Resource.ID != "thing_1" || lease.Key.LockedAt == nil {
			t.Fatalf("Start = %+v, %v", lease, err)
		}
		var keyID int64
		var note string
		if err := s.DB.QueryRow(ctx, `SELECT key_id, note FROM things WHERE id = 'thing_1'`).Scan(&keyID, &note); err != nil || keyID != lease.Key.ID || note != "made by thing_1" {
			t.Fatalf("thing = %d %q, %v", keyID, note, err)
		}

		// A retry runs nothing: held, in use; another body, a mismatch.
		if _, err := s.Start(ctx, req, thingStatement(t, s, "thing_2")); !errors.Is(err, idempotency.ErrKeyInUse) {
			t.Fatalf("while held: %v, want ErrKeyInUse", err)
		}
		if _, err := s.Start(ctx, request(t, "k", "/v1/things", `{"a":2}`), thingStatement(t, s, "thing_3")); !errors.Is(err, idempotency.ErrKeyMismatch) {
			t.Fatalf("other body: %v, want ErrKeyMismatch", err)
		}
		finish(t, s, lease.Key.ID, idempotency.RecoveryStarted)
		replay, err := s.Start(ctx, req, thingStatement(t, s, "thing_4"))
		if err != nil || replay.Created || !replay.Key.Finished() || string(replay.Key.Response.Body) != `{"done":true}` {
			t.Fatalf("replay = %+v, %v", replay, err)
		}
		// Finishing cleared the lock.
		if replay.Key.LockedAt != nil {
			t.Fatalf("finished key still locked at %v", replay.Key.LockedAt)
		}
		var things int
		if err := s.DB.QueryRow(ctx, `SELECT count(*) FROM things`).Scan(&things); err != nil || things != 1 {
			t.Fatalf("things = %d, %v; want only the first", things, err)
		}
	})

	t.Run("FailedStatementLeavesNoKey", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		ctx := context.Background()
		if _, err := s.Start(ctx, request(t, "a", "/v1/things", `{}`), thingStatement(t, s, "thing_1")); err != nil {
			t.Fatal(err)
		}
		// The key's insert succeeds, the thing's fails: neither stays.
		if _, err := s.Start(ctx, request(t, "b", "/v1/things", `{}`), thingStatement(t, s, "thing_1")); err == nil {
			t.Fatal("a duplicate thing was accepted")
		}
		if _, err := s.Get(ctx, "ten_1", "b"); !errors.Is(err, idempotency.ErrNotFound) {
			t.Fatalf("key after a failed statement: %v", err)
		}
	})

	t.Run("NoLockWithoutWaiting", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		ctx := context.Background()
		req := request(t, "k", "/v1/things", `{}`)
		req.Wait = false
		lease, err := s.Start(ctx, req, thingStatement(t, s, "thing_1"))
		if err != nil || !lease.Created || lease.Key.LockedAt != nil {
			t.Fatalf("Start without waiting = %+v, %v", lease, err)
		}
		// Nothing holds the key: a retry that does not wait gets it as it
		// stands, one that waits takes its lock, and then one is refused.
		again, err := s.Start(ctx, req, thingStatement(t, s, "thing_2"))
		if err != nil || again.Created || again.Key.ID != lease.Key.ID || again.Key.LockedAt != nil {
			t.Fatalf("retry without waiting = %+v, %v", again, err)
		}
		req.Wait = true
		waiting, err := s.Start(ctx, req, thingStatement(t, s, "thing_3"))
		if err != nil || waiting.Created || waiting.Key.LockedAt == nil {
			t.Fatalf("retry that waits = %+v, %v", waiting, err)
		}
		req.Wait = false
		if _, err := s.Start(ctx, req, thingStatement(t, s, "thing_4")); !errors.Is(err, idempotency.ErrKeyInUse) {
			t.Fatalf("while a waiting retry holds it: %v, want ErrKeyInUse", err)
		}
	})

	// Concurrent first requests under one key: the unique index decides, one
	// creates the key and its thing, and every other is refused or, not
	// waiting, told the key as it stands.
	t.Run("ConcurrentDuplicates", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		ctx := context.Background()
		thingStatement(t, s, "") // creates the table before the race
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
					lease, err := s.Start(ctx, req, thingStatement(t, s, fmt.Sprintf("thing_%d_%d", round, i)))
					mu.Lock()
					defer mu.Unlock()
					switch {
					case errors.Is(err, idempotency.ErrKeyInUse):
						inUse++
					case err != nil:
						t.Errorf("Start: %v", err)
					case lease.Created:
						created++
					default:
						others++
					}
				})
			}
			wg.Wait()
			var things int
			if err := s.DB.QueryRow(ctx, `SELECT count(*) FROM things t JOIN idempotency_keys k ON k.id = t.key_id WHERE k.key = $1`, key).Scan(&things); err != nil {
				t.Fatal(err)
			}
			if created != 1 || things != 1 || created+inUse+others != 8 {
				t.Fatalf("round %d: created %d, in use %d, others %d, things %d", round, created, inUse, others, things)
			}
		}
	})
}

func TestAcquireWithoutWaitingTakesNoLock(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	req := request(t, "k", "/v1/things", `{}`)
	req.Wait = false
	lease, err := s.Acquire(ctx, req, noop)
	if err != nil || !lease.Created || lease.Key.LockedAt != nil {
		t.Fatalf("Acquire without waiting = %+v, %v", lease, err)
	}
	req.Wait = true
	if again, err := s.Acquire(ctx, req, noop); err != nil || again.Created || again.Key.LockedAt == nil {
		t.Fatalf("a retry that waits = %+v, %v", again, err)
	}
}
