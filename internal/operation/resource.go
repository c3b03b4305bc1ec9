package operation

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"golang.org/x/text/currency"

	"github.com/example/payments/internal/database"
)

// Resource is a kind of thing an idempotency key creates, and where the API
// serves it: every Kind (its Names), and the webhook endpoints.
type Resource struct {
	Type, Prefix, Path string
}

// Resource is the kind's resource.
func (n Names) Resource() Resource { return Resource{Type: n.Type, Prefix: n.Prefix, Path: n.Path} }

// ErrNotFound is what every NotFoundError is: errors.Is(err, ErrNotFound)
// holds for any resource that does not exist for the tenant.
var ErrNotFound = errors.New("not found")

// NotFoundError reports a resource that does not exist for the tenant.
type NotFoundError struct {
	// What is what was looked for, in words: "payment", "webhook endpoint".
	What string
}

func (e *NotFoundError) Error() string { return e.What + " not found" }

// Is makes errors.Is(err, ErrNotFound) true.
func (e *NotFoundError) Is(target error) bool { return target == ErrNotFound }

// NotFound is the error of a resource, named in words, that does not exist.
func NotFound(what string) error { return &NotFoundError{What: what} }

// Wrote is nil when a statement that records an outcome wrote n == 1 rows
// of operation id of resourceType, else an error wrapping ErrNotFound: what
// a Kind's Record checks in its callback.
func Wrote(resourceType, id string, n int64) error {
	if n != 1 {
		return fmt.Errorf("record %s %s: %d rows written: %w", resourceType, id, n, NotFound(resourceType))
	}
	return nil
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

// Invalid is a ValidationError of fields, or nil when there are none.
func Invalid(fields []FieldError) error {
	if len(fields) == 0 {
		return nil
	}
	return &ValidationError{Fields: fields}
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

// ValidCurrency accepts a three-letter ISO 4217 code of money, in upper
// case, for any kind that moves money.
func ValidCurrency(code string) bool { return currencies[code] }

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

// ListPage runs a list query that takes (tenant, starting after, limit) and
// reads one row more than limit to tell whether more follow.
func ListPage[T any](ctx context.Context, db database.DBTX, sql, tenantID, startingAfter string, limit int, scan pgx.RowToFunc[T]) ([]T, bool, error) {
	var after *string
	if startingAfter != "" {
		after = &startingAfter
	}
	return Page(ctx, db, sql, limit, scan, tenantID, after, limit+1)
}

// Page runs a list query, given args that ask for one row more than limit,
// and tells whether more follow.
func Page[T any](ctx context.Context, db database.DBTX, sql string, limit int, scan pgx.RowToFunc[T], args ...any) ([]T, bool, error) {
	rows, err := db.Query(ctx, sql, args...)
	if err != nil {
		return nil, false, fmt.Errorf("list: %w", err)
	}
	page, err := pgx.CollectRows(rows, scan)
	if err != nil {
		return nil, false, fmt.Errorf("list: %w", err)
	}
	if len(page) > limit {
		return page[:limit], true, nil
	}
	return page, false, nil
}
