package render

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/example/payments/internal/operation"
)

// TestNoCauseInDetail: what wraps a known error (the database's refusal of
// a value, a network error) never reaches the client's answer.
func TestNoCauseInDetail(t *testing.T) {
	t.Parallel()
	cause := errors.New(`ERROR: invalid byte sequence for encoding "UTF8": 0x00 (SQLSTATE 22021) on 10.0.3.7:5432`)
	for _, known := range []error{ErrStorable, ErrBodyUnreadable} {
		p, ok := New(operation.MustRegistry(), nil, nil).For(fmt.Errorf("%w: %v", known, cause))
		if !ok || p.Status != 400 || strings.Contains(p.Detail, "SQLSTATE") || strings.Contains(p.Detail, "10.0.3.7") {
			t.Errorf("%v: %+v", known, p)
		}
	}
}
