package outbox_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/example/payments/internal/outbox"
	"github.com/example/payments/internal/testdb"
)

// TestChargeJobIsRiversOwnRow: the charge job a payment's statement inserts
// by SQL is the row River's InsertTx writes for the same args, in every
// column River reads to run it.
func TestChargeJobIsRiversOwnRow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	inserter, err := outbox.NewInserter(db.Pool, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := inserter.Insert(ctx, outbox.ChargeArgs{PaymentID: "pay_1"}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Pool.Exec(ctx, `WITH payment AS (SELECT 'pay_1' AS id), job AS (`+outbox.Queue{}.ChargeJobs("payment")+`) SELECT 1`); err != nil {
		t.Fatal(err)
	}
	rows, err := db.Pool.Query(ctx, `
SELECT concat_ws(' | ', args, kind, max_attempts, priority, queue, state, attempt, metadata, tags, unique_key, unique_states,
	scheduled_at <= now(), finalized_at IS NULL)
FROM river_job ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	var jobs []string
	for rows.Next() {
		var job string
		if err := rows.Scan(&job); err != nil {
			t.Fatal(err)
		}
		jobs = append(jobs, job)
	}
	if rows.Err() != nil || len(jobs) != 2 || jobs[0] != jobs[1] {
		t.Fatalf("River's row and ours differ (%v):\n%q", rows.Err(), jobs)
	}
}

// TestWakerSendsRiversInsertNotification: the waker notifies on the channel
// River's workers listen to, with River's payload, once for a burst.
func TestWakerSendsRiversInsertNotification(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	db := testdb.New(t)
	conn, err := db.Pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, `LISTEN "public.river_insert"`); err != nil {
		t.Fatal(err)
	}
	waker := outbox.NewWaker(db.Pool, time.Hour, slog.New(slog.DiscardHandler))
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); waker.Run(runCtx) }()
	defer func() { stop(); <-done }()

	for range 10 {
		waker.Queued()
	}
	n, err := conn.Conn().WaitForNotification(ctx)
	if err != nil || n.Payload != `{"queue": "default"}` {
		t.Fatalf("notification = %+v, %v", n, err)
	}
	// The burst was one notification: within the cooldown no other comes.
	short, cancelShort := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancelShort()
	if n, err := conn.Conn().WaitForNotification(short); err == nil {
		t.Fatalf("a second notification within the cooldown: %+v", n)
	}
}
