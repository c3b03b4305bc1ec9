package worker

import (
	"context"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/example/payments/internal/database"
	"github.com/example/payments/internal/idempotency"
	"github.com/example/payments/internal/jobs"
	"github.com/example/payments/internal/metrics"
	"github.com/example/payments/internal/operation"
	"github.com/example/payments/internal/webhooks"
)

// operationMetrics counts what the worker's operations do: their attempts,
// the path that settled each, what the processor's events found, and the
// reconciler's work. It implements operation.Observer.
type operationMetrics struct {
	settled, events, attempts, reconciliations *prometheus.CounterVec
}

// newOperationMetrics counts the operations of types, each series there from
// the start.
func newOperationMetrics(reg prometheus.Registerer, types []string) operationMetrics {
	m := operationMetrics{
		settled: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "payments_operations_settled_total",
			Help: "Operations settled by this worker, by resource type (the kind: payment, …) and the path whose commit recorded the outcome: " +
				"worker (its processor call), webhook (the processor's webhook) or reconciler.",
		}, []string{"resource_type", "path"}),
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "payments_processor_events_processed_total",
			Help: "Processor events processed, by result: settled (it settled its operation), agreed (another path had, alike) " +
				"or contradiction (sent to review).",
		}, []string{"result"}),
	}
	m.attempts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "payments_operation_attempts_total",
		Help: "Attempts of the jobs that drive operations, by resource type and result: ok, unknown_outcome " +
			"(the processor's answer unknown: tried again with the same downstream key) or failed.",
	}, []string{"resource_type", "result"})
	m.reconciliations = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "payments_reconciliations_total",
		Help: "Operations handed to the reconciler (scheduled: a spent retry budget, or found stuck by the sweep), " +
			"and what its runs did with them: settled, lost (another path settled first) or unsettled (tried again later).",
	}, []string{"result"})
	for _, rt := range types {
		for _, path := range operation.SettlePaths {
			m.settled.WithLabelValues(rt, path)
		}
		for _, result := range operation.AttemptResults {
			m.attempts.WithLabelValues(rt, result)
		}
	}
	for _, result := range operation.EventResults {
		m.events.WithLabelValues(result)
	}
	for _, result := range operation.ReconciliationResults {
		m.reconciliations.WithLabelValues(result)
	}
	reg.MustRegister(m.settled, m.events, m.attempts, m.reconciliations)
	return m
}

// Attempted implements operation.Observer.
func (m operationMetrics) Attempted(resourceType, result string) {
	m.attempts.WithLabelValues(resourceType, result).Inc()
}

// Reconciliation implements operation.Observer.
func (m operationMetrics) Reconciliation(result string, n int) {
	m.reconciliations.WithLabelValues(result).Add(float64(n))
}

// timedCalls is kinds, each of its processor calls timed in reg's histogram
// payments_processor_call_duration_seconds, by operation (the call, named
// for its kind's processor object: Names.Calls) and outcome
// (operation.CallOutcomes), every series there at zero from the start; an
// observation's exemplar is the trace id of its call's span.
func timedCalls(reg prometheus.Registerer, kinds *operation.Registry) *operation.Registry {
	names := kinds.Calls()
	h := metrics.NewHistogram(reg, "payments_processor_call_duration_seconds",
		"Processor calls' latency, each call alone (PROCESSOR_TIMEOUT bounds it), by operation, each kind's calls named for "+
			"the object its processor makes (<object>, find_<object>, close_<object>, ledger_<object>s: "+strings.Join(names, ", ")+
			"), and outcome: ok (a definite answer, a decline included), unknown_outcome (none: timeout, connection, 5xx, 409), not_sent (a 429, or no turn under the rate limit) or error.",
		"operation", "outcome")
	calls := callMetrics{}
	for _, name := range names {
		for _, outcome := range operation.CallOutcomes {
			calls[[2]string{name, outcome}] = h.With(name, outcome)
		}
	}
	return kinds.Timed(calls)
}

// callMetrics are the latencies of the processor calls, by call and
// outcome, each series resolved once. It implements operation.CallTimer.
type callMetrics map[[2]string]*metrics.Latency

// Called implements operation.CallTimer.
func (m callMetrics) Called(ctx context.Context, call, outcome string, d time.Duration) {
	if l, ok := m[[2]string{call, outcome}]; ok {
		l.Observe(ctx, d)
	}
}

// newReapMetrics counts the keys the reaper expired and the tombstones it
// deleted, and returns what the reaper calls.
func newReapMetrics(reg prometheus.Registerer) func(expired, deleted int) {
	reaped := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "payments_idempotency_keys_reaped_total",
		Help: "Idempotency keys pruned by the reaper: expired (their response reaped, a tombstone left) and deleted (tombstones gone).",
	}, []string{"stage"})
	reaped.WithLabelValues("expired")
	reaped.WithLabelValues("deleted")
	reg.MustRegister(reaped)
	return func(expired, deleted int) {
		reaped.WithLabelValues("expired").Add(float64(expired))
		reaped.WithLabelValues("deleted").Add(float64(deleted))
	}
}

// collector is a prometheus.Collector of descs whose metrics collect reads
// at each scrape, its queries bounded by scrapeTimeout.
type collector struct {
	descs   []*prometheus.Desc
	collect func(ctx context.Context, ch chan<- prometheus.Metric)
}

// scrapeTimeout bounds the queries of one collector's scrape.
const scrapeTimeout = 5 * time.Second

// Describe implements prometheus.Collector.
func (c collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c collector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	c.collect(ctx, ch)
}

// The descriptions of what backlogCollector reads.
var (
	keysInProgressDesc = prometheus.NewDesc("payments_idempotency_keys_in_progress",
		"Idempotency keys not finished yet.", nil, nil)
	keysStaleDesc = prometheus.NewDesc("payments_idempotency_keys_stale",
		"Unfinished idempotency keys quiet for longer than RECONCILE_STUCK_AFTER: zombies, unless the sweep is at work.", nil, nil)
	oldestUnsettledDesc = prometheus.NewDesc("payments_oldest_unsettled_operation_seconds",
		"Age of the oldest operation still processing (0 when none).", nil, nil)
	markedDesc = prometheus.NewDesc("payments_reconciliations_pending",
		"Operations waiting for the reconciler.", nil, nil)
	riverAvailableDesc = prometheus.NewDesc("payments_queue_jobs_available",
		"River jobs available to work and not yet worked (counted up to 1000).", nil, nil)
	riverOldestDesc = prometheus.NewDesc("payments_queue_oldest_available_job_seconds",
		"How long the oldest available River job has waited since it was due (0 when none).", nil, nil)
)

// backlogCollector reads, at each scrape, what waits: keys in progress and
// the quiet ones among them (quiet for stuckAfter), the oldest unsettled
// operation, the operations marked for the reconciler, and River's queue.
func backlogCollector(keys *idempotency.Store, db *pgxpool.Pool, queue jobs.Queue, stuckAfter time.Duration) collector {
	descs := []*prometheus.Desc{keysInProgressDesc, keysStaleDesc, oldestUnsettledDesc, markedDesc, riverAvailableDesc, riverOldestDesc}
	return collector{descs: descs, collect: func(ctx context.Context, ch chan<- prometheus.Metric) {
		gauge := func(d *prometheus.Desc, v float64) { ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v) }
		if inProgress, stale, err := keys.CountUnfinished(ctx, stuckAfter); err != nil {
			ch <- prometheus.NewInvalidMetric(keysInProgressDesc, err)
			ch <- prometheus.NewInvalidMetric(keysStaleDesc, err)
		} else {
			gauge(keysInProgressDesc, float64(inProgress))
			gauge(keysStaleDesc, float64(stale))
		}
		if oldest, marked, err := operation.Backlog(ctx, db); err != nil {
			ch <- prometheus.NewInvalidMetric(oldestUnsettledDesc, err)
			ch <- prometheus.NewInvalidMetric(markedDesc, err)
		} else {
			gauge(oldestUnsettledDesc, oldest.Seconds())
			gauge(markedDesc, float64(marked))
		}
		if available, oldest, err := queue.Backlog(ctx); err != nil {
			ch <- prometheus.NewInvalidMetric(riverAvailableDesc, err)
			ch <- prometheus.NewInvalidMetric(riverOldestDesc, err)
		} else {
			gauge(riverAvailableDesc, float64(available))
			gauge(riverOldestDesc, oldest.Seconds())
		}
	}}
}

// Settled implements operation.Observer.
func (m operationMetrics) Settled(resourceType, path string) {
	m.settled.WithLabelValues(resourceType, path).Inc()
}

// ProcessorEvent implements operation.Observer.
func (m operationMetrics) ProcessorEvent(result string) { m.events.WithLabelValues(result).Inc() }

// deliveryMetrics counts webhook delivery attempts and how deliveries end,
// and reads the age of the oldest undelivered event at each scrape. It
// implements webhooks.Observer.
type deliveryMetrics struct {
	attempts   prometheus.Counter
	deliveries *prometheus.CounterVec
	disabled   *prometheus.CounterVec
	// durations are the attempts' latencies by result, resolved once.
	durations map[string]*metrics.Latency
}

// oldestUndeliveredDesc is the age of the oldest pending delivery.
var oldestUndeliveredDesc = prometheus.NewDesc("payments_webhook_oldest_undelivered_seconds",
	"Age of the oldest webhook delivery not yet delivered, failed or abandoned (0 when none).", nil, nil)

func newDeliveryMetrics(reg prometheus.Registerer, pool *pgxpool.Pool) deliveryMetrics {
	m := deliveryMetrics{
		attempts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "payments_webhook_delivery_attempts_total",
			Help: "Webhook delivery attempts made to merchants' endpoints.",
		}),
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "payments_webhook_deliveries_total",
			Help: "Webhook deliveries by how they ended: delivered, failed (the retry schedule spent), gone (410: the endpoint disabled), " +
				"endpoint_disabled; and retrying, each failed attempt with another to come.",
		}, []string{"result"}),
		disabled: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "payments_webhook_endpoints_disabled_total",
			Help: "Webhook endpoints the deliveries disabled, by reason: failing (every attempt failed for WEBHOOK_DISABLE_AFTER).",
		}, []string{"reason"}),
	}
	hist := metrics.NewHistogram(reg, "payments_webhook_attempt_duration_seconds",
		"Webhook delivery attempts' latency, the POST to the merchant's endpoint (15 s at most), by result: "+
			"delivered, retrying, failed, gone or endpoint_disabled.",
		"result")
	m.durations = map[string]*metrics.Latency{}
	for _, result := range webhooks.Results {
		m.deliveries.WithLabelValues(result)
		m.durations[result] = hist.With(result)
	}
	m.disabled.WithLabelValues(webhooks.ReasonFailing)
	reg.MustRegister(m.attempts, m.deliveries, m.disabled, oldestCollector(pool))
	return m
}

// Attempted implements webhooks.Observer.
func (m deliveryMetrics) Attempted(ctx context.Context, result string, d time.Duration) {
	m.attempts.Inc()
	m.deliveries.WithLabelValues(result).Inc()
	if l, ok := m.durations[result]; ok {
		l.Observe(ctx, d)
	}
}

// Disabled implements webhooks.Observer.
func (m deliveryMetrics) Disabled(reason string) { m.disabled.WithLabelValues(reason).Inc() }

// oldestUnprocessedDesc is the age of the oldest processor event not yet
// processed.
var oldestUnprocessedDesc = prometheus.NewDesc("payments_processor_event_oldest_unprocessed_seconds",
	"Age of the oldest processor webhook received and not yet processed (0 when none): past its job's retry horizon, it never will be.", nil, nil)

// oldestCollector reads, at each scrape, the oldest pending delivery and the
// oldest unprocessed processor event.
func oldestCollector(pool *pgxpool.Pool) collector {
	ages := []struct {
		desc *prometheus.Desc
		read func(context.Context, database.DBTX) (time.Duration, error)
	}{{oldestUndeliveredDesc, webhooks.OldestUndelivered}, {oldestUnprocessedDesc, operation.OldestUnprocessedEvent}}
	descs := []*prometheus.Desc{oldestUndeliveredDesc, oldestUnprocessedDesc}
	return collector{descs: descs, collect: func(ctx context.Context, ch chan<- prometheus.Metric) {
		for _, g := range ages {
			age, err := g.read(ctx, pool)
			if err != nil {
				ch <- prometheus.NewInvalidMetric(g.desc, err)
				continue
			}
			ch <- prometheus.MustNewConstMetric(g.desc, prometheus.GaugeValue, age.Seconds())
		}
	}}
}

// announceProcessor says at start what the processor can do, and what each
// absence costs, and exports payments_ledger_comparison_enabled: 0 when the
// processor lists no ledger, so the comparison is off.
func announceProcessor(logger *slog.Logger, registry prometheus.Registerer, p operation.Processor) {
	logger.Info("processor", "name", p.Name, "lookup", p.Lookup, "fence", p.Fence, "ledger", p.Ledger,
		"key_retention", p.KeyRetention, "settled_by_webhook", p.ByWebhook)
	if !p.Fence {
		logger.Warn("the processor has no fence: an operation past OPERATION_DEADLINE is never given up; it stays processing, in the needs-review queue")
	}
	if p.Lookup != operation.LookupQuery {
		logger.Warn("the processor has no lookup by key: the reconciler asks it only as its lookup says, else waits for its webhook", "lookup", p.Lookup)
	}
	enabled := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "payments_ledger_comparison_enabled",
		Help: "1 when the worker compares the processor's ledger with the service's records; 0 when the processor lists no ledger, so nothing is compared.",
	})
	if p.Ledger {
		enabled.Set(1)
	} else {
		logger.Warn("the processor lists no ledger: the ledger comparison is off")
	}
	registry.MustRegister(enabled)
}
