package fakeprocessor_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/example/payments/tools/fakeprocessor"
	"github.com/example/payments/tools/testdb"
)

// sends counts what a pool sends to the server and waits for: a statement
// on its own, or a batch.
type sends struct{ n atomic.Int64 }

func (s *sends) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	s.n.Add(1)
	return ctx
}

func (*sends) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (s *sends) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	s.n.Add(1)
	return ctx
}

func (*sends) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (*sends) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}

// TestRoundTrips counts the processor's round trips to its database: a
// charge is two (the BEGIN with its key's insert; the charge, the response
// to replay and the COMMIT), a refund three (its charge is read and locked
// in between), and a replay three (the key's insert finds the key, its
// read, the ROLLBACK).
func TestRoundTrips(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	cfg, err := pgxpool.ParseConfig(db.URL)
	if err != nil {
		t.Fatal(err)
	}
	counted := &sends{}
	cfg.ConnConfig.Tracer = counted
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	e := newEnvPool(t, db, pool, fakeprocessor.Config{})

	trips := func(path, key, body string, want int) response {
		t.Helper()
		before := counted.n.Load()
		resp := e.postOK(t, path, key, body)
		if got := counted.n.Load() - before; got != int64(want) {
			t.Errorf("POST %s under %q: %d round trips, want %d", path, key, got, want)
		}
		return resp
	}
	// The first of each warms the statement cache: its statements are
	// prepared on the way, in round trips of their own.
	for i := range 2 {
		charge := trips("/v1/charges", fmt.Sprintf("rt-charge-%d", i), `{"amount":1000,"currency":"USD","payment_method":"pm_card_visa"}`, 2)
		ch := decode[fakeprocessor.Charge](t, charge).ID
		trips("/v1/refunds", fmt.Sprintf("rt-refund-%d", i), `{"charge":"`+ch+`","amount":100}`, 3)
		trips("/v1/charges", fmt.Sprintf("rt-charge-%d", i), `{"amount":1000,"currency":"USD","payment_method":"pm_card_visa"}`, 3)
	}
}
