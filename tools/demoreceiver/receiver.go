// Package demoreceiver is a webhook endpoint as a merchant would write one,
// to copy: it verifies each delivery's Standard Webhooks signature, with the
// standard-webhooks Go library, records the event id durably before it
// processes the event, so that the sender's retries and duplicates are
// processed once, and processes an event by printing it. It needs no
// database: the ids it has seen are kept in a file. It imports nothing of
// the payments service (TestImports): its program, tools/cmd/demoreceiver,
// reads the configuration, logs with log/slog and serves.
package demoreceiver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// MaxBodyBytes is the largest delivery accepted; a larger one is answered
// 413 without being read further.
const MaxBodyBytes = 256 << 10

// maxIDLength bounds a webhook-id, which is written to the dedupe file.
const maxIDLength = 255

// Config is the configuration of the receiver. Its program,
// tools/cmd/demoreceiver, reads it from the environment variables named
// here.
type Config struct {
	// LogFormat (LOG_FORMAT) is json or text; the program logs so, and New
	// refuses anything else.
	LogFormat string
	// LogLevel (LOG_LEVEL) is the least severe level logged: debug, info,
	// warn or error; empty is info.
	LogLevel string
	// Addr (RECEIVER_ADDR) is where the program listens.
	Addr string
	// Path (RECEIVER_PATH) is the path deliveries are POSTed to.
	Path string
	// Secret (RECEIVER_SECRET) verifies each delivery: the endpoint's
	// Secrets (ParseSecrets), the old and the new while one rotates.
	// Printed, it shows how many it holds, never them.
	Secret Verifier
	// DedupeFile (RECEIVER_DEDUPE_FILE) is the file of the event ids
	// already processed, one a line; keep it across restarts.
	DedupeFile string
	// FailFirst (RECEIVER_FAIL_FIRST), for chaos: the first N deliveries of
	// each event id are answered 500, to exercise the sender's retries
	// (counted in DedupeFile+".failfirst", across restarts).
	FailFirst int
	// Delay (RECEIVER_DELAY), for chaos: each delivery is answered after a
	// random wait of up to this.
	Delay time.Duration
}

// Verifier checks a delivery's signature and timestamp. Secrets is the one
// the program uses; it is an interface so that a test may verify with the
// sender's own implementation instead.
type Verifier interface {
	// Verify returns the webhook-id of a genuine delivery of body with
	// headers h, received at now. A genuine delivery whose timestamp is
	// too far from now is an error wrapping ErrStale; any other error is
	// answered as an invalid signature.
	Verify(body []byte, h http.Header, now time.Time) (id string, err error)
}

// logLevels are the values of LogLevel.
var logLevels = map[string]slog.Level{
	"": slog.LevelInfo, "debug": slog.LevelDebug, "info": slog.LevelInfo, "warn": slog.LevelWarn, "error": slog.LevelError,
}

// Validate checks the settings New cannot work without.
func (c Config) Validate() error {
	_, knownLevel := logLevels[c.LogLevel]
	switch {
	case c.LogFormat != "json" && c.LogFormat != "text":
		return fmt.Errorf("LOG_FORMAT (%q) must be json or text", c.LogFormat)
	case !knownLevel:
		return fmt.Errorf("LOG_LEVEL (%q) must be debug, info, warn or error", c.LogLevel)
	case noSecret(c.Secret):
		return errors.New("RECEIVER_SECRET holds no secret")
	case !strings.HasPrefix(c.Path, "/"):
		return fmt.Errorf("RECEIVER_PATH (%q) must start with /", c.Path)
	case c.DedupeFile == "":
		return errors.New("RECEIVER_DEDUPE_FILE is empty")
	case c.FailFirst < 0:
		return fmt.Errorf("RECEIVER_FAIL_FIRST (%d) is negative", c.FailFirst)
	case c.Delay < 0:
		return fmt.Errorf("RECEIVER_DELAY (%s) is negative", c.Delay)
	}
	return nil
}

// noSecret reports whether v can verify nothing.
func noSecret(v Verifier) bool {
	if v == nil {
		return true
	}
	e, ok := v.(interface{ Empty() bool })
	return ok && e.Empty()
}

// Logger is a log/slog logger writing to w as LogFormat and LogLevel say:
// JSON for machines, or text, one readable line a record, for a person at
// a terminal.
func (c Config) Logger(w io.Writer) (*slog.Logger, error) {
	level, ok := logLevels[c.LogLevel]
	if !ok {
		return nil, fmt.Errorf("LOG_LEVEL (%q) must be debug, info, warn or error", c.LogLevel)
	}
	opts := &slog.HandlerOptions{Level: level}
	switch c.LogFormat {
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("LOG_FORMAT (%q) must be json or text", c.LogFormat)
}

// log logs c, the secrets masked.
func (c Config) log(logger *slog.Logger) {
	secret := "none"
	switch s := c.Secret.(type) {
	case nil:
	case fmt.Stringer:
		secret = s.String()
	default:
		secret = fmt.Sprintf("(%T)", s)
	}
	logger.Info("configuration", "LogFormat", c.LogFormat, "LogLevel", c.LogLevel, "Addr", c.Addr, "Path", c.Path,
		"Secret", secret, "DedupeFile", c.DedupeFile, "FailFirst", c.FailFirst, "Delay", c.Delay.String())
}

// Receiver is the webhook endpoint, an http.Handler serving POST on the
// configured path and GET /healthz. Events are printed to its stdout.
type Receiver struct {
	cfg    Config
	logger *slog.Logger

	// mu makes checking and recording an id one step, so that concurrent
	// deliveries of one event are processed once. It is held across the
	// fsync: deliveries are recorded one at a time.
	mu   sync.Mutex
	seen *seenLog
	// failed counts the deliveries of each event refused on purpose
	// (FailFirst), across restarts; nil when FailFirst is 0.
	failed *failLog

	// outMu keeps the lines of concurrent events whole.
	outMu  sync.Mutex
	stdout io.Writer

	// beforeRecord, when set, is called by each delivery just before it is
	// checked and recorded; a test holds deliveries there to make them
	// race.
	beforeRecord func()
}

// New validates cfg, logs it with the secrets masked, and opens the dedupe
// file, loading the ids seen before. The receiver must be closed.
func New(cfg Config, logger *slog.Logger, stdout io.Writer) (*Receiver, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("configuration: %w", err)
	}
	cfg.log(logger)
	seen, err := openSeenLog(cfg.DedupeFile)
	if err != nil {
		return nil, err
	}
	logger.Info("dedupe file loaded", "file", cfg.DedupeFile, "seen", seen.len())
	rc := &Receiver{cfg: cfg, logger: logger, seen: seen, stdout: stdout}
	if cfg.FailFirst > 0 {
		if rc.failed, err = openFailLog(cfg.DedupeFile + ".failfirst"); err != nil {
			_ = seen.close()
			return nil, err
		}
	}
	return rc, nil
}

// Close closes the dedupe file, once no delivery is being served.
func (rc *Receiver) Close() error {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.failed != nil {
		_ = rc.failed.close()
	}
	if err := rc.seen.close(); err != nil {
		return fmt.Errorf("close dedupe file: %w", err)
	}
	return nil
}

// Seen is the number of event ids recorded, those loaded at start included.
func (rc *Receiver) Seen() int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.seen.len()
}

// ServeHTTP routes by exact path, so that any RECEIVER_PATH is taken
// literally.
func (rc *Receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.URL.Path == rc.cfg.Path && r.Method == http.MethodPost:
		rc.receive(w, r)
	case r.URL.Path == "/healthz" && (r.Method == http.MethodGet || r.Method == http.MethodHead):
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	case r.URL.Path == rc.cfg.Path:
		w.Header().Set("Allow", http.MethodPost)
		writeJSON(w, http.StatusMethodNotAllowed, errorBody{Error: "method not allowed"})
	default:
		writeJSON(w, http.StatusNotFound, errorBody{Error: "not found"})
	}
}

// event is the part of an event body the receiver reads.
type event struct {
	ID   string `json:"id"`
	Type string `json:"type"`
	Data struct {
		Object struct {
			ID     string `json:"id"`
			Status string `json:"status"`
		} `json:"object"`
	} `json:"data"`
}

// receipt is the answer to an accepted delivery.
type receipt struct {
	Received  bool `json:"received"`
	Duplicate bool `json:"duplicate,omitempty"`
}

type errorBody struct {
	Error string `json:"error"`
}

// errFailFirst is a delivery refused on purpose, for FailFirst.
var errFailFirst = errors.New("failing on purpose (RECEIVER_FAIL_FIRST)")

// receive takes one delivery. The signature is verified on the raw body
// before anything is read from it, and any refusal records nothing. The id
// is recorded durably before the event is processed and answered: a crash
// after processing, before the 200, brings a retry that is a duplicate. The
// price is that a crash between recording and processing loses the event;
// an endpoint that must never lose one records the id in the same
// transaction as the work the event causes.
func (rc *Receiver) receive(w http.ResponseWriter, r *http.Request) {
	if rc.cfg.Delay > 0 {
		select {
		case <-time.After(time.Duration(rand.Int64N(int64(rc.cfg.Delay)))):
		case <-r.Context().Done():
			return
		}
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	if tooLarge := (*http.MaxBytesError)(nil); errors.As(err, &tooLarge) {
		rc.refuse(w, r, http.StatusRequestEntityTooLarge, "body too large", err)
		return
	}
	if err != nil {
		rc.refuse(w, r, http.StatusBadRequest, "unreadable body", err)
		return
	}
	id, err := rc.cfg.Secret.Verify(body, r.Header, time.Now())
	if errors.Is(err, ErrStale) {
		rc.refuse(w, r, http.StatusBadRequest, "timestamp too old or too new", err)
		return
	}
	if err != nil {
		rc.refuse(w, r, http.StatusBadRequest, "invalid signature", err)
		return
	}
	ev, err := parseEvent(body, id)
	if err != nil {
		rc.refuse(w, r, http.StatusBadRequest, "malformed event", err)
		return
	}

	if rc.beforeRecord != nil {
		rc.beforeRecord()
	}
	duplicate, err := rc.record(id)
	if errors.Is(err, errFailFirst) {
		rc.logger.WarnContext(r.Context(), "delivery failed on purpose", "webhook_id", id, "type", ev.Type)
		writeJSON(w, http.StatusInternalServerError, errorBody{Error: err.Error()})
		return
	}
	if err != nil {
		rc.logger.ErrorContext(r.Context(), "record event", "webhook_id", id, "err", err)
		writeJSON(w, http.StatusInternalServerError, errorBody{Error: "could not record the event"})
		return
	}
	if duplicate {
		rc.logger.InfoContext(r.Context(), "duplicate event", "webhook_id", id, "type", ev.Type)
		writeJSON(w, http.StatusOK, receipt{Received: true, Duplicate: true})
		return
	}
	rc.process(r.Context(), ev)
	writeJSON(w, http.StatusOK, receipt{Received: true})
}

// record reports whether id was seen before, and otherwise records it,
// unless FailFirst says to fail this delivery.
func (rc *Receiver) record(id string) (duplicate bool, err error) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.seen.has(id) {
		return true, nil
	}
	if rc.failed != nil && rc.failed.counts[id] < rc.cfg.FailFirst {
		rc.failed.failed(id)
		return false, errFailFirst
	}
	if err := rc.seen.add(id); err != nil {
		return false, err
	}
	return false, nil
}

// process is what this receiver does with an event: one line on stdout,
// and a log record. An error writing it is logged only: the event is
// recorded, and a retry would be a duplicate.
func (rc *Receiver) process(ctx context.Context, ev event) {
	line := fmt.Sprintf("event %s %s %s %s\n", field(ev.ID), field(ev.Type), field(ev.Data.Object.ID), field(ev.Data.Object.Status))
	rc.outMu.Lock()
	_, err := io.WriteString(rc.stdout, line)
	rc.outMu.Unlock()
	if err != nil {
		rc.logger.ErrorContext(ctx, "print event", "webhook_id", ev.ID, "err", err)
	}
	rc.logger.InfoContext(ctx, "event", "webhook_id", ev.ID, "type", ev.Type, "object_id", ev.Data.Object.ID, "status", ev.Data.Object.Status)
}

// refuse answers a delivery that was not taken, and logs why.
func (rc *Receiver) refuse(w http.ResponseWriter, r *http.Request, status int, reason string, err error) {
	rc.logger.WarnContext(r.Context(), "delivery refused", "status", status, "reason", reason, "webhook_id", r.Header.Get(standardwebhooks.HeaderWebhookID), "err", err)
	writeJSON(w, status, errorBody{Error: reason})
}

// parseEvent reads a verified body. Its id must be the webhook-id, which
// is what is deduplicated, and fit on one line of the dedupe file.
func parseEvent(body []byte, id string) (event, error) {
	var ev event
	if err := json.Unmarshal(body, &ev); err != nil {
		return event{}, fmt.Errorf("decode event: %w", err)
	}
	switch {
	case id == "" || len(id) > maxIDLength || strings.ContainsFunc(id, unicode.IsSpace) || strings.ContainsFunc(id, unicode.IsControl):
		return event{}, fmt.Errorf("webhook-id %q is empty, too long or not one word", id)
	case ev.ID != id:
		return event{}, fmt.Errorf("event id %q is not the webhook-id %q", ev.ID, id)
	case ev.Type == "":
		return event{}, errors.New("event has no type")
	}
	return ev, nil
}

// field prints one value of an event line: "-" when empty, quoted when it
// would not read as one word.
func field(s string) string {
	if s == "" {
		return "-"
	}
	if strings.ContainsFunc(s, func(r rune) bool { return unicode.IsSpace(r) || !unicode.IsPrint(r) }) {
		return strconv.Quote(s)
	}
	return s
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
