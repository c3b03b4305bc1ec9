package fakeprocessor

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
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
