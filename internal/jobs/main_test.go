package jobs_test

import (
	"encoding/json"
	"log/slog"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"go.uber.org/goleak"

	"github.com/example/payments/internal/jobs"
	"github.com/example/payments/internal/outbox"
	"github.com/example/payments/internal/payments"
	"github.com/example/payments/tools/testdb"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// paymentOf reads the payment of a final response or a 202.
func paymentOf(t *testing.T, body []byte) payments.Payment {
	t.Helper()
	var v struct {
		Payment *payments.Payment `json:"payment"`
	}
	if err := json.Unmarshal(body, &v); err == nil && v.Payment != nil {
		return *v.Payment
	}
	var p payments.Payment
	if err := json.Unmarshal(body, &p); err != nil {
		t.Fatalf("decode %s: %v", body, err)
	}
	return p
}

// newInserter is a River client on pool that only inserts, as the API's.
func newInserter(t *testing.T, pool *pgxpool.Pool) *river.Client[pgx.Tx] {
	t.Helper()
	client, err := jobs.NewInserter(pool, jobs.InsertCooldown, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	return client
}

// newQueue is a queue on a fresh database whose River client only inserts
// (newInserter), and the database.
func newQueue(t *testing.T) (jobs.Queue, *testdb.DB) {
	t.Helper()
	db := testdb.New(t)
	return jobs.Queue{Client: newInserter(t, db.Pool)}, db
}

// enqueue enqueues the staged operations in a transaction of db, which it
// then commits, or rolls back unless commit, and returns their jobs' ids.
func enqueue(t *testing.T, q jobs.Queue, db *testdb.DB, commit bool, staged ...outbox.Staged) []int64 {
	t.Helper()
	ctx := t.Context()
	tx, err := db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := q.EnqueueOperations(ctx, tx, staged)
	if err != nil {
		t.Fatal(err)
	}
	end := tx.Rollback
	if commit {
		end = tx.Commit
	}
	if err := end(ctx); err != nil {
		t.Fatal(err)
	}
	return ids
}
