// Command stripesim serves the Stripe simulator (package stripesim) on an
// address of its own, so that a process under test reaches it as it would
// Stripe, with STRIPE_API_BASE=http://127.0.0.1:12112 and any sk_ key.
// "stripesim -h" lists the environment variables it reads. Beside Stripe's
// API it answers the run that drives it: GET /healthz, GET /_sim/state
// (the objects it holds and what it was asked, as JSON) and POST
// /_sim/outage?for=<duration> (every request meanwhile has its connection
// closed unanswered, nothing executed: Stripe cut off).
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/example/payments/internal/process"
	"github.com/example/payments/tools/stripesim"
)

// Config is what the command reads from the environment.
type Config struct {
	Addr          string        `envconfig:"STRIPESIM_ADDR" default:"127.0.0.1:12112" desc:"the address to listen on"`
	Seed          int64         `envconfig:"STRIPESIM_SEED" default:"1" desc:"seeds every random choice: faults, ids, search lags, webhook drops"`
	Faults        string        `envconfig:"STRIPESIM_FAULTS" desc:"the share of requests given each fault, name=rate comma-separated: 500-before, 500-saved, lose-answer, latency, 429"`
	Latency       time.Duration `envconfig:"STRIPESIM_LATENCY" default:"1s" desc:"what the latency fault adds"`
	RateLimit     float64       `envconfig:"STRIPESIM_RATE_LIMIT" default:"0" desc:"requests a second answered, more answered 429 (0: no limit)"`
	KeyRetention  time.Duration `envconfig:"STRIPESIM_KEY_RETENTION" default:"24h" desc:"how long an idempotency key is kept after its first use"`
	WebhookURL    string        `envconfig:"STRIPESIM_WEBHOOK_URL" desc:"where events are posted (unset: none)"`
	WebhookSecret string        `envconfig:"STRIPESIM_WEBHOOK_SECRET" desc:"the whsec_… secret events are signed with"`
	WebhookDrop   float64       `envconfig:"STRIPESIM_WEBHOOK_DROP" default:"0" desc:"the share of events never sent"`
	WebhookDup    float64       `envconfig:"STRIPESIM_WEBHOOK_DUPLICATE" default:"0" desc:"the share of events sent twice"`
	WebhookDelay  time.Duration `envconfig:"STRIPESIM_WEBHOOK_DELAY" default:"0s" desc:"the longest random delay before each sending of an event"`
}

// shutdownTimeout bounds how long requests under way are waited for.
const shutdownTimeout = 5 * time.Second

func main() { process.Main("stripesim", run) }

// run reads the environment and serves until ctx ends. The first line it
// writes to stdout names the address it listens on.
func run(ctx context.Context, args []string, stdout io.Writer) error {
	var cfg Config
	if err := process.Configure(args, stdout, "stripesim", "A stateful simulator of Stripe's v1 API.", &cfg); err != nil {
		return err
	}
	if len(args) > 0 {
		return fmt.Errorf("unexpected arguments: %v", args)
	}
	rates, err := parseFaults(cfg.Faults)
	if err != nil {
		return fmt.Errorf("STRIPESIM_FAULTS: %w", err)
	}
	sim, err := stripesim.New(stripesim.Options{Seed: cfg.Seed, FaultRates: rates, Latency: cfg.Latency, RateLimit: cfg.RateLimit,
		KeyRetention: cfg.KeyRetention, WebhookURL: cfg.WebhookURL, WebhookSecret: cfg.WebhookSecret,
		WebhookDrop: cfg.WebhookDrop, WebhookDuplicate: cfg.WebhookDup, WebhookDelay: cfg.WebhookDelay})
	if err != nil {
		return err
	}
	defer sim.Close()
	// Only the server's errors are logged, to stderr, as net/http's own
	// logger would: stdout is the address line's.
	errorLog := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	srv, err := process.Listen(cfg.Addr, handler(sim), errorLog, time.Minute, shutdownTimeout)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "stripesim listening on http://%s\n", srv.Addr())
	return srv.Run(ctx)
}

// parseFaults reads name=rate pairs, comma-separated.
func parseFaults(s string) (map[stripesim.Fault]float64, error) {
	rates := map[stripesim.Fault]float64{}
	for pair := range strings.SplitSeq(s, ",") {
		if pair = strings.TrimSpace(pair); pair == "" {
			continue
		}
		name, v, ok := strings.Cut(pair, "=")
		f, known := stripesim.FaultNamed(name)
		if !ok || !known {
			return nil, fmt.Errorf("%q is not a fault=rate pair of a known fault", pair)
		}
		rate, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return nil, fmt.Errorf("%q: %w", pair, err)
		}
		rates[f] = rate
	}
	return rates, nil
}

// State is what GET /_sim/state answers.
type State struct {
	PaymentIntents []stripesim.PaymentIntent
	Refunds        []stripesim.Refund
	Stats          stripesim.Stats
}

// handler serves sim, and the routes of the run that drives it. During an
// outage every request to the API has its connection closed unanswered.
func handler(sim *stripesim.Server) http.Handler {
	var outageUntil atomic.Int64 // Unix nanoseconds of real time
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") })
	mux.HandleFunc("GET /_sim/state", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(State{PaymentIntents: sim.PaymentIntents(), Refunds: sim.Refunds(), Stats: sim.Stats()})
	})
	mux.HandleFunc("POST /_sim/outage", func(w http.ResponseWriter, r *http.Request) {
		d, err := time.ParseDuration(r.URL.Query().Get("for"))
		if err != nil || d < 0 {
			http.Error(w, "for must be a duration such as 20s", http.StatusBadRequest)
			return
		}
		outageUntil.Store(time.Now().Add(d).UnixNano())
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if time.Now().UnixNano() < outageUntil.Load() {
			if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
				_ = conn.Close()
				return
			}
		}
		sim.ServeHTTP(w, r)
	})
	return mux
}
