package operation_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/example/payments/internal/idempotency"
	"github.com/example/payments/internal/jobs"
	"github.com/example/payments/internal/operation"
	"github.com/example/payments/internal/outbox"
	"github.com/example/payments/internal/payments"
	"github.com/example/payments/internal/refunds"
	"github.com/example/payments/internal/webhooks"
	"github.com/example/payments/tools/testdb"
)

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
	svc, inserter, traced := tracedService(t, h)
	pool, keys := svc.DB, svc.Keys

	amount := int64(1000)
	np := payments.NewPayment{Amount: &amount, Currency: "USD", PaymentMethod: "pm_card_visa"}
	relay := outbox.Relay{DB: pool, Jobs: jobs.Queue{Client: inserter}, BatchSize: 100}
	// River reads the server's version once, with its first insert.
	if _, _, err := payments.Create(ctx, svc, h.request("/v1/payments"), np); err != nil {
		t.Fatal(err)
	}
	if _, err := relay.Move(ctx); err != nil {
		t.Fatal(err)
	}
	traced.Take()
	// sent is what was sent since the last call, a round trip a word: a
	// statement's first word, or River's by its name, or "batch"; River's
	// notification of the queue left out.
	sent := func() string {
		var words []string
		for _, trip := range traced.Take() {
			word := "batch"
			if !trip.Batch {
				name, river := strings.CutPrefix(trip.SQL[0], "-- name: ")
				if word = strings.Fields(name)[0]; river {
					word = "river:" + word
				}
			}
			if word != "river:PGNotifyMany" {
				words = append(words, word)
			}
		}
		return strings.Join(words, " ")
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
	// The worker, given the job the relay queued: one batch that reads the
	// payment with its key's point and what its charge sends; after the processor's call, the key's lock, the
	// outcome, the event's deliveries (none: the tenant has no endpoint) and
	// the read of the payment as recorded in one batch; the event, the key
	// finished and the COMMIT in another. The job is not completed in that
	// transaction: River's completer does it once Work returns, for many jobs
	// at once.
	runner := *h.ops
	runner.DB, runner.Keys = pool, keys
	runner.Subscribers = webhooks.FanOut{Jobs: jobs.Queue{Client: inserter}}
	work := func(id string) {
		t.Helper()
		job := runningJob(t, h, inserter, id)
		traced.Take()
		if err := (&jobs.OperationWorker{Ops: &runner}).Work(ctx, job); err != nil {
			t.Fatal(err)
		}
	}
	work(p.ID)
	if got, want := sent(), "batch batch batch"; got != want {
		t.Fatalf("the worker sent %q, want %q", got, want)
	}
	// deliveries counts the deliveries of the event about payment id that
	// have their job.
	deliveries := func(id string) int {
		t.Helper()
		return h.count(`SELECT count(*) FROM webhook_deliveries d JOIN events e ON e.id = d.event_id
			WHERE e.resource_id = $1 AND d.job IS NOT NULL`, id)
	}
	if n := deliveries(p.ID); n != 0 {
		t.Fatalf("%d deliveries of an event of a tenant with no endpoint", n)
	}
	// With an endpoint, the deliveries' jobs are inserted once the first
	// batch is read, in a round trip of their own.
	h.exec(`INSERT INTO webhook_endpoints (id, tenant_id, url, enabled_events, status, created_at, updated_at)
		VALUES ('we_1', $1, 'https://example.com/hooks', '{payment.succeeded}', 'enabled', now(), now())`, tenant)
	_, hooked, err := payments.Create(ctx, svc, h.request("/v1/payments"), np)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := relay.Move(ctx); err != nil || n != 1 {
		t.Fatalf("relay moved %d, %v; want the payment's job", n, err)
	}
	work(hooked.ID)
	if got, want := sent(), "batch batch batch batch"; got != want {
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

// tracedService is h's service on a pool of its own whose statements traced
// records, its jobs inserted by River's inserter on that pool.
func tracedService(t *testing.T, h *harness) (*operation.Service, *river.Client[pgx.Tx], *testdb.RoundTrips) {
	t.Helper()
	pool, traced := h.db.Traced(t)
	keys := &idempotency.Store{DB: pool, LockTimeout: h.svc.Keys.LockTimeout, Retention: h.svc.Keys.Retention}
	inserter, err := jobs.NewInserter(pool, jobs.RelayCooldown, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	svc := &operation.Service{DB: pool, Keys: keys, Jobs: jobs.Queue{Client: inserter}, Kinds: h.svc.Kinds, Render: h.svc.Render,
		Processor: h.svc.Processor}
	return svc, inserter, traced
}

// runningJob is River's job for the operation id, running, as River's fetch
// leaves a job it hands to Work.
func runningJob(t *testing.T, h *harness, inserter *river.Client[pgx.Tx], id string) *river.Job[jobs.OperationArgs] {
	t.Helper()
	listed, err := inserter.JobList(context.Background(), river.NewJobListParams().Kinds(jobs.OperationArgs{}.Kind()).First(10))
	if err != nil {
		t.Fatal(err)
	}
	var job *river.Job[jobs.OperationArgs]
	for _, row := range listed.Jobs {
		var args jobs.OperationArgs
		if err := json.Unmarshal(row.EncodedArgs, &args); err != nil {
			t.Fatal(err)
		}
		if args.ID == id {
			job = &river.Job[jobs.OperationArgs]{JobRow: row, Args: args}
		}
	}
	if job == nil {
		t.Fatalf("no job for %s among %d", id, len(listed.Jobs))
	}
	h.exec(`UPDATE river_job SET state = 'running', attempt = 1, attempted_at = now() WHERE id = $1`, job.ID)
	job.State, job.Attempt = rivertype.JobStateRunning, 1
	return job
}
