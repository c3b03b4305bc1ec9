package processor

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/example/payments/tools/fakeprocessor"
)

var webhookEventsDesc = prometheus.NewDesc("fakeprocessor_webhook_events",
	"The fake processor's webhook events by state: pending, delivered, dropped (chaos), abandoned.", []string{"state"}, nil)

// eventsCollector reads the webhook queue's states at each scrape.
type eventsCollector struct{ db *pgxpool.Pool }

// Describe implements prometheus.Collector.
func (eventsCollector) Describe(ch chan<- *prometheus.Desc) { ch <- webhookEventsDesc }

// Collect implements prometheus.Collector.
func (c eventsCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	counts, err := fakeprocessor.CountWebhookEvents(ctx, c.db)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(webhookEventsDesc, err)
		return
	}
	for state, n := range counts {
		ch <- prometheus.MustNewConstMetric(webhookEventsDesc, prometheus.GaugeValue, float64(n), state)
	}
}
