package worker

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/example/payments/internal/endpoints"
	"github.com/example/payments/internal/payments"
)

// operationMetrics counts what the worker's operations settle, by path,
// and what the processor's events found. It implements payments.Observer.
type operationMetrics struct {
	settled, events *prometheus.CounterVec
}

func newOperationMetrics(reg prometheus.Registerer) operationMetrics {
	m := operationMetrics{
		settled: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "payments_operations_settled_total",
			Help: "Operations settled by this worker, by resource type (payment, refund) and the path whose commit recorded the outcome: " +
				"worker (its processor call), webhook (the processor's webhook) or reconciler.",
		}, []string{"resource_type", "path"}),
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "payments_processor_events_processed_total",
			Help: "Processor events processed, by result: settled (it settled its operation), agreed (another path had, alike) " +
				"or contradiction (sent to review).",
		}, []string{"result"}),
	}
	for _, rt := range []string{payments.PaymentResourceType, payments.RefundResourceType} {
		for _, path := range []string{payments.PathWorker, payments.PathWebhook, payments.PathReconciler} {
			m.settled.WithLabelValues(rt, path)
		}
	}
	for _, result := range []string{payments.EventSettled, payments.EventAgreed, payments.EventContradiction} {
		m.events.WithLabelValues(result)
	}
	reg.MustRegister(m.settled, m.events)
	return m
}

// Settled implements payments.Observer.
func (m operationMetrics) Settled(resourceType, path string) {
	m.settled.WithLabelValues(resourceType, path).Inc()
}

// ProcessorEvent implements payments.Observer.
func (m operationMetrics) ProcessorEvent(result string) { m.events.WithLabelValues(result).Inc() }

// deliveryMetrics counts webhook delivery attempts and how deliveries end,
// and reads the age of the oldest undelivered event at each scrape. It
// implements endpoints.Observer.
type deliveryMetrics struct {
	attempts   prometheus.Counter
	deliveries *prometheus.CounterVec
}

// oldestUndelivered is the age of the oldest pending delivery.
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
	}
	for _, result := range endpoints.Results {
		m.deliveries.WithLabelValues(result)
	}
	reg.MustRegister(m.attempts, m.deliveries, oldestCollector{pool: pool})
	return m
}

// Attempted implements endpoints.Observer.
func (m deliveryMetrics) Attempted(result string) {
	m.attempts.Inc()
	m.deliveries.WithLabelValues(result).Inc()
}

// oldestCollector reads the oldest pending delivery at each scrape.
type oldestCollector struct{ pool *pgxpool.Pool }

// Describe implements prometheus.Collector.
func (oldestCollector) Describe(ch chan<- *prometheus.Desc) { ch <- oldestUndeliveredDesc }

// Collect implements prometheus.Collector.
func (c oldestCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	age, err := endpoints.OldestUndelivered(ctx, c.pool)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(oldestUndeliveredDesc, err)
		return
	}
	ch <- prometheus.MustNewConstMetric(oldestUndeliveredDesc, prometheus.GaugeValue, age.Seconds())
}
