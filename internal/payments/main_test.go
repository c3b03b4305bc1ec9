package payments_test

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/goleak"

	"github.com/example/payments/internal/idempotency"
	"github.com/example/payments/internal/payments"
	"github.com/example/payments/internal/tenants"
	"github.com/example/payments/tools/testdb"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// The tests of this package run the operations' rules against a real
// Postgres and an in-memory processor with the real one's semantics: one
// operation per downstream key, lookups by key, and a fence that closes a key.
// The processor's own tests (internal/processor, internal/gateway) are real HTTP.

// fakeProcessor implements payments.Processor in memory.
type fakeProcessor struct {
	mu      sync.Mutex
	ops     map[string]payments.Outcome // made, by downstream key
	closed  map[string]bool
	charges []payments.LedgerEntry
	refunds []payments.LedgerEntry
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
	// refuse keys are refused definitely, with this code.
	refuse map[string]string
	// held keys make the charge, then hold the answer until their channel
	// closes, and answer with an unknown outcome (pm_card_timeout).
	held     map[string]chan struct{}
	calls    atomic.Int64
	pageSize int
}

func newFakeProcessor() *fakeProcessor {
	return &fakeProcessor{ops: map[string]payments.Outcome{}, closed: map[string]bool{}, unknown: map[string]bool{},
		dropped: map[string]bool{}, hidden: map[string]bool{}, findFails: map[string]bool{}, refuse: map[string]string{},
		held: map[string]chan struct{}{}, pageSize: 1000}
}

var errUnknown = fmt.Errorf("fake: %w", payments.ErrProcessorUnknown)

// make makes the operation under key once, as decided by decide.
func (f *fakeProcessor) make(key string, ledger *[]payments.LedgerEntry, entry payments.LedgerEntry, out payments.Outcome) (payments.Outcome, error) {
	f.calls.Add(1)
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case f.closed[key]:
		return payments.Outcome{}, payments.ErrKeyClosed
	case f.unknown[key]:
		return payments.Outcome{}, errUnknown
	}
	if code, ok := f.refuse[key]; ok {
		return payments.Outcome{FailureCode: code, FailureMessage: "refused"}, nil
	}
	made, ok := f.ops[key]
	if !ok {
		made = out
		f.ops[key] = made
		entry.ID, entry.IdempotencyKey, entry.Succeeded, entry.CreatedAt = made.ID, key, made.Succeeded, time.Now()
		*ledger = append(*ledger, entry)
	}
	if f.dropped[key] {
		return payments.Outcome{}, errUnknown
	}
	return made, nil
}

func (f *fakeProcessor) Charge(_ context.Context, req payments.ChargeRequest) (payments.Outcome, error) {
	out := payments.Outcome{ID: "ch_" + req.PaymentID, Succeeded: true}
	if req.PaymentMethod == "pm_card_declined" {
		out = payments.Outcome{ID: out.ID, FailureCode: "card_declined", FailureMessage: "Your card was declined."}
	}
	out, err := f.make(req.IdempotencyKey, &f.charges, payments.LedgerEntry{PaymentID: req.PaymentID, Amount: req.Amount, Currency: req.Currency}, out)
	f.mu.Lock()
	held := f.held[req.IdempotencyKey]
	f.mu.Unlock()
	if held != nil && err == nil {
		<-held
		return payments.Outcome{}, errUnknown
	}
	return out, err
}

func (f *fakeProcessor) Refund(_ context.Context, req payments.RefundRequest) (payments.Outcome, error) {
	out := payments.Outcome{ID: "re_" + req.IdempotencyKey, Succeeded: true}
	return f.make(req.IdempotencyKey, &f.refunds, payments.LedgerEntry{Amount: req.Amount}, out)
}

func (f *fakeProcessor) find(key string) (payments.Outcome, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.findFails[key] {
		return payments.Outcome{}, false, errUnknown
	}
	out, ok := f.ops[key]
	return out, ok && !f.hidden[key], nil
}

func (f *fakeProcessor) FindCharge(_ context.Context, key string) (payments.Outcome, bool, error) {
	return f.find(key)
}

func (f *fakeProcessor) FindRefund(_ context.Context, key string) (payments.Outcome, bool, error) {
	return f.find(key)
}

// close is the fence: whatever was made stands, and nothing more can be.
func (f *fakeProcessor) close(key string) (payments.Outcome, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if out, ok := f.ops[key]; ok {
		return out, true, nil
	}
	f.closed[key] = true
	return payments.Outcome{}, false, nil
}

func (f *fakeProcessor) CloseCharge(_ context.Context, key string) (payments.Outcome, bool, error) {
	return f.close(key)
}

func (f *fakeProcessor) CloseRefund(_ context.Context, key string) (payments.Outcome, bool, error) {
	return f.close(key)
}

// page returns a page of ledger after since, oldest first; the cursor is an
// index into it.
func (f *fakeProcessor) page(ledger []payments.LedgerEntry, since time.Time, cursor string) ([]payments.LedgerEntry, string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	start, _ := strconv.Atoi(cursor)
	var page []payments.LedgerEntry
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

func (f *fakeProcessor) LedgerCharges(_ context.Context, since time.Time, cursor string) ([]payments.LedgerEntry, string, error) {
	return f.page(f.charges, since, cursor)
}

func (f *fakeProcessor) LedgerRefunds(_ context.Context, since time.Time, cursor string) ([]payments.LedgerEntry, string, error) {
	return f.page(f.refunds, since, cursor)
}

// made counts the operations made under key: 0 or 1.
func (f *fakeProcessor) made(key string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, e := range append(append([]payments.LedgerEntry{}, f.charges...), f.refunds...) {
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

// renderer renders final responses as status and JSON, as the HTTP one does.
type renderer struct{}

func (renderer) Payment(p payments.Payment) idempotency.Response {
	return response(p.Status, p.FailureCode, p)
}

func (renderer) Refund(r payments.Refund) idempotency.Response {
	return response(r.Status, r.FailureCode, r)
}

func (renderer) Error(err error) idempotency.Response {
	return idempotency.Response{Status: http.StatusConflict, Body: []byte(err.Error())}
}

func response(status string, failure *string, v any) idempotency.Response {
	code := http.StatusCreated
	switch {
	case failure != nil && *failure == payments.FailureProcessorError:
		code = http.StatusBadGateway
	case status == payments.StatusFailed:
		code = http.StatusPaymentRequired
	}
	b, _ := json.Marshal(v)
	return idempotency.Response{Status: code, Header: map[string]string{"Content-Type": "application/json"}, Body: b}
}

// jobs stands for the job queue: the tests drive operations themselves. It
// numbers the jobs it is asked to stage, one per operation.
type jobs struct {
	mu   sync.Mutex
	next int64
	of   map[string]int64
}

// Enqueue implements payments.JobQueue.
func (j *jobs) Enqueue(_ context.Context, _ pgx.Tx, _, id string) (int64, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.next++
	j.of[id] = j.next
	return j.next, nil
}

// job is the id of the job staged for operation id.
func (j *jobs) job(id string) int64 {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.of[id]
}

// harness is the payments package on a fresh database with the demo tenants.
type harness struct {
	t    *testing.T
	db   *testdb.DB
	proc *fakeProcessor
	jobs *jobs
	svc  *payments.Service
	ops  *payments.Operations
	rec  *payments.Reconciler
	keys atomic.Int64
}

const tenant = "ten_acme"

func newHarness(t *testing.T) *harness {
	t.Helper()
	db := testdb.New(t)
	if err := (&tenants.Store{DB: db.Pool}).SeedDemos(context.Background()); err != nil {
		t.Fatal(err)
	}
	keys := &idempotency.Store{DB: db.Pool, LockTimeout: time.Minute, Retention: 24 * time.Hour}
	proc := newFakeProcessor()
	ops := &payments.Operations{DB: db.Pool, Keys: keys, Processor: proc, Render: renderer{}, MaxAttempts: 3, Deadline: time.Hour}
	jobs := &jobs{of: map[string]int64{}}
	return &harness{
		t: t, db: db, proc: proc, ops: ops, jobs: jobs,
		svc: &payments.Service{DB: db.Pool, Keys: keys, Jobs: jobs, Render: renderer{}},
		rec: &payments.Reconciler{Ops: ops, Logger: testLogger(t), Window: time.Hour, Grace: 0, BatchSize: 100},
	}
}

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// request is a fresh idempotent request.
func (h *harness) request(path string) idempotency.Request {
	key := "key-" + strconv.FormatInt(h.keys.Add(1), 10)
	fp := sha256.Sum256([]byte(key))
	return idempotency.Request{TenantID: tenant, Key: key, Method: http.MethodPost, Path: path, Fingerprint: fp[:]}
}

// pay creates a payment with method, as the API's first phase does.
func (h *harness) pay(method string) payments.Payment {
	h.t.Helper()
	amount := int64(1000)
	lease, _, err := h.svc.Create(context.Background(), h.request("/v1/payments"),
		payments.NewPayment{Amount: &amount, Currency: "USD", PaymentMethod: method})
	if err != nil {
		h.t.Fatal(err)
	}
	if err := h.svc.Keys.Release(context.Background(), lease); err != nil {
		h.t.Fatal(err)
	}
	p, err := h.svc.Get(context.Background(), tenant, lease.Key.Resource.ID)
	if err != nil {
		h.t.Fatal(err)
	}
	return p
}

// paid creates a payment that succeeded.
func (h *harness) paid() payments.Payment {
	h.t.Helper()
	p := h.pay("pm_card_visa")
	if err := h.ops.Charge(context.Background(), p.ID, 1, nil); err != nil {
		h.t.Fatal(err)
	}
	return h.payment(p.ID)
}

// refund creates a refund of amount of payment p.
func (h *harness) refund(p payments.Payment, amount int64) payments.Refund {
	h.t.Helper()
	lease, err := h.svc.CreateRefund(context.Background(), h.request("/v1/payments/"+p.ID+"/refunds"), p.ID,
		payments.NewRefund{Amount: &amount})
	if err != nil {
		h.t.Fatal(err)
	}
	if err := h.svc.Keys.Release(context.Background(), lease); err != nil {
		h.t.Fatal(err)
	}
	return h.refundOf(lease.Key.Resource.ID)
}

func (h *harness) payment(id string) payments.Payment {
	h.t.Helper()
	p, err := h.svc.Get(context.Background(), tenant, id)
	if err != nil {
		h.t.Fatal(err)
	}
	return p
}

func (h *harness) refundOf(id string) payments.Refund {
	h.t.Helper()
	r, err := h.svc.GetRefund(context.Background(), tenant, id)
	if err != nil {
		h.t.Fatal(err)
	}
	return r
}

func (h *harness) exec(sql string, args ...any) {
	h.t.Helper()
	if _, err := h.db.Pool.Exec(context.Background(), sql, args...); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) count(sql string, args ...any) int {
	h.t.Helper()
	var n int
	if err := h.db.Pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		h.t.Fatal(err)
	}
	return n
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
func (h *harness) unknownRefund() (payments.Payment, payments.Refund, string) {
	h.t.Helper()
	p := h.paid()
	r := h.refund(p, p.Amount)
	key := payments.RefundDownstreamKey(r.ID)
	h.proc.set(h.proc.unknown, key, true)
	return p, r, key
}

// reconciled marks the operation id and runs the reconciler once.
func (h *harness) reconciled(kind, id string) payments.Report {
	h.t.Helper()
	if err := payments.MarkForReconciliation(context.Background(), h.db.Pool, kind, id); err != nil {
		h.t.Fatal(err)
	}
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
