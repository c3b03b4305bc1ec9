package fake

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/example/payments/internal/gateway"
	"github.com/example/payments/internal/operation"
)

// object is what the processor makes under a key, for any kind: a
// ChargeObject, say, as an operation's outcome and as an entry of the
// processor's ledger.
type object interface {
	outcome() operation.Outcome
	entry() operation.LedgerEntry
}

// objects are a kind's objects at the processor, each read as a T: made and
// listed at /v1/<name> (name is "charges", say), and named member ("charge")
// in a key closure and in the errors of the kind's calls. A kind's calls
// are its objects' methods, timed under the kind's own names.
type objects[T object] struct {
	name, member string
}

// callsOf are a kind's calls at the processor, its objects o: make, and
// the lookup, the fence and the ledger every object has, each given what
// make sends, of which key reads the downstream key.
func callsOf[T object, R any](c *Client, o objects[T], make func(context.Context, R) (operation.Outcome, error), key func(R) string) operation.Calls[R] {
	return operation.Calls[R]{
		Make:  make,
		Find:  func(ctx context.Context, req R) (operation.Outcome, bool, error) { return o.find(ctx, c, key(req)) },
		Close: func(ctx context.Context, req R) (operation.Outcome, bool, error) { return o.close(ctx, c, key(req)) },
		Ledger: func(ctx context.Context, since time.Time, cursor string) ([]operation.LedgerEntry, string, error) {
			return o.ledger(ctx, c, since, cursor)
		},
	}
}

// path is where the objects are made and listed.
func (o objects[T]) path() string { return "/v1/" + o.name }

// create is every kind's call: it POSTs body under key and reads the answer
// as the object made under key, now or by an earlier request (a 200), as
// decline reads a 402 (with no decline, a 402 is a refusal like any other
// 4xx), or as a refusal.
func (o objects[T]) create(ctx context.Context, c *Client, key string, body any, decline func(resp []byte) (operation.Outcome, error)) (operation.Outcome, error) {
	if key == "" {
		return operation.Outcome{}, fmt.Errorf("%s: idempotency key is required", o.member)
	}
	status, resp, err := c.postJSON(ctx, o.path(), key, body)
	if err != nil {
		return operation.Outcome{}, fmt.Errorf("%s: %w", o.member, err)
	}
	switch {
	case status == http.StatusOK:
		var made T
		if err := json.Unmarshal(resp, &made); err != nil || made.outcome().ID == "" {
			// The processor said yes, but to what cannot be read: retrying
			// with the same key replays the answer.
			return operation.Outcome{}, fmt.Errorf("%s: %w: unreadable 200 answer: %v", o.member, operation.ErrProcessorUnknown, err)
		}
		return made.outcome(), nil
	case status == http.StatusPaymentRequired && decline != nil:
		out, err := decline(resp)
		if err != nil {
			return operation.Outcome{}, fmt.Errorf("%s: %w", o.member, err)
		}
		return out, nil
	}
	out, err := refusal(status, resp)
	if err != nil {
		return operation.Outcome{}, fmt.Errorf("%s: %w", o.member, err)
	}
	return out, nil
}

// byKey lists the objects the processor made under key, oldest first: none
// when it never made one with that key.
func (o objects[T]) byKey(ctx context.Context, c *Client, key string) ([]T, error) {
	list, err := getFullList[T](ctx, c, o.path(), url.Values{"idempotency_key": {key}})
	if err != nil {
		return nil, fmt.Errorf("%s by idempotency key: %w", o.name, err)
	}
	return list, nil
}

// find is every kind's Find: the newest object made under key, should the
// key have expired and been used again. found is false only on a definite
// answer that none was.
func (o objects[T]) find(ctx context.Context, c *Client, key string) (_ operation.Outcome, found bool, _ error) {
	made, err := o.byKey(ctx, c, key)
	if err != nil {
		return operation.Outcome{}, false, gateway.Unknown(err)
	}
	if len(made) == 0 {
		return operation.Outcome{}, false, nil
	}
	return made[len(made)-1].outcome(), true, nil
}

// close is every kind's Close: it closes key for good at the processor,
// waiting for an object in flight under it, and returns the object made
// under it, if any. Any failure to get the processor's definite answer
// wraps operation.ErrProcessorUnknown: the key may or may not be closed
// yet, and the close is asked again later.
func (o objects[T]) close(ctx context.Context, c *Client, key string) (_ operation.Outcome, made bool, _ error) {
	var obj T
	ok, err := c.close(ctx, o.path()+"/close", o.member, key, &obj)
	if err != nil || !ok {
		return operation.Outcome{}, false, err
	}
	out := obj.outcome()
	if out.ID == "" {
		return operation.Outcome{}, false, fmt.Errorf("close %s key: %w: the closure's %s has no id", o.member, operation.ErrProcessorUnknown, o.member)
	}
	return out, true, nil
}
