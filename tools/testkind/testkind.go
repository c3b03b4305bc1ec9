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
var Names = operation.Names{Type: "widget", Prefix: "wid_", Path: "/v1/widgets", Table: "widgets", Object: "gadget", Done: "made"}

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

// migration makes the widget's table, as a forker's migration for a new
// kind does: the columns every operation has (operation.Row), then its own
// (none), and its rules.
const migration = `
CREATE TABLE widgets (
    id                  text PRIMARY KEY,
    tenant_id           text NOT NULL REFERENCES tenants (id),
    idempotency_key_id  bigint UNIQUE REFERENCES idempotency_keys (id) ON DELETE SET NULL,
    amount              bigint NOT NULL,
    currency            text NOT NULL,
    status              text NOT NULL CHECK (status IN ('processing', 'made', 'queued', 'failed')),
    processor_gadget_id text,
    failure_code        text,
    failure_message     text,
    settled_by          text,
    created_at          timestamptz NOT NULL,
    updated_at          timestamptz NOT NULL
);`

// Migrate makes the widget's table in a test's database.
func Migrate(ctx context.Context, db database.DBTX) error {
	if _, err := db.Exec(ctx, migration); err != nil {
		return fmt.Errorf("migrate widgets: %w", err)
	}
	return nil
}

// Create starts a widget of amount under req's key; an amount over 1000 is
// refused for good (ErrTooHeavy).
func Create(ctx context.Context, s *operation.Service, req idempotency.Request, amount int64) (idempotency.Lease, error) {
	return s.Start(ctx, req, operation.Steps{Plan: func(context.Context, pgx.Tx) (operation.Plan, error) {
		id := operation.NewID(Names.Prefix)
		plan := operation.Plan{
			Resource:  idempotency.ResourceRef{Type: Names.Type, ID: id},
			Operation: &operation.Row{Amount: amount, Currency: "USD"},
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
	operation.Calls[Request]
}

// Request is what the widget's call sends.
type Request struct {
	Key, ID string
	Amount  int64
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
	return Kind{Declared: operation.Declare(Names, Widget{}, struct{ Amount int64 }{}, tooHeavy).WithStates(States...), Calls: p.calls()}
}

const columns = `id, tenant_id, idempotency_key_id, amount, currency, status, failure_code, processor_gadget_id, created_at`

func scan(row pgx.Row) (Widget, error) {
	w := Widget{Object: Names.Type}
	err := row.Scan(&w.ID, &w.TenantID, &w.KeyID, &w.Amount, &w.Currency, &w.Status, &w.FailureCode, &w.GadgetID, &w.CreatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return Widget{}, operation.NotFound("widget")
	}
	return w, err
}

// Call implements operation.Kind: the widget's call sends what every
// operation has.
func (k Kind) Call(_ *pgx.Batch, id string) func(*operation.Pending) {
	return func(p *operation.Pending) { k.Bind(p, Request{Key: Names.DownstreamKey(id), ID: id, Amount: p.Amount}) }
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

// calls are the processor's calls for widgets: all four, the ledger in one
// page.
func (p *Processor) calls() operation.Calls[Request] {
	return operation.Calls[Request]{
		Make:  func(_ context.Context, r Request) (operation.Outcome, error) { return p.make(r.Key, r.ID, r.Amount) },
		Find:  func(_ context.Context, r Request) (operation.Outcome, bool, error) { return p.find(r.Key) },
		Close: func(_ context.Context, r Request) (operation.Outcome, bool, error) { return p.close(r.Key) },
		Ledger: func(context.Context, time.Time, string) ([]operation.LedgerEntry, string, error) {
			return p.ledger(), "", nil
		},
	}
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
