package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/example/payments/internal/testdb"
	"github.com/example/payments/internal/testwait"
	"github.com/example/payments/internal/webhook"
)

// TestTimeoutCardSettledByWebhook: the processor charges a pm_card_timeout
// payment at once and withholds its HTTP answer, so the worker's call hangs;
// the processor's webhook settles the payment meanwhile, and the request that
// waits with Prefer: wait=5 gets its final 201 within the wait. The worker's
// call then times out, finds the key finished and ends quietly; the
// processor made one charge. Without webhooks the same request answers 202.
func TestTimeoutCardSettledByWebhook(t *testing.T) {
	t.Parallel()
	// The worker's call outlives the wait, so only a webhook can answer in
	// time; the processor holds its answer longer than the call waits.
	slowCall := []string{"PROCESSOR_TIMEOUT=8s", "JOB_TIMEOUT=10s", "RECONCILE_STUCK_AFTER=60s", "RECONCILE_INTERVAL=1h"}
	const body = `{"amount":4200,"currency":"USD","payment_method":"pm_card_timeout"}`

	for _, webhooks := range []bool{true, false} {
		name := map[bool]string{true: "WebhooksOn", false: "WebhooksOff"}[webhooks]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			db := testdb.New(t)
			secret := webhook.NewSecret()
			var apiEnv, procEnv []string
			if webhooks {
				apiEnv = []string{"PROCESSOR_WEBHOOK_SECRET=" + secret}
				procEnv = []string{"PROCESSOR_WEBHOOK_URL={api}/v1/processor/webhooks", "PROCESSOR_WEBHOOK_SECRET=" + secret}
			}
			s := startStack(t, db.URL, apiEnv, slowCall, append(procEnv, "PROCESSOR_TIMEOUT_HANG=60s")...)

			start := time.Now()
			status, _, resp := do(t, http.MethodPost, s.apiURL+"/v1/payments", "sk_test_acme", "timeout-card", body, "Prefer", "wait=5")
			elapsed := time.Since(start)
			var p struct{ ID, Status string }
			if err := json.Unmarshal(resp, &p); err != nil {
				t.Fatalf("%d %s", status, resp)
			}
			if !webhooks {
				if status != http.StatusAccepted || p.Status != "processing" {
					t.Fatalf("without webhooks: %d %s", status, resp)
				}
				return
			}
			if status != http.StatusCreated || p.Status != "succeeded" || elapsed >= 5*time.Second {
				t.Fatalf("with webhooks: %d after %s: %s", status, elapsed, resp)
			}
			var settledBy string
			if err := db.Pool.QueryRow(context.Background(), `SELECT settled_by FROM payments WHERE id = $1`, p.ID).Scan(&settledBy); err != nil || settledBy != "webhook" {
				t.Fatalf("settled by %q (%v)", settledBy, err)
			}

			// The worker's call is still hanging; when it times out, the job
			// finds the key finished and completes, on its first attempt,
			// with no error and no second call.
			testwait.Within(t, 30*time.Second, "the charge job to end", func() bool {
				var state string
				err := db.Pool.QueryRow(context.Background(),
					`SELECT state FROM river_job WHERE kind = 'charge_payment' AND args->>'payment_id' = $1`, p.ID).Scan(&state)
				return err == nil && state != "running" && state != "available"
			})
			var (
				state   string
				attempt int
				errs    []byte
			)
			err := db.Pool.QueryRow(context.Background(),
				`SELECT state, attempt, coalesce(errors::text, '[]') FROM river_job WHERE kind = 'charge_payment' AND args->>'payment_id' = $1`,
				p.ID).Scan(&state, &attempt, &errs)
			if err != nil || state != "completed" || attempt != 1 || string(errs) != "[]" {
				t.Fatalf("charge job: %s, attempt %d, errors %s (%v)\nworker log:\n%s", state, attempt, errs, err, s.worker.out.String())
			}
			if n := chargesFor(t, s, p.ID); n != 1 {
				t.Fatalf("%d charges at the processor", n)
			}
			var cases, marks int
			if err := db.Pool.QueryRow(context.Background(),
				`SELECT (SELECT count(*) FROM needs_review), (SELECT count(*) FROM reconciliations)`).Scan(&cases, &marks); err != nil || cases+marks != 0 {
				t.Fatalf("%d review cases, %d marks (%v)", cases, marks, err)
			}
		})
	}
}
