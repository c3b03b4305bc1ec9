package tenants

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/example/payments/internal/database"
)

// Limiter is each tenant's rate limit across every API replica: at most
// Requests in each Window, counted in the database the replicas share, by
// its clock. A window opens with the tenant's first request after the last
// one ended.
type Limiter struct {
	DB       *pgxpool.Pool
	Requests int
	Window   time.Duration
}

// countRequest counts a request in its tenant's window, opening a new one
// when the last has ended, and returns the count so far and the seconds the
// window has left.
const countRequest = `
INSERT INTO tenant_rates AS r (tenant_id, window_start, count) VALUES ($1, now(), 1)
ON CONFLICT (tenant_id) DO UPDATE SET
	window_start = CASE WHEN r.window_start + $2::interval > now() THEN r.window_start ELSE now() END,
	count = CASE WHEN r.window_start + $2::interval > now() THEN r.count + 1 ELSE 1 END
RETURNING count, extract(epoch FROM window_start + $2::interval - now())::float8`

// Allow counts a request of the tenant and reports whether it is within the
// limit; when not, how long until the window ends. It costs one round trip:
// the BEGIN, the count and the COMMIT go together.
func (l *Limiter) Allow(ctx context.Context, tenantID string) (bool, time.Duration, error) {
	var (
		count int
		left  float64
	)
	err := database.CommitAsync(ctx, l.DB, func(b *pgx.Batch) {
		b.Queue(countRequest, tenantID, l.Window).QueryRow(func(row pgx.Row) error { return row.Scan(&count, &left) })
	})
	if err != nil {
		return false, 0, fmt.Errorf("count request: %w", err)
	}
	if count <= l.Requests {
		return true, 0, nil
	}
	return false, time.Duration(math.Ceil(left)) * time.Second, nil
}
