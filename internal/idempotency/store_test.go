package idempotency_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/goleak"

	"github.com/example/payments/internal/database"
	"github.com/example/payments/internal/idempotency"
	"github.com/example/payments/tools/testdb"
	"github.com/example/payments/tools/testwait"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// newStore returns a store on a fresh database with one tenant. The store
// decides time with the database's clock: a test makes time pass for a key by
// moving its timestamps back.
func newStore(t *testing.T) *idempotency.Store {
	t.Helper()
	db := testdb.New(t)
	if _, err := db.Pool.Exec(context.Background(), `INSERT INTO tenants (id, name) VALUES ('ten_1', 'One');
		CREATE TABLE things (id text PRIMARY KEY, key_id bigint NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	return &idempotency.Store{
		DB:          db.Pool,
		LockTimeout: time.Minute,
		Retention:   24 * time.Hour,
	}
}

// request is a request under key as the API makes it: its body and the
// body's digest, its fingerprint left for the store to compute if it needs it.
func request(t *testing.T, key, path, body string) idempotency.Request {
	t.Helper()
	return idempotency.Request{TenantID: "ten_1", Key: key, Method: "POST", Path: path, Body: []byte(body),
		Digest: idempotency.Digest("POST", path, []byte(body)), Wait: true}
}

// TestLookupTakesOverStaleLocks: a lock older than the lock timeout is
// stale and taken over, and the old holder's release does not free the new
// holder's lock.
func TestLookupTakesOverStaleLocks(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	req := request(t, "k", "/v1/things", `{"a":1}`)
	lease, err := start(ctx, s, req, "thing_1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.DB.Exec(ctx, `UPDATE idempotency_keys SET locked_at = locked_at - interval '2 minutes'`); err != nil {
		t.Fatal(err)
	}
	stale, err := s.Lookup(ctx, req)
	if err != nil || stale.Created {
		t.Fatalf("stale takeover = %+v, %v", stale, err)
	}
	if err := s.Release(ctx, lease); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Lookup(ctx, req); !errors.Is(err, idempotency.ErrKeyInUse) {
		t.Fatalf("after the old holder released: %v, want ErrKeyInUse", err)
	}
	if err := s.Release(ctx, stale); err != nil {
		t.Fatal(err)
	}
	again, err := s.Lookup(ctx, req)
	if err != nil || again.Created || again.Key.ID != lease.Key.ID {
		t.Fatalf("after release = %+v, %v", again, err)
	}
}

// started reserves a new key, left at started with its lock held.
func started(t *testing.T, s *idempotency.Store) idempotency.Lease {
	t.Helper()
	lease, err := start(context.Background(), s, request(t, "k", "/v1/things", `{}`), "thing_1")
	if err != nil {
		t.Fatal(err)
	}
	return lease
}

func finish(t *testing.T, s *idempotency.Store, keyID int64, from string) idempotency.Key {
	t.Helper()
	key, _, err := s.RunPhase(context.Background(), keyID, from, idempotency.Phase{Commit: func(context.Context, *database.Tx, idempotency.Key) (idempotency.Next, error) {
		return idempotency.Finish(idempotency.Response{Status: 201, Header: map[string]string{"Location": "/v1/things/1"}, Body: []byte(`{"done":true}`)}), nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	return key
}

func TestRunPhase(t *testing.T) {
	t.Parallel()

	t.Run("SkipsPhasesAlreadyPassed", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		ctx := context.Background()
		lease := started(t, s)
		ran := 0
		advance := idempotency.Phase{
			Call: func(context.Context, idempotency.Key) error { ran++; return nil },
			Commit: func(context.Context, *database.Tx, idempotency.Key) (idempotency.Next, error) {
				return idempotency.AdvanceTo("charge_created"), nil
			},
		}
		for range 2 {
			key, _, err := s.RunPhase(ctx, lease.Key.ID, idempotency.RecoveryStarted, advance)
			if err != nil || key.RecoveryPoint != "charge_created" {
				t.Fatalf("RunPhase = %+v, %v", key, err)
			}
		}
		if ran != 1 {
			t.Fatalf("phase ran %d times, want 1", ran)
		}
		if key := finish(t, s, lease.Key.ID, "charge_created"); !key.Finished() || key.ExpiresAt == nil || key.FinishedAt == nil {
			t.Fatalf("finished key = %+v", key)
		}
	})

	t.Run("CallHoldsNoConnection", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		ctx := context.Background()
		lease := started(t, s)
		// With one connection in the pool, a Call that needs the database (as
		// the processor behind it may) deadlocks if the phase holds a transaction.
		cfg := s.DB.Config()
		cfg.MaxConns = 1
		one, err := pgxpool.NewWithConfig(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer one.Close()
		s.DB = one
		_, _, err = s.RunPhase(ctx, lease.Key.ID, idempotency.RecoveryStarted, idempotency.Phase{
			Call: func(ctx context.Context, _ idempotency.Key) error {
				ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				defer cancel()
				_, err := one.Exec(ctx, `SELECT 1`)
				return err
			},
			Commit: func(context.Context, *database.Tx, idempotency.Key) (idempotency.Next, error) {
				return idempotency.AdvanceTo("charge_created"), nil
			},
		})
		if err != nil {
			t.Fatalf("RunPhase: %v", err)
		}
	})

	t.Run("FailedPhaseRollsBack", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		ctx := context.Background()
		lease := started(t, s)
		_, _, err := s.RunPhase(ctx, lease.Key.ID, idempotency.RecoveryStarted, idempotency.Phase{Commit: func(ctx context.Context, tx *database.Tx, _ idempotency.Key) (idempotency.Next, error) {
			if _, err := tx.Exec(ctx, `INSERT INTO tenants (id, name) VALUES ('ten_2', 'Two')`); err != nil {
				return idempotency.Next{}, err
			}
			return idempotency.Next{}, errors.New("recording failed")
		}})
		if err == nil {
			t.Fatal("no error from a failed phase")
		}
		key, _ := s.GetByID(ctx, s.DB, lease.Key.ID)
		var n int
		_ = s.DB.QueryRow(ctx, `SELECT count(*) FROM tenants WHERE id = 'ten_2'`).Scan(&n)
		if key.RecoveryPoint != idempotency.RecoveryStarted || n != 0 {
			t.Fatalf("after a failed phase: point %s, rows %d", key.RecoveryPoint, n)
		}
	})

	t.Run("ConcurrentRunnersCommitOnce", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		ctx := context.Background()
		lease := started(t, s)
		var (
			wg    sync.WaitGroup
			mu    sync.Mutex
			moved int
		)
		for i := range 8 {
			wg.Go(func() {
				_, won, err := s.RunPhase(ctx, lease.Key.ID, idempotency.RecoveryStarted, idempotency.Phase{Commit: func(ctx context.Context, tx *database.Tx, _ idempotency.Key) (idempotency.Next, error) {
					// Each runner's write stands for its recorded side effect.
					_, err := tx.Exec(ctx, `INSERT INTO tenants (id, name) VALUES ($1, 'runner')`, "ten_runner_"+string(rune('a'+i)))
					return idempotency.AdvanceTo("charge_created"), err
				}})
				if err != nil {
					t.Error(err)
				}
				if won {
					mu.Lock()
					moved++
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if moved != 1 {
			t.Fatalf("%d runners were told they moved the key, want 1", moved)
		}
		var n int
		if err := s.DB.QueryRow(ctx, `SELECT count(*) FROM tenants WHERE name = 'runner'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 1 {
			t.Fatalf("%d runners committed, want 1", n)
		}
	})
}

// announced gives s a running Listener and an Announcer with cooldown, and
// polls only every hour, so that a waiter can be woken only by an
// announcement. Both stop when the test ends, with the context returned.
func announced(t *testing.T, s *idempotency.Store, cooldown time.Duration) (context.Context, *idempotency.Listener) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	logger := slog.New(slog.NewTextHandler(t.Output(), nil))
	listener := idempotency.NewListener(s.DB, logger)
	s.Announcer = idempotency.NewAnnouncer(s.DB, cooldown, logger)
	var wg sync.WaitGroup
	wg.Go(func() { listener.Run(ctx) })
	wg.Go(func() { s.Announcer.Run(ctx) })
	t.Cleanup(wg.Wait)
	t.Cleanup(cancel)
	s.Notifications = listener
	s.PollInterval = time.Hour
	return ctx, listener
}

// TestWaitIsWokenByNotify proves that a finish wakes a waiter through
// LISTEN/NOTIFY: polling is set to an hour, so only the notification can.
func TestWaitIsWokenByNotify(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx, listener := announced(t, s, time.Millisecond)

	lease := started(t, s)
	waiting := make(chan idempotency.Key)
	go func() {
		key, err := s.Wait(ctx, lease, time.Minute)
		if err != nil {
			t.Error(err)
		}
		waiting <- key
	}()
	// Finish only once the waiter is subscribed, so it is the notification
	// (or the re-check after LISTEN connects) that must wake it.
	deadline := time.Now().Add(10 * time.Second)
	for listener.Waiting(lease.Key.ID) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("waiter never subscribed")
		}
		time.Sleep(5 * time.Millisecond)
	}
	finish(t, s, lease.Key.ID, idempotency.RecoveryStarted)
	select {
	case key := <-waiting:
		if !key.Finished() {
			t.Fatalf("woken with an unfinished key: %+v", key)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("waiter was not woken by the notification")
	}
}

// TestWaitLooksFirstButForANewKey: a request that created its key a moment
// ago does not read it before waiting; should it finish before the waiter
// subscribes, the poll finds it. A retry reads its key first.
func TestWaitLooksFirstButForANewKey(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	s.PollInterval = time.Hour
	ctx := context.Background()
	lease := started(t, s)
	if !lease.Created {
		t.Fatalf("started = %+v, want a created lease", lease)
	}
	finish(t, s, lease.Key.ID, idempotency.RecoveryStarted)
	retry := lease
	retry.Created = false
	if key, err := s.Wait(ctx, retry, time.Minute); err != nil || !key.Finished() {
		t.Fatalf("a retry's wait = %+v, %v; want the finished key at once", key, err)
	}
	// Without notifications, the new key's first look is the poll's, and
	// with an hour's poll the timeout's.
	start := time.Now()
	if key, err := s.Wait(ctx, lease, 200*time.Millisecond); err != nil || !key.Finished() || time.Since(start) < 200*time.Millisecond {
		t.Fatalf("the creator's wait = %+v, %v after %s; want the finished key at the timeout", key, err, time.Since(start))
	}
	s.PollInterval = 20 * time.Millisecond
	if key, err := s.Wait(ctx, lease, time.Minute); err != nil || !key.Finished() {
		t.Fatalf("the creator's wait with a poll = %+v, %v", key, err)
	}
}

// TestAnnouncerWakesEveryWaiter: keys finished together are announced in
// one notification or few, and every waiter is woken by it.
func TestAnnouncerWakesEveryWaiter(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	// A long cooldown: after the first send, the rest must share one.
	ctx, listener := announced(t, s, 200*time.Millisecond)

	const n = 20
	woken := make(chan idempotency.Key, n)
	var ids []int64
	for i := range n {
		lease, err := start(ctx, s, request(t, fmt.Sprintf("k%d", i), "/v1/things", `{}`), fmt.Sprintf("thing_%d", i))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, lease.Key.ID)
		go func() {
			key, err := s.Wait(ctx, lease, time.Minute)
			if err != nil {
				t.Error(err)
			}
			woken <- key
		}()
	}
	for _, id := range ids {
		testwait.Within(t, 10*time.Second, "the waiter to subscribe", func() bool { return listener.Waiting(id) > 0 })
	}
	for _, id := range ids {
		finish(t, s, id, idempotency.RecoveryStarted)
	}
	for range n {
		select {
		case key := <-woken:
			if !key.Finished() {
				t.Fatalf("woken with an unfinished key: %+v", key)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("a waiter was not woken by the announcement")
		}
	}
}
