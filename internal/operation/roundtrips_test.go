package operation_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/example/payments/internal/endpoints"
	"github.com/example/payments/internal/idempotency"
	"github.com/example/payments/internal/operation"
	"github.com/example/payments/internal/outbox"
	"github.com/example/payments/internal/payments"
	"github.com/example/payments/internal/refunds"
)

// statements records the statements a pool sends, batched ones included.
type statements struct {
	mu   sync.Mutex
	sent []string
}

func (s *statements) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	s.add(data.SQL)
	return ctx
}

func (*statements) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (s *statements) TraceBatchStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceBatchStartData) context.Context {
	s.add("batch")
	return ctx
}

func (*statements) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (*statements) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}

// add records a statement by its first word, or River's by its name.
func (s *statements) add(sql string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	name, river := strings.CutPrefix(sql, "-- name: ")
	if river {
		name = "river:" + name
	}
	s.sent = append(s.sent, strings.Fields(name)[0])
}

// take returns the statements sent since the last take.
func (s *statements) take() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	sent := s.sent
	s.sent = nil
	return sent
}

// TestRoundTrips: a retry of a finished key is answered by one read and
// nothing else, before any transaction; a new key costs that read and one
// batch: the BEGIN, the key, the payment, its job's row in the outbox and
// the COMMIT. The relay moves staged jobs in three round trips however many
// (the batch's first read carries the BEGIN, River's insert, the batch that
// names the jobs and commits), River notifying the queue, at most once a
// cooldown, in one of its own. The worker's phases cost three.
func TestRoundTrips(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := newHarness(t)
	traced := &statements{}
	cfg := h.db.Pool.Config()
	cfg.ConnConfig.Tracer = traced
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	keys := &idempotency.Store{DB: pool, LockTimeout: h.svc.Keys.LockTimeout, Retention: h.svc.Keys.Retention}
	inserter, err := outbox.NewInserter(pool, outbox.RelayCooldown, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	svc := &operation.Service{DB: pool, Keys: keys, Jobs: outbox.Queue{Client: inserter}, Kinds: h.svc.Kinds, Render: h.svc.Render}

	amount := int64(1000)
	np := payments.NewPayment{Amount: &amount, Currency: "USD", PaymentMethod: "pm_card_visa"}
	relay := operation.Relay{DB: pool, Jobs: outbox.Queue{Client: inserter}, BatchSize: 100}
	// River reads the server's version once, with its first insert.
	if _, _, err := payments.Create(ctx, svc, h.request("/v1/payments"), np); err != nil {
		t.Fatal(err)
	}
	if _, err := relay.Move(ctx); err != nil {
		t.Fatal(err)
	}
	traced.take()
	// sent is what was sent since the last call, River's notification of
	// the queue left out.
	sent := func() string {
		return strings.Join(slices.DeleteFunc(traced.take(), func(s string) bool { return s == "river:PGNotifyMany" }), " ")
	}
	req := h.request("/v1/payments")
	lease, p, err := payments.Create(ctx, svc, req, np)
	if err != nil || !lease.Created || p == nil {
		t.Fatalf("Create = %+v, %v, %v", lease, p, err)
	}
	if got, want := sent(), "SELECT batch"; got != want {
		t.Fatalf("a new key sent %q, want %q", got, want)
	}
	if n, err := relay.Move(ctx); err != nil || n != 1 {
		t.Fatalf("relay moved %d, %v; want the payment's job", n, err)
	}
	if got, want := sent(), "batch river:JobInsertFastMany batch"; got != want {
		t.Fatalf("the relay sent %q, want %q", got, want)
	}
	// The worker, given the job the relay queued: one read of the payment
	// and its key's point; after the processor's call, the key's lock, the
	// outcome, the event's deliveries (none: the tenant has no endpoint) and
	// the read of the payment as recorded in one batch; the event, the key
	// finished and the COMMIT in another. The job is not completed in that
	// transaction: River's completer does it once Work returns, for many jobs
	// at once.
	runner := *h.ops
	runner.DB, runner.Keys = pool, keys
	runner.Subscribers = endpoints.FanOut{Jobs: outbox.Queue{Client: inserter}}
	work := func(id string) {
		t.Helper()
		jobs, err := inserter.JobList(ctx, river.NewJobListParams().Kinds(outbox.OperationArgs{}.Kind()).First(10))
		if err != nil {
			t.Fatal(err)
		}
		var job *river.Job[outbox.OperationArgs]
		for _, row := range jobs.Jobs {
			var args outbox.OperationArgs
			if err := json.Unmarshal(row.EncodedArgs, &args); err != nil {
				t.Fatal(err)
			}
			if args.ID == id {
				job = &river.Job[outbox.OperationArgs]{JobRow: row, Args: args}
			}
		}
		if job == nil {
			t.Fatalf("no job for %s among %d", id, len(jobs.Jobs))
		}
		// Running, as River's fetch leaves a job it hands to Work.
		if _, err := h.db.Pool.Exec(ctx, `UPDATE river_job SET state = 'running', attempt = 1, attempted_at = now() WHERE id = $1`, job.ID); err != nil {
			t.Fatal(err)
		}
		job.State, job.Attempt = rivertype.JobStateRunning, 1
		traced.take()
		if err := (&outbox.OperationWorker{Ops: &runner}).Work(ctx, job); err != nil {
			t.Fatal(err)
		}
	}
	work(p.ID)
	if got, want := sent(), "SELECT batch batch"; got != want {
		t.Fatalf("the worker sent %q, want %q", got, want)
	}
	// deliveries counts the deliveries of the event about payment id that
	// have their job.
	deliveries := func(id string) int {
		t.Helper()
		var n int
		if err := h.db.Pool.QueryRow(ctx, `SELECT count(*) FROM webhook_deliveries d JOIN events e ON e.id = d.event_id
			WHERE e.resource_id = $1 AND d.job IS NOT NULL`, id).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := deliveries(p.ID); n != 0 {
		t.Fatalf("%d deliveries of an event of a tenant with no endpoint", n)
	}
	// With an endpoint, the deliveries' jobs are inserted once the first
	// batch is read, in a round trip of their own.
	if _, err := h.db.Pool.Exec(ctx, `INSERT INTO webhook_endpoints (id, tenant_id, url, enabled_events, status, created_at, updated_at)
		VALUES ('we_1', $1, 'https://example.com/hooks', '{payment.succeeded}', 'enabled', now(), now())`, tenant); err != nil {
		t.Fatal(err)
	}
	_, hooked, err := payments.Create(ctx, svc, h.request("/v1/payments"), np)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := relay.Move(ctx); err != nil || n != 1 {
		t.Fatalf("relay moved %d, %v; want the payment's job", n, err)
	}
	work(hooked.ID)
	if got, want := sent(), "SELECT batch batch batch"; got != want {
		t.Fatalf("the worker sent %q for a tenant with an endpoint, want %q", got, want)
	}
	if n := deliveries(hooked.ID); n != 1 {
		t.Fatalf("%d deliveries with their job of the event, want 1", n)
	}
	replay, _, err := payments.Create(ctx, svc, req, np)
	if err != nil || replay.Created || !replay.Key.Finished() || replay.Key.Response == nil {
		t.Fatalf("replay = %+v, %v", replay, err)
	}
	if got, want := sent(), "SELECT"; got != want {
		t.Fatalf("a replay sent %q, want %q", got, want)
	}

	// A caller that has just looked the key up (the API, which answers a
	// replay before it decodes the body) says so, and Start does not read
	// it again.
	unseen := h.request("/v1/payments")
	if _, err := keys.Lookup(ctx, unseen); !errors.Is(err, idempotency.ErrNotFound) {
		t.Fatalf("Lookup = %v, want ErrNotFound", err)
	}
	unseen.Unseen = true
	if lease, _, err := payments.Create(ctx, svc, unseen, np); err != nil || !lease.Created {
		t.Fatalf("Create after a lookup = %+v, %v", lease, err)
	}
	if got, want := sent(), "SELECT batch"; got != want {
		t.Fatalf("a looked-up new key sent %q, want %q", got, want)
	}

	// A refund locks its payment and sums its refunds in one statement,
	// which carries the BEGIN; then the batch.
	refund, err := refunds.Create(ctx, svc, h.request("/v1/payments/"+p.ID+"/refunds"), p.ID, refunds.NewRefund{})
	if err != nil || !refund.Created {
		t.Fatalf("refund = %+v, %v", refund, err)
	}
	if got, want := sent(), "SELECT batch batch"; got != want {
		t.Fatalf("a refund sent %q, want %q", got, want)
	}
}
