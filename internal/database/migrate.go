package database

import (
	"context"
	"fmt"
	"io/fs"
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"

	"github.com/example/payments/migrations"
)

// Migrate applies the goose migrations under migrations/ and then River's own
// migrations, so one command leaves the database ready for every binary of
// the service. Concurrent callers are serialised by a Postgres session lock.
func Migrate(ctx context.Context, pool *pgxpool.Pool, logger *slog.Logger) error {
	if err := MigrateGoose(ctx, pool, migrations.FS, "goose_db_version", logger); err != nil {
		return err
	}
	migrator, err := rivermigrate.New(riverpgxv5.New(pool), nil)
	if err != nil {
		return fmt.Errorf("river migrator: %w", err)
	}
	res, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil)
	if err != nil {
		return fmt.Errorf("river migrate: %w", err)
	}
	for _, v := range res.Versions {
		logger.Info("applied river migration", "version", v.Version)
	}
	return nil
}

// MigrateGoose applies the goose migrations in fsys, keeping which are
// applied in the version table named table, so that sets of migrations (the
// service's, a stand-in's) are applied apart. Concurrent callers are
// serialised by a Postgres session lock.
func MigrateGoose(ctx context.Context, pool *pgxpool.Pool, fsys fs.FS, table string, logger *slog.Logger) error {
	db := stdlib.OpenDBFromPool(pool)
	defer db.Close()

	locker, err := lock.NewPostgresSessionLocker()
	if err != nil {
		return fmt.Errorf("goose locker: %w", err)
	}
	provider, err := goose.NewProvider(goose.DialectPostgres, db, fsys, goose.WithTableName(table),
		goose.WithSessionLocker(locker), goose.WithDisableGlobalRegistry(true))
	if err != nil {
		return fmt.Errorf("goose provider: %w", err)
	}
	results, err := provider.Up(ctx)
	if err != nil {
		return fmt.Errorf("goose up: %w", err)
	}
	for _, r := range results {
		logger.Info("applied migration", "source", r.Source.Path, "duration", r.Duration)
	}
	return nil
}
