package stripesim

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"time"
)

// refundFailReason is the failure_reason of a refund of pm_card_refundFail,
// as Stripe's test card fails it.
const refundFailReason = "expired_or_canceled_card"

// Refund is a refund as the simulator holds it.
type Refund struct {
	ID            string
	PaymentIntent string
	// Charge is the ch_ id of the PaymentIntent's charge it refunds.
	Charge   string
	Amount   int64
	Currency string
	// Status is pending, succeeded or failed.
	Status string
	// FailureReason is "" unless failed.
	FailureReason string
	Reason        string
	Metadata      map[string]string
	Created       time.Time
}

// refundRecord is a refund and its position among them.
type refundRecord struct {
	Refund
	pos int
}

// copy is the refund, sharing nothing with the record.
func (r *refundRecord) copy() Refund {
	out := r.Refund
	out.Metadata = maps.Clone(r.Metadata)
	return out
}

// created is when r was made, for lists.
func (r *refundRecord) created() time.Time { return r.Created }

// position is r's index among the refunds, for lists.
func (r *refundRecord) position() int { return r.pos }

// refundJSON is a refund on the wire.
type refundJSON struct {
	ID            string            `json:"id"`
	Object        string            `json:"object"`
	Amount        int64             `json:"amount"`
	Charge        string            `json:"charge"`
	Created       int64             `json:"created"`
	Currency      string            `json:"currency"`
	FailureReason string            `json:"failure_reason,omitempty"`
	Metadata      map[string]string `json:"metadata"`
	PaymentIntent string            `json:"payment_intent"`
	Reason        *string           `json:"reason"`
	Status        string            `json:"status"`
}

// wire is the refund as Stripe answers it.
func (r *refundRecord) wire() *refundJSON {
	return &refundJSON{ID: r.ID, Object: "refund", Amount: r.Amount, Charge: r.Charge, Created: r.Created.Unix(),
		Currency: r.Currency, FailureReason: r.FailureReason, Metadata: maps.Clone(r.Metadata),
		PaymentIntent: r.PaymentIntent, Reason: nullable(r.Reason), Status: r.Status}
}

// charge is the charge of a PaymentIntent's confirmation: what refunds
// refund. refunded counts the refunds pending or succeeded.
type charge struct {
	id, paymentIntent, currency, status string
	amount, refunded                    int64
	created                             time.Time
	metadata                            map[string]string
}

// chargeJSON is a charge on the wire, as charge.refunded carries it.
type chargeJSON struct {
	ID             string            `json:"id"`
	Object         string            `json:"object"`
	Amount         int64             `json:"amount"`
	AmountCaptured int64             `json:"amount_captured"`
	AmountRefunded int64             `json:"amount_refunded"`
	Captured       bool              `json:"captured"`
	Created        int64             `json:"created"`
	Currency       string            `json:"currency"`
	Metadata       map[string]string `json:"metadata"`
	Paid           bool              `json:"paid"`
	PaymentIntent  string            `json:"payment_intent"`
	Refunded       bool              `json:"refunded"`
	Status         string            `json:"status"`
}

// wire is the charge as Stripe answers it.
func (ch *charge) wire() *chargeJSON {
	paid := ch.status == StatusSucceeded
	j := &chargeJSON{ID: ch.id, Object: "charge", Amount: ch.amount, AmountRefunded: ch.refunded, Captured: paid,
		Created: ch.created.Unix(), Currency: ch.currency, Metadata: maps.Clone(ch.metadata), Paid: paid,
		PaymentIntent: ch.paymentIntent, Refunded: ch.refunded == ch.amount, Status: ch.status}
	if paid {
		j.AmountCaptured = ch.amount
	}
	return j
}

// newCharge makes p's charge id with status, its latest.
func (s *Server) newCharge(c *call, p *paymentIntentRecord, id, status string) *charge {
	ch := &charge{id: id, paymentIntent: p.ID, currency: p.Currency, status: status, amount: p.Amount,
		created: c.now, metadata: maps.Clone(p.Metadata)}
	s.charges[id] = ch
	p.LatestCharge = id
	return ch
}

// refundCreateParams are the parameters a refund's create takes.
var refundCreateParams = []string{"payment_intent", "charge", "amount", "metadata[]", "reason", "expand[]"}

// createRefund is POST /v1/refunds: a refund of a succeeded PaymentIntent's
// charge, of amount or all that is left, pending until it settles.
func (s *Server) createRefund(c *call) (any, *apiError) {
	f := c.params(refundCreateParams...)
	piID, chargeID := f.str("payment_intent"), f.str("charge")
	amount, amountGiven := f.integer("amount")
	reason := f.oneOf("reason", "duplicate", "fraudulent", "requested_by_customer")
	metadata := f.metadata()
	if f.err != nil {
		return nil, f.err
	}
	p, ch, err := s.refundable(piID, chargeID)
	if err != nil {
		return nil, err
	}
	left := ch.amount - ch.refunded
	if !amountGiven {
		amount = left
	}
	switch {
	case amountGiven && amount <= 0:
		return nil, badRequest("amount", "parameter_invalid_integer", "Invalid positive integer")
	case left == 0:
		return nil, badRequest("", "charge_already_refunded", fmt.Sprintf("Charge %s has already been refunded.", ch.id))
	case amount > left:
		return nil, badRequest("amount", "amount_too_large", fmt.Sprintf("Refund amount (%s) is greater than "+
			"unrefunded amount on charge (%s)", formatAmount(amount, ch.currency), formatAmount(left, ch.currency)))
	}
	r := &refundRecord{Refund: Refund{ID: s.newID("re_3", 23), PaymentIntent: p.ID, Charge: ch.id, Amount: amount,
		Currency: ch.currency, Status: StatusPending, Reason: reason, Metadata: metadata, Created: c.now},
		pos: len(s.refunds)}
	s.refunds = append(s.refunds, r)
	s.refundByID[r.ID] = r
	ch.refunded += amount
	if p.card.refundFail {
		// Stripe's refundFail card: the refund succeeds, and fails later.
		r.Status = StatusSucceeded
		s.after(c.now, s.opts.RefundPendingFor, func(time.Time) { s.failRefund(r, ch, refundFailReason) })
	} else {
		s.after(c.now, s.opts.RefundPendingFor, func(time.Time) { s.settleRefund(r, ch) })
	}
	s.emit(c, "refund.created", r.wire())
	s.emit(c, "charge.refunded", ch.wire())
	return r.wire(), nil
}

// refundable finds the PaymentIntent and charge a refund names, by
// PaymentIntent or charge, and refuses one with nothing to refund.
func (s *Server) refundable(piID, chargeID string) (*paymentIntentRecord, *charge, *apiError) {
	if piID == "" && chargeID == "" {
		return nil, nil, badRequest("payment_intent", "parameter_missing",
			"One of the following params should be provided for this request: payment_intent or charge.")
	}
	if piID == "" {
		ch, ok := s.charges[chargeID]
		if !ok {
			return nil, nil, noSuch(http.StatusBadRequest, "charge", chargeID, "charge")
		}
		piID = ch.paymentIntent
	}
	p, ok := s.paymentByID[piID]
	switch {
	case !ok:
		return nil, nil, noSuch(http.StatusBadRequest, "payment_intent", piID, "payment_intent")
	case chargeID != "" && chargeID != p.LatestCharge:
		return nil, nil, badRequest("charge", "", fmt.Sprintf("Charge %s is not the charge of PaymentIntent %s.", chargeID, p.ID))
	case p.Status != StatusSucceeded:
		return nil, nil, badRequest("payment_intent", "", fmt.Sprintf("This PaymentIntent (%s) does not have a "+
			"successful charge to refund.", p.ID))
	}
	return p, s.charges[p.LatestCharge], nil
}

// settleRefund ends r's pending: failed if Options.RefundFails says so,
// else succeeded.
func (s *Server) settleRefund(r *refundRecord, ch *charge) {
	if s.opts.RefundFails != nil {
		if reason := s.opts.RefundFails(r.copy()); reason != "" {
			s.failRefund(r, ch, reason)
			return
		}
	}
	r.Status = StatusSucceeded
	s.emit(nil, "refund.updated", r.wire())
}

// failRefund fails r for reason, its amount no longer refunded.
func (s *Server) failRefund(r *refundRecord, ch *charge, reason string) {
	r.Status, r.FailureReason = StatusFailed, reason
	ch.refunded -= r.Amount
	s.emit(nil, "refund.updated", r.wire())
	s.emit(nil, "refund.failed", r.wire())
}

// retrieveRefund is GET /v1/refunds/{id}.
func (s *Server) retrieveRefund(c *call) (any, *apiError) {
	return retrieve(c, s.refundByID, (*refundRecord).wire, "refund", "refund", "expand[]")
}

// listRefunds is GET /v1/refunds: newest first, paged, of one
// PaymentIntent or charge if asked.
func (s *Server) listRefunds(c *call) (any, *apiError) {
	f := c.params(append(slices.Clone(pagingParams), "payment_intent", "charge")...)
	lp := f.paging()
	piID, chargeID := f.str("payment_intent"), f.str("charge")
	if f.err != nil {
		return nil, f.err
	}
	keep := func(r *refundRecord) bool {
		return (piID == "" || r.PaymentIntent == piID) && (chargeID == "" || r.Charge == chargeID)
	}
	return list(s.refunds, s.refundByID, lp, "refund", "/v1/refunds", keep, (*refundRecord).wire)
}
