// Package payments creates payments and drives them through their atomic
// phases: started (the API records the intent), charge_created (the processor
// was asked, its answer recorded) and finished (the final response stored).
// It knows nothing of HTTP, River or the processor's wire format: those are
// behind the JobQueue and Processor interfaces and a Render function.
package payments

import (
	"crypto/rand"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"golang.org/x/text/currency"
)

// The statuses of a payment.
const (
	StatusProcessing = "processing"
	StatusSucceeded  = "succeeded"
	StatusFailed     = "failed"
)

// RecoveryChargeCreated is the recovery point after the processor's answer is
// recorded on the payment.
const RecoveryChargeCreated = "charge_created"

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
var ErrNotFound = errors.New("payment not found")

// Payment is a payment as the API shows it.
type Payment struct {
	ID                string            `json:"id"`
	Object            string            `json:"object"`
	Amount            int64             `json:"amount"`
	Currency          string            `json:"currency"`
	PaymentMethod     string            `json:"payment_method"`
	Description       *string           `json:"description"`
	Metadata          map[string]string `json:"metadata"`
	Status            string            `json:"status"`
	FailureCode       *string           `json:"failure_code"`
	FailureMessage    *string           `json:"failure_message"`
	ProcessorChargeID *string           `json:"processor_charge_id"`
	AmountRefunded    int64             `json:"amount_refunded"`
	CreatedAt         time.Time         `json:"created_at"`
	UpdatedAt         time.Time         `json:"updated_at"`

	TenantID string `json:"-"`
	// KeyID is the idempotency key that created the payment; nil once reaped.
	KeyID *int64 `json:"-"`
}

// NewPayment is the request to create a payment.
type NewPayment struct {
	Amount        *int64            `json:"amount"`
	Currency      string            `json:"currency"`
	PaymentMethod string            `json:"payment_method"`
	Description   *string           `json:"description"`
	Metadata      map[string]string `json:"metadata"`
}

// FieldError is one invalid field of a request.
type FieldError struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

// ValidationError lists every invalid field of a request.
type ValidationError struct {
	Fields []FieldError
}

func (e *ValidationError) Error() string {
	return fmt.Sprintf("invalid request: %d invalid field(s)", len(e.Fields))
}

var paymentMethodPattern = regexp.MustCompile(`^pm_[A-Za-z0-9_]+$`)

// Validate checks every field and reports all that are wrong at once.
func (p NewPayment) Validate() error {
	var errs []FieldError
	add := func(field, format string, args ...any) {
		errs = append(errs, FieldError{Field: field, Message: fmt.Sprintf(format, args...)})
	}
	switch {
	case p.Amount == nil:
		add("amount", "is required")
	case *p.Amount < MinAmount || *p.Amount > MaxAmount:
		add("amount", "must be an integer from %d to %d, in minor units", MinAmount, MaxAmount)
	}
	if p.Currency == "" {
		add("currency", "is required")
	} else if !validCurrency(strings.ToUpper(p.Currency)) {
		add("currency", "must be an ISO 4217 currency code such as USD")
	}
	switch {
	case p.PaymentMethod == "":
		add("payment_method", "is required")
	case len(p.PaymentMethod) > MaxPaymentMethod || !paymentMethodPattern.MatchString(p.PaymentMethod):
		add("payment_method", "must be a payment method token such as pm_card_visa")
	}
	if p.Description != nil && utf8.RuneCountInString(*p.Description) > MaxDescription {
		add("description", "must be at most %d characters", MaxDescription)
	}
	if len(p.Metadata) > MaxMetadataPairs {
		add("metadata", "must have at most %d keys", MaxMetadataPairs)
	}
	for k, v := range p.Metadata {
		switch {
		case k == "" || utf8.RuneCountInString(k) > MaxMetadataKey:
			add("metadata", "keys must be 1 to %d characters", MaxMetadataKey)
		case utf8.RuneCountInString(v) > MaxMetadataValue:
			add("metadata."+k, "must be at most %d characters", MaxMetadataValue)
		}
	}
	if len(errs) > 0 {
		return &ValidationError{Fields: errs}
	}
	return nil
}

// validCurrency accepts a three-letter ISO 4217 code in upper case.
func validCurrency(code string) bool {
	if len(code) != 3 || code[0] < 'A' || code[0] > 'Z' || code[1] < 'A' || code[1] > 'Z' || code[2] < 'A' || code[2] > 'Z' {
		return false
	}
	_, err := currency.ParseISO(code)
	return err == nil
}

const idAlphabet = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"

// newID returns prefix followed by 24 random base62 characters.
func newID(prefix string) string {
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	for i := range b {
		// The slight modulo bias does not matter for identifiers.
		b[i] = idAlphabet[int(b[i])%len(idAlphabet)]
	}
	return prefix + string(b)
}
