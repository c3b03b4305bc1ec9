package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/example/payments/client"
	tenantstore "github.com/example/payments/internal/tenants"
)

// The tarpit: a third tenant, besides the two of the load, whose webhook
// endpoints each hold every attempt for nearly the sender's attempt timeout
// (15 s) and then answer 500, so that its deliveries are never done and
// always want a worker. It answers before the sender gives up (a delivery's
// job has a timeout of its own above the attempt's, whatever JOB_TIMEOUT
// says), so that it ends each attempt itself and its count of the attempts
// it holds at once is exact: an attempt the sender cuts ends, at the
// receiver, only when the receiver notices the hang-up, which a loaded
// machine may take longer to do than the next attempt takes to arrive. The
// tenant pays at a steady pace, for its endpoints to have events. The
// contract's "Fair" (SPEC.md: at most WEBHOOK_ENDPOINT_IN_FLIGHT attempts to
// one endpoint and WEBHOOK_TENANT_IN_FLIGHT for one tenant, across every
// worker) must keep it to its share (checkTarpitLimits) and from delaying
// the other tenants' events (checkFairDelivery).
const (
	tarpitTenant    = 2 // its index in tenants
	tarpitEndpoints = 8
	tarpitHold      = 14 * time.Second
)

// tarpitTenantID names the tarpit tenant in the database.
const tarpitTenantID = "ten_tarpit"

// createTarpitTenant adds the tarpit tenant and its API key, which the seed
// does not make.
func createTarpitTenant(ctx context.Context, pool *pgxpool.Pool) error {
	return (&tenantstore.Store{DB: pool}).Create(ctx, tarpitTenantID, "Tarpit", tenants[tarpitTenant].apiKey)
}

// tarpit is the HTTP server of the tarpit tenant's endpoints, in the chaos
// process: POST /tarpit/{n}, one n an endpoint. It counts the attempts it
// holds at once, in all and to one endpoint.
type tarpit struct {
	srv  *http.Server
	base string // http://127.0.0.1:port/tarpit/
	stop chan struct{}

	mu                        sync.Mutex
	inFlight                  map[string]int // by path, one an endpoint
	total, maxTotal, maxToOne int
	// held counts the attempts answered 500 after tarpitHold; cut those
	// the sender gave up on first.
	held, cut atomic.Int64
}

// startTarpit listens on a free loopback port.
func startTarpit() (*tarpit, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	t := &tarpit{base: "http://" + ln.Addr().String() + "/tarpit/", stop: make(chan struct{}), inFlight: map[string]int{}}
	t.srv = &http.Server{Handler: t, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = t.srv.Serve(ln) }()
	return t, nil
}

// close answers the attempts held at once and stops the server.
func (t *tarpit) close() {
	select {
	case <-t.stop:
		return
	default:
	}
	close(t.stop)
	_ = t.srv.Close()
}

func (t *tarpit) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || !strings.HasPrefix(r.URL.Path, "/tarpit/") {
		http.NotFound(w, r)
		return
	}
	// Read to the end, so that the server notices a sender that hangs up.
	_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, 1<<20))
	t.enter(r.URL.Path)
	defer t.leave(r.URL.Path)
	hold := time.NewTimer(tarpitHold)
	defer hold.Stop()
	select {
	case <-hold.C:
		t.held.Add(1)
		http.Error(w, `{"error":"tarpit"}`, http.StatusInternalServerError)
	case <-r.Context().Done():
		t.cut.Add(1)
	case <-t.stop:
	}
}

func (t *tarpit) enter(endpoint string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.inFlight[endpoint]++
	t.total++
	t.maxTotal = max(t.maxTotal, t.total)
	t.maxToOne = max(t.maxToOne, t.inFlight[endpoint])
}

func (t *tarpit) leave(endpoint string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.inFlight[endpoint]--
	t.total--
}

// Tarpit is what the tarpit tenant's endpoints went through.
type Tarpit struct {
	Endpoints int
	Hold      time.Duration
	// Held and Cut count the attempts the endpoints held to the end and
	// those the sender gave up on first; MaxInFlight and MaxToOne the most
	// held at once, in all and to one endpoint.
	Held, Cut             int64
	MaxInFlight, MaxToOne int
	// Events and Deliveries are the tenant's, Deliveries by status.
	Events     int
	Deliveries map[string]int
}

// The contract's limits (SPEC.md, "Fair"), the defaults of
// WEBHOOK_TENANT_IN_FLIGHT and WEBHOOK_ENDPOINT_IN_FLIGHT: what the tarpit
// tenant may hold at once. The run does not set them, so that a run with
// either set otherwise in its environment, which the workers inherit,
// stands for a service that stopped enforcing them, and fails.
const (
	tenantInFlight   = 16
	endpointInFlight = 8
)

func (t *tarpit) stats() Tarpit {
	t.mu.Lock()
	defer t.mu.Unlock()
	return Tarpit{Endpoints: tarpitEndpoints, Hold: tarpitHold, Held: t.held.Load(), Cut: t.cut.Load(),
		MaxInFlight: t.maxTotal, MaxToOne: t.maxToOne}
}

// startTarpit registers the tarpit tenant's endpoints, each at a path of
// the tarpit server of its own.
func (s *stack) startTarpit(ctx context.Context) error {
	t, err := startTarpit()
	if err != nil {
		return err
	}
	s.tarpit = t
	client := &http.Client{Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()
	for i := range tarpitEndpoints {
		if _, err := registerEndpoint(ctx, client, s.apiURLs[0], tenants[tarpitTenant].apiKey, t.base+strconv.Itoa(i+1),
			"chaos-tarpit-endpoint-"+strconv.Itoa(i+1)); err != nil {
			return fmt.Errorf("tarpit: %w", err)
		}
	}
	return nil
}

// registerEndpoint registers a webhook endpoint for every event at url, for
// the tenant of apiKey, and returns its secret.
func registerEndpoint(ctx context.Context, client *http.Client, apiURL, apiKey, url, key string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, apiURL+"/v1/webhook_endpoints",
		strings.NewReader(`{"url":"`+url+`","enabled_events":["*"]}`))
	if err != nil {
		return "", err
	}
	req.Header.Set("Authorization", "Bearer "+apiKey)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	res, err := client.Do(req)
	if err != nil {
		return "", fmt.Errorf("register an endpoint: %w", err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	var e struct{ Secret string }
	if err := json.Unmarshal(body, &e); err != nil || res.StatusCode != http.StatusCreated || e.Secret == "" {
		return "", fmt.Errorf("register an endpoint: %d %s", res.StatusCode, body)
	}
	return e.Secret, nil
}

// tarpitPayments has the tarpit tenant pay, one payment (that succeeds)
// at a time, every so often, until ctx ends. They are operations of the run like the others,
// under every money invariant.
func (l *load) tarpitPayments(ctx context.Context, every time.Duration) {
	rng := rand.New(rand.NewPCG(l.seed, 1<<40))
	for i := 0; ctx.Err() == nil; i++ {
		o := &op{tenant: tarpitTenant, key: fmt.Sprintf("chaos-%d-tarpit-%d", l.seed, i), method: "pm_card_visa",
			amount: int64(100 + rng.IntN(9900)), sentAt: time.Now()}
		o.body, _ = json.Marshal(client.CreatePaymentParams{Amount: o.amount, Currency: "USD", PaymentMethod: o.method})
		l.add(o)
		l.send(ctx, rng, o, false, false)
		sleep(ctx, every)
	}
}

// down is a time the run itself held merchant deliveries up: a worker
// killed (from the kill to the restart; worker), or the receiver killed or
// taken down for a while.
type down struct {
	window
	worker bool
	// cut is a worker's link cut (partition.go), which holds up every
	// tenant whose lock the worker's session held until the heal: behind
	// the run's proxy, which keeps the server's side of a cut connection
	// open, that session ends only then.
	cut bool
}

// cutShadow is how long after a cut link healed the cut may still hold an
// event up: a sweep, the place handed, the attempt, on a loaded machine.
const cutShadow = 5 * time.Second

// receiverShadow is how long after the receiver came back its absence may
// still hold an event up: the attempts meanwhile failed, the schedule's
// waits grew about as fast as the time spent (the first attempt after it
// may come as long again later), and that attempt is refused on purpose
// when it is the first the receiver sees of the event, so the next waits
// as long again.
func receiverShadow(down time.Duration) time.Duration { return 2*down + 5*time.Second }

// checkFairDelivery lists what breaks "every event of the tenants other
// than the tarpit delivered within bound of its creation, whatever the
// tarpit does": from the event's created_at to its delivery's delivered_at
// (both the database's clock), less the time the event spent in the shadow
// of what the run did to its deliveries itself, which the contract allows
// to hold them up:
//
//   - its delivery's job stuck on a killed worker, from the kill until River
//     rescued it (the "Stuck job rescued" error River records on the job).
//     The job's worker is not recorded; its kill is taken to be the first
//     after the job's last sign of life before the rescue (the event's
//     creation, an attempt logged, an earlier rescue), which is when it
//     was stuck at the latest (the latest kill before the rescue is often
//     the other worker's);
//   - the receiver killed or taken down, until receiverShadow after it was
//     back; a worker's link cut, until cutShadow after the heal;
//   - each attempt the receiver failed (an answer other than a 2xx, on
//     purpose when it first sees an event, or no answer), until the next
//     attempt was due by the schedule: the contract's retry wait after a
//     failure the run made. A next attempt later than it was due counts.
//
// The tarpit must have been sent attempts, or the check says nothing.
func checkFairDelivery(ctx context.Context, pool *pgxpool.Pool, bound time.Duration, downs []down, tp Tarpit) ([]string, Latency, error) {
	var ks kills
	var common []window // the receiver's, for every event
	for _, d := range downs {
		switch {
		case d.cut:
			common = append(common, window{d.from, d.to.Add(cutShadow)})
		case d.worker:
			ks = append(ks, d.from)
		default:
			common = append(common, window{d.from, d.to.Add(receiverShadow(d.to.Sub(d.from)))})
		}
	}
	slices.SortFunc(ks, time.Time.Compare)
	bad, lat, err := deliveryWaits(ctx, pool, bound, ks, common)
	if err != nil {
		return nil, Latency{}, err
	}
	if tp.Held+tp.Cut == 0 {
		bad = append(bad, "the tarpit was sent no attempt: the check would be vacuous")
	}
	return bad, lat, nil
}

// kills are the times workers were killed, in order.
type kills []time.Time

// first is the earliest kill in (after, before).
func (ks kills) first(after, before time.Time) (time.Time, bool) {
	for _, k := range ks {
		if k.Before(before) && k.After(after) {
			return k, true
		}
	}
	return time.Time{}, false
}

// deliveryWaits lists the events of the tenants other than the tarpit not
// delivered within bound, less their time in the shadow of what the run did
// (checkFairDelivery), and measures their waits.
func deliveryWaits(ctx context.Context, pool *pgxpool.Pool, bound time.Duration, ks kills, common []window) ([]string, Latency, error) {
	rows, err := pool.Query(ctx, `
WITH failed AS (
	SELECT delivery_id, array_agg(created_at ORDER BY attempt) AS at, array_agg(next_retry_at ORDER BY attempt) AS due
	FROM webhook_delivery_attempts
	WHERE next_retry_at IS NOT NULL AND (status_code IS NOT NULL OR error LIKE 'the receiver %')
	GROUP BY delivery_id),
logged AS (
	SELECT delivery_id, array_agg(created_at) AS at FROM webhook_delivery_attempts GROUP BY delivery_id)
SELECT e.id, e.tenant_id, e.created_at, d.delivered_at,
	coalesce(array_agg((x->>'at')::timestamptz) FILTER (WHERE x->>'error' LIKE 'Stuck job rescued%'), '{}'),
	coalesce(f.at, '{}'), coalesce(f.due, '{}'), coalesce(l.at, '{}')
FROM events e
LEFT JOIN webhook_deliveries d ON d.event_id = e.id AND d.status = 'delivered'
LEFT JOIN failed f ON f.delivery_id = d.id
LEFT JOIN logged l ON l.delivery_id = d.id
LEFT JOIN river_job j ON j.kind = 'deliver_webhook' AND (j.args->>'delivery_id')::bigint = d.id
LEFT JOIN LATERAL unnest(j.errors) x ON true
WHERE e.tenant_id <> $1
GROUP BY e.id, e.tenant_id, e.created_at, d.delivered_at, f.at, f.due, l.at`, tarpitTenantID)
	if err != nil {
		return nil, Latency{}, err
	}
	var (
		bad         []string
		lat         Latency
		id, ten     string
		created     time.Time
		delivered   *time.Time
		rescues     []time.Time
		failed      []time.Time // the receiver's failed attempts
		retries     []time.Time // and the next attempt each scheduled
		logged      []time.Time // every attempt
		waits, nets []time.Duration
	)
	_, err = pgx.ForEachRow(rows, []any{&id, &ten, &created, &delivered, &rescues, &failed, &retries, &logged}, func() error {
		if delivered == nil {
			bad = append(bad, fmt.Sprintf("%s (%s): never delivered", id, ten))
			return nil
		}
		shadows := append([]window(nil), common...)
		for _, r := range rescues {
			alive := created
			for _, at := range slices.Concat(logged, rescues) {
				if at.Before(r) && at.After(alive) {
					alive = at
				}
			}
			if k, ok := ks.first(alive, r); ok {
				shadows = append(shadows, window{k, r.Add(time.Second)}) // and River's retry after the rescue
			}
		}
		for i, f := range failed {
			shadows = append(shadows, window{f, retries[i]})
		}
		wait := delivered.Sub(created)
		shadowed := covered(window{created, *delivered}, shadows)
		waits, nets = append(waits, wait), append(nets, wait-shadowed)
		if shadowed > 0 {
			lat.Shadowed++
		}
		if wait-shadowed > bound {
			bad = append(bad, fmt.Sprintf("%s (%s): delivered %s after it was created, %s of it in the shadow of a kill or outage; bound %s",
				id, ten, wait.Round(100*time.Millisecond), shadowed.Round(100*time.Millisecond), bound))
		}
		return nil
	})
	if err != nil {
		return nil, Latency{}, err
	}
	lat.Events, lat.Bound = len(waits), bound
	lat.P50, lat.P99, lat.Max, lat.MaxNet = quantile(waits, 0.5), quantile(waits, 0.99), quantile(waits, 1), quantile(nets, 1)
	return bad, lat, nil
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// covered is how much of w the windows cover, overlaps counted once.
func covered(w window, ws []window) time.Duration {
	var in []window
	for _, x := range ws {
		if x.from.Before(w.to) && x.to.After(w.from) {
			in = append(in, window{maxTime(x.from, w.from), minTime(x.to, w.to)})
		}
	}
	slices.SortFunc(in, func(a, b window) int { return a.from.Compare(b.from) })
	var total time.Duration
	var cur *window
	for i := range in {
		switch {
		case cur == nil:
			cur = &in[i]
		case in[i].from.After(cur.to):
			total += cur.to.Sub(cur.from)
			cur = &in[i]
		case in[i].to.After(cur.to):
			cur.to = in[i].to
		}
	}
	if cur != nil {
		total += cur.to.Sub(cur.from)
	}
	return total
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// Latency is how long the other tenants' events waited for delivery.
type Latency struct {
	Events        int
	P50, P99, Max time.Duration
	Bound         time.Duration
	// MaxNet is the longest wait less its time in the shadow of a kill or
	// outage, which the bound bounds; Shadowed counts the events that
	// spent some of their wait there.
	MaxNet   time.Duration
	Shadowed int
}

// quantile is the q-quantile of waits.
func quantile(waits []time.Duration, q float64) time.Duration {
	if len(waits) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), waits...)
	slices.Sort(s)
	i := int(q * float64(len(s)-1))
	return s[i]
}

// checkTarpitLimits lists what breaks "the tarpit tenant never held more
// attempts at once than its share": tenantInFlight in all,
// endpointInFlight to one endpoint, as its server counted them. A worker
// killed mid-attempt drops the connection, so the count falls with it,
// while its place lingers: the count can only be lower than the places.
func checkTarpitLimits(tp Tarpit) []string {
	var bad []string
	if tp.MaxInFlight > tenantInFlight {
		bad = append(bad, fmt.Sprintf("%d attempts held at once, over the tenant's %d", tp.MaxInFlight, tenantInFlight))
	}
	if tp.MaxToOne > endpointInFlight {
		bad = append(bad, fmt.Sprintf("%d attempts held at once to one endpoint, over its %d", tp.MaxToOne, endpointInFlight))
	}
	return bad
}
