package operation

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/example/payments/internal/database"
)

// A kind's operations are the rows of its table (Names.Table). The columns
// every operation has are the machinery's, and only the machinery writes
// them; the statements below are the only ones that do:
//
//	id                  text PRIMARY KEY      the operation's id (Names.Prefix)
//	tenant_id           text NOT NULL         who owns it
//	idempotency_key_id  bigint UNIQUE         the key that created it; NULL once reaped
//	amount              bigint NOT NULL       what it asks of the processor, in minor units
//	currency            text NOT NULL         in which currency
//	status              text NOT NULL         processing, then one of the kind's States
//	processor_<object>_id text                what the processor made (Names.ProcessorColumn)
//	failure_code        text                  the code it failed with
//	failure_message     text                  and the words
//	settled_by          text                  the path that recorded its outcome (SettlePaths)
//	created_at, updated_at timestamptz NOT NULL
//
// The kind's own columns follow them in its table: the kind names them in
// its first phase (Row.Columns), and reads its rows as it likes.

// Row is a new operation's row, as its first phase plans it (Plan.Operation):
// what every operation has, and the kind's own columns.
type Row struct {
	Amount   int64
	Currency string
	// Columns are the kind's own columns and their values, in the order
	// they are written.
	Columns []Column
}

// Column is one of a kind's own columns, and its value.
type Column struct {
	Name  string
	Value any
}

// machineryColumns are the columns a kind never writes itself.
var machineryColumns = []string{"id", "tenant_id", "idempotency_key_id", "amount", "currency", "status",
	"failure_code", "failure_message", "settled_by", "created_at", "updated_at"}

// statements are the machinery's statements over one kind's table.
type statements struct {
	insert, load, record, accounted string
}

// statementsOf holds the statements of each kind's names, made once.
var statementsOf sync.Map

// statementsFor are the statements over the table of n's kind.
func statementsFor(n Names) statements {
	if s, ok := statementsOf.Load(n); ok {
		return s.(statements)
	}
	table, made := pgx.Identifier{n.Table}.Sanitize(), pgx.Identifier{n.ProcessorColumn()}.Sanitize()
	s := statements{
		// The first phase writes the operation after its key, which it
		// refers to: only when the key was reserved for this operation (a
		// key another request reserved names another, and nothing is
		// written). Its own columns follow ($6 on).
		insert: `INSERT INTO ` + table + ` (id, tenant_id, idempotency_key_id, amount, currency, status, created_at, updated_at%s)
SELECT $1, $2, k.id, $4, $5, 'processing', now(), now()%s
FROM idempotency_keys k WHERE k.tenant_id = $2 AND k.key = $3 AND k.resource_id = $1`,
		// Scanned by load, in this order.
		load: `SELECT tenant_id, idempotency_key_id, amount, currency, status, ` + made + `, failure_code, created_at,
	now() >= created_at + $2::interval,
	(SELECT k.recovery_point FROM idempotency_keys k WHERE k.id = o.idempotency_key_id)
FROM ` + table + ` o WHERE id = $1`,
		record: `UPDATE ` + table + `
SET status = $2, ` + made + ` = $3, failure_code = $4, failure_message = $5, settled_by = $6, updated_at = now()
WHERE id = $1`,
		accounted: `SELECT id, status, ` + made + `, amount, currency FROM ` + table + ` WHERE id = ANY($1)`,
	}
	statementsOf.Store(n, s)
	return s
}

// queueInsert queues in b the insert of operation id of kind n, under
// tenant's key, as row plans it.
func queueInsert(b *pgx.Batch, n Names, id, tenant, key string, row Row) error {
	var names, params strings.Builder
	args := []any{id, tenant, key, row.Amount, row.Currency}
	for _, c := range row.Columns {
		if !namePattern.MatchString(c.Name) || c.Name == n.ProcessorColumn() || slices.Contains(machineryColumns, c.Name) {
			return fmt.Errorf("%s: column %q is not one of its own", n.Type, c.Name)
		}
		args = append(args, c.Value)
		fmt.Fprintf(&names, ", %s", pgx.Identifier{c.Name}.Sanitize())
		fmt.Fprintf(&params, ", $%d", len(args))
	}
	b.Queue(fmt.Sprintf(statementsFor(n).insert, names.String(), params.String()), args...)
	return nil
}

// Load reads operation id of kind k, and its key's recovery point, as its
// phases need it, with its processor calls bound to what they send
// (Kind.Call); an error wrapping ErrNotFound when there is none. Whether
// deadline has passed since the operation was created is decided by the
// database's clock.
func Load(ctx context.Context, db database.DBTX, k Kind, id string, deadline time.Duration) (Pending, error) {
	b := &pgx.Batch{}
	p := queueLoad(b, k, id, deadline)
	bind := k.Call(b, id)
	err := db.SendBatch(ctx, b).Close()
	if err != nil {
		return Pending{}, err
	}
	if p.Recorded, err = recordedOf(k, *p); err != nil {
		return Pending{}, err
	}
	bind(p)
	if t, ok := k.(timedKind); ok {
		t.timeCalls(p)
	}
	return *p, nil
}

// loadRow reads operation id of kind k as Load does, without its calls and
// without reading its status as an outcome (Pending.Recorded is nil).
func loadRow(ctx context.Context, db database.DBTX, k Kind, id string, deadline time.Duration) (Pending, error) {
	b := &pgx.Batch{}
	p := queueLoad(b, k, id, deadline)
	if err := db.SendBatch(ctx, b).Close(); err != nil {
		return Pending{}, err
	}
	return *p, nil
}

// queueLoad queues in b the read of operation id of kind k into the Pending
// it returns, which holds it once b is sent.
func queueLoad(b *pgx.Batch, k Kind, id string, deadline time.Duration) *Pending {
	n := k.Names()
	p := &Pending{ID: id}
	b.Queue(statementsFor(n).load, id, deadline).QueryRow(func(row pgx.Row) error {
		err := row.Scan(&p.TenantID, &p.KeyID, &p.Amount, &p.Currency, &p.Status, &p.ProcessorID, &p.FailureCode,
			&p.CreatedAt, &p.PastDeadline, &p.RecoveryPoint)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			return NotFound(n.Type)
		case err != nil:
			return fmt.Errorf("read %s %s: %w", n.Type, id, err)
		}
		return nil
	})
	return p
}

// queueRecord queues in b the write of a definite outcome on operation id
// of kind n, in status, learned by path; once sent, it is refused unless it
// wrote exactly one row.
func queueRecord(b *pgx.Batch, n Names, id, status string, out Outcome, path string) {
	b.Queue(statementsFor(n).record, id, status, Nullable(out.ID), Nullable(out.FailureCode), Nullable(out.FailureMessage), path).
		Exec(func(tag pgconn.CommandTag) error { return Wrote(n.Type, id, tag.RowsAffected()) })
}

// accounted reads how our records stand for the operations ids of kind n,
// for the ledger comparison: one query for a whole page.
func accounted(ctx context.Context, db database.DBTX, n Names, ids []string) (map[string]Accounted, error) {
	rows, err := db.Query(ctx, statementsFor(n).accounted, ids)
	if err != nil {
		return nil, fmt.Errorf("look up accounted %ss: %w", n.Type, err)
	}
	found := map[string]Accounted{}
	var (
		id string
		a  Accounted
	)
	_, err = pgx.ForEachRow(rows, []any{&id, &a.Status, &a.ProcessorID, &a.Amount, &a.Currency}, func() error {
		found[id] = a
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read accounted %ss: %w", n.Type, err)
	}
	return found, nil
}
