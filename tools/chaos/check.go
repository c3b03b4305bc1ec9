package chaos

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/example/payments/tools/stripesim"
)

// Summary is what a run did and found.
type Summary struct {
	Profile, Logs, Database string
	// Path is how the APIs and workers reached Postgres.
	Path          string
	Seed          uint64
	Load, Quiesce time.Duration
	// Quiet is whether everything settled within the profile's bound.
	Quiet bool

	Payments, Refunds                     int
	Requests, Dups, Resends, Async        int64
	Kills                                 map[string]int64
	Outages                               int64
	Succeeded, Failed, GivenUp            int
	RefundsSucceeded, RefundsFailed       int
	RefundsRefused                        int
	Charges, ProcessorRefunds, ReviewKept int
	// SettledBy counts the operations each path settled (worker, webhook,
	// reconciler); Webhooks the processor's events by what became of them.
	SettledBy map[string]int
	Webhooks  map[string]int
	Injected  Injected
	// Merchant webhooks: deliveries by status and attempts made, and how
	// often the receiver was killed or taken down.
	Deliveries                     map[string]int
	DeliveryAttempts               int
	ReceiverKills, ReceiverOutages int64
	// Tarpit is what the tarpit tenant's endpoints held; Latency how long
	// the other tenants' events waited for delivery meanwhile.
	Tarpit  Tarpit
	Latency Latency

	// Failovers are the primary's kills, in the failover profile.
	Failovers []Failover
	// Partitions are the cuts of a worker's link, and Slowed how often
	// every link was slowed, in the partition profile.
	Partitions []Partition
	Slowed     int
	// Stripe is what the Stripe simulator was asked and answered, in the
	// stripe profile.
	Stripe stripesim.Stats

	// Invariants in the order they are printed, with their violations.
	Invariants []Invariant
}

// Injected is what the run forged on purpose: processor events that must go
// to review, and deliveries that must be refused.
type Injected struct {
	Contradictions, Unknown, Refused int64
	// Wrong are the answers to injected deliveries other than the contract's.
	Wrong []string
}

// Invariant is one property checked, with what broke it.
type Invariant struct {
	Name       string
	Violations []string
}

// Passed reports whether every invariant held and everything settled.
func (s *Summary) Passed() bool {
	for _, inv := range s.Invariants {
		if len(inv.Violations) > 0 {
			return false
		}
	}
	return s.Quiet
}

// Print writes the summary table.
func (s *Summary) Print(out io.Writer) {
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "\nchaos summary\tprofile %s, seed %d, load %s\n", s.Profile, s.Seed, s.Load)
	fmt.Fprintf(tw, "operations\t%d payments, %d refunds; %d requests, %d duplicate sends, %d re-sends, %d asking not to wait\n",
		s.Payments, s.Refunds, s.Requests, s.Dups, s.Resends, s.Async)
	fmt.Fprintf(tw, "kills (SIGKILL)\tapi %d, worker %d, processor %d, pooler %d\n", s.Kills["api"], s.Kills["worker"], s.Kills["processor"], s.Kills["pooler"])
	fmt.Fprintf(tw, "processor outages\t%d, each longer than a worker's retry budget\n", s.Outages)
	fmt.Fprintf(tw, "database path\t%s\n", s.Path)
	if len(s.Failovers) > 0 {
		fmt.Fprintf(tw, "failovers (primary SIGKILLed)\t%d: %s\n", len(s.Failovers), printFailovers(s.Failovers))
	}
	if len(s.Partitions) > 0 {
		fmt.Fprintf(tw, "partitions (Toxiproxy timeout)\t%s\n", printPartitions(s.Partitions, s.Slowed))
	}
	if s.Stripe.Requests > 0 {
		fmt.Fprintf(tw, "stripe simulator\t%d requests, %d answered 429 (at most %d in one second, limit %d), %d 500, %d replayed, %d answers lost\n",
			s.Stripe.Requests, s.Stripe.ByStatus[429], s.Stripe.MaxPerSecond, simRateLimit, s.Stripe.ByStatus[500], s.Stripe.Replayed, s.Stripe.Lost)
	}
	fmt.Fprintf(tw, "payments\t%d succeeded, %d failed (%d given up through the fence)\n", s.Succeeded, s.Failed, s.GivenUp)
	fmt.Fprintf(tw, "refunds\t%d succeeded, %d failed, %d refused (exceeding or not refundable)\n", s.RefundsSucceeded, s.RefundsFailed, s.RefundsRefused)
	fmt.Fprintf(tw, "processor ledger\t%d charges, %d refunds\n", s.Charges, s.ProcessorRefunds)
	fmt.Fprintf(tw, "settled by\tworker %d, webhook %d, reconciler %d\n", s.SettledBy["worker"], s.SettledBy["webhook"], s.SettledBy["reconciler"])
	fmt.Fprintf(tw, "processor webhooks\tsent: %d delivered, %d dropped on purpose, %d pending, %d abandoned; received: %d settled, %d agreed\n",
		s.Webhooks["delivered"], s.Webhooks["dropped"], s.Webhooks["pending"], s.Webhooks["abandoned"], s.Webhooks["settled"], s.Webhooks["agreed"])
	fmt.Fprintf(tw, "merchant webhooks\t%d delivered, %d failed, %d pending, in %d attempts; receiver killed %d times, down %d times for 10 s\n",
		s.Deliveries["delivered"], s.Deliveries["failed"], s.Deliveries["pending"], s.DeliveryAttempts, s.ReceiverKills, s.ReceiverOutages)
	fmt.Fprintf(tw, "delivery wait\t%d events of acme and globex: median %s, p99 %s, max %s; max %s out of the shadow of kills and outages (%d events in it), bound %s\n",
		s.Latency.Events, s.Latency.P50.Round(100*time.Millisecond), s.Latency.P99.Round(100*time.Millisecond),
		s.Latency.Max.Round(100*time.Millisecond), s.Latency.MaxNet.Round(100*time.Millisecond), s.Latency.Shadowed, s.Latency.Bound)
	fmt.Fprintf(tw, "tarpit tenant\t%d endpoints holding attempts %s: %d events, %d deliveries (%d delivered); %d attempts held, %d given up on by the sender; at most %d at once (limit %d), %d to one endpoint (limit %d)\n",
		s.Tarpit.Endpoints, s.Tarpit.Hold, s.Tarpit.Events, s.Tarpit.Deliveries["pending"]+s.Tarpit.Deliveries["failed"]+s.Tarpit.Deliveries["delivered"],
		s.Tarpit.Deliveries["delivered"], s.Tarpit.Held, s.Tarpit.Cut, s.Tarpit.MaxInFlight, tenantInFlight, s.Tarpit.MaxToOne, endpointInFlight)
	fmt.Fprintf(tw, "injected webhooks\t%d contradictions and %d for unknown operations (to review), %d forged or stale (refused)\n",
		s.Injected.Contradictions, s.Injected.Unknown, s.Injected.Refused)
	fmt.Fprintf(tw, "needs review\t%d cases, all injected on purpose\n", s.ReviewKept)
	fmt.Fprintf(tw, "time to quiesce\t%s (settled: %t)\n", s.Quiesce.Round(100*time.Millisecond), s.Quiet)
	fmt.Fprintln(tw, "\ninvariant\tviolations")
	for _, inv := range s.Invariants {
		fmt.Fprintf(tw, "%s\t%d\n", inv.Name, len(inv.Violations))
	}
	_ = tw.Flush()
	for _, inv := range s.Invariants {
		for i, v := range inv.Violations {
			if i == 5 {
				fmt.Fprintf(out, "  %s: … %d more\n", inv.Name, len(inv.Violations)-5)
				break
			}
			fmt.Fprintf(out, "  %s: %s\n", inv.Name, v)
		}
	}
	verdict := "PASSED"
	if !s.Passed() {
		verdict = "FAILED"
	}
	fmt.Fprintf(out, "\nchaos: %s; logs of every process in %s\n", verdict, s.Logs)
	failed := 0
	for _, inv := range s.Invariants {
		if len(inv.Violations) > 0 {
			failed++
		}
	}
	if !s.Quiet && failed == 0 {
		failed = 1 // not settling in time is a failure of its own
	}
	// The closing line CI reads: invariants that held, and that did not.
	fmt.Fprintf(out, "chaos: %d passed, %d failed\n", max(len(s.Invariants)-failed, 0), failed)
}

// unsettled counts what is not final yet: keys, payments, refunds and
// operations waiting for the reconciler.
const unsettled = `SELECT
	(SELECT count(*) FROM idempotency_keys WHERE recovery_point NOT IN ('finished', 'expired'))
	+ (SELECT count(*) FROM payments WHERE status = 'processing')
	+ (SELECT count(*) FROM refunds WHERE status = 'processing')
	+ (SELECT count(*) FROM reconciliations)
	+ (SELECT count(*) FROM processor_events WHERE result IS NULL)
	+ (SELECT count(*) FROM webhook_deliveries WHERE status = 'pending' AND tenant_id <> '` + tarpitTenantID + `')`

// settle waits until nothing accepted is left unsettled (but the tarpit
// tenant's deliveries, which never end) (the service settles
// by itself: invariant 7, no client retry needed), then sends again, with the
// same key, every operation that got no final answer, as a client that keeps
// its keys does (one whose every request was lost is only now accepted), and
// repeats until every operation has its final answer, within bound. It
// reports whether everything settled.
func settle(ctx context.Context, l *load, pool *pgxpool.Pool, bound time.Duration) bool {
	ctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	for ctx.Err() == nil {
		var n int
		if err := pool.QueryRow(ctx, unsettled).Scan(&n); err != nil || n > 0 {
			sleep(ctx, 250*time.Millisecond)
			continue
		}
		var pending []*op
		for _, o := range l.all() {
			if l.rec.firstFinal(tenants[o.tenant].apiKey, o.key) == nil && (!o.refund || o.payment != "") {
				pending = append(pending, o)
			}
		}
		if len(pending) == 0 {
			return true
		}
		l.resendAll(ctx, pending, 99)
	}
	return false
}

// check verifies every invariant and fills sum.
func check(ctx context.Context, pool *pgxpool.Pool, l *load, outages []window, receiverSeen string, bound time.Duration, downs []down, sum *Summary) error {
	ops := l.all()
	for _, o := range ops {
		if o.refund {
			sum.Refunds++
		} else {
			sum.Payments++
		}
	}
	if err := tally(ctx, pool, sum); err != nil {
		return err
	}
	for _, q := range sqlInvariants {
		found, err := queryStrings(ctx, pool, q.sql)
		if err != nil {
			return fmt.Errorf("%s: %w", q.name, err)
		}
		sum.Invariants = append(sum.Invariants, Invariant{Name: q.name, Violations: found})
	}
	return checkRun(ctx, pool, l, ops, outages, receiverSeen, bound, downs, sum)
}

// tally fills sum's counts of what the run left in the database.
func tally(ctx context.Context, pool *pgxpool.Pool, sum *Summary) error {
	counts := []struct {
		sql  string
		dest *int
	}{
		{`SELECT count(*) FROM payments WHERE status = 'succeeded'`, &sum.Succeeded},
		{`SELECT count(*) FROM payments WHERE status = 'failed'`, &sum.Failed},
		{`SELECT count(*) FROM payments WHERE failure_code = 'processor_error'`, &sum.GivenUp},
		{`SELECT count(*) FROM refunds WHERE status = 'succeeded'`, &sum.RefundsSucceeded},
		{`SELECT count(*) FROM refunds WHERE status = 'failed'`, &sum.RefundsFailed},
		{`SELECT count(*) FROM idempotency_keys WHERE request_path LIKE '%/refunds' AND resource_id IS NULL`, &sum.RefundsRefused},
		{`SELECT count(*) FROM processor.charges`, &sum.Charges},
		{`SELECT count(*) FROM processor.refunds`, &sum.ProcessorRefunds},
		{`SELECT count(*) FROM needs_review`, &sum.ReviewKept},
		{`
SELECT count(*) FROM webhook_delivery_attempts a JOIN webhook_deliveries d ON d.id = a.delivery_id
WHERE d.tenant_id <> '` + tarpitTenantID + `'`, &sum.DeliveryAttempts},
		{`SELECT count(*) FROM events WHERE tenant_id = '` + tarpitTenantID + `'`, &sum.Tarpit.Events},
	}
	for _, c := range counts {
		if err := pool.QueryRow(ctx, c.sql).Scan(c.dest); err != nil {
			return fmt.Errorf("count: %w", err)
		}
	}
	// Queries of (name, count) rows.
	by := []struct {
		sql  string
		dest *map[string]int
	}{
		{`
SELECT settled_by, count(*) FROM (SELECT settled_by FROM payments UNION ALL SELECT settled_by FROM refunds) o
WHERE settled_by IS NOT NULL GROUP BY settled_by`, &sum.SettledBy},
		{`SELECT status, count(*) FROM webhook_deliveries WHERE tenant_id <> '` + tarpitTenantID + `' GROUP BY status`, &sum.Deliveries},
		{`SELECT status, count(*) FROM webhook_deliveries WHERE tenant_id = '` + tarpitTenantID + `' GROUP BY status`, &sum.Tarpit.Deliveries},
		{`
SELECT state, count(*) FROM processor.webhook_events GROUP BY state
UNION ALL
SELECT result, count(*) FROM processor_events WHERE result IN ('settled', 'agreed') GROUP BY result`, &sum.Webhooks},
	}
	for _, c := range by {
		counts, err := countBy(ctx, pool, c.sql)
		if err != nil {
			return err
		}
		*c.dest = counts
	}
	return nil
}

// sqlInvariants are the invariants a query checks: each lists what violates
// its invariant, one text a row.
var sqlInvariants = []struct{ name, sql string }{
	{"one successful charge per succeeded payment", `
SELECT p.id || ': ' || count(c.id) || ' successful charges, recorded ' || coalesce(p.processor_charge_id, 'none')
FROM payments p LEFT JOIN processor.charges c ON c.payment_id = p.id AND c.status = 'succeeded'
WHERE p.status = 'succeeded'
GROUP BY p.id HAVING count(c.id) <> 1 OR bool_or(c.id IS DISTINCT FROM p.processor_charge_id)`},
	{"no money taken for a failed payment", `
SELECT p.id || ' failed (' || coalesce(p.failure_code, '') || ') but charge ' || c.id || ' succeeded'
FROM payments p JOIN processor.charges c ON c.payment_id = p.id AND c.status = 'succeeded'
WHERE p.status = 'failed'`},
	{"one processor operation per downstream key", `
SELECT idempotency_key || ': ' || count(*) || ' charges' FROM processor.charges GROUP BY idempotency_key HAVING count(*) > 1
UNION ALL
SELECT idempotency_key || ': ' || count(*) || ' refunds' FROM processor.refunds GROUP BY idempotency_key HAVING count(*) > 1`},
	{"nothing left unfinished", `
SELECT 'key ' || key || ' at ' || recovery_point FROM idempotency_keys WHERE recovery_point NOT IN ('finished', 'expired')
UNION ALL SELECT 'payment ' || id || ' processing' FROM payments WHERE status = 'processing'
UNION ALL SELECT 'refund ' || id || ' processing' FROM refunds WHERE status = 'processing'
UNION ALL SELECT resource_type || ' ' || resource_id || ' still marked for reconciliation' FROM reconciliations`},
	{"refunds within their payment, agreed by the processor", `
SELECT p.id || ': amount ' || p.amount || ', amount_refunded ' || p.amount_refunded || ', refunds succeeded '
	|| coalesce(r.total, 0) || ', processor refunded ' || coalesce(c.amount_refunded, 0)
FROM payments p
LEFT JOIN (SELECT payment_id, sum(amount) AS total FROM refunds WHERE status = 'succeeded' GROUP BY payment_id) r ON r.payment_id = p.id
LEFT JOIN processor.charges c ON c.id = p.processor_charge_id
WHERE p.amount_refunded > p.amount OR p.amount_refunded <> coalesce(r.total, 0)
	OR p.amount_refunded <> coalesce(c.amount_refunded, 0)`},
	{"a succeeded refund is one processor refund, a failed one none", `
SELECT r.id || ' ' || r.status || ': ' || count(pr.id) || ' processor refunds'
FROM refunds r LEFT JOIN processor.refunds pr ON pr.idempotency_key = 'refund_' || r.id
GROUP BY r.id, r.status, r.processor_refund_id
HAVING (r.status = 'succeeded' AND (count(pr.id) <> 1 OR bool_or(pr.id IS DISTINCT FROM r.processor_refund_id)))
	OR (r.status = 'failed' AND count(pr.id) <> 0)`},
	{"every operation settled once, by one path", `
SELECT 'payment ' || id || ' ' || status || ', settled by no path' FROM payments WHERE status <> 'processing' AND settled_by IS NULL
UNION ALL
SELECT 'refund ' || id || ' ' || status || ', settled by no path' FROM refunds WHERE status <> 'processing' AND settled_by IS NULL
UNION ALL
SELECT resource_type || ' ' || resource_id || ': ' || count(*) || ' events settled it'
FROM processor_events WHERE result = 'settled' GROUP BY resource_type, resource_id HAVING count(*) > 1
UNION ALL
SELECT o.kind || ' ' || o.id || ' settled by ' || coalesce(o.settled_by, 'none') || ', yet an event says it settled it'
FROM (SELECT 'payment' AS kind, id, settled_by FROM payments UNION ALL SELECT 'refund', id, settled_by FROM refunds) o
WHERE (o.settled_by = 'webhook') <> EXISTS (
	SELECT 1 FROM processor_events e WHERE e.resource_id = o.id AND e.result = 'settled')`},
	{"no processor event contradicts a recorded outcome, except the injected", `
SELECT e.id || ': ' || e.result FROM processor_events e
WHERE e.result IN ('contradiction', 'unknown_operation') AND e.id NOT LIKE '` + injectedPrefix + `%'
UNION ALL
SELECT e.id || ' (injected): ' || coalesce(e.result, 'not processed') || ', not sent to review' FROM processor_events e
WHERE e.id LIKE '` + injectedPrefix + `%' AND NOT EXISTS (SELECT 1 FROM needs_review n WHERE n.reference = e.id)
UNION ALL
SELECT e.id || ' ' || e.result || ' but says ' || e.succeeded || ' ' || coalesce(e.processor_object_id, 'nothing made')
	|| ', recorded ' || o.status || ' ' || coalesce(o.processor_id, 'nothing made')
FROM processor_events e
JOIN (SELECT id, status, processor_charge_id AS processor_id FROM payments
	UNION ALL SELECT id, status, processor_refund_id FROM refunds) o ON o.id = e.resource_id
WHERE e.result IN ('settled', 'agreed')
	AND (e.succeeded <> (o.status = 'succeeded') OR e.processor_object_id IS DISTINCT FROM o.processor_id)`},
	// An attempt is recorded after its POST, in a transaction whose now()
	// is after the POST's end: created_at less the POST's duration is no
	// earlier than its start, so attempts one after another never overlap
	// here, and two that do were in flight together.
	{"no delivery attempted twice at once", `
SELECT 'delivery ' || a.delivery_id || ': attempts ' || a.attempt || ' and ' || b.attempt || ' in flight together'
FROM webhook_delivery_attempts a
JOIN webhook_delivery_attempts b ON b.delivery_id = a.delivery_id AND b.id > a.id
WHERE b.created_at - make_interval(secs => b.duration_ms / 1000.0) < a.created_at
	AND a.created_at - make_interval(secs => a.duration_ms / 1000.0) < b.created_at`},
	{"every accepted key is exactly one resource", `
SELECT k.tenant_id || '/' || k.key || ' created ' || coalesce(k.resource_type || ' ' || k.resource_id, 'nothing')
FROM idempotency_keys k
WHERE k.resource_id IS NOT NULL AND NOT EXISTS (
	SELECT 1 FROM payments p WHERE p.id = k.resource_id AND p.idempotency_key_id = k.id
	UNION ALL SELECT 1 FROM refunds r WHERE r.id = k.resource_id AND r.idempotency_key_id = k.id
	UNION ALL SELECT 1 FROM webhook_endpoints e WHERE e.id = k.resource_id AND k.resource_type = 'webhook_endpoint')
UNION ALL
SELECT 'payment ' || id || ' has no key' FROM payments WHERE idempotency_key_id IS NULL
UNION ALL
SELECT 'refund ' || id || ' has no key' FROM refunds WHERE idempotency_key_id IS NULL`},
}

// checkRun checks the invariants that need what the run itself saw: the
// operations it sent and their answers, the receiver's record, the kills
// and outages.
func checkRun(ctx context.Context, pool *pgxpool.Pool, l *load, ops []*op, outages []window, receiverSeen string, bound time.Duration, downs []down, sum *Summary) error {
	asked, err := checkAsked(ctx, pool, ops)
	if err != nil {
		return err
	}
	sum.Invariants = append(sum.Invariants, Invariant{Name: "every payment and refund is one a client asked for", Violations: asked})
	replays, err := checkReplays(ctx, pool, l, ops)
	if err != nil {
		return err
	}
	sum.Invariants = append(sum.Invariants, Invariant{Name: "every replay byte-identical to the first final response, no answered key lost", Violations: replays})
	merchants, err := checkMerchantWebhooks(ctx, pool, receiverSeen)
	if err != nil {
		return fmt.Errorf("merchant webhooks: %w", err)
	}
	sum.Invariants = append(sum.Invariants, Invariant{Name: "every event delivered, verified and processed once; none not committed", Violations: merchants})
	fair, lat, err := checkFairDelivery(ctx, pool, bound, downs, sum.Tarpit)
	if err != nil {
		return fmt.Errorf("fair delivery: %w", err)
	}
	sum.Latency = lat
	sum.Invariants = append(sum.Invariants,
		Invariant{Name: fmt.Sprintf("other tenants' events delivered within %s, the tarpit's notwithstanding", bound), Violations: fair},
		Invariant{Name: fmt.Sprintf("the tarpit held at most %d attempts at once, %d to one endpoint", tenantInFlight, endpointInFlight),
			Violations: checkTarpitLimits(sum.Tarpit)})
	injected := append([]string(nil), sum.Injected.Wrong...)
	if sum.Injected.Contradictions == 0 || sum.Injected.Refused == 0 {
		injected = append(injected, "nothing was injected: the check would be vacuous")
	}
	sum.Invariants = append(sum.Invariants, Invariant{Name: "forged and stale webhooks refused, injected ones recorded", Violations: injected})
	review, err := checkReview(ctx, pool, outages)
	if err != nil {
		return err
	}
	sum.Invariants = append(sum.Invariants, Invariant{Name: "needs-review holds only what was injected", Violations: review})
	var server []string
	if n := l.rec.serverErrs.Load(); n > 0 {
		server = append(server, fmt.Sprintf("%d answers 500", n))
	}
	l.rec.mu.Lock()
	server = append(server, l.rec.unexpected...)
	l.rec.mu.Unlock()
	sum.Invariants = append(sum.Invariants, Invariant{Name: "no 500, no 404 or 422 for a correct client", Violations: server})
	return nil
}

// queryStrings runs a query of one text column and returns its rows.
func queryStrings(ctx context.Context, pool *pgxpool.Pool, sql string, args ...any) ([]string, error) {
	rows, err := pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// countBy runs a query of (name, count) rows into a map.
func countBy(ctx context.Context, pool *pgxpool.Pool, sql string) (map[string]int, error) {
	rows, err := pool.Query(ctx, sql)
	if err != nil {
		return nil, fmt.Errorf("count: %w", err)
	}
	counts := map[string]int{}
	var (
		name string
		n    int
	)
	_, err = pgx.ForEachRow(rows, []any{&name, &n}, func() error {
		counts[name] += n
		return nil
	})
	return counts, err
}

// checkAsked lists the payments and refunds whose key no operation of the
// run was sent under: a resource nobody asked for.
func checkAsked(ctx context.Context, pool *pgxpool.Pool, ops []*op) ([]string, error) {
	sent := map[string]bool{}
	for _, o := range ops {
		sent[tenants[o.tenant].id+"/"+o.key] = true
	}
	rows, err := pool.Query(ctx, `
SELECT k.tenant_id || '/' || k.key, p.id FROM payments p JOIN idempotency_keys k ON k.id = p.idempotency_key_id
UNION ALL
SELECT k.tenant_id || '/' || k.key, r.id FROM refunds r JOIN idempotency_keys k ON k.id = r.idempotency_key_id`)
	if err != nil {
		return nil, fmt.Errorf("resources by key: %w", err)
	}
	var bad []string
	var key, id string
	_, err = pgx.ForEachRow(rows, []any{&key, &id}, func() error {
		if !sent[key] {
			bad = append(bad, id+" under "+key)
		}
		return nil
	})
	return bad, err
}

// checkReplays sends every operation once more, which the recorder compares
// with the first final answer it saw, and compares that answer with the
// response the key stores.
func checkReplays(ctx context.Context, pool *pgxpool.Pool, l *load, ops []*op) ([]string, error) {
	var bad []string
	var final []*op
	for _, o := range ops {
		switch {
		case l.rec.firstFinal(tenants[o.tenant].apiKey, o.key) != nil:
			final = append(final, o)
		case !o.refund || o.payment != "":
			bad = append(bad, fmt.Sprintf("%s/%s: never got a final answer", tenants[o.tenant].id, o.key))
		}
	}
	l.resendAll(ctx, final, 100)
	for _, o := range final {
		first := l.rec.firstFinal(tenants[o.tenant].apiKey, o.key)
		var stored []byte
		err := pool.QueryRow(ctx, `SELECT response_body FROM idempotency_keys WHERE tenant_id = $1 AND key = $2`,
			tenants[o.tenant].id, o.key).Scan(&stored)
		if errors.Is(err, pgx.ErrNoRows) {
			// A key a client was answered for, lost: a failover that
			// promoted a standby without its commit, say.
			bad = append(bad, fmt.Sprintf("%s: answered %s, and no such key any more", o.key, first))
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("stored response of %s: %w", o.key, err)
		}
		if !bytes.Equal(stored, first) {
			bad = append(bad, fmt.Sprintf("%s: stored %s, first answered %s", o.key, stored, first))
		}
	}
	l.rec.mu.Lock()
	bad = append(bad, l.rec.mismatches...)
	l.rec.mu.Unlock()
	return bad, nil
}

// checkReview allows in the needs-review queue only what the run injected:
// a payment given up on that used pm_card_processing_error (the processor
// never charges it), an operation whose deadline ran out while the
// processor was cut off, and an operation whose key the processor answered
// with a failure it saved (Stripe's 500s), reviewed at once and given up
// once the processor forgot the key. Any discrepancy between the ledgers is
// a violation.
func checkReview(ctx context.Context, pool *pgxpool.Pool, outages []window) ([]string, error) {
	rows, err := pool.Query(ctx, `
SELECT n.kind, n.reference, coalesce(p.payment_method, ''), coalesce(p.created_at, r.created_at),
	EXISTS (SELECT 1 FROM needs_review s WHERE s.reference = n.reference AND s.kind LIKE '%\_saved\_failure')
FROM needs_review n
LEFT JOIN payments p ON n.kind = 'payment_given_up' AND p.id = n.reference
LEFT JOIN refunds r ON n.kind = 'refund_given_up' AND r.id = n.reference`)
	if err != nil {
		return nil, err
	}
	var bad []string
	var (
		kind, ref, method string
		created           *time.Time
		saved             bool
	)
	_, err = pgx.ForEachRow(rows, []any{&kind, &ref, &method, &created, &saved}, func() error {
		givenUp := strings.HasSuffix(kind, "_given_up")
		switch {
		case strings.HasPrefix(kind, "processor_event_") && strings.HasPrefix(ref, injectedPrefix):
		case strings.HasSuffix(kind, "_saved_failure"), givenUp && saved:
		case givenUp && method == "pm_card_processing_error":
		case givenUp && created != nil && slices.ContainsFunc(outages, func(w window) bool {
			// Its deadline passed while the processor could not be asked.
			return !created.Add(operationDeadline).Before(w.from) && !created.After(w.to)
		}):
		default:
			bad = append(bad, kind+" "+ref)
		}
		return nil
	})
	return bad, err
}
