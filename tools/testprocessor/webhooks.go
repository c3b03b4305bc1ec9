package testprocessor

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/example/payments/internal/gateway"
	"github.com/example/payments/internal/operation"
	"github.com/example/payments/internal/signing"
)

// The event codes of the processor's notifications that settle an
// operation; every other is acknowledged and ignored.
const (
	eventAuthorisation = "AUTHORISATION"
	eventRefund        = "REFUND"
	eventRefundFailed  = "REFUND_FAILED"
)

// notification is the body of one webhook delivery: a batch of items.
type notification struct {
	Live  string `json:"live"`
	Items []struct {
		Item Item `json:"NotificationRequestItem"`
	} `json:"notificationItems"`
}

// Item is one event of a delivery.
type Item struct {
	EventCode         string `json:"eventCode"`
	Success           string `json:"success"`
	PSPReference      string `json:"pspReference"`
	MerchantReference string `json:"merchantReference"`
	Amount            amount `json:"amount"`
	Reason            string `json:"reason,omitempty"`
	AdditionalData    struct {
		HMACSignature string `json:"hmacSignature"`
	} `json:"additionalData"`
}

// signed is the text an item's HMAC is made over: fields inside the JSON,
// joined by colons.
func (it Item) signed() string {
	return strings.Join([]string{it.PSPReference, it.MerchantReference, strconv.FormatInt(it.Amount.Value, 10),
		it.Amount.Currency, it.EventCode, it.Success}, ":")
}

// sign is the item's HMAC-SHA256 with key, in base64.
func (it Item) sign(key []byte) string {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(it.signed()))
	return base64.StdEncoding.EncodeToString(mac.Sum(nil))
}

// id is the event's id: the same on every delivery of the item.
func (it Item) id() string { return it.PSPReference + ":" + it.EventCode + ":" + it.Success }

// webhooks reads the test processor's deliveries.
type webhooks struct{ key []byte }

// Verify implements gateway.Webhooks: every item's HMAC, compared in
// constant time. The processor signs no time, so nothing is stale.
func (w webhooks) Verify(body []byte, _ http.Header, _ time.Time) error {
	if len(w.key) == 0 {
		return fmt.Errorf("%w: no HMAC key", signing.ErrSignature)
	}
	var n notification
	if err := json.Unmarshal(body, &n); err != nil || len(n.Items) == 0 {
		return fmt.Errorf("%w: not a notification", signing.ErrSignature)
	}
	for _, it := range n.Items {
		got, err := base64.StdEncoding.DecodeString(it.Item.AdditionalData.HMACSignature)
		want, _ := base64.StdEncoding.DecodeString(it.Item.sign(w.key))
		if err != nil || !hmac.Equal(got, want) {
			return fmt.Errorf("%w: item %s", signing.ErrSignature, it.Item.id())
		}
	}
	return nil
}

// Events implements gateway.Webhooks: a verified delivery's items, in
// order.
func (webhooks) Events(body []byte, _ http.Header) ([]gateway.Event, error) {
	var n notification
	if err := json.Unmarshal(body, &n); err != nil {
		return nil, fmt.Errorf("%w: %w", operation.ErrEventMalformed, err)
	}
	events := make([]gateway.Event, len(n.Items))
	for i, it := range n.Items {
		item := it.Item
		ev := operation.ProcessorEvent{ID: item.id(), Type: item.EventCode, DownstreamKey: item.MerchantReference,
			Amount: item.Amount.Value, Currency: item.Amount.Currency, Payload: body,
			Outcome: operation.Outcome{ID: item.PSPReference, Succeeded: item.Success == "true", FailureMessage: item.Reason}}
		switch {
		case item.PSPReference == "" || item.MerchantReference == "":
			return nil, fmt.Errorf("%w: item %d names no reference", operation.ErrEventMalformed, i)
		case item.EventCode == eventRefundFailed:
			ev.Outcome.Succeeded = false
		case item.EventCode != eventAuthorisation && item.EventCode != eventRefund:
			events[i] = gateway.Event{ProcessorEvent: operation.ProcessorEvent{ID: item.id()}, Ignored: true}
			continue
		}
		if !ev.Outcome.Succeeded {
			ev.Outcome.FailureCode = "refused"
		}
		events[i] = gateway.Event{ProcessorEvent: ev}
	}
	return events, nil
}

// Answer implements gateway.Webhooks: the text the processor expects.
func (webhooks) Answer(w http.ResponseWriter, _ []gateway.Receipt) {
	w.Header().Set("Content-Type", "text/plain")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write([]byte(Accepted))
}

// Accepted is the answer the processor expects to a delivery it need not
// send again.
const Accepted = "[accepted]"
