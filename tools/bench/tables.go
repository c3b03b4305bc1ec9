package bench

import (
	"context"
	"fmt"
	"io"

	"github.com/jackc/pgx/v5/pgxpool"
)

// What the run does to its database between modes: the big table of
// finished keys, and the vacuums and checkpoints that keep a mode from
// paying for the modes before it.

// bigTable inserts n finished keys, as months of traffic leave them.
func bigTable(ctx context.Context, pool *pgxpool.Pool, n int) error {
	_, err := pool.Exec(ctx, `
INSERT INTO idempotency_keys (tenant_id, key, request_method, request_path, request_fingerprint, recovery_point,
	response_status, response_headers, response_body, created_at, updated_at, finished_at, expires_at)
SELECT 'ten_globex', 'old-' || i, 'POST', '/v1/payments', sha256(i::text::bytea), 'finished',
	201, '{"Content-Type": "application/json"}', '{}'::bytea, now(), now(), now(), now() + interval '1 day'
FROM generate_series(1, $1) i`, n)
	if err != nil {
		return err
	}
	_, err = pool.Exec(ctx, `VACUUM ANALYZE idempotency_keys`)
	return err
}

// vacuum vacuums and analyzes the whole database, then checkpoints, so
// that a mode does not pay for what the modes before it left: the new-key
// modes queue tens of thousands of jobs with the worker stopped, and once the
// worker has drained them the job queue's indexes hold their dead entries
// until a vacuum, which autovacuum starts a minute apart at most. River's
// fetch read 364 buffers a call just after such a drain, 25 after a VACUUM.
// It needs the table owners' rights (the bench's own database: it made
// them); without them the run goes on, and says so.
func vacuum(ctx context.Context, pool *pgxpool.Pool, out io.Writer) {
	if _, err := pool.Exec(ctx, `VACUUM (ANALYZE)`); err != nil {
		fmt.Fprintf(out, "bench: no vacuum before the mode (%v); its figure includes what earlier modes left\n", err)
	}
	checkpoint(ctx, pool, out)
}

// checkpoint flushes what earlier writes left dirty. It needs the
// pg_checkpoint role (or a superuser); without it the run goes on, and says so.
func checkpoint(ctx context.Context, pool *pgxpool.Pool, out io.Writer) {
	if _, err := pool.Exec(ctx, `CHECKPOINT`); err != nil {
		fmt.Fprintf(out, "bench: no checkpoint before the mode (%v); its figure includes earlier writes\n", err)
	}
}
