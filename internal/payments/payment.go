// Package payments declares the payment, one kind of operation (see package
// operation): POST /v1/payments records it, and a charge at the processor
// settles it. Its phases are started → charge_created → finished. This
// package holds what is the payment's own: its request and its validation,
// its table, its charge, and how it reads; the machinery does the rest.
package payments

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/example/payments/client"
	"github.com/example/payments/internal/operation"
)

// Names are the payment's names: what the machinery derives every other one
// from (the charge_<id> downstream key, the charge_created recovery point,
// the payment.succeeded event, the payment_given_up review case, …).
var Names = operation.Names{Type: "payment", Prefix: "pay_", Path: "/v1/payments", Table: "payments", Object: "charge", Done: "charged"}

// Limits on a new payment.
const (
	MinAmount        = 1
	MaxAmount        = 99_999_999
	MaxDescription   = 1000
	MaxMetadataPairs = 20
	MaxMetadataKey   = 40
	MaxMetadataValue = 500
	MaxPaymentMethod = 255
)

// ErrNotFound reports a payment that does not exist for the tenant.
var ErrNotFound = operation.NotFound("payment")

// Payment is a payment: what the API shows of it (the client's type, so that
// the two cannot drift apart), and whose it is.
type Payment struct {
	client.Payment

	TenantID string `json:"-"`
	// KeyID is the idempotency key that created the payment; nil once reaped.
	KeyID *int64 `json:"-"`
}

// NewPayment is the request to create a payment.
type NewPayment struct {
	Amount        *int64  `json:"amount"`
	Currency      string  `json:"currency"`
	PaymentMethod string  `json:"payment_method"`
	Description   *string `json:"description"`
	// Metadata values are pointers so that a null value is told apart from
	// "" and refused, rather than stored as "".
	Metadata map[string]*string `json:"metadata"`
}

// metadata returns the validated metadata as stored: never nil.
func (p NewPayment) metadata() map[string]string {
	m := make(map[string]string, len(p.Metadata))
	for k, v := range p.Metadata {
		m[k] = *v
	}
	return m
}

// Validate checks every field and reports all that are wrong at once; the
// payment method has the format of the processor's, and the amount the
// rule it has for the currency (operation.Processor).
func (p NewPayment) Validate(proc operation.Processor) error {
	method := proc.PaymentMethod
	var errs []operation.FieldError
	add := func(field, format string, args ...any) {
		errs = append(errs, operation.FieldError{Field: field, Message: fmt.Sprintf(format, args...)})
	}
	switch {
	case p.Amount == nil:
		add("amount", "is required")
	case *p.Amount < MinAmount || *p.Amount > MaxAmount:
		add("amount", "must be an integer from %d to %d, in minor units", MinAmount, MaxAmount)
	}
	if p.Currency == "" {
		add("currency", "is required")
	} else if !operation.ValidCurrency(strings.ToUpper(p.Currency)) {
		add("currency", "must be an ISO 4217 currency code such as USD")
	} else if p.Amount != nil && *p.Amount >= MinAmount && *p.Amount <= MaxAmount {
		if e := proc.CheckAmount(p.Currency, *p.Amount, true); e != nil {
			errs = append(errs, *e)
		}
	}
	switch {
	case p.PaymentMethod == "":
		add("payment_method", "is required")
	case len(p.PaymentMethod) > MaxPaymentMethod || !method.Valid(p.PaymentMethod):
		add("payment_method", "must be a payment method the processor takes, such as %s", method.Example)
	}
	switch {
	case p.Description == nil:
	case utf8.RuneCountInString(*p.Description) > MaxDescription:
		add("description", "must be at most %d characters", MaxDescription)
	case !operation.Storable(*p.Description):
		add("description", "must be valid UTF-8 text without NUL characters")
	}
	if len(p.Metadata) > MaxMetadataPairs {
		add("metadata", "must have at most %d keys", MaxMetadataPairs)
	}
	for _, k := range slices.Sorted(maps.Keys(p.Metadata)) {
		v := p.Metadata[k]
		switch {
		case k == "" || utf8.RuneCountInString(k) > MaxMetadataKey:
			add("metadata", "keys must be 1 to %d characters", MaxMetadataKey)
		case !operation.Storable(k):
			add("metadata", "keys must be valid UTF-8 text without NUL characters")
		case v == nil:
			add("metadata."+k, "must be a string, not null")
		case utf8.RuneCountInString(*v) > MaxMetadataValue:
			add("metadata."+k, "must be at most %d characters", MaxMetadataValue)
		case !operation.Storable(*v):
			add("metadata."+k, "must be valid UTF-8 text without NUL characters")
		}
	}
	return operation.Invalid(errs)
}
