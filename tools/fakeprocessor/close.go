package fakeprocessor

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5/middleware"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/example/payments/internal/database"
)

// closeParams is the body of the close of every object, POST
// /v1/<objects>/close.
type closeParams struct {
	IdempotencyKey string `json:"idempotency_key"`
}

// closeKind is what a close fences: an object (charges, say). Every object
// shares the one key space of processor.idempotency_keys, so a closed key
// refuses any.
type closeKind struct {
	// path is the close's request path, recorded on the fence row.
	path string
	// closure reads, in the close's transaction, the newest operation of
	// this kind made under key and returns the answer to encode, and
	// whether it carries an operation.
	closure func(ctx context.Context, db database.DBTX, key string) (answer any, made bool, err error)
}

// closeOf is the close, at path, of the objects t reads, which a closure
// names member ("charge"): it answers with the newest made under the key.
func closeOf[T any](path, member string, t table[T]) closeKind {
	return closeKind{path: path, closure: func(ctx context.Context, db database.DBTX, key string) (any, bool, error) {
		made, err := queryAll(ctx, db, t.byKeySQL, t.scan, key)
		if err != nil {
			return nil, false, err
		}
		cl := keyClosure[T]{key: key, member: member}
		if len(made) > 0 {
			cl.made = &made[len(made)-1]
		}
		return cl, cl.made != nil, nil
	}}
}

// keyClosure is the answer of a close: the closed key, and as the member
// named member (the object's name: "charge") the newest object made under
// it, or null when nothing was, or ever will be.
type keyClosure[T any] struct {
	key, member string
	made        *T
}

// MarshalJSON encodes the closure as {"object": "key_closure",
// "idempotency_key": key, member: made}, in that order: the member's name
// is the object's.
func (c keyClosure[T]) MarshalJSON() ([]byte, error) {
	made, err := json.Marshal(c.made)
	if err != nil {
		return nil, err
	}
	key, _ := json.Marshal(c.key) // a string always encodes
	return fmt.Appendf(nil, `{"object":"key_closure","idempotency_key":%s,%q:%s}`, key, c.member, made), nil
}

// handleClose returns the handler of a close: after it commits no operation
// of any kind can be made with the key, and it answers with the operation of
// kind made under the key before, if any. A request making one right now
// holds the key uncommitted, so the close waits for it to finish.
//
// Closing is idempotent by nature: closing again answers the same, so it
// needs no Idempotency-Key of its own.
func (s *Server) handleClose(kind closeKind) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var p closeParams
		if err := decodeBody(w, r, &p); err != nil {
			writeError(w, http.StatusBadRequest, invalid("parameter_invalid", err.Error()))
			return
		}
		switch {
		case p.IdempotencyKey == "":
			writeError(w, http.StatusBadRequest, invalid("parameter_missing", "idempotency_key is required."))
			return
		case len(p.IdempotencyKey) > maxKeyLength:
			writeError(w, http.StatusBadRequest, invalid("parameter_invalid", "idempotency_key is longer than 255 characters."))
			return
		}
		if s.chance(s.cfg.Chaos.FailRate) {
			s.logger.WarnContext(r.Context(), "chaos: failing before closing", "request_id", middleware.GetReqID(r.Context()))
			writeError(w, http.StatusInternalServerError, apiError{Type: typeAPI, Code: "chaos_failure", Message: "Injected failure; nothing was closed."})
			return
		}

		// Unlike an operation, a close follows its caller: one rolled back
		// because the caller left is simply asked for again.
		ctx, cancel := context.WithTimeout(r.Context(), execTimeout)
		defer cancel()
		answer, made, err := s.closeKey(ctx, kind, p.IdempotencyKey)
		if err != nil {
			s.internalError(w, r, fmt.Errorf("close %s: %w", kind.path, err))
			return
		}
		// The key travels in the body, so the access log does not show it.
		s.logger.InfoContext(r.Context(), "key closed", "request_id", middleware.GetReqID(r.Context()),
			"path", kind.path, "idempotency_key", p.IdempotencyKey, "made", made)
		if s.chance(s.cfg.Chaos.DropRate) {
			s.logger.WarnContext(r.Context(), "chaos: dropping the response", "request_id", middleware.GetReqID(r.Context()))
			panic(http.ErrAbortHandler)
		}
		writeRaw(w, http.StatusOK, answer)
	}
}

// closeKey closes key in one transaction and returns the encoded answer, and
// whether it carries an operation made under key. The fence insert waits on the key row of an operation in flight; by the
// time the ledger is read (a fresh snapshot, in READ COMMITTED), that
// operation has committed or rolled back.
func (s *Server) closeKey(ctx context.Context, kind closeKind, key string) ([]byte, bool, error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return nil, false, fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // a no-op after Commit

	now := s.now()
	fenced, err := claimKey(ctx, tx, key, kind.path, fingerprint(kind.path, closeParams{key}), now, never, &now)
	if err != nil {
		return nil, false, fmt.Errorf("fence key: %w", err)
	}
	if !fenced {
		// The key is live: it holds an operation's answer, or was closed
		// before. Keep the answer for that operation's retries to replay,
		// but forever, so that the key can never expire and be taken over
		// by a new operation.
		if err := pinKey(ctx, tx, key, now); err != nil {
			return nil, false, err
		}
	}
	answer, made, err := kind.closure(ctx, tx, key)
	if err != nil {
		return nil, false, err
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, false, fmt.Errorf("commit: %w", err)
	}
	return marshal(answer), made, nil
}

// never is the expiry of a closed key.
var never = pgtype.Timestamptz{InfinityModifier: pgtype.Infinity, Valid: true}

// pinKeySQL closes a live key without touching its stored answer. A key
// closed before keeps the time it was first closed.
const pinKeySQL = `
UPDATE processor.idempotency_keys
SET expires_at = 'infinity',
    closed_at  = coalesce(closed_at, $2)
WHERE key = $1`

// pinKey closes a live key row, which the caller holds locked.
func pinKey(ctx context.Context, db database.DBTX, key string, now time.Time) error {
	if _, err := db.Exec(ctx, pinKeySQL, key, now); err != nil {
		return fmt.Errorf("pin key: %w", err)
	}
	return nil
}
