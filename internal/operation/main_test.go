package operation_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/goleak"

	"github.com/example/payments/internal/database"
	"github.com/example/payments/internal/idempotency"
	"github.com/example/payments/internal/operation"
	"github.com/example/payments/internal/outbox"
	"github.com/example/payments/internal/payments"
	"github.com/example/payments/internal/refunds"
	"github.com/example/payments/internal/render"
	"github.com/example/payments/tools/testdb"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// The tests of this package run the operations' rules against a real
// Postgres and an in-memory processor with the real one's semantics: one
// operation per downstream key, lookups by key, and a fence that closes a key.
// The processor's own tests (internal/processor, internal/gateway) are real HTTP.

// fakeProcessor makes the payments' and the refunds' processor calls in memory.
type fakeProcessor struct {
	mu      sync.Mutex
	ops     map[string]operation.Outcome // made, by downstream key
	closed  map[string]bool
	charges []operation.LedgerEntry
	refunds []operation.LedgerEntry
	// unknown keys answer every Charge or Refund with an unknown outcome,
	// without making anything (a processor outage for that key).
	unknown map[string]bool
	// dropped keys make the operation, then answer with an unknown outcome.
	dropped map[string]bool
	// hidden keys are not found by Find although made: an operation in
	// flight, which only a close can see.
	hidden map[string]bool
	// findFails keys make Find fail.
	findFails map[string]bool
	// saved keys answer every Charge or Refund with a failure the processor
	// saved for the key, without making anything.
	saved map[string]bool
	// refuse keys are refused definitely, with this code.
	refuse map[string]string
	// held keys make the charge, then hold the answer until their channel
	// closes, and answer with an unknown outcome (pm_card_timeout).
	held     map[string]chan struct{}
	holding  atomic.Int64 // answers held right now
	calls    atomic.Int64
	pageSize int
}

func newFakeProcessor() *fakeProcessor {
	return &fakeProcessor{ops: map[string]operation.Outcome{}, closed: map[string]bool{}, unknown: map[string]bool{},
		dropped: map[string]bool{}, hidden: map[string]bool{}, findFails: map[string]bool{}, saved: map[string]bool{}, refuse: map[string]string{},
		held: map[string]chan struct{}{}, pageSize: 1000}
}

var errUnknown = fmt.Errorf("fake: %w", operation.ErrProcessorUnknown)

// make makes the operation under key once, as decided by decide.
func (f *fakeProcessor) make(key string, ledger *[]operation.LedgerEntry, entry operation.LedgerEntry, out operation.Outcome) (operation.Outcome, error) {
	f.calls.Add(1)
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case f.closed[key]:
		return operation.Outcome{}, operation.ErrKeyClosed
	case f.unknown[key]:
		return operation.Outcome{}, errUnknown
	case f.saved[key]:
		return operation.Outcome{}, fmt.Errorf("fake: %w: %w: a saved 500", operation.ErrSavedFailure, operation.ErrProcessorUnknown)
	}
	if code, ok := f.refuse[key]; ok {
		return operation.Outcome{FailureCode: code, FailureMessage: "refused"}, nil
	}
	made, ok := f.ops[key]
	if !ok {
		made = out
		f.ops[key] = made
		entry.ID, entry.IdempotencyKey, entry.Succeeded, entry.CreatedAt = made.ID, key, made.Succeeded, time.Now()
		*ledger = append(*ledger, entry)
	}
	if f.dropped[key] {
		return operation.Outcome{}, errUnknown
	}
	return made, nil
}

func (f *fakeProcessor) Charge(ctx context.Context, req payments.ChargeRequest) (operation.Outcome, error) {
	out := operation.Outcome{ID: "ch_" + req.PaymentID, Succeeded: true}
	if req.PaymentMethod == "pm_card_declined" {
		out = operation.Outcome{ID: out.ID, FailureCode: "card_declined", FailureMessage: "Your card was declined."}
	}
	out, err := f.make(req.IdempotencyKey, &f.charges, operation.LedgerEntry{Reference: req.PaymentID, Amount: req.Amount, Currency: req.Currency}, out)
	f.mu.Lock()
	held := f.held[req.IdempotencyKey]
	f.mu.Unlock()
	if held != nil && err == nil {
		f.holding.Add(1)
		defer f.holding.Add(-1)
		select {
		case <-held:
		case <-ctx.Done():
		}
		return operation.Outcome{}, errUnknown
	}
	return out, err
}

func (f *fakeProcessor) Refund(_ context.Context, req refunds.Request) (operation.Outcome, error) {
	out := operation.Outcome{ID: "re_" + req.IdempotencyKey, Succeeded: true}
	return f.make(req.IdempotencyKey, &f.refunds, operation.LedgerEntry{
		Reference: strings.TrimPrefix(req.IdempotencyKey, refunds.Names.DownstreamKey("")), Amount: req.Amount}, out)
}

func (f *fakeProcessor) find(key string) (operation.Outcome, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.findFails[key] {
		return operation.Outcome{}, false, errUnknown
	}
	out, ok := f.ops[key]
	return out, ok && !f.hidden[key], nil
}

func (f *fakeProcessor) FindCharge(_ context.Context, req payments.ChargeRequest) (operation.Outcome, bool, error) {
	return f.find(req.IdempotencyKey)
}

func (f *fakeProcessor) FindRefund(_ context.Context, req refunds.Request) (operation.Outcome, bool, error) {
	return f.find(req.IdempotencyKey)
}

// close is the fence: whatever was made stands, and nothing more can be.
func (f *fakeProcessor) close(key string) (operation.Outcome, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if out, ok := f.ops[key]; ok {
		return out, true, nil
	}
	f.closed[key] = true
	return operation.Outcome{}, false, nil
}

func (f *fakeProcessor) CloseCharge(_ context.Context, req payments.ChargeRequest) (operation.Outcome, bool, error) {
	return f.close(req.IdempotencyKey)
}

func (f *fakeProcessor) CloseRefund(_ context.Context, req refunds.Request) (operation.Outcome, bool, error) {
	return f.close(req.IdempotencyKey)
}

// page returns a page of ledger after since, oldest first; the cursor is an
// index into it.
func (f *fakeProcessor) page(ledger []operation.LedgerEntry, since time.Time, cursor string) ([]operation.LedgerEntry, string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	start, _ := strconv.Atoi(cursor)
	var page []operation.LedgerEntry
	i := start
	for ; i < len(ledger) && len(page) < f.pageSize; i++ {
		if ledger[i].CreatedAt.After(since) {
			page = append(page, ledger[i])
		}
	}
	if i < len(ledger) {
		return page, strconv.Itoa(i), nil
	}
	return page, "", nil
}

func (f *fakeProcessor) LedgerCharges(_ context.Context, since time.Time, cursor string) ([]operation.LedgerEntry, string, error) {
	return f.page(f.charges, since, cursor)
}

func (f *fakeProcessor) LedgerRefunds(_ context.Context, since time.Time, cursor string) ([]operation.LedgerEntry, string, error) {
	return f.page(f.refunds, since, cursor)
}

// made counts the operations made under key: 0 or 1.
func (f *fakeProcessor) Charges() operation.Calls[payments.ChargeRequest] {
	return operation.Calls[payments.ChargeRequest]{Make: f.Charge, Find: f.FindCharge, Close: f.CloseCharge, Ledger: f.LedgerCharges}
}

func (f *fakeProcessor) Refunds() operation.Calls[refunds.Request] {
	return operation.Calls[refunds.Request]{Make: f.Refund, Find: f.FindRefund, Close: f.CloseRefund, Ledger: f.LedgerRefunds}
}

func (f *fakeProcessor) made(key string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, e := range append(append([]operation.LedgerEntry{}, f.charges...), f.refunds...) {
		if e.IdempotencyKey == key {
			n++
		}
	}
	return n
}

// set sets a knob for key under the lock.
func (f *fakeProcessor) set(knob map[string]bool, key string, on bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	knob[key] = on
}

// hold makes key's charge hold its answer until release closes.
func (f *fakeProcessor) hold(key string, release chan struct{}) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.held[key] = release
}

// record adds entries to ledger, f.charges or f.refunds, under the lock:
// operations the processor has that no call of the service made.
func (f *fakeProcessor) record(ledger *[]operation.LedgerEntry, entries ...operation.LedgerEntry) {
	f.mu.Lock()
	defer f.mu.Unlock()
	*ledger = append(*ledger, entries...)
}

// fakeJobs stands for the job queue: the tests drive operations themselves. It
// numbers the jobs it is asked to stage, one per operation.
type fakeJobs struct {
	mu   sync.Mutex
	next int64
	of   map[string]int64
}

// EnqueueOperations implements outbox.Queue.
func (j *fakeJobs) EnqueueOperations(_ context.Context, _ pgx.Tx, staged []outbox.Staged) ([]int64, error) {
	ids := make([]int64, len(staged))
	for i, op := range staged {
		ids[i] = j.add(op.ID)
	}
	return ids, nil
}

// EnqueueProcessorEvent implements operation.JobQueue.
func (j *fakeJobs) EnqueueProcessorEvent(_ context.Context, _ pgx.Tx, eventID string) error {
	j.add(eventID)
	return nil
}

// add numbers the job of id.
func (j *fakeJobs) add(id string) int64 {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.next++
	j.of[id] = j.next
	return j.next
}

// job is the id of the job staged for operation id.
func (j *fakeJobs) job(id string) int64 {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.of[id]
}

// harness is the payments package on a fresh database with the demo tenants.
type harness struct {
	t    *testing.T
	db   *testdb.DB
	proc *fakeProcessor
	jobs *fakeJobs
	// relay moves the jobs first phases staged to jobs, as the worker's
	// does (relayed).
	relay *outbox.Relay
	svc   *operation.Service
	ops   *operation.Runner
	rec   *operation.Reconciler
	keys  atomic.Int64
}

const tenant = "ten_acme"

// inMemory is what the in-memory processor can do: everything, as the
// fake processor's adapter declares.
var inMemory = operation.Processor{Name: "memory", Lookup: operation.LookupQuery, Fence: true, Ledger: true, LedgerPage: 1000,
	KeyRetention: 7 * 24 * time.Hour, PaymentMethod: operation.Format{Pattern: regexp.MustCompile(`^pm_[a-z_]+$`), Example: "pm_card_visa"}}

// newHarness runs the two kinds these tests drive, payments and refunds,
// whatever else the service's list holds.
func newHarness(t *testing.T) *harness {
	t.Helper()
	return newHarnessOf(t, func(p *fakeProcessor) *operation.Registry {
		return operation.MustRegistry(payments.New(p), refunds.New(p))
	})
}

// newHarnessOf is newHarness with the kinds list makes, their processor calls
// made by the in-memory processor.
func newHarnessOf(t *testing.T, list func(*fakeProcessor) *operation.Registry) *harness {
	t.Helper()
	db := testdb.New(t, testdb.DemoTenants)
	keys := &idempotency.Store{DB: db.Pool, LockTimeout: time.Minute, Retention: 24 * time.Hour}
	proc := newFakeProcessor()
	kinds := list(proc)
	ops := &operation.Runner{DB: db.Pool, Keys: keys, Kinds: kinds, MaxAttempts: 3, Deadline: time.Hour, Processor: inMemory}
	fj := &fakeJobs{of: map[string]int64{}}
	return &harness{
		t: t, db: db, proc: proc, ops: ops, jobs: fj, relay: &outbox.Relay{DB: db.Pool, Jobs: fj, BatchSize: 100},
		svc: &operation.Service{DB: db.Pool, Keys: keys, Jobs: fj, Kinds: kinds, Render: render.New(kinds, nil, nil),
			Processor: inMemory},
		rec: &operation.Reconciler{Ops: ops, Logger: testLogger(t), Window: time.Hour, Grace: 0, BatchSize: 100,
			Parallel: 4},
	}
}

// onHarness runs body as the parallel subtest name of t, on a harness of its
// own.
func onHarness(t *testing.T, name string, body func(t *testing.T, h *harness)) {
	t.Helper()
	t.Run(name, func(t *testing.T) {
		t.Parallel()
		body(t, newHarness(t))
	})
}

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// relayed moves every staged job to the queue, as the worker's relay does.
func (h *harness) relayed() {
	h.t.Helper()
	if _, err := h.relay.Drain(context.Background()); err != nil {
		h.t.Fatal(err)
	}
}

// request is a fresh idempotent request.
func (h *harness) request(path string) idempotency.Request {
	key := "key-" + strconv.FormatInt(h.keys.Add(1), 10)
	fp := sha256.Sum256([]byte(key))
	return idempotency.Request{TenantID: tenant, Key: key, Method: http.MethodPost, Path: path, Fingerprint: fp[:]}
}

// start starts a payment of 1000 USD with method, as the API's first phase
// does, its job left in the outbox, and returns its key's lease.
func (h *harness) start(method string) idempotency.Lease {
	h.t.Helper()
	amount := int64(1000)
	lease, _, err := payments.Create(context.Background(), h.svc, h.request("/v1/payments"),
		payments.NewPayment{Amount: &amount, Currency: "USD", PaymentMethod: method})
	if err != nil || !lease.Created {
		h.t.Fatalf("create: %+v, %v", lease, err)
	}
	return lease
}

// released releases lease, as the API does once it has answered, and
// relays the job its first phase staged; it returns the id of what the key
// created.
func (h *harness) released(lease idempotency.Lease) string {
	h.t.Helper()
	if err := h.svc.Keys.Release(context.Background(), lease); err != nil {
		h.t.Fatal(err)
	}
	h.relayed()
	return lease.Key.Resource.ID
}

// pay creates a payment with method, as the API's first phase does.
func (h *harness) pay(method string) payments.Payment {
	h.t.Helper()
	return h.payment(h.released(h.start(method)))
}

// paid creates a payment that succeeded.
func (h *harness) paid() payments.Payment {
	h.t.Helper()
	p := h.pay("pm_card_visa")
	h.run(payments.Names.Type, p.ID)
	return h.payment(p.ID)
}

// run runs the first attempt of the operation id of kind, which must not
// fail.
func (h *harness) run(kind, id string) {
	h.t.Helper()
	if err := h.ops.Run(context.Background(), kind, id, 1); err != nil {
		h.t.Fatal(err)
	}
}

// answerLost runs the first attempt of payment id with the processor's
// answer lost: the charge is made, its outcome unknown. hidden keeps the
// charge from lookups too, as one still in flight: only the close sees it.
// It returns the charge's downstream key.
func (h *harness) answerLost(id string, hidden bool) string {
	h.t.Helper()
	key := payments.Names.DownstreamKey(id)
	h.proc.set(h.proc.hidden, key, hidden)
	h.proc.set(h.proc.dropped, key, true)
	if err := h.ops.Run(context.Background(), payments.Names.Type, id, 1); !errors.Is(err, operation.ErrProcessorUnknown) {
		h.t.Fatalf("first attempt: %v, want an unknown outcome", err)
	}
	h.proc.set(h.proc.dropped, key, false)
	return key
}

// firstAttempt runs payment id's first attempt with the processor
// answering its key as flags says (h.proc.unknown, say), which must fail
// with want, and returns the key.
func (h *harness) firstAttempt(id string, flags map[string]bool, want error) string {
	h.t.Helper()
	key := payments.Names.DownstreamKey(id)
	h.proc.set(flags, key, true)
	if err := h.ops.Run(context.Background(), payments.Names.Type, id, 1); !errors.Is(err, want) {
		h.t.Fatalf("first attempt: %v, want %v", err, want)
	}
	return key
}

// overdue moves the operation id, a row of table, past the runner's
// deadline.
func (h *harness) overdue(table, id string) {
	h.t.Helper()
	h.exec(`UPDATE `+table+` SET created_at = created_at - interval '2 hours' WHERE id = $1`, id)
}

// refund creates a refund of amount of payment p.
func (h *harness) refund(p payments.Payment, amount int64) refunds.Refund {
	h.t.Helper()
	lease, err := refunds.Create(context.Background(), h.svc, h.request("/v1/payments/"+p.ID+"/refunds"), p.ID,
		refunds.NewRefund{Amount: &amount})
	if err != nil {
		h.t.Fatal(err)
	}
	return h.refundOf(h.released(lease))
}

// payment reads the payment id, which must exist.
func (h *harness) payment(id string) payments.Payment {
	h.t.Helper()
	return read(h, payments.Get, id)
}

// refundOf reads the refund id, which must exist.
func (h *harness) refundOf(id string) refunds.Refund {
	h.t.Helper()
	return read(h, refunds.Get, id)
}

// read reads the tenant's resource id with get, its kind's Get, failing the
// test if it fails.
func read[T any](h *harness, get func(context.Context, database.DBTX, string, string) (T, error), id string) T {
	h.t.Helper()
	v, err := get(context.Background(), h.db.Pool, tenant, id)
	if err != nil {
		h.t.Fatal(err)
	}
	return v
}

func (h *harness) exec(sql string, args ...any) {
	h.t.Helper()
	h.db.Exec(h.t, sql, args...)
}

func (h *harness) count(sql string, args ...any) int {
	h.t.Helper()
	return h.db.Count(h.t, sql, args...)
}

// point is the recovery point of the key that created resource id.
func (h *harness) point(id string) string {
	h.t.Helper()
	var point string
	err := h.db.Pool.QueryRow(context.Background(),
		`SELECT recovery_point FROM idempotency_keys WHERE resource_id = $1`, id).Scan(&point)
	if err != nil {
		h.t.Fatal(err)
	}
	return point
}

// unknownRefund makes a refund of a whole paid payment whose processor calls
// have unknown outcomes until the test says otherwise.
func (h *harness) unknownRefund() (payments.Payment, refunds.Refund, string) {
	h.t.Helper()
	p := h.paid()
	r := h.refund(p, p.Amount)
	key := refunds.Names.DownstreamKey(r.ID)
	h.proc.set(h.proc.unknown, key, true)
	return p, r, key
}

// mark hands the operation id of kind to the reconciler.
// heldPayment is a new payment marked for the reconciler, whose charge the
// processor makes and answers only once release closes.
func (h *harness) heldPayment(release chan struct{}) payments.Payment {
	p := h.pay("pm_card_visa")
	h.proc.hold(payments.Names.DownstreamKey(p.ID), release)
	h.mark(payments.Names.Type, p.ID)
	return p
}

// settleAsync runs a pass of the reconciler, whose report the channel
// returned gives once it ends.
func (h *harness) settleAsync(t *testing.T) chan operation.Report {
	done := make(chan operation.Report, 1)
	go func() {
		r, err := h.rec.Settle(t.Context())
		if err != nil {
			t.Error(err)
		}
		done <- r
	}()
	return done
}

func (h *harness) mark(kind, id string) {
	h.t.Helper()
	if err := operation.MarkForReconciliation(context.Background(), h.db.Pool, kind, id); err != nil {
		h.t.Fatal(err)
	}
}

// reconciled marks the operation id and runs the reconciler once.
func (h *harness) reconciled(kind, id string) operation.Report {
	h.t.Helper()
	h.mark(kind, id)
	report, err := h.rec.Run(context.Background())
	if err != nil {
		h.t.Fatal(err)
	}
	return report
}

// marked reports whether the operation id waits for the reconciler.
func (h *harness) marked(id string) bool {
	return h.count(`SELECT count(*) FROM reconciliations WHERE resource_id = $1`, id) == 1
}
