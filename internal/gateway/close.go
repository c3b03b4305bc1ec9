package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/example/payments/internal/payments"
)

// closeRequest is the body of POST /v1/charges/close and /v1/refunds/close.
type closeRequest struct {
	IdempotencyKey string `json:"idempotency_key"`
}

// object is what the processor makes under a key: a ChargeObject or a
// RefundObject.
type object interface {
	ChargeObject | RefundObject
	outcome() payments.Outcome
}

// findByKey is FindCharge and FindRefund: list lists what was made under a
// key, oldest first, and the newest is the answer.
func findByKey[T object](list func() ([]T, error)) (payments.Outcome, bool, error) {
	made, err := list()
	if err != nil {
		return payments.Outcome{}, false, unknown(err)
	}
	if len(made) == 0 {
		return payments.Outcome{}, false, nil
	}
	return made[len(made)-1].outcome(), true, nil
}

// closeKey is CloseCharge and CloseRefund: it closes key with a POST to
// path and returns the member ("charge" or "refund") made under it, if any.
func closeKey[T object](ctx context.Context, c *Client, path, member, key string) (payments.Outcome, bool, error) {
	var made T
	ok, err := c.close(ctx, path, member, key, &made)
	if err != nil || !ok {
		return payments.Outcome{}, false, err
	}
	out := made.outcome()
	if out.ID == "" {
		return payments.Outcome{}, false, fmt.Errorf("close %s key: %w: the closure's %s has no id", member, payments.ErrProcessorUnknown, member)
	}
	return out, true, nil
}

// close closes key with a POST to path and decodes the closure's member
// ("charge" or "refund") into dst. made is false when the member is null:
// nothing was, or ever will be, made under key. Anything short of a 200
// key_closure for key, member included, wraps payments.ErrProcessorUnknown.
func (c *Client) close(ctx context.Context, path, member, key string, dst any) (made bool, err error) {
	if key == "" {
		return false, fmt.Errorf("close %s key: the key is required", member)
	}
	status, resp, err := c.postJSON(ctx, path, "", closeRequest{IdempotencyKey: key})
	if err != nil {
		return false, fmt.Errorf("close %s key: %w", member, unknown(err))
	}
	if status != http.StatusOK {
		return false, fmt.Errorf("close %s key: %w", member, unknown(classify(status, resp)))
	}
	var closure map[string]json.RawMessage
	if err := json.Unmarshal(resp, &closure); err != nil {
		return false, fmt.Errorf("close %s key: %w: decode: %w", member, payments.ErrProcessorUnknown, err)
	}
	var object, closed string
	_ = json.Unmarshal(closure["object"], &object)
	_ = json.Unmarshal(closure["idempotency_key"], &closed)
	raw, ok := closure[member]
	switch {
	case object != "key_closure" || closed != key || !ok:
		return false, fmt.Errorf("close %s key: %w: not the closure of %q: %s", member, payments.ErrProcessorUnknown, key, resp)
	case bytes.Equal(raw, []byte("null")):
		return false, nil
	}
	if err := json.Unmarshal(raw, dst); err != nil {
		return false, fmt.Errorf("close %s key: %w: decode %s: %w", member, payments.ErrProcessorUnknown, member, err)
	}
	return true, nil
}
