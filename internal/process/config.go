// Package process holds what every process shares: the configuration they
// all read (declared once here and embedded in each process's own), logging
// that joins up with traces, what a program's main does (Main, Configure,
// Run), and an HTTP server that shuts down gracefully.
// Each process is built by one constructor from one configuration struct, in
// a package of its own so that a binary links only what it runs: process/api,
// process/worker, and the stand-in processor's under tools/. The
// binaries only read their configuration and call these; the end-to-end
// tests, the chaos run and every harness use the same constructors.
package process

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/kelseyhightower/envconfig"
	"go.opentelemetry.io/otel/trace"

	"github.com/example/payments/internal/catalog"
	"github.com/example/payments/internal/crash"
	"github.com/example/payments/internal/database"
	"github.com/example/payments/internal/gateway"
	"github.com/example/payments/internal/signing"
	"github.com/example/payments/internal/tracing"
)

// Common is the configuration every process reads.
type Common struct {
	DatabaseURL string `envconfig:"DATABASE_URL" default:"postgres://postgres@127.0.0.1:5432/payments?sslmode=disable" desc:"Postgres connection URL, or a pooler's in transaction mode (then set DATABASE_SESSION_URL too)"`
	// SessionURL, when set, reaches Postgres past the pooler DatabaseURL
	// names, for what needs a session of its own.
	SessionURL string `envconfig:"DATABASE_SESSION_URL" desc:"when DATABASE_URL is a pooler in transaction mode: Postgres past it, for what needs a session (LISTEN, River's client, migrations, the worker's presence); unset: DATABASE_URL, and the worker refuses to start if that is such a pooler"`
	AppEnv     string `envconfig:"APP_ENV" default:"production" desc:"production, development (allows api seed) or test (allows CRASH_POINT)"`
	// Logging is LOG_FORMAT and LOG_LEVEL.
	Logging
	ShutdownTimeout time.Duration `envconfig:"SHUTDOWN_TIMEOUT" default:"35s" desc:"how long in-flight work may finish on shutdown"`
	// DBMaxConns sizes the process's pool; see docs/SCALING.md.
	DBMaxConns int32 `envconfig:"DB_MAX_CONNS" default:"16" desc:"the most connections in the process's database pool (the API's LISTEN has one of its own, and its reads of keys DB_READ_CONNS)"`
	// OTel is read by the program's main, which sets its global
	// TracerProvider up (Run); it is validated and logged here.
	tracing.OTel
	// TracerProvider, when set, is the process's instead of the global one:
	// tests give each process its own, recording in memory. It is never read
	// from the environment.
	TracerProvider trace.TracerProvider `ignored:"true"`
}

// Pooled reports whether DatabaseURL is a pooler: whether SessionURL is set.
func (c Common) Pooled() bool { return c.SessionURL != "" }

// Session is the URL of what needs a session of its own: SessionURL when
// set, else DatabaseURL.
func (c Common) Session() string {
	if c.Pooled() {
		return c.SessionURL
	}
	return c.DatabaseURL
}

// OpenPools opens the process's pool for its transactions, of at most
// DB_MAX_CONNS, through the pooler when there is one (database.OpenPooled),
// and its pool for what needs a session, of at most sessionConns, past the
// pooler: the same pool when there is none. Neither waits for the database.
func (c Common) OpenPools(ctx context.Context, sessionConns int32) (pool, session *pgxpool.Pool, err error) {
	if pool, err = c.OpenPool(ctx, c.DBMaxConns); err != nil || !c.Pooled() {
		return pool, pool, err
	}
	if session, err = database.Open(ctx, c.SessionURL, sessionConns); err != nil {
		pool.Close()
		return nil, nil, err
	}
	return pool, session, nil
}

// OpenPool opens a pool of at most maxConns on DatabaseURL, through the
// pooler when there is one (database.OpenPooled). It does not wait for the
// database.
func (c Common) OpenPool(ctx context.Context, maxConns int32) (*pgxpool.Pool, error) {
	if c.Pooled() {
		return database.OpenPooled(ctx, c.DatabaseURL, maxConns)
	}
	return database.Open(ctx, c.DatabaseURL, maxConns)
}

// Connect opens a pool on DatabaseURL, through the pooler when there is one,
// as OpenPool does, and checks that the database answers: for a command
// that runs once (the review, the seed).
func (c Common) Connect(ctx context.Context) (*pgxpool.Pool, error) {
	if c.Pooled() {
		return database.ConnectPooled(ctx, c.DatabaseURL, 0)
	}
	return database.Connect(ctx, c.DatabaseURL, 0)
}

// ClosePools closes what OpenPools opened.
func ClosePools(pool, session *pgxpool.Pool) {
	pool.Close()
	if session != pool {
		session.Close()
	}
}

// KeyRetention is shared by the API, which finishes the keys of refusals it
// stores at once, and the worker, which finishes every other key.
type KeyRetention struct {
	KeyRetention time.Duration `envconfig:"IDEMPOTENCY_KEY_RETENTION" default:"24h" desc:"how long a finished key is kept"`
}

// Processor is shared by the worker, which calls the processor, and the
// API, which receives its webhooks: which processor the service runs
// against (one of package catalog's), and its adapter's own settings.
type Processor struct {
	Name string `envconfig:"PROCESSOR" desc:"the card processor, one of those listed below with their own settings (unset: the first of them)"`
	// Settings are the named adapter's own, read from the environment by
	// Load, and logged with the configuration; a test may set them instead.
	Settings gateway.Settings `ignored:"true" log:"settings"`
}

// processor is what Load and Usage find in a configuration that embeds a
// Processor.
func (p *Processor) processor() *Processor { return p }

// load reads the settings of the adapter Name picks from the environment:
// the list's first when Name is unset.
func (p *Processor) load() error {
	if p.Name == "" {
		p.Name = catalog.Processors[0].Name
	}
	a, err := catalog.Adapter(p.Name)
	if err != nil {
		return err
	}
	*p, err = NewProcessor(a)
	return err
}

// NewProcessor is the processor a declares, its settings read from the
// environment, each one unset its default: what Load reads for the
// processor PROCESSOR names, and what a harness starts with.
func NewProcessor(a gateway.Adapter) (Processor, error) {
	settings := a.Settings()
	if err := envconfig.Process("", settings); err != nil {
		return Processor{}, fmt.Errorf("configuration of processor %s: %w", a.Name, err)
	}
	return Processor{Name: a.Name, Settings: settings}, nil
}

// Validate refuses a processor whose settings were not read: for a name
// the service has no adapter for, naming the known ones. Settings a test
// sets may be of an adapter no list names (a test-only processor's), as
// long as they declare the processor Name names.
func (p Processor) Validate() error {
	if p.Settings == nil {
		if _, err := catalog.Adapter(p.Name); err != nil {
			return err
		}
		return fmt.Errorf("the settings of processor %s were not read", p.Name)
	}
	if declared := p.Settings.Processor().Name; declared != p.Name {
		return fmt.Errorf("PROCESSOR is %q, and its settings declare processor %q", p.Name, declared)
	}
	return nil
}

// settingsTable is envconfig's table without its preamble, which the
// process's own table above it has said.
const settingsTable = `KEY	TYPE	DEFAULT	REQUIRED	DESCRIPTION
{{range .}}{{usage_key .}}	{{usage_type .}}	{{usage_default .}}	{{usage_required .}}	{{usage_description .}}
{{end}}`

// usage writes, for -h, each processor's own settings under its name.
func (p *Processor) usage(w io.Writer) error {
	for _, a := range catalog.Processors {
		fmt.Fprintf(w, "\nWith PROCESSOR=%s, %s:\n", a.Name, a.Summary)
		tw := tabwriter.NewWriter(w, 1, 0, 4, ' ', 0)
		if err := envconfig.Usagef("", a.Settings(), tw, settingsTable); err != nil {
			return err
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return nil
}

// withProcessor is a configuration that embeds a Processor.
type withProcessor interface{ processor() *Processor }

// Webhooks is shared by the API, which registers endpoints and encrypts
// their secrets, and the worker, which decrypts them and delivers.
type Webhooks struct {
	SecretsKey   signing.Box `envconfig:"WEBHOOK_SECRETS_KEY" desc:"32 bytes in base64 (openssl rand -base64 32): encrypts the webhook endpoints' signing secrets at rest; required"`
	AllowPrivate bool        `envconfig:"WEBHOOK_ALLOW_PRIVATE_NETWORKS" default:"false" desc:"development and tests only: let webhook endpoints be http, and on loopback or private networks"`
}

// Validate refuses a missing key: no endpoint's secret could be stored.
func (w Webhooks) Validate() error {
	if !w.SecretsKey.Set() {
		return fmt.Errorf("WEBHOOK_SECRETS_KEY is required (32 bytes in base64: openssl rand -base64 32)")
	}
	return nil
}

// CrashPoint names a point where the process kills itself, for the crash
// tests; refused unless APP_ENV=test.
type CrashPoint struct {
	CrashPoint string `envconfig:"CRASH_POINT" desc:"test only: where to die with SIGKILL"`
}

// Arm arms the crash point c names, which must be one of points, the
// process's own (crash.Arm: refused unless appEnv is "test"), and warns that
// the process will kill itself there. When c names none, it does nothing.
func (c CrashPoint) Arm(appEnv string, logger *slog.Logger, points ...string) error {
	if err := crash.Arm(c.CrashPoint, appEnv, points...); err != nil {
		return err
	}
	if c.CrashPoint != "" {
		logger.Warn("crash point armed: this process will kill itself", "point", c.CrashPoint)
	}
	return nil
}

// Load reads cfg, a pointer to one of the configuration structs, from the
// environment, with every default applied, and the settings of the
// processor it names, when it names one.
func Load(cfg any) error {
	if err := envconfig.Process("", cfg); err != nil {
		return fmt.Errorf("configuration: %w", err)
	}
	if p, ok := cfg.(withProcessor); ok {
		return p.processor().load()
	}
	return nil
}

// CheckConfig refuses cfg, a process's configuration, unless its Validate
// accepts it, and logs it (LogConfig): what each process's constructor does
// first.
func CheckConfig(logger *slog.Logger, cfg interface{ Validate() error }) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	LogConfig(logger, cfg)
	return nil
}

// Validate checks what every process shares.
func (c Common) Validate() error {
	if err := c.Logging.Validate(); err != nil {
		return err
	}
	return c.OTel.Validate()
}

// Provider is the process's TracerProvider: the one its configuration gives,
// else the global one its program's main set up.
func (c Common) Provider() trace.TracerProvider { return tracing.Or(c.TracerProvider) }
