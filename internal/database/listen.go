package database

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Listen LISTENs on channel, on a connection of its own made with pool's
// configuration (a session: past any pooler), until ctx ends, and calls
// notified with the payload of each notification. What is sent while it is
// not connected is lost, so it calls connected each time it has connected,
// for the caller to look for itself. A lost connection is made again a
// second later.
func Listen(ctx context.Context, pool *pgxpool.Pool, channel string, logger *slog.Logger, connected func(), notified func(payload string)) {
	for ctx.Err() == nil {
		err := listen(ctx, pool, channel, connected, notified)
		if ctx.Err() != nil {
			return
		}
		logger.Warn("listener lost its connection", "channel", channel, "err", err)
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

func listen(ctx context.Context, pool *pgxpool.Pool, channel string, connected func(), notified func(string)) error {
	conn, err := pgx.ConnectConfig(ctx, pool.Config().ConnConfig.Copy())
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{channel}.Sanitize()); err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	connected()
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		notified(n.Payload)
	}
}
