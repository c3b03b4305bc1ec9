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
	"maps"
	"regexp"
	"slices"
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
	switch {
	case p.Description == nil:
	case utf8.RuneCountInString(*p.Description) > MaxDescription:
		add("description", "must be at most %d characters", MaxDescription)
	case !Storable(*p.Description):
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
		case !Storable(k):
			add("metadata", "keys must be valid UTF-8 text without NUL characters")
		case v == nil:
			add("metadata."+k, "must be a string, not null")
		case utf8.RuneCountInString(*v) > MaxMetadataValue:
			add("metadata."+k, "must be at most %d characters", MaxMetadataValue)
		case !Storable(*v):
			add("metadata."+k, "must be valid UTF-8 text without NUL characters")
		}
	}
	if len(errs) > 0 {
		return &ValidationError{Fields: errs}
	}
	return nil
}

// Storable reports whether s can be stored as Postgres text: valid UTF-8
// with no NUL character. Text from a client is checked before any query, so
// the database never refuses it.
func Storable(s string) bool {
	return utf8.ValidString(s) && !strings.ContainsRune(s, 0)
}

// currencies are the ISO 4217 codes of money: the tender currencies in use
// today, as golang.org/x/text's CLDR data knows them. Codes that are not money
// (XXX, XTS, the precious metals XAU and the like, fund codes such as USN)
// and withdrawn ones (DEM) are not in it.
var currencies = func() map[string]bool {
	set := map[string]bool{}
	for it := currency.Query(); it.Next(); {
		set[it.Unit().String()] = true
	}
	return set
}()

// validCurrency accepts a three-letter ISO 4217 code of money, in upper case.
func validCurrency(code string) bool { return currencies[code] }

const (
	idAlphabet = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
	idLength   = 24
)

// ValidID reports whether id has the shape of an id NewID made with prefix.
// Anything else names nothing, and is answered as not found without a query,
// so that no client text reaches the database as an id.
func ValidID(prefix, id string) bool {
	rest, ok := strings.CutPrefix(id, prefix)
	if !ok || len(rest) != idLength {
		return false
	}
	for i := range len(rest) {
		if strings.IndexByte(idAlphabet, rest[i]) < 0 {
			return false
		}
	}
	return true
}

// NewID returns prefix followed by 24 random base62 characters.
func NewID(prefix string) string {
	b := make([]byte, idLength)
	_, _ = rand.Read(b)
	for i := range b {
		// The slight modulo bias does not matter for identifiers.
		b[i] = idAlphabet[int(b[i])%len(idAlphabet)]
	}
	return prefix + string(b)
}
