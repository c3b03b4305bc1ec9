package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/example/payments/internal/gateway/stripe"
	"github.com/example/payments/tools/stripesim"
)

// The stripe profile runs the service on its Stripe adapter against the
// Stripe simulator (tools/stripesim, served by tools/cmd/stripesim), with
// Stripe's faults: 500s before acting and saved under the key, answers lost
// after committing, 429s under a rate limit, search that lags, refunds
// pending, webhooks dropped, duplicated and delayed. Stripe is never killed
// (it keeps its state); its outages cut every connection for a while. The
// invariants are checked against the simulator's state, loaded into the
// tables the fake processor's would be (loadSimulatorState).

// stripeMethods are Stripe's test cards, with their weights.
var stripeMethods = []method{
	{"pm_card_visa", 55}, {"pm_card_mastercard", 10}, {"pm_card_chargeDeclined", 8}, {"pm_card_insufficientFunds", 5},
	{"pm_card_authenticationRequired", 7}, {"pm_card_processing", 15},
}

// The simulator's settings in the run: Stripe's faults at rates that give
// each kind of recovery work, its rate limit, and a key retention short
// enough that an operation whose key holds a saved 500 is given up within
// the run (still far past the last call, at operationDeadline plus
// jobTimeout, as the worker's start-up check holds for Stripe's 24 hours).
const (
	simFaults       = "500-before=0.04,500-saved=0.01,lose-answer=0.03,latency=0.01,429=0.02"
	simRateLimit    = 50
	simKeyRetention = 75 * time.Second
	simAPIKey       = "sk_test_chaos"
)

// newSimulator is the simulator's process, listening on addr, its
// webhooks to webhookURL signed with secret.
func newSimulator(cfg Config, addr, webhookURL, secret string) (*proc, error) {
	return newProc("processor", "processor", filepath.Join(cfg.Bin, "stripesim"), cfg.Logs, "http://"+addr+"/healthz",
		[]string{"STRIPESIM_ADDR=" + addr, fmt.Sprintf("STRIPESIM_SEED=%d", cfg.Seed), "STRIPESIM_FAULTS=" + simFaults,
			"STRIPESIM_LATENCY=1500ms", fmt.Sprintf("STRIPESIM_RATE_LIMIT=%d", simRateLimit),
			"STRIPESIM_KEY_RETENTION=" + simKeyRetention.String(), "STRIPESIM_WEBHOOK_URL=" + webhookURL,
			"STRIPESIM_WEBHOOK_SECRET=" + secret, "STRIPESIM_WEBHOOK_DROP=0.1", "STRIPESIM_WEBHOOK_DUPLICATE=0.1",
			"STRIPESIM_WEBHOOK_DELAY=500ms"})
}

// simulatorOutage cuts the simulator off for d: every connection closed
// unanswered, nothing executed.
func simulatorOutage(ctx context.Context, addr string, d time.Duration) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, fmt.Sprintf("http://%s/_sim/outage?for=%s", addr, d), nil)
	if err != nil {
		return err
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	res.Body.Close()
	if res.StatusCode != http.StatusNoContent {
		return fmt.Errorf("outage: %s", res.Status)
	}
	return nil
}

// simulatorState is what the simulator holds (tools/cmd/stripesim's
// /_sim/state).
type simulatorState struct {
	PaymentIntents []stripesim.PaymentIntent
	Refunds        []stripesim.Refund
	Stats          stripesim.Stats
}

// loadSimulatorState reads the simulator's state and writes it into the
// tables the invariants read of a processor (schema processor): a charge a
// PaymentIntent made under a key (fences and objects made elsewhere
// aside), succeeded as Stripe says and with what its succeeded refunds
// returned; a refund a succeeded Refund; the webhook events as sent and
// dropped.
func loadSimulatorState(ctx context.Context, pool *pgxpool.Pool, addr string) (stripesim.Stats, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/_sim/state", nil)
	if err != nil {
		return stripesim.Stats{}, err
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return stripesim.Stats{}, fmt.Errorf("read the simulator's state: %w", err)
	}
	defer res.Body.Close()
	var st simulatorState
	if err := json.NewDecoder(res.Body).Decode(&st); err != nil {
		return stripesim.Stats{}, fmt.Errorf("read the simulator's state: %w", err)
	}
	refunded := map[string]int64{}
	var refunds [][]any
	for _, r := range st.Refunds {
		if r.Status == stripesim.StatusSucceeded {
			refunded[r.PaymentIntent] += r.Amount
			refunds = append(refunds, []any{r.ID, r.Metadata["downstream_key"], r.Amount})
		}
	}
	var charges [][]any
	for _, pi := range st.PaymentIntents {
		key := pi.Metadata["downstream_key"]
		if key == "" || pi.Metadata["fence"] != "" {
			continue
		}
		status := "failed"
		if pi.Status == stripesim.StatusSucceeded {
			status = "succeeded"
		}
		charges = append(charges, []any{pi.ID, pi.Metadata["payment_id"], key, status, pi.Amount, refunded[pi.ID]})
	}
	events := [][]any{}
	for state, n := range map[string]int{"delivered": st.Stats.WebhooksSent, "dropped": st.Stats.WebhooksDropped, "abandoned": st.Stats.WebhooksFailed} {
		for range n {
			events = append(events, []any{state})
		}
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		return stripesim.Stats{}, err
	}
	defer tx.Rollback(ctx) //nolint:errcheck // a no-op after Commit
	if _, err := tx.Exec(ctx, `
CREATE SCHEMA processor;
CREATE TABLE processor.charges (id text PRIMARY KEY, payment_id text, idempotency_key text, status text, amount bigint, amount_refunded bigint);
CREATE TABLE processor.refunds (id text PRIMARY KEY, idempotency_key text, amount bigint);
CREATE TABLE processor.webhook_events (state text)`); err != nil {
		return stripesim.Stats{}, err
	}
	for table, rows := range map[string][][]any{"charges": charges, "refunds": refunds, "webhook_events": events} {
		cols := map[string][]string{"charges": {"id", "payment_id", "idempotency_key", "status", "amount", "amount_refunded"},
			"refunds": {"id", "idempotency_key", "amount"}, "webhook_events": {"state"}}[table]
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{"processor", table}, cols, pgx.CopyFromRows(rows)); err != nil {
			return stripesim.Stats{}, fmt.Errorf("load processor.%s: %w", table, err)
		}
	}
	return st.Stats, tx.Commit(ctx)
}

// stripeEvent is Stripe's event about PaymentIntent chargeID of payment
// paymentID: succeeded, or declined.
func stripeEvent(id, chargeID, paymentID string, amount int64, succeeded bool) string {
	typ, status, failure := "payment_intent.succeeded", "succeeded", "null"
	if !succeeded {
		typ, status = "payment_intent.payment_failed", "requires_payment_method"
		failure = `{"type":"card_error","code":"card_declined","decline_code":"generic_decline","message":"declined"}`
	}
	return fmt.Sprintf(`{"id":%q,"object":"event","type":%q,"created":%d,"api_version":"2025-09-30","data":{"object":`+
		`{"id":%q,"object":"payment_intent","amount":%d,"currency":"usd","status":%q,"last_payment_error":%s,`+
		`"metadata":{"downstream_key":"charge_%s","payment_id":%q}}}}`,
		id, typ, time.Now().Unix(), chargeID, amount, status, failure, paymentID, paymentID)
}

// stripeSigner signs as Stripe does, in Stripe-Signature, with secret.
type stripeSigner struct{ secret string }

func (s stripeSigner) sign(h http.Header, _ string, at time.Time, body []byte) error {
	h.Set(stripe.SignatureHeader, stripesim.Sign(body, s.secret, at))
	return nil
}

// staleBy is how far past Stripe's tolerance a stale delivery is signed.
func (stripeSigner) staleBy() time.Duration { return stripe.SignatureTolerance + time.Minute }
