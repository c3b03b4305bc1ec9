package fakeprocessor

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
)

// errNotFound reports something the processor does not have.
var errNotFound = errors.New("not found")

// The statuses of what the processor makes.
const (
	statusSucceeded = "succeeded"
	statusFailed    = "failed"
)

// newID returns prefix followed by 24 random hex digits.
func newID(prefix string) string {
	b := make([]byte, 12)
	_, _ = rand.Read(b) // never fails, per crypto/rand
	return prefix + hex.EncodeToString(b)
}

// optional maps "" to SQL NULL and JSON null.
func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// stored is an object kept in a table of its own (*charge, *refund): columns
// are pointers to its members in the order of its column list
// (chargeColumns), the one mapping its insert and its scan share.
type stored[T any] interface {
	*T
	columns() []any
}

// scanObject reads a row of an object's column list into o, whose members
// that are not columns (Object) are set, and puts the times it read in UTC,
// so that an object reads back as it was first answered.
func scanObject[T any, P stored[T]](r pgx.Row, o T) (T, error) {
	cols := P(&o).columns()
	if err := r.Scan(cols...); err != nil {
		return o, err
	}
	for _, c := range cols {
		if t, ok := c.(*time.Time); ok {
			*t = t.UTC()
		}
	}
	return o, nil
}
