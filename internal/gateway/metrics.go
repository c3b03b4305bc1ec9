package gateway

import (
	"context"
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/example/payments/internal/metrics"
	"github.com/example/payments/internal/operation"
)

// call is one of the processor calls the kinds make (their Processor
// interfaces), as the operation label names it.
type call int

// The calls.
const (
	callCharge call = iota
	callFindCharge
	callCloseCharge
	callLedgerCharges
	callRefund
	callFindRefund
	callCloseRefund
	callLedgerRefunds
)

// callNames are the values of the operation label, by call.
var callNames = [...]string{callCharge: "charge", callFindCharge: "find_charge", callCloseCharge: "close_charge",
	callLedgerCharges: "ledger_charges", callRefund: "refund", callFindRefund: "find_refund",
	callCloseRefund: "close_refund", callLedgerRefunds: "ledger_refunds"}

// The values of the outcome label, by index.
const (
	outcomeOK = iota
	outcomeUnknown
	outcomeError
)

// callOutcomes are the values of the outcome label: ok, a definite answer
// (a decline or a refusal is one); unknown_outcome, none (a timeout, a lost
// connection, a 5xx, 409 or 429, an unreadable answer), asked again later;
// error, any other error (a closed key, a request of ours refused before it
// was sent).
var callOutcomes = [...]string{outcomeOK: "ok", outcomeUnknown: "unknown_outcome", outcomeError: "error"}

// callMetrics are the latencies of the processor calls, each series
// resolved once.
type callMetrics [len(callNames)][len(callOutcomes)]*metrics.Latency

// Metered returns a copy of c that times every call in reg's histogram
// payments_processor_call_duration_seconds, by operation and outcome, each
// series there at zero from the start; an observation's exemplar is the
// trace id of its context's span.
func (c *Client) Metered(reg prometheus.Registerer) *Client {
	h := metrics.NewHistogram(reg, "payments_processor_call_duration_seconds",
		"Processor calls' latency, each call alone (PROCESSOR_TIMEOUT bounds it), by operation "+
			"(charge, find_charge, close_charge, ledger_charges, refund, find_refund, close_refund, ledger_refunds) "+
			"and outcome: ok (a definite answer, a decline included), unknown_outcome (none: timeout, connection, 5xx, 409, 429) or error.",
		"operation", "outcome")
	m := &callMetrics{}
	for op, name := range callNames {
		for outcome, label := range callOutcomes {
			m[op][outcome] = h.With(name, label)
		}
	}
	metered := *c
	metered.metrics = m
	return &metered
}

// observe records a call that began at start and ended with *err; deferred
// by each call, as defer c.observe(ctx, op, time.Now(), &err).
func (c *Client) observe(ctx context.Context, op call, start time.Time, err *error) {
	if c.metrics == nil {
		return
	}
	outcome := outcomeOK
	switch {
	case errors.Is(*err, operation.ErrProcessorUnknown):
		outcome = outcomeUnknown
	case *err != nil:
		outcome = outcomeError
	}
	c.metrics[op][outcome].Observe(ctx, time.Since(start))
}
