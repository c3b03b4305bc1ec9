package idempotency_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/goleak"

	"github.com/example/payments/internal/database"
	"github.com/example/payments/internal/idempotency"
	"github.com/example/payments/tools/testdb"
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

// storeCase is a subtest run on a store of its own (newStore).
type storeCase struct {
	name string
	test func(t *testing.T, s *idempotency.Store)
}

// runStoreCases runs each case as a parallel subtest of t, on a store of its
// own.
func runStoreCases(t *testing.T, cases ...storeCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.test(t, newStore(t))
		})
	}
}

// exec runs sql on s's database.
func exec(t *testing.T, s *idempotency.Store, sql string) {
	t.Helper()
	if _, err := s.DB.Exec(context.Background(), sql); err != nil {
		t.Fatal(err)
	}
}

// count runs sql, which counts, on s's database.
func count(t *testing.T, s *idempotency.Store, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := s.DB.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
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
	exec(t, s, `UPDATE idempotency_keys SET locked_at = locked_at - interval '2 minutes'`)
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

// advanceTo is a phase's Commit that writes nothing and leaves the key at
// point.
func advanceTo(point string) func(context.Context, *database.Tx, idempotency.Key) (idempotency.Next, error) {
	return func(context.Context, *database.Tx, idempotency.Key) (idempotency.Next, error) {
		return idempotency.AdvanceTo(point), nil
	}
}

func TestRunPhase(t *testing.T) {
	t.Parallel()
	runStoreCases(t,
		storeCase{"SkipsPhasesAlreadyPassed", runPhaseSkipsPhasesAlreadyPassed},
		storeCase{"CallHoldsNoConnection", runPhaseCallHoldsNoConnection},
		storeCase{"FailedPhaseRollsBack", runPhaseFailedPhaseRollsBack},
		storeCase{"ConcurrentRunnersCommitOnce", runPhaseConcurrentRunnersCommitOnce},
	)
}

func runPhaseSkipsPhasesAlreadyPassed(t *testing.T, s *idempotency.Store) {
	ctx := context.Background()
	lease := started(t, s)
	ran := 0
	advance := idempotency.Phase{
		Call:   func(context.Context, idempotency.Key) error { ran++; return nil },
		Commit: advanceTo("charge_created"),
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
}

func runPhaseCallHoldsNoConnection(t *testing.T, s *idempotency.Store) {
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
		Commit: advanceTo("charge_created"),
	})
	if err != nil {
		t.Fatalf("RunPhase: %v", err)
	}
}

func runPhaseFailedPhaseRollsBack(t *testing.T, s *idempotency.Store) {
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
	if n := count(t, s, `SELECT count(*) FROM tenants WHERE id = 'ten_2'`); key.RecoveryPoint != idempotency.RecoveryStarted || n != 0 {
		t.Fatalf("after a failed phase: point %s, rows %d", key.RecoveryPoint, n)
	}
}

func runPhaseConcurrentRunnersCommitOnce(t *testing.T, s *idempotency.Store) {
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
	if n := count(t, s, `SELECT count(*) FROM tenants WHERE name = 'runner'`); n != 1 {
		t.Fatalf("%d runners committed, want 1", n)
	}
}
