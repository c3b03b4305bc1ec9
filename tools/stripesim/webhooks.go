package stripesim

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"
)

// Webhook retries: a delivery answered other than 2xx, or not at all, is
// sent again up to webhookAttempts times in all, the waits doubling from
// webhookBackoff.
const (
	webhookAttempts = 4
	webhookBackoff  = 100 * time.Millisecond
)

// SignatureHeader is the header Stripe signs its webhooks in.
const SignatureHeader = "Stripe-Signature"

// Event is an event the simulator made.
type Event struct {
	ID, Type string
	Created  time.Time
	// Body is the event as it is sent: Stripe's JSON.
	Body []byte
}

// eventJSON is an event on the wire.
type eventJSON struct {
	ID              string           `json:"id"`
	Object          string           `json:"object"`
	APIVersion      string           `json:"api_version"`
	Created         int64            `json:"created"`
	Data            eventData        `json:"data"`
	Livemode        bool             `json:"livemode"`
	PendingWebhooks int              `json:"pending_webhooks"`
	Request         eventRequestJSON `json:"request"`
	Type            string           `json:"type"`
}

// eventData holds the object an event is about, as it stood.
type eventData struct {
	Object any `json:"object"`
}

// eventRequestJSON names the request that made an event: nulls for a
// change that fell due.
type eventRequestJSON struct {
	ID             *string `json:"id"`
	IdempotencyKey *string `json:"idempotency_key"`
}

// emit makes an event of type typ about object, made by request c (nil for
// a change that fell due), and sends it if a webhook URL is set. The state
// is locked.
func (s *Server) emit(c *call, typ string, object any) {
	now := s.clock.now()
	ev := eventJSON{ID: s.newID("evt_3", 23), Object: "event", APIVersion: apiVersion, Created: now.Unix(),
		Data: eventData{Object: object}, Type: typ}
	if c != nil {
		ev.Request = eventRequestJSON{ID: nullable(c.requestID), IdempotencyKey: nullable(c.idempotencyKey)}
	}
	if s.opts.WebhookURL != "" {
		ev.PendingWebhooks = 1
	}
	body := mustJSON(ev)
	s.events = append(s.events, Event{ID: ev.ID, Type: typ, Created: now, Body: body})
	if s.opts.WebhookURL == "" || s.closed {
		return
	}
	// Every random choice is drawn here, with the state locked, so that a
	// seed makes the same choices for the same events.
	drop := s.rng.Float64() < s.opts.WebhookDrop
	copies := 1
	if s.rng.Float64() < s.opts.WebhookDuplicate {
		copies = 2
	}
	delays := make([]time.Duration, copies)
	for i := range delays {
		if s.opts.WebhookDelay > 0 {
			delays[i] = time.Duration(s.rng.Int64N(int64(s.opts.WebhookDelay) + 1))
		}
	}
	if drop {
		s.stats.WebhooksDropped++
		return
	}
	s.wg.Add(1)
	go s.deliver(body, delays)
}

// deliver sends body once after each delay, until Close.
func (s *Server) deliver(body []byte, delays []time.Duration) {
	defer s.wg.Done()
	for _, d := range delays {
		if !s.wait(s.ctx, d) {
			return
		}
		sent := s.send(body)
		s.mu.Lock()
		if sent {
			s.stats.WebhooksSent++
		} else if s.ctx.Err() == nil {
			s.stats.WebhooksFailed++
		}
		s.mu.Unlock()
	}
}

// send posts body, signed, until an attempt is answered 2xx or the
// attempts run out, and reports whether one was.
func (s *Server) send(body []byte) bool {
	wait := webhookBackoff
	for attempt := range webhookAttempts {
		if attempt > 0 {
			if !s.wait(s.ctx, wait) {
				return false
			}
			wait *= 2
		}
		req, err := http.NewRequestWithContext(s.ctx, http.MethodPost, s.opts.WebhookURL, bytes.NewReader(body))
		if err != nil {
			return false
		}
		req.Header.Set("Content-Type", "application/json; charset=utf-8")
		req.Header.Set("User-Agent", "Stripe/1.0 (+https://stripe.com/docs/webhooks)")
		req.Header.Set(SignatureHeader, Sign(body, s.opts.WebhookSecret, s.clock.now()))
		resp, err := s.hc.Do(req)
		if err != nil {
			continue
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode >= 200 && resp.StatusCode < 300 {
			return true
		}
	}
	return false
}

// Sign is the Stripe-Signature of body signed with secret at t:
// "t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">", keyed by the
// whole secret string, as Stripe signs.
func Sign(body []byte, secret string, t time.Time) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	mac := hmac.New(sha256.New, []byte(secret))
	fmt.Fprintf(mac, "%s.", ts)
	mac.Write(body)
	return "t=" + ts + ",v1=" + hex.EncodeToString(mac.Sum(nil))
}
