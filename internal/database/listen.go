package database

import (
	"context"
	"errors"
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
// second later; one that answers nothing for twice listenPing is lost.
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
		wait, cancel := context.WithTimeout(ctx, listenPing)
		n, err := conn.WaitForNotification(wait)
		cancel()
		switch {
		case err == nil:
			notified(n.Payload)
		case ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded):
			// Nothing heard for listenPing: a quiet channel, or a server
			// cut off behind something that still holds the connection.
			if err := ping(ctx, conn); err != nil {
				return fmt.Errorf("ping: %w", err)
			}
		default:
			return err
		}
	}
}

// listenPing is how long a listener waits for a notification before it
// asks the server whether it is still there, and how long it waits for the
// answer: a listener cut off without a reset (a proxy holding the
// connection, which the kernel's bounds cannot see) knows it within twice
// listenPing, and connects again.
const listenPing = 5 * time.Second

func ping(ctx context.Context, conn *pgx.Conn) error {
	ctx, cancel := context.WithTimeout(ctx, listenPing)
	defer cancel()
	return conn.Ping(ctx)
}
