package operation_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/example/payments/internal/idempotency"
	"github.com/example/payments/internal/operation"
	"github.com/example/payments/internal/payments"
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

func (s *statements) add(sql string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sent = append(s.sent, strings.Fields(sql)[0])
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
// transaction in which the key and the payment go in one batch.
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
	svc := &operation.Service{DB: pool, Keys: keys, Jobs: h.jobs, Kinds: h.svc.Kinds, Render: h.svc.Render}

	amount := int64(1000)
	np := payments.NewPayment{Amount: &amount, Currency: "USD", PaymentMethod: "pm_card_visa"}
	req := h.request("/v1/payments")
	lease, p, err := payments.Create(ctx, svc, req, np)
	if err != nil || !lease.Created || p == nil {
		t.Fatalf("Create = %+v, %v, %v", lease, p, err)
	}
	if got, want := strings.Join(traced.take(), " "), "SELECT begin batch commit"; got != want {
		t.Fatalf("a new key sent %q, want %q", got, want)
	}
	if err := h.ops.Run(ctx, payments.Names.Type, p.ID, 1, nil); err != nil {
		t.Fatal(err)
	}
	replay, _, err := payments.Create(ctx, svc, req, np)
	if err != nil || replay.Created || !replay.Key.Finished() || replay.Key.Response == nil {
		t.Fatalf("replay = %+v, %v", replay, err)
	}
	if got, want := strings.Join(traced.take(), " "), "SELECT"; got != want {
		t.Fatalf("a replay sent %q, want %q", got, want)
	}
}
