package e2e

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/example/payments/internal/signing"
	"github.com/example/payments/tools/demoreceiver"
	"github.com/example/payments/tools/testdb"
	"github.com/example/payments/tools/testio"
	"github.com/example/payments/tools/testwait"
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
	slowCall := []string{"PROCESSOR_TIMEOUT=8s", "JOB_TIMEOUT=10s", "RECONCILE_STUCK_AFTER=60s", "RECONCILE_INTERVAL=0"}
	const body = `{"amount":4200,"currency":"USD","payment_method":"pm_card_timeout"}`

	for _, webhooks := range []bool{true, false} {
		name := map[bool]string{true: "WebhooksOn", false: "WebhooksOff"}[webhooks]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			db := testdb.New(t)
			secret := signing.NewSecret()
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
					`SELECT state FROM river_job WHERE kind = 'drive_operation' AND args->>'resource_type' = 'payment' AND args->>'id' = $1`, p.ID).Scan(&state)
				return err == nil && state != "running" && state != "available"
			})
			var (
				state   string
				attempt int
				errs    []byte
			)
			err := db.Pool.QueryRow(context.Background(),
				`SELECT state, attempt, coalesce(errors::text, '[]') FROM river_job WHERE kind = 'drive_operation' AND args->>'resource_type' = 'payment' AND args->>'id' = $1`,
				p.ID).Scan(&state, &attempt, &errs)
			if err != nil || state != "completed" || attempt != 1 || string(errs) != "[]" {
				t.Fatalf("charge job: %s, attempt %d, errors %s (%v)\nworker log:\n%s", state, attempt, errs, err, s.worker.out.String())
			}
			if n := len(chargesFor(t, s, p.ID)); n != 1 {
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

// TestWorkerKilledMidDelivery: the worker is SIGKILLed while the receiver
// handles a delivery, before the worker can record it. The restarted worker
// (River's rescuer) delivers the event again, with the same webhook-id, and
// the receiver's dedupe makes it once: delivered at least once, processed
// exactly once.
func TestWorkerKilledMidDelivery(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	s := startStack(t, db.URL, nil, nil)

	var (
		recv    atomic.Pointer[demoreceiver.Receiver]
		printed testio.Buffer
		hits    sync.Map // webhook-id → deliveries
		killing atomic.Bool
		dead    = make(chan struct{}) // closed once the first worker died
	)
	first := s.worker // the handler kills this one; the test restarts another
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v, _ := hits.LoadOrStore(r.Header.Get("webhook-id"), new(atomic.Int64))
		v.(*atomic.Int64).Add(1)
		rec := httptest.NewRecorder()
		recv.Load().ServeHTTP(rec, r) // processed and recorded as seen
		if killing.CompareAndSwap(false, true) {
			_ = first.cmd.Process.Signal(syscall.SIGKILL)
			<-first.done // the process is gone
			first.done <- nil
			close(dead)
			panic(http.ErrAbortHandler) // the worker never gets its answer
		}
		w.WriteHeader(rec.Code)
		_, _ = w.Write(rec.Body.Bytes())
	}))
	defer srv.Close()

	secrets, err := signing.ParseSecrets(registerEndpoint(t, s, srv.URL+"/hooks"))
	if err != nil {
		t.Fatal(err)
	}
	r, err := demoreceiver.New(demoreceiver.Config{LogFormat: "json", Path: "/hooks", Secret: secrets,
		DedupeFile: filepath.Join(t.TempDir(), "seen.log")}, slog.New(slog.NewTextHandler(io.Discard, nil)), &printed)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	recv.Store(r)

	pay(t, s, "pay")
	awaitDelivery(t, dead, first)
	s.startWorker()
	testwait.Within(t, 60*time.Second, "the delivery recorded by the restarted worker", func() bool {
		var n int
		err := db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM webhook_deliveries WHERE status = 'delivered'`).Scan(&n)
		return err == nil && n == 1
	})
	deliveries := 0
	hits.Range(func(_, v any) bool { deliveries = int(v.(*atomic.Int64).Load()); return true })
	if deliveries < 2 || !strings.Contains(printed.String(), "event evt_") {
		t.Fatalf("%d deliveries of the event; the receiver printed %q", deliveries, printed.String())
	}
	if n := strings.Count(printed.String(), "payment.succeeded"); n != 1 {
		t.Fatalf("the receiver processed the event %d times:\n%s", n, printed.String())
	}
}

// TestWorkerKilledBeforeThePOST: the worker is SIGKILLed once it has
// claimed a delivery's attempt and before it sends anything. The attempt
// never left, so it is not one: the restarted worker's sweep finds the dead
// worker's place and gives it back to its delivery with a new job, which
// makes the attempt within seconds (not when River's rescuer comes by for
// the dead job), numbered as the first the endpoint saw.
func TestWorkerKilledBeforeThePOST(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	s := startStack(t, db.URL, nil, []string{"APP_ENV=test", "CRASH_POINT=webhook_after_claim"})
	var posts atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		posts.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	registerEndpoint(t, s, srv.URL+"/hooks")
	pay(t, s, "pay")
	s.worker.killed(t)
	restarted := time.Now()
	s.startWorker()
	testwait.Within(t, 60*time.Second, "the delivery delivered by the restarted worker", func() bool {
		var n int
		err := db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM webhook_deliveries WHERE status = 'delivered'`).Scan(&n)
		return err == nil && n == 1
	})
	if took := time.Since(restarted); took > 10*time.Second {
		t.Errorf("delivered %s after the restart: the dead worker's attempt waited for River's rescuer", took.Round(time.Millisecond))
	}
	rows, _ := db.Pool.Query(context.Background(), `SELECT attempt FROM webhook_delivery_attempts ORDER BY id`)
	numbers, err := pgx.CollectRows(rows, pgx.RowTo[int])
	if err != nil {
		t.Fatal(err)
	}
	var attempts int
	if err := db.Pool.QueryRow(context.Background(), `SELECT attempts FROM webhook_deliveries`).Scan(&attempts); err != nil {
		t.Fatal(err)
	}
	if len(numbers) != 1 || numbers[0] != 1 || attempts != 1 || posts.Load() != 1 {
		t.Fatalf("attempts logged %v, counted %d, %d POSTs: want one, numbered 1", numbers, attempts, posts.Load())
	}
}

// TestDeadWorkersWebhookPlaceFreed: a worker SIGKILLed mid-attempt leaves
// its place among the endpoint's attempts in flight (one here) held until
// PlaceHeld has passed; its presence, though, died with it, so the next
// worker frees the place at its first look and the endpoint's next event is
// delivered before the dead place's until.
func TestDeadWorkersWebhookPlaceFreed(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	oneAtATime := "WEBHOOK_ENDPOINT_IN_FLIGHT=1"
	s := startStack(t, db.URL, nil, []string{oneAtATime})
	ctx := context.Background()
	var first atomic.Bool
	held, release := make(chan struct{}), make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body) // so that the server sees the client go
		if first.CompareAndSwap(false, true) {
			close(held)
			select { // a tarpit, until the worker dies
			case <-r.Context().Done():
			case <-release:
			}
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	defer close(release)
	registerEndpoint(t, s, srv.URL+"/hooks")
	pay(t, s, "pay-1")
	awaitDelivery(t, held, s.worker)
	var (
		dead   int64
		until  time.Time
		holder *int32
	)
	if err := db.Pool.QueryRow(ctx, `SELECT delivery_id, until, worker FROM webhook_places`).Scan(&dead, &until, &holder); err != nil || holder == nil {
		t.Fatalf("the attempt's place: worker %v, %v", holder, err)
	}
	_ = s.worker.cmd.Process.Signal(syscall.SIGKILL)
	s.worker.killed(t)
	s.startWorker(oneAtATime)
	pay(t, s, "pay-2")
	var at time.Time
	testwait.Within(t, 60*time.Second, "the next event delivered", func() bool {
		err := db.Pool.QueryRow(ctx, `SELECT delivered_at FROM webhook_deliveries WHERE id <> $1 AND status = 'delivered'`, dead).Scan(&at)
		return err == nil
	})
	if !at.Before(until) {
		t.Fatalf("the next event was delivered at %s, once the dead worker's place had expired (%s): its death went unseen", at, until)
	}
}

// registerEndpoint registers Acme's webhook endpoint at url for
// payment.succeeded and returns the secret its deliveries are signed with.
func registerEndpoint(t *testing.T, s *stack, url string) string {
	t.Helper()
	status, _, body := do(t, http.MethodPost, s.apiURL+"/v1/webhook_endpoints", "sk_test_acme", "hook",
		`{"url":"`+url+`","enabled_events":["payment.succeeded"]}`)
	var e struct{ Secret string }
	if err := json.Unmarshal(body, &e); err != nil || status != http.StatusCreated {
		t.Fatalf("register: %d %s", status, body)
	}
	return e.Secret
}

// pay makes a payment under key that succeeds within the default wait
// (201), for its payment.succeeded event.
func pay(t *testing.T, s *stack, key string) {
	t.Helper()
	status, _, body := do(t, http.MethodPost, s.apiURL+"/v1/payments", "sk_test_acme", key, `{"amount":500,"currency":"USD","payment_method":"pm_card_visa"}`)
	if status != http.StatusCreated {
		t.Fatalf("payment: %d %s", status, body)
	}
}

// awaitDelivery waits until the test's receiver closes reached, which it
// does once a delivery from worker got to it.
func awaitDelivery(t *testing.T, reached <-chan struct{}, worker *process) {
	t.Helper()
	select {
	case <-reached:
	case <-time.After(60 * time.Second):
		t.Fatalf("no delivery reached the receiver\n%s", worker.out.String())
	}
}
