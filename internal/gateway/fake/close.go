package fake

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/example/payments/internal/gateway"
	"github.com/example/payments/internal/operation"
)

// closeRequest is the body of the processor's close of every kind, POST
// /v1/<objects>/close.
type closeRequest struct {
	IdempotencyKey string `json:"idempotency_key"`
}

// close closes key with a POST to path and decodes the closure's member
// (the object's name) into dst. made is false when the member is null:
// nothing was, or ever will be, made under key. Anything short of a 200
// key_closure for key, member included, wraps operation.ErrProcessorUnknown.
func (c *Client) close(ctx context.Context, path, member, key string, dst any) (made bool, err error) {
	if key == "" {
		return false, fmt.Errorf("close %s key: the key is required", member)
	}
	status, resp, err := c.postJSON(ctx, path, "", closeRequest{IdempotencyKey: key})
	if err != nil {
		return false, fmt.Errorf("close %s key: %w", member, gateway.Unknown(err))
	}
	if status != http.StatusOK {
		return false, fmt.Errorf("close %s key: %w", member, gateway.Unknown(classify(status, resp)))
	}
	var closure map[string]json.RawMessage
	if err := json.Unmarshal(resp, &closure); err != nil {
		return false, fmt.Errorf("close %s key: %w: decode: %w", member, operation.ErrProcessorUnknown, err)
	}
	var object, closed string
	_ = json.Unmarshal(closure["object"], &object)
	_ = json.Unmarshal(closure["idempotency_key"], &closed)
	raw, ok := closure[member]
	switch {
	case object != "key_closure" || closed != key || !ok:
		return false, fmt.Errorf("close %s key: %w: not the closure of %q: %s", member, operation.ErrProcessorUnknown, key, resp)
	case bytes.Equal(raw, []byte("null")):
		return false, nil
	}
	if err := json.Unmarshal(raw, dst); err != nil {
		return false, fmt.Errorf("close %s key: %w: decode %s: %w", member, operation.ErrProcessorUnknown, member, err)
	}
	return true, nil
}
