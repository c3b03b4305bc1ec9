package worker

import (
	"github.com/prometheus/client_golang/prometheus"

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
