package fakeprocessor_test

import (
	"bytes"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/example/payments/internal/signing"
	"github.com/example/payments/tools/fakeprocessor"
	"github.com/example/payments/tools/testdb"
	"github.com/example/payments/tools/testwait"
)

// TestWebhookRetries checks that a failed delivery is sent again, with the
// same id and body, that a redirect is a failure and is not followed, and
// that attempts are counted.
func TestWebhookRetries(t *testing.T) {
	t.Parallel()
	e, r := newWebhookEnv(t, func(w http.ResponseWriter, n int) {
		switch n {
		case 1:
			w.Header().Set("Location", "/elsewhere")
			w.WriteHeader(http.StatusTemporaryRedirect)
		case 2:
			w.WriteHeader(http.StatusInternalServerError)
		default:
			w.WriteHeader(http.StatusNoContent)
		}
	}, nil)
	e.charge("retried", "pm_card_visa")
	id, ds := waitDelivered(t, e, r, "retried")
	if len(ds) != 3 || len(r.all()) != 3 {
		t.Fatalf("%d deliveries of the event, %d in all; want 3", len(ds), len(r.all()))
	}
	for _, d := range ds {
		checkDelivery(t, d, "charge.succeeded")
		if !bytes.Equal(d.body, ds[0].body) {
			t.Errorf("bodies differ: %s / %s", d.body, ds[0].body)
		}
	}
	row := e.event(t, id)
	if row.attempts != 3 || row.deliveredAt == nil || row.nextAttempt != nil {
		t.Errorf("row = %+v", row)
	}
}

// TestWebhookAbandoned checks that an event failing past its horizon is
// abandoned, with its last error, after as many deliveries as attempts.
func TestWebhookAbandoned(t *testing.T) {
	t.Parallel()
	e, r := newWebhookEnv(t, func(w http.ResponseWriter, _ int) { w.WriteHeader(http.StatusServiceUnavailable) },
		func(cfg *fakeprocessor.Config) { cfg.Webhooks.RetryHorizon = time.Second })
	e.charge("abandoned", "pm_card_visa")
	id := waitState(t, e, "abandoned", "abandoned")
	row := e.event(t, id)
	if row.attempts < 2 || row.lastError == nil || !strings.Contains(*row.lastError, "503") ||
		row.nextAttempt != nil || row.deliveredAt != nil {
		t.Errorf("row = %+v, last error %v", row, row.lastError)
	}
	if n := len(r.byID(id)); n != row.attempts {
		t.Errorf("%d deliveries, %d attempts", n, row.attempts)
	}
}

// TestWebhookDurable checks that an event a processor left behind is
// delivered by another on the same database.
func TestWebhookDurable(t *testing.T) {
	t.Parallel()
	t.Run("Stopped", func(t *testing.T) {
		t.Parallel()
		secrets := newSecrets(t, signing.NewSecret())
		r := newReceiver(t, secrets, nil)
		db := testdb.New(t)
		first := newEnvOn(t, db, webhookConfig(r, secrets))
		first.sendWebhooks()()
		first.charge("left", "pm_card_visa")
		ids := first.eventsUnder(t, "left")
		if len(ids) != 1 || first.event(t, ids[0]).state != "pending" {
			t.Fatalf("events %v", ids)
		}

		second := newEnvOn(t, db, webhookConfig(r, secrets))
		second.sendWebhooks()
		_, ds := waitDelivered(t, second, r, "left")
		checkDeliveries(t, ds, "charge.succeeded", 1)
	})
	t.Run("LeaseExpired", func(t *testing.T) {
		t.Parallel()
		secrets := newSecrets(t, signing.NewSecret())
		// The first attempt hangs until released, as if its sender died.
		release := make(chan struct{})
		var releaseOnce sync.Once
		releaseAll := func() { releaseOnce.Do(func() { close(release) }) }
		r := newReceiver(t, secrets, func(w http.ResponseWriter, n int) {
			if n == 1 {
				<-release
				w.WriteHeader(http.StatusInternalServerError)
				return
			}
			w.WriteHeader(http.StatusOK)
		})
		db := testdb.New(t)
		first := newEnvOn(t, db, webhookConfig(r, secrets))
		stopFirst := first.sendWebhooks()
		t.Cleanup(releaseAll)
		first.charge("leased", "pm_card_visa")
		testwait.For(t, "the first attempt", func() bool { return len(r.all()) == 1 })
		id := first.eventsUnder(t, "leased")[0]
		if row := first.event(t, id); row.state != "pending" || row.attempts != 1 || row.nextAttempt == nil ||
			row.nextAttempt.Before(time.Now().Add(10*time.Second)) {
			t.Fatalf("claimed row = %+v", row)
		}

		// A processor whose clock is past the lease claims the event again.
		cfg := webhookConfig(r, secrets)
		cfg.Now = func() time.Time { return time.Now().Add(time.Minute) }
		second := newEnvOn(t, db, cfg)
		second.sendWebhooks()
		_, ds := waitDelivered(t, second, r, "leased")
		checkDeliveries(t, ds, "charge.succeeded", 2)

		// The first attempt now fails, too late: the second claim owns the
		// event, and its result stands.
		releaseAll()
		stopFirst()
		if row := first.event(t, id); row.state != "delivered" || row.attempts != 2 || row.lastError != nil {
			t.Errorf("row = %+v", row)
		}
	})
}

func TestWebhookChaos(t *testing.T) {
	t.Parallel()
	t.Run("DropAlways", func(t *testing.T) {
		t.Parallel()
		e, _ := newWebhookEnv(t, nil, func(cfg *fakeprocessor.Config) { cfg.Chaos.WebhookDropRate = 1 })
		e.charge("dropped", "pm_card_visa")
		ids := e.eventsUnder(t, "dropped")
		if len(ids) != 1 {
			t.Fatalf("events %v", ids)
		}
		if row := e.event(t, ids[0]); row.state != "dropped" || row.attempts != 0 || row.nextAttempt != nil {
			t.Errorf("row = %+v", row)
		}
	})
	t.Run("DropDrawn", func(t *testing.T) {
		t.Parallel()
		e, r := newWebhookEnv(t, nil, func(cfg *fakeprocessor.Config) {
			cfg.Chaos.WebhookDropRate, cfg.Chaos.Rand = 0.5, seq(0.2, 0.8)
		})
		e.charge("drawn", "pm_card_visa")
		e.charge("kept", "pm_card_visa")
		// The dropped event was due first: had it been pending, it would
		// have been sent no later than the kept one.
		waitDelivered(t, e, r, "kept")
		dropped := e.eventsUnder(t, "drawn")
		if len(dropped) != 1 || e.event(t, dropped[0]).state != "dropped" {
			t.Fatalf("events %v", dropped)
		}
		if n := len(r.byID(dropped[0])); n != 0 || len(r.all()) != 1 {
			t.Errorf("the dropped event was sent %d times; %d deliveries in all", n, len(r.all()))
		}
	})
	t.Run("Duplicate", func(t *testing.T) {
		t.Parallel()
		// Each copy waits for the other: they arrive together or not at all.
		both := make(chan struct{})
		var mu sync.Mutex
		arrived, together := 0, 0
		e, r := newWebhookEnv(t, func(w http.ResponseWriter, _ int) {
			mu.Lock()
			if arrived++; arrived == 2 {
				close(both)
			}
			mu.Unlock()
			select {
			case <-both:
				mu.Lock()
				together++
				mu.Unlock()
			case <-time.After(5 * time.Second):
			}
			w.WriteHeader(http.StatusOK)
		}, func(cfg *fakeprocessor.Config) { cfg.Chaos.WebhookDuplicateRate = 1 })
		e.charge("twice", "pm_card_visa")
		id, ds := waitDelivered(t, e, r, "twice")
		checkDeliveries(t, ds, "charge.succeeded", 2)
		if !bytes.Equal(ds[0].body, ds[1].body) || ds[0].header.Get(signing.HeaderSignature) != ds[1].header.Get(signing.HeaderSignature) {
			t.Errorf("the copies differ")
		}
		mu.Lock()
		if together != 2 {
			t.Errorf("%d copies saw the other arrive, want 2 (sent concurrently)", together)
		}
		mu.Unlock()
		if row := e.event(t, id); row.attempts != 1 {
			t.Errorf("row = %+v, want one attempt", row)
		}
	})
	t.Run("Delay", func(t *testing.T) {
		t.Parallel()
		e, r := newWebhookEnv(t, nil, func(cfg *fakeprocessor.Config) {
			// The first event is due 1.8s after it is made, the second at once.
			cfg.Chaos.WebhookDelay, cfg.Chaos.Rand = 2*time.Second, seq(0.9, 0)
		})
		e.charge("late", "pm_card_visa")
		e.charge("early", "pm_card_visa")
		lateID, late := waitDelivered(t, e, r, "late")
		_, early := waitDelivered(t, e, r, "early")
		if len(late) != 1 || len(early) != 1 {
			t.Fatalf("%d and %d deliveries", len(late), len(early))
		}
		if !early[0].at.Before(late[0].at) {
			t.Errorf("the delayed event arrived first")
		}
		if d := late[0].at.Sub(e.event(t, lateID).createdAt); d < 1800*time.Millisecond {
			t.Errorf("the delayed event arrived %v after it was made, want at least 1.8s", d)
		}
	})
}

// TestWebhookRotation checks that with two secrets configured, a receiver
// holding either one verifies.
func TestWebhookRotation(t *testing.T) {
	t.Parallel()
	old, current := signing.NewSecret(), signing.NewSecret()
	r := newReceiver(t, newSecrets(t, old), nil)
	e := newEnv(t, webhookConfig(r, newSecrets(t, old, current)))
	e.charge("rotated", "pm_card_visa")
	_, ds := waitDelivered(t, e, r, "rotated")
	checkDeliveries(t, ds, "charge.succeeded", 1) // with the old secret
	if _, err := newSecrets(t, current).Verify(ds[0].body, ds[0].header, time.Now()); err != nil {
		t.Errorf("the current secret does not verify: %v", err)
	}
	if _, err := newSecrets(t, signing.NewSecret()).Verify(ds[0].body, ds[0].header, time.Now()); err == nil {
		t.Errorf("another secret verifies")
	}
}

func TestNewRejectsBadWebhooks(t *testing.T) {
	t.Parallel()
	secrets := newSecrets(t, signing.NewSecret())
	wantRefused(t, []badConfig{
		{"ErrNoSecret", fakeprocessor.Config{Webhooks: fakeprocessor.Webhooks{URL: "http://127.0.0.1:1/webhooks"}}},
		{"ErrURL", fakeprocessor.Config{Webhooks: fakeprocessor.Webhooks{URL: "127.0.0.1:1/webhooks", Secrets: secrets}}},
		{"ErrRetryHorizon", fakeprocessor.Config{Webhooks: fakeprocessor.Webhooks{URL: "http://h/", Secrets: secrets, RetryHorizon: -time.Second}}},
		{"ErrPollInterval", fakeprocessor.Config{Webhooks: fakeprocessor.Webhooks{URL: "http://h/", Secrets: secrets, PollInterval: -time.Second}}},
		{"ErrRetryBackoff", fakeprocessor.Config{Webhooks: fakeprocessor.Webhooks{URL: "http://h/", Secrets: secrets, RetryBackoff: -time.Second}}},
		{"ErrDropRate", fakeprocessor.Config{Chaos: fakeprocessor.Chaos{WebhookDropRate: 1.1}}},
		{"ErrDuplicateRate", fakeprocessor.Config{Chaos: fakeprocessor.Chaos{WebhookDuplicateRate: -0.1}}},
		{"ErrDelay", fakeprocessor.Config{Chaos: fakeprocessor.Chaos{WebhookDelay: -time.Second}}},
	})
}
