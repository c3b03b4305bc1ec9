package fake

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/example/payments/internal/operation"
)

// event is the body of the processor's webhook: {"id", "type", "created",
// "data": {"object": <what it made>}}.
type event struct {
	ID      string `json:"id"`
	Type    string `json:"type"`
	Created int64  `json:"created"`
	Data    struct {
		Object json.RawMessage `json:"object"`
	} `json:"data"`
}

// eventObject is what an event is about, as every object this processor
// makes (a charge, say) reads: the members an outcome needs. The id is
// null in the object of an operation refused without being made.
type eventObject struct {
	ID             string `json:"id"`
	Object         string `json:"object"`
	Status         string `json:"status"`
	Amount         int64  `json:"amount"`
	Currency       string `json:"currency"`
	FailureCode    string `json:"failure_code"`
	FailureMessage string `json:"failure_message"`
	IdempotencyKey string `json:"idempotency_key"`
}

// ParseEvent reads the body of a processor webhook, already verified as
// signed by the processor, into the event about one operation. The types
// that settle an operation are <object>.succeeded and <object>.failed,
// about an object of that name with that status, for every kind alike: which
// operation it is about is its downstream key's to say (an operation of no
// declared kind is the service's to refuse, not this reader's). Any other
// type wraps operation.ErrEventNotHandled; a body that is not such an event
// wraps operation.ErrEventMalformed. This is where a forker maps their
// processor's events to operations.
func ParseEvent(body []byte) (operation.ProcessorEvent, error) {
	var e event
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&e); err != nil {
		return operation.ProcessorEvent{}, fmt.Errorf("%w: %w", operation.ErrEventMalformed, err)
	}
	if e.ID == "" || len(e.ID) > 255 {
		return operation.ProcessorEvent{}, fmt.Errorf("%w: the id is missing or longer than 255 bytes", operation.ErrEventMalformed)
	}
	kind, status, _ := strings.Cut(e.Type, ".")
	if status != operation.StatusSucceeded && status != operation.StatusFailed {
		return operation.ProcessorEvent{}, fmt.Errorf("%w: %q", operation.ErrEventNotHandled, e.Type)
	}
	var o eventObject
	switch err := json.Unmarshal(e.Data.Object, &o); {
	case err != nil || o.Object != kind:
		return operation.ProcessorEvent{}, fmt.Errorf("%w: data.object is not a %s", operation.ErrEventMalformed, kind)
	case o.Status != status:
		return operation.ProcessorEvent{}, fmt.Errorf("%w: a %s event about an object with status %q", operation.ErrEventMalformed, e.Type, o.Status)
	case o.ID == "" && status == operation.StatusSucceeded:
		return operation.ProcessorEvent{}, fmt.Errorf("%w: a %s event about an object with no id", operation.ErrEventMalformed, e.Type)
	case o.IdempotencyKey == "":
		return operation.ProcessorEvent{}, fmt.Errorf("%w: the object has no idempotency_key", operation.ErrEventMalformed)
	}
	return operation.ProcessorEvent{ID: e.ID, Type: e.Type, DownstreamKey: o.IdempotencyKey, Payload: body,
		Outcome: operation.Outcome{ID: o.ID, Succeeded: status == operation.StatusSucceeded, FailureCode: o.FailureCode,
			FailureMessage: o.FailureMessage},
		Amount: o.Amount, Currency: o.Currency}, nil
}
