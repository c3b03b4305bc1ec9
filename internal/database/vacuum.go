package database

import (
	"context"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/example/payments/internal/timer"
)

// Vacuum vacuums tables, skipping any that another vacuum holds
// (SKIP_LOCKED), so that workers doing it at once never queue behind each
// other.
func Vacuum(ctx context.Context, db DBTX, tables ...string) error {
	names := make([]string, len(tables))
	for i, t := range tables {
		names[i] = pgx.Identifier{t}.Sanitize()
	}
	_, err := db.Exec(ctx, "VACUUM (SKIP_LOCKED) "+strings.Join(names, ", "))
	return err
}

// KeepVacuumed vacuums tables every interval until ctx ends: for the small
// queue tables whose every row is written and deleted many times a second.
// Autovacuum, where it runs at all, looks once a naptime (a minute by
// default) and leaves their indexes full of dead entries in between, which
// every count over them walks, some under a tenant's lock; a vacuum of a
// table of a few hundred live rows costs milliseconds.
func KeepVacuumed(ctx context.Context, db DBTX, interval time.Duration, logger *slog.Logger, tables ...string) {
	timer.Every(ctx, interval, func() {
		if err := Vacuum(ctx, db, tables...); err != nil && ctx.Err() == nil {
			logger.WarnContext(ctx, "vacuum the queue tables", "tables", tables, "err", err)
		}
	})
}
