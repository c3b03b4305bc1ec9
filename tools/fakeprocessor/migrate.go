package fakeprocessor

import (
	"context"
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/example/payments/internal/database"
	"github.com/example/payments/tools/fakeprocessor/migrations"
)

// Migrate applies the fake processor's own migrations (its schema,
// processor), with a goose version table of its own. The service's
// migrations know nothing of it: a real processor keeps its ledger elsewhere.
func Migrate(ctx context.Context, pool *pgxpool.Pool, logger *slog.Logger) error {
	return database.MigrateGoose(ctx, pool, migrations.FS, "fakeprocessor_db_version", logger)
}
