// Package testkind declares a kind of operation for tests only, the widget,
// which no list of the service names: the machinery's tests run it to meet
// what a forker's new kind meets. Its table is made in a test's database by
// Migrate, as a forker's migration would make theirs; its processor is in
// memory.
package testkind

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/example/payments/internal/database"
	"github.com/example/payments/internal/idempotency"
	"github.com/example/payments/internal/operation"
	"github.com/example/payments/internal/render"
)

// Names are the widget's names: the processor makes a gadget for it, so its
// downstream keys are gadget_<id> and its recovery point gadget_created.
var Names = operation.Names{Type: "widget", Prefix: "wid_", Path: "/v1/widgets", Object: "gadget", Done: "made"}

// ErrTooHeavy is the refusal of the widget's first phase.
var ErrTooHeavy = errors.New("the widget is too heavy")

// Widget is a widget as the API would show it.
type Widget struct {
	ID          string    `json:"id"`
	Object      string    `json:"object"`
	Amount      int64     `json:"amount"`
	Currency    string    `json:"currency"`
	Status      string    `json:"status"`
	FailureCode *string   `json:"failure_code"`
	GadgetID    *string   `json:"gadget_id"`
	CreatedAt   time.Time `json:"created_at"`

	TenantID string `json:"-"`
	KeyID    *int64 `json:"-"`
}

// migration makes the widget's table and admits its type and recovery point
// in the service's checks, as a forker's migration for a new kind does.
const migration = `
CREATE TABLE widgets (
    id                 text PRIMARY KEY,
    tenant_id          text NOT NULL REFERENCES tenants (id),
    idempotency_key_id bigint UNIQUE REFERENCES idempotency_keys (id) ON DELETE SET NULL,
    amount             bigint NOT NULL,
    currency           text NOT NULL,
    status             text NOT NULL CHECK (status IN ('processing', 'made', 'queued', 'failed')),
    failure_code       text,
    gadget_id          text,
    settled_by         text,
    created_at         timestamptz NOT NULL,
    updated_at         timestamptz NOT NULL
);
CREATE OR REPLACE FUNCTION recovery_point_known(point text) RETURNS boolean LANGUAGE sql IMMUTABLE
RETURN point IN ('started', 'charge_created', 'refund_created', 'gadget_created', 'finished', 'expired');
ALTER TABLE reconciliations DROP CONSTRAINT reconciliations_resource_type_check;
ALTER TABLE reconciliations ADD CONSTRAINT reconciliations_resource_type_check
    CHECK (resource_type IN ('payment', 'refund', 'widget'));`

// Migrate makes the widget's table in a test's database.
func Migrate(ctx context.Context, db database.DBTX) error {
	if _, err := db.Exec(ctx, migration); err != nil {
		return fmt.Errorf("migrate widgets: %w", err)
	}
	return nil
}

const insertWidget = `
INSERT INTO widgets (id, tenant_id, idempotency_key_id, amount, currency, status, created_at, updated_at)
SELECT $1, $2, k.id, $4, 'USD', 'processing', now(), now()
FROM idempotency_keys k WHERE k.tenant_id = $2 AND k.key = $3 AND k.resource_id = $1`

// Create starts a widget of amount under req's key; an amount over 1000 is
// refused for good (ErrTooHeavy).
func Create(ctx context.Context, s *operation.Service, req idempotency.Request, amount int64) (idempotency.Lease, error) {
	return s.Start(ctx, req, operation.Steps{Plan: func(context.Context, pgx.Tx) (operation.Plan, error) {
		id := operation.NewID(Names.Prefix)
		plan := operation.Plan{
			Resource: idempotency.ResourceRef{Type: Names.Type, ID: id},
			Rows:     func(b *pgx.Batch) { b.Queue(insertWidget, id, req.TenantID, req.Key, amount) },
		}
		if amount > 1000 {
			plan.Refusal = ErrTooHeavy
		}
		return plan, nil
	}})
}

// Kind declares the widget; New makes it.
type Kind struct {
	operation.Declared
	processor *Processor
}

// tooHeavy is how the error table answers ErrTooHeavy.
var tooHeavy = operation.ErrorRule{Err: ErrTooHeavy, Status: http.StatusBadRequest, Code: "widget_too_heavy", Title: "Widget too heavy"}

// States are the widget's own: made (201, widget.made) when the processor
// made its gadget; queued (202, widget.queued), a success not final, when
// it took a gadget of QueuedAmount to make later, and its webhook then
// says made, or failed; and failed (402, widget.failed).
var States = []operation.State{
	{Status: "made", Succeeded: true, Answer: http.StatusCreated},
	{Status: "queued", Succeeded: true, Answer: http.StatusAccepted, Waiting: true},
	{Status: "failed", Answer: http.StatusPaymentRequired},
}

// QueuedAmount is the amount of a widget whose gadget the processor queues.
const QueuedAmount = 777

// New declares the widget, its gadgets made by p.
func New(p *Processor) Kind {
	return Kind{Declared: operation.Declare(Names, Widget{}, struct{ Amount int64 }{}, tooHeavy).WithStates(States...), processor: p}
}

const columns = `id, tenant_id, idempotency_key_id, amount, currency, status, failure_code, gadget_id, created_at`

func scan(row pgx.Row) (Widget, error) {
	w := Widget{Object: Names.Type}
	err := row.Scan(&w.ID, &w.TenantID, &w.KeyID, &w.Amount, &w.Currency, &w.Status, &w.FailureCode, &w.GadgetID, &w.CreatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return Widget{}, operation.NotFound("widget")
	}
	return w, err
}

const loadWidget = `
SELECT tenant_id, idempotency_key_id, amount, currency, status, gadget_id, failure_code,
	created_at, now() >= created_at + $2::interval,
	(SELECT k.recovery_point FROM idempotency_keys k WHERE k.id = widgets.idempotency_key_id)
FROM widgets WHERE id = $1`

// Load implements operation.Kind.
func (k Kind) Load(ctx context.Context, db database.DBTX, id string, deadline time.Duration) (operation.Pending, error) {
	p, err := operation.ScanPending(db.QueryRow(ctx, loadWidget, id, deadline), Names.Type)
	if err != nil {
		return operation.Pending{}, err
	}
	amount, key := p.Amount, Names.DownstreamKey(id)
	p.Make = func(context.Context) (operation.Outcome, error) { return k.processor.make(key, id, amount) }
	p.Find = func(context.Context) (operation.Outcome, bool, error) { return k.processor.find(key) }
	p.Close = func(context.Context) (operation.Outcome, bool, error) { return k.processor.close(key) }
	return p, nil
}

const recordWidget = `
UPDATE widgets SET status = $2, gadget_id = $3, failure_code = $4, settled_by = $5, updated_at = now() WHERE id = $1`

// Record implements operation.Kind.
func (Kind) Record(b *pgx.Batch, id, status string, out operation.Outcome, path string) {
	operation.QueueRecord(b, Names.Type, recordWidget, id, status, operation.Nullable(out.ID), operation.Nullable(out.FailureCode), path)
}

// Final implements operation.Kind.
func (k Kind) Final(ctx context.Context, tx pgx.Tx, id string) (operation.Final, error) {
	w, err := scan(tx.QueryRow(ctx, `SELECT `+columns+` FROM widgets WHERE id = $1`, id))
	if err != nil {
		return operation.Final{}, err
	}
	st, err := k.State(w.Status)
	if err != nil {
		return operation.Final{}, err
	}
	resp := render.FinalResponse(Names, st, w.ID, w, w.FailureCode, render.Declined{Title: "Widget failed", Detail: "No gadget."})
	return operation.Final{TenantID: w.TenantID, Status: w.Status, Object: w, Response: resp}, nil
}

// Ledger implements operation.Kind: the whole ledger, in one page.
func (k Kind) Ledger(context.Context, time.Time, string) ([]operation.LedgerEntry, string, error) {
	return k.processor.ledger(), "", nil
}

// Accounted implements operation.Kind.
func (Kind) Accounted(ctx context.Context, db database.DBTX, ids []string) (map[string]operation.Accounted, error) {
	return operation.QueryAccounted(ctx, db, `SELECT id, status, gadget_id, amount, currency FROM widgets WHERE id = ANY($1)`, ids)
}

// Processor makes gadgets in memory: one per downstream key, a lookup by
// key, a fence, a ledger.
type Processor struct {
	mu     sync.Mutex
	made   map[string]operation.LedgerEntry
	closed map[string]bool
	// Unknown makes every call's outcome unknown, without making anything.
	Unknown bool
}

// NewProcessor returns a processor that has made nothing.
func NewProcessor() *Processor {
	return &Processor{made: map[string]operation.LedgerEntry{}, closed: map[string]bool{}}
}

// SetUnknown turns the outage on or off.
func (p *Processor) SetUnknown(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.Unknown = on
}

func (p *Processor) make(key, id string, amount int64) (operation.Outcome, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.closed[key]:
		return operation.Outcome{}, operation.ErrKeyClosed
	case p.Unknown:
		return operation.Outcome{}, fmt.Errorf("gadget: %w", operation.ErrProcessorUnknown)
	}
	e, ok := p.made[key]
	if !ok {
		e = operation.LedgerEntry{ID: GadgetID(id), IdempotencyKey: key, Reference: id,
			Succeeded: true, Amount: amount, Currency: "USD", CreatedAt: time.Now()}
		p.made[key] = e
	}
	if amount == QueuedAmount {
		return operation.Outcome{ID: e.ID, Succeeded: true, Status: "queued"}, nil
	}
	return operation.Outcome{ID: e.ID, Succeeded: true}, nil
}

// GadgetID is the id of the gadget the processor makes for widget id.
func GadgetID(id string) string { return "gad_" + strings.TrimPrefix(id, Names.Prefix) }

func (p *Processor) find(key string) (operation.Outcome, bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.Unknown {
		return operation.Outcome{}, false, fmt.Errorf("gadget: %w", operation.ErrProcessorUnknown)
	}
	e, ok := p.made[key]
	return operation.Outcome{ID: e.ID, Succeeded: ok}, ok, nil
}

func (p *Processor) close(key string) (operation.Outcome, bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if e, ok := p.made[key]; ok {
		return operation.Outcome{ID: e.ID, Succeeded: true}, true, nil
	}
	p.closed[key] = true
	return operation.Outcome{}, false, nil
}

func (p *Processor) ledger() []operation.LedgerEntry {
	p.mu.Lock()
	defer p.mu.Unlock()
	var entries []operation.LedgerEntry
	for _, e := range p.made {
		entries = append(entries, e)
	}
	return entries
}

// Made counts the gadgets made.
func (p *Processor) Made() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.made)
}
