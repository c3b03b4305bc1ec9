package idempotency_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/example/payments/internal/idempotency"
)

// statements records the reaper's statements on the keys: which, how many
// rows, and when.
type statements struct {
	mu   sync.Mutex
	list []statement
	// hold, when set, keeps every statement after the first batch of each
	// stage waiting for its context to end, as a slow database would.
	hold bool
}

type statement struct {
	expire     bool
	rows       int64
	start, end time.Time
}

type startKey struct{}

func (s *statements) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	expire := strings.Contains(data.SQL, "UPDATE idempotency_keys")
	if !expire && !strings.Contains(data.SQL, "DELETE FROM idempotency_keys") {
		return ctx
	}
	if s.holding() {
		<-ctx.Done()
	}
	return context.WithValue(ctx, startKey{}, statement{expire: expire, start: time.Now()})
}

func (s *statements) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryEndData) {
	st, ok := ctx.Value(startKey{}).(statement)
	if !ok || data.Err != nil {
		return
	}
	st.end, st.rows = time.Now(), data.CommandTag.RowsAffected()
	s.mu.Lock()
	s.list = append(s.list, st)
	s.mu.Unlock()
}

func (s *statements) holding() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	var expired, deleted bool
	for _, st := range s.list {
		expired, deleted = expired || st.expire && st.rows > 0, deleted || !st.expire && st.rows > 0
	}
	return s.hold && expired && deleted
}

func (s *statements) setHold(on bool) {
	s.mu.Lock()
	s.hold = on
	s.mu.Unlock()
}

func (s *statements) all() []statement {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.list)
}

// reapStore is newStore's database with expired keys, and a store on a pool
// whose statements are recorded.
func reapStore(t *testing.T, finished, tombstones int) (*idempotency.Store, *statements) {
	t.Helper()
	s := newStore(t)
	ctx := context.Background()
	// Expired finished keys and tombstones, and one of each not yet expired,
	// and an unfinished key (never reaped, whatever its age).
	if _, err := s.DB.Exec(ctx, fmt.Sprintf(`
INSERT INTO idempotency_keys (tenant_id, key, request_method, request_path, request_fingerprint, recovery_point,
	response_status, response_headers, response_body, created_at, updated_at, finished_at, expires_at)
SELECT 'ten_1', 'done-' || i, 'POST', '/v1/things', '\x00', 'finished', 201, '{}', '{}', now() - interval '2 days',
	now() - interval '2 days', now() - interval '2 days', now() - interval '1 day' + (i || ' ms')::interval
FROM generate_series(1, %d) i;
INSERT INTO idempotency_keys (tenant_id, key, request_method, request_path, request_fingerprint, recovery_point,
	created_at, updated_at, finished_at, expires_at)
SELECT 'ten_1', 'gone-' || i, 'POST', '/v1/things', '\x00', 'expired', now() - interval '40 days',
	now() - interval '39 days', now() - interval '40 days', now() - interval '1 day' + (i || ' ms')::interval
FROM generate_series(1, %d) i;
INSERT INTO idempotency_keys (tenant_id, key, request_method, request_path, request_fingerprint, recovery_point,
	response_status, response_headers, response_body, created_at, updated_at, finished_at, expires_at)
VALUES ('ten_1', 'fresh', 'POST', '/v1/things', '\x00', 'finished', 201, '{}', '{}', now(), now(), now(), now() + interval '1 day');
INSERT INTO idempotency_keys (tenant_id, key, request_method, request_path, request_fingerprint, recovery_point,
	created_at, updated_at, finished_at, expires_at)
VALUES ('ten_1', 'young-tombstone', 'POST', '/v1/things', '\x00', 'expired', now(), now(), now(), now() + interval '1 day');
INSERT INTO idempotency_keys (tenant_id, key, request_method, request_path, request_fingerprint, recovery_point,
	created_at, updated_at)
VALUES ('ten_1', 'unfinished', 'POST', '/v1/things', '\x00', 'started', now() - interval '60 days', now() - interval '60 days')`,
		finished, tombstones)); err != nil {
		t.Fatal(err)
	}
	cfg := s.DB.Config()
	rec := &statements{}
	cfg.ConnConfig.Tracer = rec
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return &idempotency.Store{DB: pool, Retention: 24 * time.Hour, TombstoneRetention: 30 * 24 * time.Hour}, rec
}

func points(t *testing.T, s *idempotency.Store) map[string]int {
	t.Helper()
	rows, err := s.DB.Query(context.Background(), `
SELECT split_part(key, '-', 1) || ':' || recovery_point || CASE WHEN expires_at < now() THEN ':due' ELSE '' END, count(*)
FROM idempotency_keys GROUP BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (struct {
		k string
		n int
	}, error) {
		var r struct {
			k string
			n int
		}
		return r, row.Scan(&r.k, &r.n)
	})
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]int{}
	for _, r := range got {
		m[r.k] = r.n
	}
	return m
}

// TestReap reaps what Reap reaps, in batches of at most Batch, the two
// stages in turn, and rests after each batch at least Pause times its time.
func TestReap(t *testing.T) {
	t.Parallel()
	s, rec := reapStore(t, 7, 3)
	expired, deleted, err := s.Reap(context.Background(), idempotency.ReapPace{Batch: 2, Pause: 1})
	if err != nil || expired != 7 || deleted != 3 {
		t.Fatalf("reaped %d, %d, %v; want 7, 3", expired, deleted, err)
	}
	want := map[string]int{
		"done:expired":   7, // tombstones now, due in a month
		"fresh:finished": 1, "young:expired": 1, "unfinished:started": 1,
	}
	got := points(t, s)
	for k, n := range want {
		if got[k] != n {
			t.Errorf("%s: %d, want %d (all: %v)", k, got[k], n, got)
		}
	}
	if len(got) != len(want) {
		t.Errorf("keys %v, want %v", got, want)
	}
	// In turn: expire, delete, expire, delete (the last that finds fewer
	// than 2), then the expiries alone.
	var order strings.Builder
	list := rec.all()
	for i, st := range list {
		if st.rows > 2 {
			t.Errorf("a batch of %d rows", st.rows)
		}
		if st.expire {
			order.WriteString("e")
		} else {
			order.WriteString("d")
		}
		if i > 0 {
			prev := list[i-1]
			if rest, took := st.start.Sub(prev.end), prev.end.Sub(prev.start); rest < took {
				t.Errorf("rested %s after a batch of %s, want at least as long", rest, took)
			}
		}
	}
	if order.String() != "ededee" {
		t.Errorf("statements %q, want ededee", order.String())
	}

	// Nothing left: one statement of each, nothing reaped.
	if expired, deleted, err := s.Reap(context.Background(), idempotency.ReapPace{Batch: 2}); err != nil || expired+deleted != 0 {
		t.Fatalf("again: %d, %d, %v", expired, deleted, err)
	}
}

// TestReapStopsAtItsDeadline: a run that cannot finish before its
// context's deadline stops at it without error, what it counts committed
// (a batch the deadline cut off rolled back whole), and the next run reaps
// the rest. The database is held after a batch of each stage, so the
// deadline falls mid-run however fast or slow the machine.
func TestReapStopsAtItsDeadline(t *testing.T) {
	t.Parallel()
	const keys = 1000
	s, rec := reapStore(t, keys, keys)
	rec.setHold(true)
	// Long enough for one batch of each stage on a slow, busy machine; the
	// run waits it out, held.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	expired, deleted, err := s.Reap(ctx, idempotency.ReapPace{Batch: 1})
	rec.setHold(false)
	if err != nil {
		t.Fatalf("stopped with %v", err)
	}
	if expired == 0 || deleted == 0 || expired+deleted == 2*keys {
		t.Fatalf("first run reaped %d, %d: want some of each, not all", expired, deleted)
	}
	got := points(t, s)
	if got["done:finished:due"] != keys-expired || got["gone:expired:due"] != keys-deleted {
		t.Fatalf("after the first run: %v", got)
	}
	more, fewer, err := s.Reap(context.Background(), idempotency.ReapPace{Batch: 100})
	if err != nil || expired+more != keys || deleted+fewer != keys {
		t.Fatalf("second run reaped %d, %d, %v", more, fewer, err)
	}
}

// TestReapStopsWhenItsDeadlineCutsABatchOff: a batch still running at the
// deadline (here, blocked by a table lock) is cancelled and rolls back whole;
// the run ends without error, the batch uncounted, and the next run reaps
// everything.
func TestReapStopsWhenItsDeadlineCutsABatchOff(t *testing.T) {
	t.Parallel()
	const keys = 10
	s, _ := reapStore(t, keys, keys)
	lock, err := s.DB.Begin(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lock.Rollback(context.Background()) })
	if _, err := lock.Exec(context.Background(), `LOCK TABLE idempotency_keys IN EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	expired, deleted, err := s.Reap(ctx, idempotency.ReapPace{Batch: 100})
	if err != nil || expired+deleted != 0 {
		t.Fatalf("cut off: reaped %d, %d, %v; want nothing and no error", expired, deleted, err)
	}
	if err := lock.Rollback(context.Background()); err != nil {
		t.Fatal(err)
	}
	expired, deleted, err = s.Reap(context.Background(), idempotency.ReapPace{Batch: 100})
	if err != nil || expired != keys || deleted != keys {
		t.Fatalf("next run reaped %d, %d, %v; want %d of each", expired, deleted, err, keys)
	}
}

// TestReapRefuses a store without a tombstone retention and a batch or
// a pause out of range.
func TestReapRefuses(t *testing.T) {
	t.Parallel()
	s, rec := reapStore(t, 1, 1)
	noTombstones := *s
	noTombstones.TombstoneRetention = 0
	for _, c := range []struct {
		s *idempotency.Store
		p idempotency.ReapPace
	}{{&noTombstones, idempotency.ReapPace{Batch: 1}}, {s, idempotency.ReapPace{}}, {s, idempotency.ReapPace{Batch: 1, Pause: -1}}} {
		if _, _, err := c.s.Reap(context.Background(), c.p); err == nil {
			t.Errorf("%+v: no error", c.p)
		}
	}
	if n := len(rec.all()); n != 0 {
		t.Errorf("%d statements run", n)
	}
	// Cancelled while it rests: the batch before is committed, and it says
	// why it stopped.
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(200*time.Millisecond, cancel)
	expired, _, err := s.Reap(ctx, idempotency.ReapPace{Batch: 1, Pause: 1000})
	if !errors.Is(err, context.Canceled) || expired != 1 {
		t.Errorf("cancelled while resting: %d expired, %v", expired, err)
	}
}

// TestReapSizesBatchesToTarget: with a Target, a stage starts at a
// tenth of Batch and sizes each next batch from the last one's time per
// key, from that tenth to Batch.
func TestReapSizesBatchesToTarget(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		target time.Duration
		want   []int64
	}{
		{time.Nanosecond, []int64{4, 4, 3}}, // no batch is that quick: a tenth of Batch
		{time.Hour, []int64{4, 40, 16}},     // every batch is quicker: up to Batch
		{0, []int64{40, 40, 20}},            // no target: Batch every time
	} {
		want := 0
		for _, n := range c.want {
			want += int(n)
		}
		s, rec := reapStore(t, want, 0)
		expired, _, err := s.Reap(context.Background(), idempotency.ReapPace{Batch: 40, Target: c.target})
		if err != nil || expired != want {
			t.Fatalf("target %s: expired %d, %v; want %d", c.target, expired, err, want)
		}
		var got []int64
		for _, st := range rec.all() {
			if st.expire {
				got = append(got, st.rows)
			}
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("target %s: batches %v, want %v", c.target, got, c.want)
		}
	}
}

// TestReapLeavesLockedKeysToTheNextRun: a key locked by another
// transaction is skipped, and the batches after it go on from where the
// last one ended; the next run, from the start, reaps it.
func TestReapLeavesLockedKeysToTheNextRun(t *testing.T) {
	t.Parallel()
	s, rec := reapStore(t, 9, 0)
	ctx := context.Background()
	tx, err := s.DB.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SELECT 1 FROM idempotency_keys WHERE key = 'done-3' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	expired, _, err := s.Reap(ctx, idempotency.ReapPace{Batch: 2})
	if err != nil || expired != 8 {
		t.Fatalf("with done-3 locked: expired %d, %v; want 8", expired, err)
	}
	if got := points(t, s); got["done:finished:due"] != 1 {
		t.Fatalf("after the first run: %v", got)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if expired, _, err := s.Reap(ctx, idempotency.ReapPace{Batch: 2}); err != nil || expired != 1 {
		t.Fatalf("the next run: expired %d, %v; want 1", expired, err)
	}
	for _, st := range rec.all() {
		if st.rows > 2 {
			t.Errorf("a batch of %d", st.rows)
		}
	}
}
