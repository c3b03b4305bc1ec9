package http_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/example/payments/internal/database"
	"github.com/example/payments/internal/jobs"
	"github.com/example/payments/internal/webhooks"
	"github.com/example/payments/tools/stacktest"
	"github.com/example/payments/tools/testwait"
)

// TestWebhookLimits: a tenant's endpoints, an endpoint's live secrets and a
// delivery's chains of attempts are each bounded, with a clear 4xx, and the
// database decides the last place when requests race for it.
func TestWebhookLimits(t *testing.T) {
	t.Parallel()

	t.Run("EndpointsPerTenant", func(t *testing.T) {
		t.Parallel()
		s := stacktest.New(t, stacktest.Options{})
		h := newReceiver(t, 0)
		// One more than the limit, all at once: exactly the limit is made.
		const tries = 17
		var wg sync.WaitGroup
		statuses := make([]stacktest.Response, tries)
		for i := range tries {
			wg.Go(func() {
				statuses[i], _ = register(t, s, acme, fmt.Sprintf("we-%d", i), h.srv.URL+"/hooks")
			})
		}
		wg.Wait()
		made, refused := 0, 0
		for _, res := range statuses {
			switch {
			case res.Status == http.StatusCreated:
				made++
			case res.Status == http.StatusBadRequest && strings.Contains(string(res.Body), `"endpoint_limit_reached"`):
				refused++
			default:
				t.Fatalf("register: %d %s", res.Status, res.Body)
			}
		}
		if made != 16 || refused != 1 || s.Count(`SELECT count(*) FROM webhook_endpoints WHERE tenant_id = $1`, stacktest.AcmeID) != 16 {
			t.Fatalf("%d made, %d refused", made, refused)
		}
		// The other tenant has its own sixteen.
		if res, _ := register(t, s, globex, "we-globex", h.srv.URL+"/hooks"); res.Status != http.StatusCreated {
			t.Fatalf("globex: %d %s", res.Status, res.Body)
		}
	})

	t.Run("LiveSecretsPerEndpoint", func(t *testing.T) {
		t.Parallel()
		s := stacktest.New(t, stacktest.Options{})
		h := newReceiver(t, 0)
		_, e := register(t, s, acme, "we", h.srv.URL+"/hooks")
		if res := rotate(s, e.ID, "r1", `{}`); res.Status != http.StatusOK {
			t.Fatalf("first rotation: %d %s", res.Status, res.Body)
		}
		res := rotate(s, e.ID, "r2", `{}`)
		if res.Status != http.StatusConflict || !strings.Contains(string(res.Body), `"rotation_in_progress"`) {
			t.Fatalf("second rotation within the grace: %d %s", res.Status, res.Body)
		}
		if n := s.Count(`SELECT count(*) FROM webhook_endpoint_secrets WHERE endpoint_id = $1 AND (expires_at IS NULL OR expires_at > now())`, e.ID); n != 2 {
			t.Fatalf("%d live secrets after a refused rotation", n)
		}
		// Ending the older secrets at once is always taken.
		if res := rotate(s, e.ID, "r3", `{"expire_current_secret_in":0}`); res.Status != http.StatusOK {
			t.Fatalf("rotation that ends the others: %d %s", res.Status, res.Body)
		}
		if n := s.Count(`SELECT count(*) FROM webhook_endpoint_secrets WHERE endpoint_id = $1 AND (expires_at IS NULL OR expires_at > now())`, e.ID); n != 1 {
			t.Fatalf("%d live secrets, want the new one", n)
		}
	})

	t.Run("OneChainPerDelivery", func(t *testing.T) {
		t.Parallel()
		s, h, e := startDelivering(t, stacktest.Options{WebhookSchedule: webhooks.Schedule{time.Hour}}, answer(http.StatusBadGateway))
		paidPayment(t, s, "pay-1")
		stacktest.WaitFor(t, "the first attempt", func() bool { return len(deliveryLog(t, s, e)) == 1 })
		evID := deliveryLog(t, s, e)[0].Event
		res := resend(s, e, evID, "rs")
		if res.Status != http.StatusConflict || !strings.Contains(string(res.Body), `"delivery_in_flight"`) {
			t.Fatalf("resend of a delivery still retrying: %d %s", res.Status, res.Body)
		}
		if s.Count(`SELECT count(*) FROM webhook_deliveries WHERE chain = 1 AND attempts = 1 AND status = 'pending'`) != 1 {
			t.Fatal("the refused resend changed the delivery")
		}
		// Once it has failed, a resend starts a second chain, its attempts
		// counted from one.
		s.Exec(`UPDATE webhook_deliveries SET status = 'failed'`)
		h.front = nil
		h.start(registeredSecret(t, s, e))
		res = resend(s, e, evID, "rs")
		if res.Status != http.StatusAccepted {
			t.Fatalf("resend of a failed delivery: %d %s", res.Status, res.Body)
		}
		delivered(t, s)
		if s.Count(`SELECT count(*) FROM webhook_deliveries WHERE chain = 2 AND attempts = 1`) != 1 {
			t.Fatal("the resend is not a new chain counted from one")
		}
	})
}

// TestWebhookDeliveryRaces: what a delivery attempt decides stays its own
// when the endpoint or the delivery has moved on meanwhile, and whatever
// fails before the POST is an attempt like any other.
func TestWebhookDeliveryRaces(t *testing.T) {
	t.Parallel()

	t.Run("GoneDisablesOnlyTheVersionSentTo", func(t *testing.T) {
		t.Parallel()
		moved := make(chan struct{})
		s, old, e := startDelivering(t, stacktest.Options{}, func(w http.ResponseWriter, _ *http.Request, _ int64) bool {
			<-moved
			w.WriteHeader(http.StatusGone)
			return true
		})
		paidPayment(t, s, "pay-1")
		stacktest.WaitFor(t, "the attempt at the old URL", func() bool { return old.hits.Load() == 1 })
		// While that attempt is in flight, the tenant moves the endpoint.
		healthy := newReceiver(t, 0)
		res := updateEndpoint(s, e, "move", fmt.Sprintf(`{"url":%q}`, healthy.srv.URL+"/hooks"))
		if res.Status != http.StatusOK {
			t.Fatalf("move: %d %s", res.Status, res.Body)
		}
		close(moved)
		waitDeliveries(t, s, "failed", 1) // the 410 recorded
		if got := getEndpoint(t, s, e); got.Status != "enabled" {
			t.Fatalf("the moved endpoint was disabled by the old URL's 410: %+v", got)
		}
		healthy.start(registeredSecret(t, s, e))
		paidPayment(t, s, "pay-2")
		stacktest.WaitFor(t, "the next event at the new URL", func() bool { return len(healthy.events()) == 1 })
	})

	t.Run("UnreadableSecretIsAnAttempt", func(t *testing.T) {
		t.Parallel()
		s, h, e := startDelivering(t, stacktest.Options{}, nil)
		s.Exec(`UPDATE webhook_endpoint_secrets SET ciphertext = '\x00'`)
		paidPayment(t, s, "pay-1")
		waitDeliveries(t, s, "failed", 1)
		log := deliveryLog(t, s, e)
		if len(log) != 4 || h.hits.Load() != 0 {
			t.Fatalf("%d attempts logged, %d POSTs, want 4 logged and none sent", len(log), h.hits.Load())
		}
		for _, a := range log {
			if a.Error == nil || !strings.Contains(*a.Error, "secrets could not be read") || a.StatusCode != nil {
				t.Fatalf("log line %+v", a)
			}
		}
		if m := s.WorkerMetrics(); !strings.Contains(m, `payments_webhook_deliveries_total{result="failed"} 1`) {
			t.Fatal("the failed delivery is not in the metrics")
		}
	})

	t.Run("ATwoHundredIsNeverDiscarded", func(t *testing.T) {
		t.Parallel()
		answered := make(chan struct{})
		s, h, e := startDelivering(t, stacktest.Options{}, func(http.ResponseWriter, *http.Request, int64) bool {
			<-answered
			return false
		})
		paidPayment(t, s, "pay-1")
		stacktest.WaitFor(t, "the attempt in flight", func() bool { return h.hits.Load() == 1 })
		// Another runner ends the delivery failed while this attempt is in
		// flight; the receiver then answers 200.
		s.Exec(`UPDATE webhook_deliveries SET status = 'failed'`)
		close(answered)
		stacktest.WaitFor(t, "the 200 recorded", func() bool { return len(deliveryLog(t, s, e)) == 1 })
		delivered(t, s)
	})

	t.Run("FailingForDaysDisables", func(t *testing.T) {
		t.Parallel()
		s, h, e := startDelivering(t, stacktest.Options{WebhookSchedule: webhooks.Schedule{time.Hour}}, answer(http.StatusInternalServerError))
		// Its run of failures began six days ago (WEBHOOK_DISABLE_AFTER is
		// five by default).
		s.Exec(`UPDATE webhook_endpoints SET failing_since = now() - interval '6 days'`)
		paidPayment(t, s, "pay-1")
		waitDisabled(t, s, e, "failing")
		if m := s.WorkerMetrics(); !strings.Contains(m, `payments_webhook_endpoints_disabled_total{reason="failing"} 1`) {
			t.Fatal("the disabled endpoint is not in the metrics")
		}
		// A 2xx ends a run: an endpoint that answers again is not disabled
		// by an old failure.
		s.Exec(`UPDATE webhook_endpoints SET status = 'enabled', disabled_reason = NULL, failing_since = now() - interval '6 days'`)
		h.front = nil
		h.start(registeredSecret(t, s, e))
		paidPayment(t, s, "pay-2")
		stacktest.WaitFor(t, "the 2xx recorded, ending the run of failures", func() bool {
			return deliveries(s, "delivered") == 1 &&
				s.Count(`SELECT count(*) FROM webhook_endpoints WHERE last_success_at > failing_since AND status = 'enabled'`) == 1
		})
		// The next failure starts a run of its own: the endpoint stays
		// enabled.
		h.front = answer(http.StatusInternalServerError)
		paidPayment(t, s, "pay-3")
		stacktest.WaitFor(t, "a new run of failures", func() bool {
			return s.Count(`SELECT count(*) FROM webhook_endpoints WHERE failing_since > last_success_at`) == 1
		})
		if n := s.Count(`SELECT count(*) FROM webhook_endpoints WHERE status = 'enabled'`); n != 1 {
			t.Fatal("a failure after a 2xx disabled the endpoint on the run the 2xx ended")
		}
	})
}

// TestWebhookFairness: one tenant's tarpit endpoints, which hold every
// attempt for seconds and then fail, delay only that tenant's events: the
// other tenant's arrive within seconds, though the tarpit's attempts alone
// would keep every delivery worker busy for half a minute. The worker has
// ten delivery workers, four for a tenant, two to an endpoint.
func TestWebhookFairness(t *testing.T) {
	t.Parallel()
	s := stacktest.New(t, stacktest.Options{WebhookSchedule: webhooks.Schedule{time.Hour},
		WebhookConcurrency: 10, TenantInFlight: 4, EndpointInFlight: 2})
	s.StartWorker()
	const hold = 8 * time.Second
	held := registerTarpits(t, s, globex, 8, hold)
	for i := range 4 {
		created(t, s, globex, fmt.Sprintf("tarpit-pay-%d", i), `{"amount":1000,"currency":"USD","payment_method":"pm_card_visa"}`, "Prefer", "wait=10")
	}
	// 32 deliveries of 8 s each: without shares, every one of the worker's
	// delivery places are held for about 25 s.
	stacktest.WaitFor(t, "the tarpit holding attempts", func() bool { return held.Load() >= 2 })
	h := newReceiver(t, 0)
	registerWith(t, s, h)
	start := time.Now()
	for i := range 3 {
		paidPayment(t, s, fmt.Sprintf("pay-%d", i))
	}
	stacktest.WaitFor(t, "the healthy tenant's events", func() bool { return len(h.events()) == 3 })
	if took := time.Since(start); took > hold {
		t.Fatalf("the healthy tenant's events took %s behind the tarpit, longer than one tarpit attempt (%s)", took, hold)
	}
	if n := s.Count(`SELECT count(*) FROM webhook_places WHERE tenant_id = $1`, stacktest.GlobexID); n > 4 {
		t.Fatalf("%d tarpit attempts in flight, over the tenant's share of 4", n)
	}
}

// registerTarpits registers n endpoints of apiKey's at a receiver that
// holds each attempt for hold (or until the attempt gives up) and then
// answers 500, and returns how many attempts it has held.
func registerTarpits(t *testing.T, s *stacktest.Stack, apiKey string, n int, hold time.Duration) *atomic.Int64 {
	t.Helper()
	held := &atomic.Int64{}
	tarpit := newReceiver(t, 0)
	tarpit.front = func(w http.ResponseWriter, r *http.Request, _ int64) bool {
		held.Add(1)
		select {
		case <-time.After(hold):
		case <-r.Context().Done():
		}
		w.WriteHeader(http.StatusInternalServerError)
		return true
	}
	for i := range n {
		if res, _ := register(t, s, apiKey, fmt.Sprintf("tarpit-%d", i), tarpit.srv.URL+"/hooks"); res.Status != http.StatusCreated {
			t.Fatalf("register a tarpit: %d %s", res.Status, res.Body)
		}
	}
	return held
}

// TestWebhookPlacesSplitEvenly: two of a tenant's endpoints hold each
// attempt for seconds and have long lines, and they hold every place of
// the tenant; a third endpoint registered then gets the next place that
// ends, and every place after while it holds the fewest, so its
// deliveries arrive within two of the slow attempts, though the slow lines
// take half a minute to drain. Handing a place on to its own endpoint's
// line first, the slow endpoints kept every place cycling between them.
func TestWebhookPlacesSplitEvenly(t *testing.T) {
	t.Parallel()
	s := stacktest.New(t, stacktest.Options{WebhookSchedule: webhooks.Schedule{time.Hour},
		WebhookConcurrency: 10, TenantInFlight: 4, EndpointInFlight: 4})
	s.StartWorker()
	const hold = 3 * time.Second
	registerTarpits(t, s, acme, 2, hold)
	for i := range 16 {
		paidPayment(t, s, fmt.Sprintf("backlog-%d", i))
	}
	// At least 32 slow deliveries, four at a time, 3 s each: 24 s of line.
	stacktest.WaitFor(t, "long lines at the slow endpoints", func() bool {
		return s.Count(`SELECT count(*) FROM webhook_line`) >= 16
	})
	h := newReceiver(t, 0)
	e := registerWith(t, s, h)
	start := time.Now()
	for i := range 3 {
		paidPayment(t, s, fmt.Sprintf("healthy-%d", i))
	}
	stacktest.WaitFor(t, "the third endpoint's deliveries", func() bool {
		return s.Count(`SELECT count(*) FROM webhook_deliveries WHERE endpoint_id = $1 AND status = 'delivered'`, e.ID) >= 3 &&
			s.Count(`SELECT count(*) FROM webhook_deliveries WHERE endpoint_id = $1 AND status <> 'delivered'`, e.ID) == 0
	})
	if took := time.Since(start); took > 2*hold+2*time.Second {
		t.Fatalf("the third endpoint's deliveries took %s behind its siblings' lines, more than two of their attempts and 2 s", took)
	}
	if w := s.Count(`SELECT count(*) FROM webhook_line`); w == 0 {
		t.Fatal("the slow lines drained first: the test proves nothing")
	}
	if n := s.Count(`SELECT count(*) FROM webhook_places WHERE tenant_id = $1`, stacktest.AcmeID); n > 4 {
		t.Fatalf("%d attempts in flight, over the tenant's share of 4", n)
	}
}

// TestWebhookOrphanRejobbed: a pending delivery whose job is gone
// (cancelled by hand in River's dashboard, here through River's client, or
// discarded after its attempts) gets a new job from the workers' look for
// orphans, and is delivered, though its retry was an hour away and a resend
// refuses a delivery still pending.
func TestWebhookOrphanRejobbed(t *testing.T) {
	t.Parallel()
	s := startStack(t, stacktest.Options{WebhookSchedule: webhooks.Schedule{time.Hour}})
	h := newReceiver(t, 1)
	e := registerWith(t, s, h)
	paidPayment(t, s, "orphan")
	stacktest.WaitFor(t, "the first attempt, failed", func() bool { return len(deliveryLog(t, s, e.ID)) == 1 })
	var job int64
	if err := s.DB.Pool.QueryRow(t.Context(), `SELECT job FROM webhook_deliveries WHERE status = 'pending'`).Scan(&job); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Deliverer.Jobs.(jobs.Queue).Client.JobCancel(t.Context(), job); err != nil {
		t.Fatal(err)
	}
	stacktest.WaitFor(t, "the orphan delivered", func() bool { return deliveries(s, "delivered") == 1 })
	if log := deliveryLog(t, s, e.ID); len(log) != 2 {
		t.Fatalf("%d attempts logged, want the failed one and the one its new job made", len(log))
	}
}

// TestWebhookAbandonedAmongManyPending: a delivery whose job River
// abandoned (cancelled, here) gets a new job within a look for orphans
// however many deliveries are pending before it: the look reads what the
// queue abandoned, not a page of the pending. Here 2,500 older deliveries
// pending on a live job would take a look at 1,000 of them every 10 s
// three looks to reach it.
func TestWebhookAbandonedAmongManyPending(t *testing.T) {
	t.Parallel()
	s := startStack(t, stacktest.Options{WebhookSchedule: webhooks.Schedule{time.Hour}})
	h := newReceiver(t, 2)
	e := registerWith(t, s, h)
	paidPayment(t, s, "abandoned")
	paidPayment(t, s, "live")
	stacktest.WaitFor(t, "both first attempts, failed", func() bool { return len(deliveryLog(t, s, e.ID)) == 2 })
	var orphan, live int64
	if err := s.DB.Pool.QueryRow(t.Context(), `SELECT min(job), max(job) FROM webhook_deliveries WHERE status = 'pending'`).Scan(&orphan, &live); err != nil {
		t.Fatal(err)
	}
	s.Exec(`INSERT INTO events (id, tenant_id, type, resource_id, data, created_at)
SELECT 'evt_bulk_' || i, $1, 'payment.succeeded', 'pay_bulk', '{}', now() - interval '1 hour' FROM generate_series(1, 2500) i`, stacktest.AcmeID)
	s.Exec(`INSERT INTO webhook_deliveries (tenant_id, endpoint_id, event_id, status, job, created_at)
SELECT $1, $2, 'evt_bulk_' || i, 'pending', $3, now() - interval '1 hour' FROM generate_series(1, 2500) i`, stacktest.AcmeID, e.ID, live)
	if _, err := s.Deliverer.Jobs.(jobs.Queue).Client.JobCancel(t.Context(), orphan); err != nil {
		t.Fatal(err)
	}
	testwait.Within(t, webhooks.OrphanLookInterval+5*time.Second, "the abandoned job's delivery given a new job", func() bool {
		return s.Count(`SELECT count(*) FROM webhook_deliveries WHERE status = 'pending' AND job NOT IN ($1, $2)`, orphan, live) == 1
	})
}

// TestWebhookWaitingLine: deliveries over their endpoint's share wait in
// line, and the attempt that frees a place wakes the next at once. With one
// attempt at a time to the endpoint, each held 300 ms, the deliveries of six
// payments arrive one after another in about their holds, though a waiting
// job looks again on its own only after 20 s.
func TestWebhookWaitingLine(t *testing.T) {
	t.Parallel()
	const hold = 300 * time.Millisecond
	var inFlight peak
	s, _, _ := startDelivering(t, stacktest.Options{EndpointInFlight: 1}, func(_ http.ResponseWriter, r *http.Request, _ int64) bool {
		defer inFlight.enter()()
		select { // the receiver's own latency
		case <-time.After(hold):
		case <-r.Context().Done():
		}
		return false
	})
	start := time.Now()
	for i := range 6 {
		paidPayment(t, s, fmt.Sprintf("line-%d", i))
	}
	var n int
	stacktest.WaitFor(t, "every delivery delivered", func() bool {
		n = s.Count(`SELECT count(*) FROM webhook_deliveries`)
		return n >= 6 && deliveries(s, "delivered") == n
	})
	took := time.Since(start)
	if bound := time.Duration(n)*hold + 5*time.Second; took > bound {
		t.Fatalf("%d deliveries one at a time took %s, more than their holds and 5 s (%s): the line did not move as places freed", n, took, bound)
	}
	if m := inFlight.most.Load(); m != 1 {
		t.Fatalf("%d attempts at once to an endpoint whose share is 1", m)
	}
	if w := s.Count(`SELECT count(*) FROM webhook_line`); w != 0 {
		t.Fatalf("%d deliveries still in the line", w)
	}
	if a := s.Count(`SELECT count(*) FROM webhook_delivery_attempts`); a != n {
		t.Fatalf("%d attempts for %d deliveries: waiting spent attempts", a, n)
	}
}

// TestWebhookLineSwept: a delivery waits in line without a job while a
// dead worker's place holds its endpoint's share; once that place is past
// its until, the worker's sweep hands it on and the delivery arrives, though
// no attempt ever ended to hand it over and no other delivery came. Another
// process holds River's leadership throughout (the test writes River's
// table, as a leader that never dies would), so the worker runs no periodic
// job: the sweep runs in every worker, not on the leader alone.
func TestWebhookLineSwept(t *testing.T) {
	t.Parallel()
	s := stacktest.New(t, stacktest.Options{EndpointInFlight: 1})
	s.Exec(`INSERT INTO river_leader (elected_at, expires_at, leader_id) VALUES (now(), now() + interval '1 hour', 'another-worker')`)
	s.StartWorker()
	h := newReceiver(t, 0)
	e := registerWith(t, s, h)
	paidPayment(t, s, "swept-1")
	stacktest.WaitFor(t, "the first delivery", func() bool { return deliveries(s, "delivered") >= 1 })
	first := s.Count(`SELECT count(*) FROM webhook_deliveries`)
	// A place a killed worker left, counting for two more seconds.
	s.Exec(`INSERT INTO webhook_places (delivery_id, endpoint_id, tenant_id, until)
SELECT min(id), $1, $2, now() + interval '2 seconds' FROM webhook_deliveries`, e.ID, stacktest.AcmeID)
	paidPayment(t, s, "swept-2")
	stacktest.WaitFor(t, "the next delivery in line", func() bool { return s.Count(`SELECT count(*) FROM webhook_line`) >= 1 })
	waitAllDelivered(t, s, first) // the line swept
}

// TestWebhookDeadWorkersPlaceFreed: a place held by a worker that lives
// (its presence lock held) counts, however the sweeps go, and the delivery
// behind it waits in line; once that worker's session ends, as a killed
// worker's does, the place is freed at the next look, though its until is
// an hour away, and the delivery arrives.
func TestWebhookDeadWorkersPlaceFreed(t *testing.T) {
	t.Parallel()
	s, _, e := startDelivering(t, stacktest.Options{EndpointInFlight: 1}, nil)
	paidPayment(t, s, "dead-1")
	stacktest.WaitFor(t, "the first delivery", func() bool { return deliveries(s, "delivered") >= 1 })
	first := s.Count(`SELECT count(*) FROM webhook_deliveries`)
	// Another worker, alive: its presence held on a session of its own,
	// making an attempt that holds the endpoint's one place for an hour.
	const other = 4242
	ctx := context.Background()
	alive, err := pgx.Connect(ctx, s.DB.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer alive.Close(ctx)
	if _, err := alive.Exec(ctx, `SET application_name = '`+database.PresenceApplication+`'`); err != nil {
		t.Fatal(err)
	}
	if _, err := alive.Exec(ctx, `SELECT pg_advisory_lock($1, $2)`, database.PresenceClass, other); err != nil {
		t.Fatal(err)
	}
	s.Exec(`INSERT INTO webhook_places (delivery_id, endpoint_id, tenant_id, until, worker, instance)
SELECT min(id), $1, $2, now() + interval '1 hour', $3, pg_postmaster_start_time() FROM webhook_deliveries`, e, stacktest.AcmeID, other)
	paidPayment(t, s, "dead-2")
	stacktest.WaitFor(t, "the next delivery in line", func() bool { return s.Count(`SELECT count(*) FROM webhook_line`) == 1 })
	// Two sweeps since it joined the line: the place still counts.
	for range 2 {
		if _, err := s.Deliverer.SweepLine(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if n, w := s.Count(`SELECT count(*) FROM webhook_places WHERE worker = $1`, other), s.Count(`SELECT count(*) FROM webhook_line`); n != 1 || w != 1 {
		t.Fatalf("with its worker alive: %d of its places held, %d deliveries in line; want 1 and 1", n, w)
	}
	// The worker dies: its session ends, and its lock with it.
	alive.Close(ctx)
	waitAllDelivered(t, s, first) // the dead worker's place freed
}

// TestWebhookOneJobADelivery: a delivery has one job at a time that may
// attempt it. A delivery joins the line behind an attempt in flight and its
// job ends; that job's worker is taken to have died before River marked it
// completed, so River will run it again once it rescues it. Meanwhile the
// attempt in flight ends and hands its place to the delivery in line, with
// a new job, whose attempt is in flight when the old job runs again, and
// has failed (another due in an hour) when it runs a third time: the old
// job makes no attempt either time, and never joins the line.
func TestWebhookOneJobADelivery(t *testing.T) {
	t.Parallel()
	gate, over := make(chan struct{}, 1), make(chan struct{})
	var inFlight peak
	s, h, _ := startDelivering(t, stacktest.Options{EndpointInFlight: 1, WebhookSchedule: webhooks.Schedule{time.Hour}},
		func(w http.ResponseWriter, r *http.Request, _ int64) bool {
			defer inFlight.enter()()
			select {
			case <-gate:
			case <-over:
			case <-r.Context().Done():
			}
			w.WriteHeader(http.StatusInternalServerError)
			return true
		})
	t.Cleanup(func() { close(over) }) // before the receiver closes
	paidPayment(t, s, "first")
	stacktest.WaitFor(t, "the first attempt in flight", func() bool { return h.hits.Load() == 1 })
	paidPayment(t, s, "second")
	stacktest.WaitFor(t, "a delivery in line", func() bool { return s.Count(`SELECT count(*) FROM webhook_line`) >= 1 })
	next := int64(s.Count(`SELECT delivery_id FROM webhook_line ORDER BY since LIMIT 1`))
	// The job that put it in line: done, to River, only once rescued.
	stale := int64(s.Count(`SELECT min(id) FROM river_job WHERE kind = 'deliver_webhook' AND (args->>'delivery_id')::bigint = $1`, next))
	var event string
	if err := s.DB.Pool.QueryRow(context.Background(), `SELECT event_id FROM webhook_deliveries WHERE id = $1`, next).Scan(&event); err != nil {
		t.Fatal(err)
	}
	posts := func() int64 { // of the delivery's event, by its webhook-id
		if v, ok := h.ids.Load(event); ok {
			return v.(*atomic.Int64).Load()
		}
		return 0
	}

	gate <- struct{}{} // the first attempt fails, and hands its place on
	stacktest.WaitFor(t, "the next delivery's attempt in flight", func() bool {
		return posts() == 1 && s.Count(`SELECT count(*) FROM webhook_places WHERE delivery_id = $1 AND worker IS NOT NULL`, next) == 1
	})
	if n := s.Count(`SELECT count(*) FROM river_job WHERE kind = 'deliver_webhook' AND (args->>'delivery_id')::bigint = $1`, next); n != 2 {
		t.Fatalf("%d jobs for the delivery handed the place, want its first and the hand-on's", n)
	}
	ctx := context.Background()
	rerun := func(when string) {
		t.Helper()
		done := make(chan error, 1)
		go func() {
			wait, err := s.Deliverer.Deliver(ctx, next, stale)
			if err == nil && wait != 0 {
				err = fmt.Errorf("the old job snoozes %s", wait)
			}
			done <- err
		}()
		var err error
		stacktest.WaitFor(t, "the old job's run over "+when, func() bool {
			select {
			case err = <-done:
				return true
			default:
				return posts() > 1
			}
		})
		if err != nil {
			t.Fatalf("the old job, %s: %v", when, err)
		}
		if n := posts(); n != 1 {
			t.Fatalf("the old job, %s, made an attempt: %d POSTs of the delivery, want 1", when, n)
		}
		if n := s.Count(`SELECT count(*) FROM webhook_line WHERE delivery_id = $1`, next); n != 0 {
			t.Fatalf("the old job, %s, put the delivery in line", when)
		}
	}
	rerun("while the new job's attempt is in flight")
	close(gate) // that attempt fails: the next is due in an hour
	stacktest.WaitFor(t, "the attempt recorded, its place given up", func() bool {
		return s.Count(`SELECT count(*) FROM webhook_delivery_attempts WHERE delivery_id = $1`, next) == 1 &&
			s.Count(`SELECT count(*) FROM webhook_places WHERE delivery_id = $1`, next) == 0
	})
	rerun("once the new job's attempt failed")
	if n := s.Count(`SELECT attempts FROM webhook_deliveries WHERE id = $1`, next); n != 1 {
		t.Fatalf("%d attempts counted, want the new job's one", n)
	}
	if m := inFlight.most.Load(); m != 1 {
		t.Fatalf("%d attempts at once to an endpoint whose share is 1", m)
	}
}

// TestWorkerVacuumsQueueTables: a worker vacuums the tables whose rows live
// for moments (the outbox, the webhook places and lines) on its own, every
// ten seconds, whether autovacuum runs or not: vacuum_count counts only
// vacuums asked for, never autovacuum's.
func TestWorkerVacuumsQueueTables(t *testing.T) {
	t.Parallel()
	s := stacktest.New(t, stacktest.Options{})
	s.StartWorker()
	stacktest.WaitFor(t, "the worker's vacuum of the queue tables", func() bool {
		return s.Count(`SELECT count(*) FROM pg_stat_user_tables
WHERE relname IN ('operation_outbox', 'webhook_places', 'webhook_line') AND vacuum_count > 0`) == 3
	})
}
