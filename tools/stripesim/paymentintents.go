package stripesim

import (
	"maps"
	"net/http"
	"slices"
	"time"
)

// The statuses of PaymentIntents, and of refunds (pending, succeeded,
// failed, canceled). The simulator captures every charge it makes, so no
// PaymentIntent of its is ever requires_capture.
const (
	StatusRequiresPaymentMethod = "requires_payment_method"
	StatusRequiresConfirmation  = "requires_confirmation"
	StatusRequiresAction        = "requires_action"
	StatusRequiresCapture       = "requires_capture"
	StatusProcessing            = "processing"
	StatusSucceeded             = "succeeded"
	StatusCanceled              = "canceled"
	StatusPending               = "pending"
	StatusFailed                = "failed"
)

// PaymentIntent is a PaymentIntent as the simulator holds it.
type PaymentIntent struct {
	ID                 string
	Amount             int64
	AmountReceived     int64
	Currency           string
	Status             string
	PaymentMethod      string
	PaymentMethodTypes []string
	Customer           string
	Description        string
	Metadata           map[string]string
	// LastPaymentError is the error of the last confirmation, nil if none
	// failed.
	LastPaymentError *PaymentError
	// LatestCharge is the ch_ id of the last confirmation's charge, "" if
	// none was made.
	LatestCharge       string
	CancellationReason string
	// CanceledAt is zero unless canceled.
	CanceledAt time.Time
	Created    time.Time
}

// PaymentError is a PaymentIntent's last_payment_error.
type PaymentError struct {
	Type, Code, DeclineCode, Message string
	// PaymentMethod is the payment method that failed.
	PaymentMethod string
}

// paymentIntentRecord is a PaymentIntent and what the simulator keeps
// about it besides.
type paymentIntentRecord struct {
	PaymentIntent
	pos          int
	clientSecret string
	card         card
	// searchable is when a search first finds it.
	searchable time.Time
}

// copy is the PaymentIntent, sharing nothing with the record.
func (p *paymentIntentRecord) copy() PaymentIntent {
	out := p.PaymentIntent
	out.Metadata = maps.Clone(p.Metadata)
	out.PaymentMethodTypes = slices.Clone(p.PaymentMethodTypes)
	if e := p.LastPaymentError; e != nil {
		copied := *e
		out.LastPaymentError = &copied
	}
	return out
}

// paymentIntentJSON is a PaymentIntent on the wire.
type paymentIntentJSON struct {
	ID                 string            `json:"id"`
	Object             string            `json:"object"`
	Amount             int64             `json:"amount"`
	AmountCapturable   int64             `json:"amount_capturable"`
	AmountReceived     int64             `json:"amount_received"`
	CanceledAt         *int64            `json:"canceled_at"`
	CancellationReason *string           `json:"cancellation_reason"`
	CaptureMethod      string            `json:"capture_method"`
	ClientSecret       string            `json:"client_secret"`
	ConfirmationMethod string            `json:"confirmation_method"`
	Created            int64             `json:"created"`
	Currency           string            `json:"currency"`
	Customer           *string           `json:"customer"`
	Description        *string           `json:"description"`
	LastPaymentError   *errorJSON        `json:"last_payment_error"`
	LatestCharge       *string           `json:"latest_charge"`
	Livemode           bool              `json:"livemode"`
	Metadata           map[string]string `json:"metadata"`
	NextAction         *nextActionJSON   `json:"next_action"`
	PaymentMethod      *string           `json:"payment_method"`
	PaymentMethodTypes []string          `json:"payment_method_types"`
	Status             string            `json:"status"`
}

// paymentMethodJSON is a payment method on the wire, as an error carries it.
type paymentMethodJSON struct {
	ID     string `json:"id"`
	Object string `json:"object"`
	Type   string `json:"type"`
}

// nextActionJSON is the next_action of a PaymentIntent requiring action.
type nextActionJSON struct {
	Type         string         `json:"type"`
	UseStripeSDK map[string]any `json:"use_stripe_sdk"`
}

// wire is the PaymentIntent as Stripe answers it.
func (p *paymentIntentRecord) wire() *paymentIntentJSON {
	j := &paymentIntentJSON{ID: p.ID, Object: "payment_intent", Amount: p.Amount, AmountReceived: p.AmountReceived,
		CancellationReason: nullable(p.CancellationReason), CaptureMethod: "automatic_async", ClientSecret: p.clientSecret,
		ConfirmationMethod: "automatic", Created: p.Created.Unix(), Currency: p.Currency, Customer: nullable(p.Customer),
		Description: nullable(p.Description), LatestCharge: nullable(p.LatestCharge), Metadata: maps.Clone(p.Metadata),
		PaymentMethod: nullable(p.PaymentMethod), PaymentMethodTypes: slices.Clone(p.PaymentMethodTypes), Status: p.Status}
	if !p.CanceledAt.IsZero() {
		at := p.CanceledAt.Unix()
		j.CanceledAt = &at
	}
	if e := p.LastPaymentError; e != nil {
		j.LastPaymentError = &errorJSON{Type: e.Type, Code: e.Code, DeclineCode: e.DeclineCode, Message: e.Message,
			Charge: p.LatestCharge, PaymentMethod: &paymentMethodJSON{ID: e.PaymentMethod, Object: "payment_method", Type: "card"}}
	}
	if p.Status == StatusRequiresAction {
		j.NextAction = &nextActionJSON{Type: "use_stripe_sdk", UseStripeSDK: map[string]any{"type": "three_d_secure_redirect"}}
	}
	return j
}

// nullable is s, or JSON's null for "".
func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// paymentIntentCreateParams are the parameters a create takes.
var paymentIntentCreateParams = []string{"amount", "currency", "confirm", "error_on_requires_action", "payment_method",
	"payment_method_types[]", "metadata[]", "description", "customer", "return_url", "expand[]"}

// createPaymentIntent is POST /v1/payment_intents: validated, made, and
// confirmed if asked.
func (s *Server) createPaymentIntent(c *call) (any, *apiError) {
	f := c.params(paymentIntentCreateParams...)
	amount := f.requiredInteger("amount")
	currency := f.required("currency")
	confirm := f.boolean("confirm")
	errorOnRequiresAction := f.boolean("error_on_requires_action")
	method := f.str("payment_method")
	types := f.list("payment_method_types")
	metadata := f.metadata()
	description := f.str("description")
	customer := f.str("customer")
	if f.err != nil {
		return nil, f.err
	}
	if err := checkAmount(amount, currency); err != nil {
		return nil, err
	}
	switch {
	case method != "" && !paymentMethodExists(method):
		return nil, noSuch(http.StatusBadRequest, "PaymentMethod", method, "payment_method")
	case customer != "" && !s.customerExists(customer):
		return nil, noSuch(http.StatusBadRequest, "customer", customer, "customer")
	case confirm && method == "":
		return nil, badRequest("payment_method", "parameter_missing",
			"You cannot confirm this PaymentIntent because it's missing a payment method.")
	}
	if len(types) == 0 {
		types = []string{"card"}
	}
	suffix := s.newID("3", 23)
	p := &paymentIntentRecord{PaymentIntent: PaymentIntent{ID: "pi_" + suffix, Amount: amount, Currency: currency,
		Status: StatusRequiresPaymentMethod, PaymentMethod: method, PaymentMethodTypes: types, Customer: customer,
		Description: description, Metadata: metadata, Created: c.now},
		pos: len(s.paymentIntents), card: cards[method]}
	p.clientSecret = p.ID + "_secret_" + s.newID("", 25)
	if method != "" {
		p.Status = StatusRequiresConfirmation
	}
	lag := s.searchLag(p.copy())
	p.searchable = c.now.Add(lag)
	s.paymentIntents = append(s.paymentIntents, p)
	s.paymentByID[p.ID] = p
	s.emit(c, "payment_intent.created", p.wire())
	if !confirm {
		return p.wire(), nil
	}
	return s.confirm(c, p, errorOnRequiresAction, "ch_"+suffix)
}

// searchLag is how long after its creation the search finds p.
func (s *Server) searchLag(p PaymentIntent) time.Duration {
	if s.opts.SearchLag != nil {
		return s.opts.SearchLag(p)
	}
	const least, most = 2 * time.Second, 5 * time.Second
	return least + time.Duration(s.rng.Int64N(int64(most-least)+1))
}

// confirm runs p's payment method, making its charge chargeID when the
// card is charged: the PaymentIntent as it stands after, or the 402 of a
// decline carrying it.
func (s *Server) confirm(c *call, p *paymentIntentRecord, errorOnRequiresAction bool, chargeID string) (any, *apiError) {
	switch {
	case p.card.decline != nil:
		s.newCharge(c, p, chargeID, StatusFailed)
		return nil, s.declined(c, p, *p.card.decline)
	case p.card.authentication && errorOnRequiresAction:
		return nil, s.declined(c, p, authenticationRequired)
	case p.card.authentication:
		p.Status = StatusRequiresAction
		s.emit(c, "payment_intent.requires_action", p.wire())
	case p.card.processing:
		ch := s.newCharge(c, p, chargeID, StatusPending)
		p.Status = StatusProcessing
		s.emit(c, "payment_intent.processing", p.wire())
		s.after(c.now, s.opts.ProcessingFor, func(time.Time) {
			ch.status = StatusSucceeded
			s.succeed(nil, p)
		})
	default:
		s.newCharge(c, p, chargeID, StatusSucceeded)
		s.succeed(c, p)
	}
	return p.wire(), nil
}

// succeed moves p to succeeded, its amount received.
func (s *Server) succeed(c *call, p *paymentIntentRecord) {
	p.Status, p.AmountReceived = StatusSucceeded, p.Amount
	s.emit(c, "payment_intent.succeeded", p.wire())
}

// declined leaves p in requires_payment_method after its confirmation
// failed with e, and returns the 402 card_error carrying it. The
// PaymentIntent was made: the error is saved under the key.
func (s *Server) declined(c *call, p *paymentIntentRecord, e PaymentError) *apiError {
	e.PaymentMethod = p.PaymentMethod
	p.LastPaymentError = &e
	p.Status, p.PaymentMethod = StatusRequiresPaymentMethod, ""
	s.emit(c, "payment_intent.payment_failed", p.wire())
	return &apiError{status: http.StatusPaymentRequired, executed: true, body: errorJSON{Type: e.Type, Code: e.Code,
		DeclineCode: e.DeclineCode, Message: e.Message, Charge: p.LatestCharge, PaymentIntent: p.wire(),
		PaymentMethod: &paymentMethodJSON{ID: e.PaymentMethod, Object: "payment_method", Type: "card"}}}
}

// retrievePaymentIntent is GET /v1/payment_intents/{id}.
func (s *Server) retrievePaymentIntent(c *call) (any, *apiError) {
	return retrieve(c, s.paymentByID, (*paymentIntentRecord).wire, "payment_intent", "intent", "expand[]", "client_secret")
}

// cancelable are the statuses a PaymentIntent can be canceled from. A
// card's processing is not among them: Stripe cancels a processing
// PaymentIntent only for some payment methods, never a card's.
var cancelable = []string{StatusRequiresPaymentMethod, StatusRequiresCapture, StatusRequiresConfirmation, StatusRequiresAction}

// cancelPaymentIntent is POST /v1/payment_intents/{id}/cancel.
func (s *Server) cancelPaymentIntent(c *call) (any, *apiError) {
	f := c.params("cancellation_reason", "expand[]")
	reason := f.oneOf("cancellation_reason", "duplicate", "fraudulent", "requested_by_customer", "abandoned")
	if f.err != nil {
		return nil, f.err
	}
	p, err := pathObject(c, s.paymentByID, "payment_intent", "intent")
	if err != nil {
		return nil, err
	}
	if !slices.Contains(cancelable, p.Status) {
		err := badRequest("", "payment_intent_unexpected_state", "You cannot cancel this PaymentIntent because it has a "+
			"status of "+p.Status+". Only a PaymentIntent with one of the following statuses may be canceled: "+
			"requires_payment_method, requires_capture, requires_confirmation, requires_action.")
		err.body.PaymentIntent = p.wire()
		return nil, err
	}
	p.Status, p.CanceledAt, p.CancellationReason = StatusCanceled, c.now, reason
	s.emit(c, "payment_intent.canceled", p.wire())
	return p.wire(), nil
}

// listPaymentIntents is GET /v1/payment_intents: newest first, paged.
func (s *Server) listPaymentIntents(c *call) (any, *apiError) {
	f := c.params(append(slices.Clone(pagingParams), "customer")...)
	lp := f.paging()
	customer := f.str("customer")
	if f.err != nil {
		return nil, f.err
	}
	keep := func(p *paymentIntentRecord) bool { return customer == "" || p.Customer == customer }
	return list(s.paymentIntents, s.paymentByID, lp, "payment_intent", "/v1/payment_intents", keep, (*paymentIntentRecord).wire)
}

// created is when p was made, for lists.
func (p *paymentIntentRecord) created() time.Time { return p.Created }

// position is p's index among the PaymentIntents, for lists.
func (p *paymentIntentRecord) position() int { return p.pos }
