// Package fakeprocessor is a fake, Stripe-like card processor: a JSON HTTP API
// with its own durable ledger in the Postgres schema "processor" and its own
// idempotency keys. Test payment methods choose the outcome (pm_card_visa
// succeeds, pm_card_declined is declined, pm_card_timeout charges and then
// does not answer), and a Chaos configuration injects 5xx answers, dropped
// responses and latency, so that the service's retries and reconciliation can
// be exercised against something that behaves like a real card network.
//
// Besides charging and refunding, it finds operations by idempotency key,
// pages through its ledger with a cursor, and closes keys: after a close
// commits, nothing can ever be made with the key, which is the fence the
// service raises before giving up on an operation.
//
// When Webhooks are configured, every operation it completes also queues an
// event in its own transaction, and SendWebhooks delivers the queue, signed
// as Standard Webhooks, retrying until a horizon; the chaos knobs drop,
// duplicate and delay deliveries, as real processors sometimes do.
package fakeprocessor

import (
	"cmp"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/time/rate"

	"github.com/example/payments/internal/signing"
	"github.com/example/payments/internal/timer"
	"github.com/example/payments/internal/tracing"
)

const (
	// DefaultTimeoutHang is how long a pm_card_timeout charge holds its
	// response when the caller does not give up first.
	DefaultTimeoutHang = 60 * time.Second
	// DefaultKeyRetention is how long an idempotency key is remembered.
	DefaultKeyRetention = 7 * 24 * time.Hour
	// DefaultRetryHorizon is how long after its creation a webhook event
	// that no delivery has succeeded for is still retried.
	DefaultRetryHorizon = 72 * time.Hour
	// DefaultPollInterval is how often the webhook sender looks for events
	// that came due without a nudge.
	DefaultPollInterval = 200 * time.Millisecond
	// DefaultRetryBackoff is the delay before a webhook's first retry; it
	// doubles with each attempt, up to MaxRetryBackoff.
	DefaultRetryBackoff = time.Second
	// MaxRetryBackoff caps the delay between two attempts of a webhook.
	MaxRetryBackoff = 5 * time.Minute
)

// objects are what the processor makes, each declared in a file of its own
// (charges.go, refunds.go): its routes are the processor's API.
var objects = []object{charges, refunds}

// Chaos injects faults into the POST endpoints. The zero value injects none.
type Chaos struct {
	// FailRate is the probability, from 0 to 1, of answering 500 before
	// anything is charged or stored.
	FailRate float64
	// DropRate is the probability, from 0 to 1, of committing a new result
	// and then aborting the connection instead of answering.
	DropRate float64
	// Latency is added before every /v1 request is handled.
	Latency time.Duration
	// RateLimit, when set, is the /v1 requests a second the processor
	// takes (a burst as large); the others are answered 429 with
	// Retry-After, before anything is read, as a real processor's rate
	// limit answers.
	RateLimit float64
	// ExecLatency is the time the card network takes to execute a charge or
	// a refund. It is spent inside the operation's transaction, after its key
	// is reserved and before it commits, whether or not the caller is still
	// waiting, so that tests can find an operation in flight. It must be
	// shorter than the bound on that transaction (30s).
	ExecLatency time.Duration
	// WebhookDropRate is the probability, from 0 to 1, that an event is
	// recorded as dropped and never sent, so that the receiver must learn
	// of its operation some other way.
	WebhookDropRate float64
	// WebhookDuplicateRate is the probability, from 0 to 1, that an attempt
	// is sent twice, concurrently, so that the two copies race.
	WebhookDuplicateRate float64
	// WebhookDelay delays each event's first attempt by a random share of
	// it, so that deliveries arrive out of order.
	WebhookDelay time.Duration
	// Rand returns a number in [0, 1) and must be safe for concurrent use.
	// Nil means math/rand/v2.Float64; tests pass their own to be
	// deterministic.
	Rand func() float64
}

// Config configures a Server. The zero value is usable.
type Config struct {
	// Chaos is the fault injection; none by default.
	Chaos Chaos
	// TimeoutHang bounds how long a pm_card_timeout charge withholds its
	// response; zero means DefaultTimeoutHang.
	TimeoutHang time.Duration
	// KeyRetention is how long an idempotency key is remembered; an expired
	// key is treated as absent. Zero means DefaultKeyRetention.
	KeyRetention time.Duration
	// Now is the clock deciding timestamps, key expiry and when webhooks
	// are due; nil means time.Now.
	Now func() time.Time
	// Webhooks configures the events sent to the service; none by default.
	Webhooks Webhooks
	// TracerProvider makes a server span of each request, a child of the
	// caller's, and a span of each webhook attempt, in the trace of the
	// operation it tells of; nil means the global provider.
	TracerProvider trace.TracerProvider
}

// Webhooks configures the processor's outgoing webhooks. With no URL, none
// are recorded or sent.
type Webhooks struct {
	// URL receives every event, POSTed as JSON.
	URL string
	// Secrets sign every delivery, with each secret listed (rotation); they
	// are required with a URL.
	Secrets signing.Secrets
	// RetryHorizon is how long after its creation an event is retried; one
	// whose next attempt would fall later is abandoned. Zero means
	// DefaultRetryHorizon.
	RetryHorizon time.Duration
	// PollInterval is how often the sender looks for events that came due
	// (retries, delayed events, those a stopped processor left); zero means
	// DefaultPollInterval.
	PollInterval time.Duration
	// RetryBackoff is the delay before the first retry, doubled with each
	// attempt up to MaxRetryBackoff, then jittered; zero means
	// DefaultRetryBackoff.
	RetryBackoff time.Duration
}

// Server is the processor's HTTP API. It implements http.Handler.
type Server struct {
	pool   *pgxpool.Pool
	logger *slog.Logger
	cfg    Config

	// closed releases requests held by pm_card_timeout when the server stops.
	closed    chan struct{}
	closeOnce sync.Once

	// nudge wakes the webhook sender when an operation has committed an
	// event; it holds at most one wake-up.
	nudge chan struct{}
	// client sends webhooks; nil when they are off.
	client *http.Client
	// tracer makes the spans of webhook attempts.
	tracer trace.Tracer
	// router serves the API, each request in a span.
	router chi.Router
}

// New returns a Server keeping its ledger in pool, which must be migrated.
// It fails when cfg is out of range.
func New(pool *pgxpool.Pool, logger *slog.Logger, cfg Config) (*Server, error) {
	if err := validate(&cfg); err != nil {
		return nil, err
	}
	s := &Server{pool: pool, logger: logger, cfg: cfg, closed: make(chan struct{}), nudge: make(chan struct{}, 1),
		tracer: tracing.Or(cfg.TracerProvider).Tracer("github.com/example/payments/tools/fakeprocessor")}
	if s.webhooksOn() {
		s.client = newWebhookClient(cfg.TracerProvider)
	}

	r := chi.NewRouter()
	r.Use(tracing.Middleware(cfg.TracerProvider), middleware.RequestID, s.accessLog, middleware.Recoverer)
	r.Get("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	r.Route("/v1", func(r chi.Router) {
		r.Use(s.rateLimit(), s.latency)
		for _, o := range objects {
			o.routes(r, s)
		}
	})
	r.NotFound(func(w http.ResponseWriter, _ *http.Request) {
		writeError(w, http.StatusNotFound, apiError{Type: typeInvalidRequest, Code: "resource_missing", Message: "Unrecognized request URL."})
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, _ *http.Request) {
		writeError(w, http.StatusMethodNotAllowed, apiError{Type: typeInvalidRequest, Code: "method_not_allowed", Message: "Method not allowed for this URL."})
	})
	s.router = r
	return s, nil
}

// validate fills in defaults and rejects settings out of range.
func validate(cfg *Config) error {
	c := &cfg.Chaos
	err := outOfRange(
		probability("chaos fail rate", c.FailRate),
		probability("chaos drop rate", c.DropRate),
		notNegative("chaos latency", c.Latency),
		notNegative("chaos rate limit", c.RateLimit),
		notNegative("chaos exec latency", c.ExecLatency),
		notNegative("timeout hang", cfg.TimeoutHang),
		notNegative("key retention", cfg.KeyRetention),
		probability("chaos webhook drop rate", c.WebhookDropRate),
		probability("chaos webhook duplicate rate", c.WebhookDuplicateRate),
		notNegative("chaos webhook delay", c.WebhookDelay),
	)
	if err != nil {
		return err
	}
	if c.ExecLatency >= execTimeout {
		// Every operation would time out and roll back.
		return fmt.Errorf("chaos exec latency %v is not shorter than the %v an operation may take", c.ExecLatency, execTimeout)
	}
	if err := validateWebhooks(&cfg.Webhooks); err != nil {
		return err
	}
	if c.Rand == nil {
		c.Rand = rand.Float64
	}
	cfg.TimeoutHang = cmp.Or(cfg.TimeoutHang, DefaultTimeoutHang)
	cfg.KeyRetention = cmp.Or(cfg.KeyRetention, DefaultKeyRetention)
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return nil
}

// outOfRange is the first of the settings' errors, nil when every one is
// in range.
func outOfRange(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// probability is the error of a rate not between 0 and 1.
func probability(name string, v float64) error {
	if v < 0 || v > 1 {
		return fmt.Errorf("%s %v is not between 0 and 1", name, v)
	}
	return nil
}

// notNegative is the error of a negative setting.
func notNegative[T time.Duration | float64](name string, v T) error {
	if v < 0 {
		return fmt.Errorf("%s is negative", name)
	}
	return nil
}

// ServeHTTP routes a request to its handler, in a server span that
// continues the caller's trace.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.router.ServeHTTP(w, r)
}

// Close releases the requests that pm_card_timeout is holding, so that a
// graceful shutdown need not wait out the hang limit. They answer at once.
func (s *Server) Close() {
	s.closeOnce.Do(func() { close(s.closed) })
}

// now is the configured clock, in UTC and truncated to what Postgres stores,
// so that a charge reads back exactly as it was first answered.
func (s *Server) now() time.Time {
	return s.cfg.Now().UTC().Truncate(time.Microsecond)
}

// chance reports true with probability rate. It draws only when the rate is
// set, so an injected Rand sees a predictable sequence.
func (s *Server) chance(rate float64) bool {
	return rate > 0 && s.cfg.Chaos.Rand() < rate
}

// rateLimit answers 429, with Retry-After, the requests past the chaos rate
// limit.
func (s *Server) rateLimit() func(http.Handler) http.Handler {
	perSecond := s.cfg.Chaos.RateLimit
	if perSecond <= 0 {
		return func(next http.Handler) http.Handler { return next }
	}
	turns := rate.NewLimiter(rate.Limit(perSecond), max(1, int(perSecond)))
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !turns.Allow() {
				w.Header().Set("Retry-After", "1")
				writeError(w, http.StatusTooManyRequests, apiError{Type: typeInvalidRequest, Code: "rate_limit",
					Message: "Too many requests hit the API too quickly."})
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// latency delays every request by the configured chaos latency.
func (s *Server) latency(next http.Handler) http.Handler {
	d := s.cfg.Chaos.Latency
	if d <= 0 {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if timer.Sleep(r.Context(), d) == nil {
			next.ServeHTTP(w, r)
		}
	})
}

// accessLog writes one line per request, with its span's trace and span
// ids. It logs from a defer so that a response aborted on purpose (status 0)
// is logged too. The query string is kept, so that a lookup by key or a
// ledger page can be traced.
func (s *Server) accessLog(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if key := r.Header.Get("Idempotency-Key"); key != "" {
			trace.SpanFromContext(r.Context()).SetAttributes(attribute.String("idempotency.key", key))
		}
		ww := middleware.NewWrapResponseWriter(w, r.ProtoMajor)
		start := time.Now()
		defer func() {
			s.logger.LogAttrs(r.Context(), slog.LevelInfo, "request",
				slog.String("request_id", middleware.GetReqID(r.Context())),
				slog.String("method", r.Method),
				slog.String("path", r.URL.Path),
				slog.String("query", r.URL.RawQuery),
				slog.String("idempotency_key", r.Header.Get("Idempotency-Key")),
				slog.Int("status", ww.Status()),
				slog.Int("bytes", ww.BytesWritten()),
				slog.Duration("duration", time.Since(start)),
			)
		}()
		next.ServeHTTP(ww, r)
	})
}
