package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/example/payments/internal/database"
	"github.com/example/payments/internal/signing"
	"github.com/example/payments/tools/hapg"
	"github.com/example/payments/tools/testdb"
	"github.com/example/payments/tools/testwait"
)

// failoverPayments is the load: at least this many payments from
// failoverClients clients, the primary killed once a third of them are
// answered, and more sent until a standby has taken over.
const (
	failoverPayments = 36
	failoverClients  = 6
)

// TestFailover: the API and the worker run on a Patroni pair in synchronous
// mode through the multi-host URL (target_session_attrs=read-write), with
// merchant webhooks and the processor's webhooks on, while clients pay. The
// primary is SIGKILLed mid-load. Clients see 503 with Retry-After while no
// primary accepts writes, never a 500; every 201 and 402 a client got is
// still there, the same, afterwards; every payment finishes and every event
// is delivered; and every kind of connection is back on the new primary:
// the pools (payments succeed), the API's LISTEN (a waiting request is
// woken, not polled), the worker's presence lock, and River's leader (a
// periodic job runs).
func TestFailover(t *testing.T) {
	t.Parallel()
	if usePooler {
		// The test's PgBouncer points at one server; a pooler in front of a
		// cluster must follow its primary (docs/SCALING.md).
		t.Skip("not through the test's PgBouncer (E2E_POOLER), which does not follow the primary")
	}
	c := hapg.Start(t)
	// The processor is outside the database that fails over, as a real one.
	procDB := testdb.New(t)
	url := c.URL()
	run(t, "api", []string{"DATABASE_URL=" + url}, "migrate")
	run(t, "api", []string{"DATABASE_URL=" + url, "APP_ENV=development"}, "seed")
	s := newStack(t, url)
	secret := signing.NewSecret()
	s.startProcessor("DATABASE_URL="+procDB.URL, "PROCESSOR_WEBHOOK_URL={api}/v1/processor/webhooks", "PROCESSOR_WEBHOOK_SECRET="+secret)
	s.startWorker("WEBHOOK_RETRY_SCHEDULE=1s,2s,4s")
	s.startAPI("PROCESSOR_WEBHOOK_SECRET=" + secret)

	var seen sync.Map // webhook-id → struct{}
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen.Store(r.Header.Get("webhook-id"), struct{}{})
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(receiver.Close)
	registerEndpoint(t, s, receiver.URL+"/hooks")

	pool, err := database.Connect(t.Context(), url, 2)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)

	l := &failoverLoad{t: t, s: s, answers: map[string]finalAnswer{}}
	var wg sync.WaitGroup
	for i := range failoverClients {
		wg.Go(func() { l.client(i) })
	}
	testwait.Within(t, 60*time.Second, "a third of the payments answered", func() bool { return l.done.Load() >= failoverPayments/3 })
	killedAt := time.Now()
	killed, err := c.KillPrimary()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	leader, err := c.WaitPrimary(ctx)
	if err != nil {
		t.Fatal(err)
	}
	promoted := time.Now()
	t.Logf("killed %s; %s took writes %s later", killed, leader, promoted.Sub(killedAt).Round(100*time.Millisecond))
	l.failedOver.Store(true)
	wg.Wait()
	if t.Failed() {
		return
	}
	if l.unavailable.Load() == 0 {
		t.Fatal("no request was answered 503: the load missed the outage")
	}

	t.Run("AnswersKept", func(t *testing.T) {
		// Every 201 and 402 a client got is the answer to its key still.
		for key, a := range l.answers {
			status, _, body := do(t, http.MethodPost, s.apiURL+"/v1/payments", "sk_test_acme", key, a.request)
			if status != a.status || string(body) != string(a.body) {
				t.Errorf("key %s: %d %s, was %d %s", key, status, body, a.status, a.body)
			}
		}
	})
	t.Run("Pools", func(t *testing.T) {
		pay(t, s, "after-failover")
	})
	t.Run("Listen", func(t *testing.T) {
		// A request that waits is woken by the key's announcement (LISTEN on
		// the new primary), not by its poll a second later.
		var took []time.Duration
		for i := range 7 {
			start := time.Now()
			pay(t, s, fmt.Sprintf("woken-%d", i))
			took = append(took, time.Since(start))
		}
		slices.Sort(took)
		if median := took[len(took)/2]; median >= 900*time.Millisecond {
			t.Fatalf("payments answered in %v (median %v): waiters are polled, not woken", took, median)
		}
	})
	t.Run("Presence", func(t *testing.T) {
		testwait.Within(t, 20*time.Second, "the worker's presence lock on the new primary", func() bool {
			return count(t, pool, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND classid::bigint = $1 AND objsubid = 2 AND granted`,
				database.PresenceClass) == 1
		})
	})
	t.Run("RiverLeader", func(t *testing.T) {
		// The ledger comparison, inserted by River's leader alone, runs
		// again: a leader was elected on the new primary.
		testwait.Within(t, 30*time.Second, "a periodic job inserted after the failover to run", func() bool {
			return count(t, pool, `SELECT count(*) FROM river_job WHERE kind = 'compare_ledger' AND state = 'completed' AND created_at > $1`, promoted) > 0
		})
	})
	t.Run("Delivered", func(t *testing.T) {
		// A delivery whose snooze River could not record while no primary
		// took writes (its completer gives up after some 7 s) looks running
		// until River's rescuer, which a leader elected on the new primary
		// runs every 30 s, makes it retryable: a minute and more on a loaded
		// machine.
		testwait.Within(t, 90*time.Second, "every merchant event delivered", func() bool {
			return count(t, pool, `SELECT count(*) FROM webhook_deliveries WHERE status <> 'delivered'`) == 0
		})
		rows, err := pool.Query(t.Context(), `SELECT event_id FROM webhook_deliveries`)
		if err != nil {
			t.Fatal(err)
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range ids {
			if _, ok := seen.Load(id); !ok {
				t.Errorf("event %s recorded delivered, never received", id)
			}
		}
		if len(ids) < failoverPayments/3 {
			t.Errorf("%d deliveries for %d payments", len(ids), failoverPayments)
		}
	})
	t.Logf("%d requests: %d answered 503 with Retry-After, %d cut unanswered", l.requests.Load(), l.unavailable.Load(), l.cut.Load())
}

// failoverLoad is the clients' payments and what they were answered.
type failoverLoad struct {
	t                          *testing.T
	s                          *stack
	next                       atomic.Int64
	done                       atomic.Int64
	failedOver                 atomic.Bool // a standby took writes
	requests, unavailable, cut atomic.Int64
	mu                         sync.Mutex
	answers                    map[string]finalAnswer // by key: each final answer
}

// finalAnswer is a final answer a client got: 201 or 402, and its request.
type finalAnswer struct {
	request string
	status  int
	body    []byte
}

// client pays until the load's payments are all sent and a standby took
// writes, each until it has its final answer, retrying its key on a 202, a
// 409, a 503 or a connection cut.
func (l *failoverLoad) client(i int) {
	for {
		n := l.next.Add(1)
		if n > failoverPayments && l.failedOver.Load() {
			return
		}
		method := "pm_card_visa"
		if n%4 == 0 {
			method = "pm_card_declined"
		}
		key := fmt.Sprintf("failover-%d-%d", i, n)
		body := fmt.Sprintf(`{"amount":%d,"currency":"USD","payment_method":"%s"}`, 100+n, method)
		if !l.pay(key, body) {
			return
		}
		l.done.Add(1)
	}
}

// pay sends key's payment until it has its final answer, within a minute.
func (l *failoverLoad) pay(key, body string) bool {
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		l.requests.Add(1)
		status, header, resp := do(l.t, http.MethodPost, l.s.apiURL+"/v1/payments", "sk_test_acme", key, body, "Prefer", "wait=3")
		switch status {
		case http.StatusCreated, http.StatusPaymentRequired:
			l.mu.Lock()
			l.answers[key] = finalAnswer{request: body, status: status, body: resp}
			l.mu.Unlock()
			return true
		case http.StatusServiceUnavailable:
			l.unavailable.Add(1)
			if header.Get("Retry-After") == "" {
				l.t.Errorf("key %s: 503 without Retry-After: %s", key, resp)
				return false
			}
		case 0:
			l.cut.Add(1)
		case http.StatusAccepted, http.StatusConflict:
			// Processing, or the key's request before this one, cut off by
			// the failover, still holds it: retry, as the contract says.
		default:
			l.t.Errorf("key %s: %d %s", key, status, resp)
			return false
		}
		time.Sleep(200 * time.Millisecond)
	}
	l.t.Errorf("key %s: no final answer within a minute", key)
	return false
}

// count runs a count on pool.
func count(t *testing.T, pool interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(t.Context(), sql, args...).Scan(&n); err != nil {
		t.Logf("%s: %v", sql, err)
		return -1
	}
	return n
}
