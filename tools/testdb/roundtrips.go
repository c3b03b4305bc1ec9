package testdb

import (
	"context"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// RoundTrip is what one exchange with the server carried: a statement, or a
// batch of statements.
type RoundTrip struct {
	// Batch is set for a batch, whose statements SQL lists in order.
	Batch bool
	// SQL is the statement, or the batch's statements.
	SQL []string
}

// RoundTrips records the round trips of a pool (Traced), for tests that
// count what the code sends. It is a pgx tracer, safe for concurrent use.
type RoundTrips struct {
	mu   sync.Mutex
	sent []RoundTrip
}

// Traced opens a pool of its own on db, closed when t ends, whose round trips
// the RoundTrips returned records.
func (db *DB) Traced(t testing.TB) (*pgxpool.Pool, *RoundTrips) {
	t.Helper()
	trips := &RoundTrips{}
	cfg := db.Pool.Config()
	cfg.ConnConfig.Tracer = trips
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool, trips
}

// Take returns the round trips since the last Take, oldest first.
func (r *RoundTrips) Take() []RoundTrip {
	r.mu.Lock()
	defer r.mu.Unlock()
	sent := r.sent
	r.sent = nil
	return sent
}

func (r *RoundTrips) add(trip RoundTrip) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sent = append(r.sent, trip)
}

// TraceQueryStart implements pgx.QueryTracer.
func (r *RoundTrips) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	r.add(RoundTrip{SQL: []string{d.SQL}})
	return ctx
}

// TraceQueryEnd implements pgx.QueryTracer.
func (*RoundTrips) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// TraceBatchStart implements pgx.BatchTracer.
func (r *RoundTrips) TraceBatchStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceBatchStartData) context.Context {
	trip := RoundTrip{Batch: true}
	for _, q := range d.Batch.QueuedQueries {
		trip.SQL = append(trip.SQL, q.SQL)
	}
	r.add(trip)
	return ctx
}

// TraceBatchQuery implements pgx.BatchTracer.
func (*RoundTrips) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}

// TraceBatchEnd implements pgx.BatchTracer.
func (*RoundTrips) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}
