// Command stripesim serves the Stripe simulator (package stripesim) on an
// address of its own, so that a process under test reaches it as it would
// Stripe, with STRIPE_API_BASE=http://127.0.0.1:12112 and any sk_ key.
// "stripesim -h" lists its flags, each of which an environment variable
// sets too.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/example/payments/tools/stripesim"
)

// defaultAddr is where the simulator listens unless told.
const defaultAddr = "127.0.0.1:12112"

// shutdownTimeout bounds how long requests under way are waited for.
const shutdownTimeout = 5 * time.Second

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "stripesim:", err)
		os.Exit(1)
	}
}

// run reads the flags and the environment, and serves until ctx ends. The
// first line it writes to stdout names the address it listens on.
func run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	fs := flag.NewFlagSet("stripesim", flag.ContinueOnError)
	fs.SetOutput(stdout)
	addr := fs.String("addr", or(getenv("STRIPESIM_ADDR"), defaultAddr), "the address to listen on (STRIPESIM_ADDR)")
	webhookURL := fs.String("webhook-url", getenv("STRIPESIM_WEBHOOK_URL"), "where events are posted, unset for none (STRIPESIM_WEBHOOK_URL)")
	webhookSecret := fs.String("webhook-secret", getenv("STRIPESIM_WEBHOOK_SECRET"), "the whsec_… secret events are signed with (STRIPESIM_WEBHOOK_SECRET)")
	rate := 0.0
	if v := getenv("STRIPESIM_RATE_LIMIT"); v != "" {
		var err error
		if rate, err = strconv.ParseFloat(v, 64); err != nil {
			return fmt.Errorf("STRIPESIM_RATE_LIMIT: %w", err)
		}
	}
	rateLimit := fs.Float64("rate-limit", rate, "requests a second answered, more answered 429; 0 for no limit (STRIPESIM_RATE_LIMIT)")
	switch err := fs.Parse(args); {
	case errors.Is(err, flag.ErrHelp):
		return nil
	case err != nil:
		return err
	case fs.NArg() > 0:
		return fmt.Errorf("unexpected arguments: %v", fs.Args())
	}

	sim, err := stripesim.New(stripesim.Options{WebhookURL: *webhookURL, WebhookSecret: *webhookSecret, RateLimit: *rateLimit})
	if err != nil {
		return err
	}
	defer sim.Close()
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "stripesim listening on http://%s\n", ln.Addr())
	srv := &http.Server{Handler: sim, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
		WriteTimeout: time.Minute, IdleTimeout: 2 * time.Minute}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	return nil
}

// or is v, or fallback if v is empty.
func or(v, fallback string) string {
	if v == "" {
		return fallback
	}
	return v
}
