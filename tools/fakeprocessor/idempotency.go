package fakeprocessor

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5/middleware"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/example/payments/internal/database"
	"github.com/example/payments/internal/timer"
)

// execTimeout bounds the transaction of one POST. The transaction does not
// follow the request's context: once the processor starts charging it
// finishes, whether or not the caller is still there, as a card network does.
const execTimeout = 30 * time.Second

// maxKeyLength is the longest Idempotency-Key accepted.
const maxKeyLength = 255

// outcome is the answer of an operation run under an idempotency key. The
// status and body are stored and replayed; hang and event are not.
type outcome struct {
	status int
	body   []byte
	// hang withholds a fresh answer until the caller gives up or the hang
	// limit passes (pm_card_timeout).
	hang bool
	// event tells the service of a completed operation by webhook. It is
	// recorded with the stored answer, so a 5xx (rolled back) has none.
	event *event
}

// execFunc performs an operation inside the transaction that reserved its
// key. Its writes are queued (Tx.Queue), to go with the COMMIT. An outcome
// of 5xx, or an error, rolls everything back.
type execFunc func(ctx context.Context, tx *database.Tx, key string) (outcome, error)

// params is a pointer to a POST body that can check (and normalise) itself.
type params[P any] interface {
	*P
	validate() error
}

// handleCreate returns the handler of an idempotent POST: decode and
// validate the body into P, then run create under the request's key. done
// says what the operation does to money ("charged"), for the refusal of a
// closed key.
func handleCreate[P any, PP params[P]](s *Server, done string, create func(ctx context.Context, tx *database.Tx, key string, p P) (outcome, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var p P
		if err := decodeBody(w, r, &p); err != nil {
			writeError(w, http.StatusBadRequest, invalid("parameter_invalid", err.Error()))
			return
		}
		if err := PP(&p).validate(); err != nil {
			writeError(w, http.StatusBadRequest, invalid("parameter_invalid", err.Error()))
			return
		}
		s.idempotent(w, r, done, p, func(ctx context.Context, tx *database.Tx, key string) (outcome, error) {
			return create(ctx, tx, key, p)
		})
	}
}

// idempotent runs exec at most once per Idempotency-Key and answers with its
// outcome, or with the stored outcome of an earlier request with the same key
// and the same params. params must be the validated, normalised request, so
// its JSON is the request's fingerprint.
//
// Everything happens in one transaction: the key row is inserted, exec runs
// and the outcome is stored, then the transaction commits. A concurrent
// request with the same key blocks on the key's unique index until the first
// commits, then reads its outcome; if the first rolls back, the second runs.
// A key closed before anything was made under it refuses every request.
func (s *Server) idempotent(w http.ResponseWriter, r *http.Request, done string, params any, exec execFunc) {
	key := r.Header.Get("Idempotency-Key")
	switch {
	case key == "":
		writeError(w, http.StatusBadRequest, invalid("idempotency_key_missing", "The Idempotency-Key header is required."))
		return
	case len(key) > maxKeyLength:
		writeError(w, http.StatusBadRequest, invalid("idempotency_key_invalid", "The Idempotency-Key header is longer than 255 characters."))
		return
	}
	w.Header().Set("Idempotency-Key", key)
	if s.chance(s.cfg.Chaos.FailRate) {
		s.logger.WarnContext(r.Context(), "chaos: failing before charging", "request_id", middleware.GetReqID(r.Context()))
		writeError(w, http.StatusInternalServerError, apiError{Type: typeAPI, Code: "chaos_failure", Message: "Injected failure; nothing was charged."})
		return
	}

	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), execTimeout)
	defer cancel()
	out, replayed, err := s.runOnce(ctx, key, r.URL.Path, fingerprint(r.URL.Path, params), exec)
	switch {
	case errors.Is(err, errKeyClosed):
		writeError(w, http.StatusBadRequest, apiError{Type: typeIdempotency, Code: "idempotency_key_closed",
			Message: "This idempotency key was closed: nothing was or will be " + done + " with it."})
		return
	case errors.Is(err, errKeyReused):
		writeError(w, http.StatusBadRequest, apiError{Type: typeIdempotency, Code: "idempotency_key_reused",
			Message: "Keys for idempotent requests can only be used with the same parameters they were first used with."})
		return
	case err != nil:
		s.logger.ErrorContext(r.Context(), "idempotent request failed", "request_id", middleware.GetReqID(r.Context()), "err", err)
		writeError(w, http.StatusInternalServerError, internalError)
		return
	}

	if replayed {
		w.Header().Set("Idempotent-Replayed", "true")
		writeRaw(w, out.status, out.body)
		return
	}
	// Only a committed outcome is dropped: the caller then cannot tell
	// whether anything happened, which is the point.
	if out.status < 500 && s.chance(s.cfg.Chaos.DropRate) {
		s.logger.WarnContext(r.Context(), "chaos: dropping the response", "request_id", middleware.GetReqID(r.Context()))
		panic(http.ErrAbortHandler)
	}
	if out.hang && !s.hang(r.Context()) {
		return
	}
	writeRaw(w, out.status, out.body)
}

var (
	// errKeyReused reports a key used before with different parameters.
	errKeyReused = errors.New("idempotency key reused with different parameters")
	// errKeyClosed reports a key closed before anything was made under it.
	errKeyClosed = errors.New("idempotency key closed")
)

// runOnce reserves key and runs exec, or returns the outcome stored under key
// with replayed set.
func (s *Server) runOnce(ctx context.Context, key, path string, fp []byte, exec execFunc) (out outcome, replayed bool, err error) {
	// The BEGIN goes with the key's insert; the operation's writes, the
	// response and the event go with the COMMIT: two round trips for a
	// charge, three for a refund (which reads and locks its charge first).
	tx, err := database.Begin(ctx, s.pool)
	if err != nil {
		return outcome{}, false, err
	}
	defer tx.Rollback(ctx) //nolint:errcheck // a no-op after Commit

	now := s.now()
	reserved, err := claimKey(ctx, tx, key, path, fp, now, pgtype.Timestamptz{Time: now.Add(s.cfg.KeyRetention), Valid: true}, nil)
	if err != nil {
		return outcome{}, false, fmt.Errorf("reserve key: %w", err)
	}
	if !reserved {
		stored, err := getKey(ctx, tx, key)
		if err != nil {
			return outcome{}, false, err
		}
		// Closed comes first: a fence row carries the close's own path and
		// fingerprint, which no request matches, and the refusal must say
		// that nothing will ever be made rather than blame the parameters.
		if stored.closed && stored.status == nil {
			return outcome{}, false, errKeyClosed
		}
		if stored.path != path || !bytes.Equal(stored.fingerprint, fp) {
			return outcome{}, false, errKeyReused
		}
		if stored.status == nil {
			// Unreachable: a key row commits together with its response,
			// unless it is a fence, refused above.
			return outcome{}, false, fmt.Errorf("key %q has no stored response", key)
		}
		return outcome{status: *stored.status, body: stored.body}, true, nil
	}

	// The card network's own time, spent holding the key, so that a close
	// of the key waits for this operation.
	if err := s.execLatency(ctx); err != nil {
		return outcome{}, false, err
	}
	out, err = exec(ctx, tx, key)
	if err != nil {
		return outcome{}, false, err
	}
	if out.status >= 500 {
		// Not stored: the rollback frees the key for a retry.
		return out, false, nil
	}
	last := &pgx.Batch{}
	saveResponse(last, key, out.status, out.body)
	queued := out.event != nil && s.webhooksOn()
	if queued {
		s.recordEvent(ctx, last, *out.event)
	}
	if err := tx.CommitWith(ctx, last); err != nil {
		return outcome{}, false, fmt.Errorf("commit: %w", err)
	}
	if queued {
		// Sent now rather than at the next poll, even while the answer
		// itself is withheld (pm_card_timeout).
		s.wake()
	}
	return out, false, nil
}

// execLatency waits for the chaos exec latency, or until ctx ends; ctx is
// the operation's own, bounded by execTimeout and not by the caller.
func (s *Server) execLatency(ctx context.Context) error {
	d := s.cfg.Chaos.ExecLatency
	if d <= 0 {
		return nil
	}
	if err := timer.Sleep(ctx, d); err != nil {
		return fmt.Errorf("exec latency: %w", err)
	}
	return nil
}

// hang waits until the caller gives up, the hang limit passes or the server
// closes. It reports whether an answer should still be written.
func (s *Server) hang(ctx context.Context) bool {
	t := time.NewTimer(s.cfg.TimeoutHang)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	case <-s.closed:
		return true
	}
}

// fingerprint identifies a request's path and parameters. params is encoded
// from a struct, so field order and whitespace in the request do not matter.
func fingerprint(path string, params any) []byte {
	h := sha256.New()
	h.Write([]byte(path))
	h.Write([]byte{0})
	h.Write(marshal(params))
	return h.Sum(nil)
}

// claimKeySQL inserts a key row made at $4, expiring at $5 and closed at $6
// (NULL while open), or takes over one that has expired. A live key is left
// alone (the WHERE fails) but stays locked by this transaction; the
// conflicting row of a concurrent, uncommitted insert makes it wait. A
// closed key never expires, so it is never taken over.
const claimKeySQL = `
INSERT INTO processor.idempotency_keys (key, request_path, request_fingerprint, created_at, expires_at, closed_at)
VALUES ($1, $2, $3, $4, $5, $6)
ON CONFLICT (key) DO UPDATE
SET request_path        = excluded.request_path,
    request_fingerprint = excluded.request_fingerprint,
    response_status     = NULL,
    response_body       = NULL,
    created_at          = excluded.created_at,
    expires_at          = excluded.expires_at,
    closed_at           = excluded.closed_at
WHERE processor.idempotency_keys.expires_at <= excluded.created_at
RETURNING key`

// claimKey inserts the row of key, for a request to path with fingerprint
// fp at now, or takes over an expired one (claimKeySQL): a reservation open
// until expires, or a fence, closed at *closedAt and expiring never. It
// reports whether this transaction now owns the key: it inserted it, or
// replaced an expired row. false means a live key row, now locked, holds it.
func claimKey(ctx context.Context, db database.DBTX, key, path string, fp []byte, now time.Time,
	expires pgtype.Timestamptz, closedAt *time.Time) (bool, error) {
	var k string
	err := db.QueryRow(ctx, claimKeySQL, key, path, fp, now, expires, closedAt).Scan(&k)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return false, nil
	case err != nil:
		return false, err
	}
	return true, nil
}

// storedKey is a key row as a replay needs it.
type storedKey struct {
	path        string
	fingerprint []byte
	status      *int
	body        []byte
	// closed is set once the key is closed; with no status, it is a fence.
	closed bool
}

const getKeySQL = `
SELECT request_path, request_fingerprint, response_status, response_body, closed_at IS NOT NULL
FROM processor.idempotency_keys
WHERE key = $1`

// getKey reads a committed key row.
func getKey(ctx context.Context, db database.DBTX, key string) (storedKey, error) {
	var k storedKey
	err := db.QueryRow(ctx, getKeySQL, key).Scan(&k.path, &k.fingerprint, &k.status, &k.body, &k.closed)
	if err != nil {
		return storedKey{}, fmt.Errorf("get key: %w", err)
	}
	return k, nil
}

const saveResponseSQL = `
UPDATE processor.idempotency_keys
SET response_status = $2, response_body = $3
WHERE key = $1`

// saveResponse queues in b the store of the outcome to replay under key.
func saveResponse(b *pgx.Batch, key string, status int, body []byte) {
	b.Queue(saveResponseSQL, key, status, body)
}
