package database

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Tx is a transaction that spends no round trip it can share. Its BEGIN is
// sent with its first statement, in one batch; statements whose outcome the
// caller needs only as "no error" may be queued (Queue) to go with the next
// statement that is sent; and its COMMIT may go with its last statements
// (CommitWith). A transaction of one batch costs one round trip. It
// implements pgx.Tx, so River's InsertManyTx runs in it like in any other. A transaction that ran nothing commits and rolls back without a
// word to the server.
type Tx struct {
	conn    *pgxpool.Conn
	begun   bool
	done    bool
	pending []*pgx.QueuedQuery
}

var _ pgx.Tx = (*Tx)(nil)

// Begin takes a connection from pool for a transaction that is begun by its
// first statement. The caller must Commit, CommitWith or Rollback it, which
// returns the connection.
func Begin(ctx context.Context, pool *pgxpool.Pool) (*Tx, error) {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("begin: %w", err)
	}
	return &Tx{conn: conn}, nil
}

// errNested reports a savepoint asked of a Tx, which nothing here needs.
var errNested = errors.New("database: savepoints are not supported by this transaction")

// Begin implements pgx.Tx; savepoints are not supported.
func (t *Tx) Begin(context.Context) (pgx.Tx, error) { return nil, errNested }

// Queue queues the statements of b to be sent with the next statement that
// is (by Exec, Query, QueryRow, SendBatch, Flush, Commit or CommitWith), in
// the same round trip, in order. Their callbacks, if any, run as their
// results are read, before that statement's; the first error, of the server
// or of a callback, is returned by that call instead of its own result (the
// server skips what follows a failed statement), and the transaction must
// then be rolled back.
func (t *Tx) Queue(b *pgx.Batch) {
	t.pending = append(t.pending, b.QueuedQueries...)
}

// Flush sends what is queued, if anything, and reads its results.
func (t *Tx) Flush(ctx context.Context) error {
	if len(t.pending) == 0 {
		return nil
	}
	br, err := t.send(ctx, &pgx.Batch{})
	if err != nil {
		return err
	}
	return br.Close()
}

// send sends the statements of b after a BEGIN, when the transaction has
// not begun, and after what is queued, in one batch. It reads the results
// of those that go first and returns the batch's results at b's first.
func (t *Tx) send(ctx context.Context, b *pgx.Batch) (pgx.BatchResults, error) {
	if t.done {
		return nil, pgx.ErrTxClosed
	}
	var first []*pgx.QueuedQuery
	if !t.begun {
		first = append(first, &pgx.QueuedQuery{SQL: "BEGIN"})
	}
	first = append(first, t.pending...)
	t.pending = nil
	if len(first) == 0 {
		return t.conn.SendBatch(ctx, b), nil
	}
	br := t.conn.SendBatch(ctx, &pgx.Batch{QueuedQueries: append(first, b.QueuedQueries...)})
	for i, q := range first {
		var err error
		if q.Fn != nil {
			err = q.Fn(br)
		} else {
			_, err = br.Exec()
		}
		if i == 0 && !t.begun {
			// Sent: whatever follows, the transaction must be rolled back
			// or committed.
			t.begun = true
		}
		if err != nil {
			return nil, errors.Join(err, br.Close())
		}
	}
	return br, nil
}

// sendOne sends one statement as send does: after the BEGIN and what is
// queued, when there is any.
func (t *Tx) sendOne(ctx context.Context, sql string, args ...any) (pgx.BatchResults, error) {
	b := &pgx.Batch{}
	b.Queue(sql, args...)
	return t.send(ctx, b)
}

// direct reports whether a statement may go to the connection alone: the
// transaction has begun and nothing is queued to go with it.
func (t *Tx) direct() bool { return t.begun && !t.done && len(t.pending) == 0 }

// Exec implements pgx.Tx.
func (t *Tx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if t.direct() {
		return t.conn.Exec(ctx, sql, args...)
	}
	br, err := t.sendOne(ctx, sql, args...)
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	tag, err := br.Exec()
	return tag, errors.Join(err, br.Close())
}

// Query implements pgx.Tx.
func (t *Tx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if t.direct() {
		return t.conn.Query(ctx, sql, args...)
	}
	br, err := t.sendOne(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	rows, err := br.Query()
	if err != nil {
		return nil, errors.Join(err, br.Close())
	}
	return &batchRows{Rows: rows, br: br}, nil
}

// QueryRow implements pgx.Tx.
func (t *Tx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	rows, err := t.Query(ctx, sql, args...)
	return &row{rows: rows, err: err}
}

// SendBatch implements pgx.Tx: the BEGIN, when it is still to be sent, and
// what is queued go first in the same batch.
func (t *Tx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	br, err := t.send(ctx, b)
	if err != nil {
		return &failedBatch{err: err}
	}
	return br
}

// CommitWith sends the statements queued in b and the COMMIT in one batch,
// after the BEGIN when the transaction has not begun, and after what was
// queued before (Queue): a transaction of one batch costs one round trip.
// Only the server can stop that COMMIT: when a statement fails, the server
// skips the rest and the COMMIT, the transaction is left to roll back, and
// the error is returned. So the statements queued before whose callbacks may
// refuse what they read are sent and read first, in a round trip of their
// own; b's callbacks run once the COMMIT is sent, and only read.
func (t *Tx) CommitWith(ctx context.Context, b *pgx.Batch) error {
	last := -1
	for i, q := range t.pending {
		if q.Fn != nil {
			last = i
		}
	}
	if last >= 0 {
		rest := t.pending[last+1:]
		t.pending = t.pending[:last+1]
		if err := t.Flush(ctx); err != nil {
			return err
		}
		t.pending = rest
	}
	var tag pgconn.CommandTag
	b.Queue("COMMIT").Exec(func(ct pgconn.CommandTag) error {
		tag = ct
		return nil
	})
	br, err := t.send(ctx, b)
	if err != nil {
		return err
	}
	if err := br.Close(); err != nil {
		return err
	}
	t.release()
	if tag.String() == "ROLLBACK" {
		return pgx.ErrTxCommitRollback
	}
	return nil
}

// Commit implements pgx.Tx: what is queued is sent with the COMMIT.
func (t *Tx) Commit(ctx context.Context) error {
	switch {
	case t.done:
		return pgx.ErrTxClosed
	case !t.begun && len(t.pending) == 0:
		t.release()
		return nil
	}
	return t.CommitWith(ctx, &pgx.Batch{})
}

// Rollback implements pgx.Tx: what is queued is dropped. A connection the
// ROLLBACK could not reach is closed rather than returned to the pool in a
// transaction.
func (t *Tx) Rollback(ctx context.Context) error {
	t.pending = nil
	switch {
	case t.done:
		return pgx.ErrTxClosed
	case !t.begun:
		t.release()
		return nil
	}
	_, err := t.conn.Exec(ctx, "ROLLBACK")
	if err != nil {
		_ = t.conn.Conn().Close(ctx)
	}
	t.release()
	return err
}

// release returns the connection to the pool, which closes it if it is
// still in a transaction or busy.
func (t *Tx) release() {
	t.done = true
	t.conn.Release()
}

// CopyFrom implements pgx.Tx.
func (t *Tx) CopyFrom(ctx context.Context, table pgx.Identifier, columns []string, src pgx.CopyFromSource) (int64, error) {
	if !t.direct() {
		if _, err := t.Exec(ctx, "SELECT 1"); err != nil {
			return 0, err
		}
	}
	return t.conn.CopyFrom(ctx, table, columns, src)
}

// LargeObjects implements pgx.Tx; large objects are not supported.
func (t *Tx) LargeObjects() pgx.LargeObjects { return pgx.LargeObjects{} }

// Prepare implements pgx.Tx.
func (t *Tx) Prepare(ctx context.Context, name, sql string) (*pgconn.StatementDescription, error) {
	return t.conn.Conn().Prepare(ctx, name, sql)
}

// Conn implements pgx.Tx.
func (t *Tx) Conn() *pgx.Conn { return t.conn.Conn() }

// batchRows are the rows of a statement sent in a batch with the BEGIN:
// closing them closes the batch.
type batchRows struct {
	pgx.Rows
	br pgx.BatchResults
}

func (r *batchRows) Close() {
	r.Rows.Close()
	_ = r.br.Close()
}

// row is the first row of rows, as pgx's QueryRow reads it.
type row struct {
	rows pgx.Rows
	err  error
}

func (r *row) Scan(dest ...any) error {
	if r.err != nil {
		return r.err
	}
	defer r.rows.Close()
	if !r.rows.Next() {
		if err := r.rows.Err(); err != nil {
			return err
		}
		return pgx.ErrNoRows
	}
	if err := r.rows.Scan(dest...); err != nil {
		return err
	}
	r.rows.Close()
	return r.rows.Err()
}

// failedBatch is the results of a batch that could not be sent.
type failedBatch struct{ err error }

func (f *failedBatch) Exec() (pgconn.CommandTag, error) { return pgconn.CommandTag{}, f.err }
func (f *failedBatch) Query() (pgx.Rows, error)         { return nil, f.err }
func (f *failedBatch) QueryRow() pgx.Row                { return &row{err: f.err} }
func (f *failedBatch) Close() error                     { return f.err }
func (f *failedBatch) Tx() pgx.Tx                       { return nil }

// Later runs a statement in tx whose outcome is needed only as "no error":
// queued to go with tx's next statement when tx is a *Tx (its error
// returned by that statement's call), else sent at once.
func Later(ctx context.Context, tx pgx.Tx, sql string, args ...any) error {
	if t, ok := tx.(*Tx); ok {
		b := &pgx.Batch{}
		b.Queue(sql, args...)
		t.Queue(b)
		return nil
	}
	_, err := tx.Exec(ctx, sql, args...)
	return err
}

// AsyncCommit, queued first in a transaction, spares its commit the wait for
// the disk: for a count a crash may forget (a rate limit's), whose row is
// then held for the statement and the commit only. It is local to the
// transaction, so it outlives nothing (a pooler may hand the connection to
// anyone next).
const AsyncCommit = `SET LOCAL synchronous_commit TO off`

// CommitAsync runs the statements queue puts in a batch as one transaction
// on pool whose commit does not wait for the disk (AsyncCommit), in one
// round trip: the BEGIN, the statements and the COMMIT go together.
func CommitAsync(ctx context.Context, pool *pgxpool.Pool, queue func(b *pgx.Batch)) error {
	tx, err := Begin(ctx, pool)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx) //nolint:errcheck // a no-op once committed
	b := &pgx.Batch{}
	b.Queue(AsyncCommit)
	queue(b)
	return tx.CommitWith(ctx, b)
}
