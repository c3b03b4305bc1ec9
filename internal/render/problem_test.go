package render

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/example/payments/internal/idempotency"
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

// TestResourceOf: a key's resource is named with its URL for every resource
// declared, and an undeclared type is an error, never nil (a nil resource
// made the 202 path of a new kind panic).
func TestResourceOf(t *testing.T) {
	t.Parallel()
	gadget := operation.Names{Type: "widget", Prefix: "wid_", Path: "/v1/widgets", Table: "widgets", Object: "gadget", Done: "made"}
	r := New(operation.MustRegistry(kind{gadget}), []operation.Resource{{Type: "thing", Prefix: "th_", Path: "/v1/things"}}, nil)
	for res, want := range map[idempotency.ResourceRef]string{
		{Type: "widget", ID: "wid_1"}: "/v1/widgets/wid_1",
		{Type: "thing", ID: "th_1"}:   "/v1/things/th_1",
	} {
		got, err := r.ResourceOf(res)
		if err != nil || got == nil || got.URL != want || got.Type != res.Type || got.ID != res.ID {
			t.Errorf("ResourceOf(%v) = %+v, %v; want %s", res, got, err, want)
		}
	}
	if got, err := r.ResourceOf(idempotency.ResourceRef{}); got != nil || err != nil {
		t.Errorf("a key that created nothing: %+v, %v", got, err)
	}
	if got, err := r.ResourceOf(idempotency.ResourceRef{Type: "payout", ID: "po_1"}); err == nil {
		t.Errorf("an undeclared type: %+v, want an error", got)
	}
	// An expired key of an undeclared type still names what it created.
	p, ok := r.For(&idempotency.ExpiredError{Resource: idempotency.ResourceRef{Type: "payout", ID: "po_1"}})
	if !ok || p.Status != 410 || p.Resource == nil || p.Resource.ID != "po_1" {
		t.Errorf("expired: %+v", p)
	}
}

// kind is a kind with names and nothing else, for the renderer's table.
type kind struct{ names operation.Names }

func (k kind) Names() operation.Names                         { return k.names }
func (kind) Object() any                                      { return struct{}{} }
func (kind) Request() any                                     { return struct{}{} }
func (kind) Errors() []operation.ErrorRule                    { return nil }
func (k kind) States() []operation.State                      { return operation.DefaultStates(k.names) }
func (kind) Call(*pgx.Batch, string) func(*operation.Pending) { return func(*operation.Pending) {} }
func (kind) Final(context.Context, pgx.Tx, string) (operation.Final, error) {
	return operation.Final{}, nil
}
func (kind) Has() operation.Has { return operation.Has{} }
func (kind) LedgerPage(context.Context, time.Time, string) ([]operation.LedgerEntry, string, error) {
	return nil, "", nil
}
