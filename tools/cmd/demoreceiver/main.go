// Command demoreceiver is a demo of a webhook endpoint as a merchant would run
// one, to copy: it verifies each delivery's signature, processes each event
// once by printing it, and keeps the ids it has processed in a file so that a
// restart does not process them again. "demoreceiver -h" lists the
// environment variables it reads. It imports nothing of the payments service
// but its handler, tools/demoreceiver: copy both.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/example/payments/tools/demoreceiver"
)

// main runs the program until SIGINT or SIGTERM, then stops it gracefully.
// An error ends it with status 1, -h with 0.
func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout)
	stop()
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintf(os.Stderr, "demoreceiver: %v\n", err)
		os.Exit(1)
	}
}

// The server's bounds. A delivery is answered in the time of one fsync
// (plus RECEIVER_DELAY, for chaos); the sender's own timeout is far shorter
// than writeTimeout.
const (
	readHeaderTimeout = 5 * time.Second
	readTimeout       = 15 * time.Second
	writeTimeout      = 30 * time.Second
	idleTimeout       = 60 * time.Second
	// shutdownTimeout bounds how long the deliveries in flight may finish.
	shutdownTimeout = 15 * time.Second
	// maxHeaderBytes: headers are small; a megabyte of them (net/http's
	// default) is someone's memory to spend. Past it: 431.
	maxHeaderBytes = 32 << 10
)

// run reads the configuration from the environment and serves until ctx
// ends. Events and logs both go to stdout; so do spans, with
// OTEL_TRACES_EXPORTER=console. Spans are flushed before it returns.
func run(ctx context.Context, args []string, stdout io.Writer) (err error) {
	if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
		usage(stdout)
		return flag.ErrHelp
	}
	if len(args) > 0 {
		return fmt.Errorf("unexpected arguments: %v", args)
	}
	cfg, err := loadConfig()
	if err != nil {
		return fmt.Errorf("configuration: %w", err)
	}
	logger, err := cfg.Logger(stdout)
	if err != nil {
		return fmt.Errorf("configuration: %w", err)
	}
	logger = logger.With("process", "demoreceiver")
	stopTracing, err := startTracing(ctx, "demoreceiver", stdout)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, stopTracing()) }()
	rcv, err := demoreceiver.New(cfg, logger, stdout)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return errors.Join(fmt.Errorf("listen %s: %w", cfg.Addr, err), rcv.Close())
	}
	srv := &http.Server{
		Handler:           traced(rcv, cfg.Path),
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readTimeout,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	// serve returns once the deliveries in flight are answered, so the
	// dedupe file is closed after its last append.
	err = serve(ctx, srv, ln, logger)
	return errors.Join(err, rcv.Close())
}

// serve serves on ln until ctx ends, then shuts srv down gracefully.
func serve(ctx context.Context, srv *http.Server, ln net.Listener, logger *slog.Logger) error {
	logger.Info("listening", "addr", ln.Addr().String())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// setting is an environment variable the program reads.
type setting struct {
	name, def, desc string
	required        bool
	// set stores a value in the configuration; nil for the variables
	// OpenTelemetry reads (startTracing).
	set func(c *demoreceiver.Config, value string) error
}

// text is the set of a setting stored as it is read, in the field of the
// configuration that field points to.
func text(field func(c *demoreceiver.Config) *string) func(c *demoreceiver.Config, value string) error {
	return func(c *demoreceiver.Config, v string) error {
		*field(c) = v
		return nil
	}
}

// settings are the environment variables the program reads, as -h lists
// them.
var settings = []setting{
	{"LOG_FORMAT", "json", "json or text", false, text(func(c *demoreceiver.Config) *string { return &c.LogFormat })},
	{"LOG_LEVEL", "info", "the least severe records written: debug, info, warn or error", false, text(func(c *demoreceiver.Config) *string { return &c.LogLevel })},
	{"RECEIVER_ADDR", ":9092", "address to listen on", false, text(func(c *demoreceiver.Config) *string { return &c.Addr })},
	{"RECEIVER_PATH", "/webhooks", "the path webhooks are POSTed to", false, text(func(c *demoreceiver.Config) *string { return &c.Path })},
	{"RECEIVER_SECRET", "", "required: whsec_ secrets, comma-separated; a delivery signed with any of them is genuine (list the old and the new while rotating)", true,
		func(c *demoreceiver.Config, v string) error {
			s, err := demoreceiver.ParseSecrets(v)
			c.Secret = s
			return err
		}},
	{"RECEIVER_DEDUPE_FILE", "receiver-seen.log", "file of the event ids already processed, one a line; keep it across restarts", false, text(func(c *demoreceiver.Config) *string { return &c.DedupeFile })},
	{"RECEIVER_FAIL_FIRST", "0", "chaos: answer 500 to the first N deliveries of each event id, to exercise the sender's retries (counted in RECEIVER_DEDUPE_FILE.failfirst, across restarts)", false,
		func(c *demoreceiver.Config, v string) (err error) {
			c.FailFirst, err = strconv.Atoi(v)
			return err
		}},
	{"RECEIVER_DELAY", "0s", "chaos: answer each delivery after a random wait of up to this", false, func(c *demoreceiver.Config, v string) (err error) {
		c.Delay, err = time.ParseDuration(v)
		return err
	}},
	{"OTEL_TRACES_EXPORTER", "none", "where spans go: otlp (see OTEL_EXPORTER_OTLP_PROTOCOL and OTEL_EXPORTER_OTLP_ENDPOINT), console (stdout) or none", false, nil},
	{"OTEL_PROPAGATORS", "tracecontext,baggage", "formats of the trace context read, comma-separated: tracecontext, baggage, b3, b3multi, jaeger, xray, ottrace or none", false, nil},
	{"OTEL_SERVICE_NAME", "", "the service name on the spans (default: service.name in OTEL_RESOURCE_ATTRIBUTES, else demoreceiver)", false, nil},
}

// loadConfig reads the configuration from the environment: a variable that
// is unset takes its default, one set empty leaves its setting empty.
func loadConfig() (demoreceiver.Config, error) {
	var cfg demoreceiver.Config
	for _, s := range settings {
		if s.set == nil {
			continue
		}
		v, ok := os.LookupEnv(s.name)
		if !ok && s.required {
			return demoreceiver.Config{}, fmt.Errorf("%s is required", s.name)
		}
		if !ok {
			v = s.def
		}
		if v == "" {
			continue
		}
		if err := s.set(&cfg, v); err != nil {
			return demoreceiver.Config{}, fmt.Errorf("%s: %w", s.name, err)
		}
	}
	return cfg, nil
}

// usage writes the environment variables the program reads, for -h.
func usage(w io.Writer) {
	fmt.Fprint(w, "Usage: demoreceiver\n\nA webhook endpoint that verifies, deduplicates and prints events.\n\nEnvironment:\n")
	tw := tabwriter.NewWriter(w, 1, 0, 4, ' ', 0)
	fmt.Fprintln(tw, "VARIABLE\tDEFAULT\tDESCRIPTION")
	for _, s := range settings {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", s.name, s.def, s.desc)
	}
	_ = tw.Flush()
}
