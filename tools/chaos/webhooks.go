package chaos

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/example/payments/internal/signing"
)

// injectedPrefix starts the id of every processor event the run forges on
// purpose; the invariants allow these, and only these, in review.
const injectedPrefix = "evt_chaos_"

// injector sends the APIs processor webhooks that must not settle anything:
// correctly signed events that contradict a settled payment (they must go to
// review), signed events naming no operation (review too), and deliveries
// forged with another secret or replayed past the tolerance (they must be
// refused 400 and change nothing).
type injector struct {
	apiURLs [2]string
	// signer signs as the processor does, forger as another would; event is
	// the processor's event about a charge.
	signer, forger signer
	event          func(id, chargeID, paymentID string, amount int64, succeeded bool) string
	pool           *pgxpool.Pool
	rng            *rand.Rand
	client         *http.Client

	contradictions, unknown, refused atomic.Int64
	mu                               sync.Mutex
	wrong                            []string // answers other than the contract's
	seq                              int
}

// run injects a few deliveries every two seconds until ctx ends.
func (in *injector) run(ctx context.Context) {
	defer in.client.CloseIdleConnections()
	for ctx.Err() == nil {
		sleep(ctx, 2*time.Second)
		var paymentID, chargeID string
		var amount int64
		err := in.pool.QueryRow(ctx, `
SELECT id, processor_charge_id, amount FROM payments
WHERE status = 'succeeded' AND processor_charge_id IS NOT NULL
ORDER BY created_at DESC LIMIT 1`).Scan(&paymentID, &chargeID, &amount)
		if err != nil {
			continue // none yet
		}
		in.seq++
		n := in.seq
		contradicting := in.event(fmt.Sprintf("%s%d_contradiction", injectedPrefix, n), chargeID, paymentID, amount, false)
		if in.deliver(ctx, contradicting, in.signer, time.Now(), http.StatusOK, `"accepted"`) {
			in.contradictions.Add(1)
		}
		unknown := in.event(fmt.Sprintf("%s%d_unknown", injectedPrefix, n), "ch_chaos", "pay_"+strings.Repeat("0", 24), 100, true)
		if in.deliver(ctx, unknown, in.signer, time.Now(), http.StatusOK, `"unknown_operation"`) {
			in.unknown.Add(1)
		}
		forged := in.event(fmt.Sprintf("%s%d_forged", injectedPrefix, n), chargeID, paymentID, amount, false)
		if in.deliver(ctx, forged, in.forger, time.Now(), http.StatusBadRequest, "webhook_signature_invalid") {
			in.refused.Add(1)
		}
		if in.deliver(ctx, forged, in.signer, time.Now().Add(-in.signer.staleBy()), http.StatusBadRequest, "webhook_signature_invalid") {
			in.refused.Add(1)
		}
	}
}

// signer signs a processor's webhook.
type signer interface {
	// sign signs body, event id's, at at, in h.
	sign(h http.Header, id string, at time.Time, body []byte) error
	// staleBy is how long before now a delivery signed is stale.
	staleBy() time.Duration
}

// standardSigner signs as the fake processor does: Standard Webhooks.
type standardSigner struct{ secrets signing.Secrets }

func (s standardSigner) sign(h http.Header, id string, at time.Time, body []byte) error {
	return s.secrets.Sign(h, id, at, body)
}

func (standardSigner) staleBy() time.Duration { return signing.Tolerance + time.Minute }

// fakeEvent is the fake processor's event about a charge.
func fakeEvent(id, chargeID, paymentID string, amount int64, succeeded bool) string {
	if succeeded {
		return chargeEvent(id, "charge.succeeded", chargeID, paymentID, amount, "succeeded")
	}
	return chargeEvent(id, "charge.failed", chargeID, paymentID, amount, "failed")
}

// chargeEvent is a processor event about a charge, as the processor sends it.
func chargeEvent(id, typ, chargeID, paymentID string, amount int64, status string) string {
	failure := "null"
	if status == "failed" {
		failure = `"card_declined"`
	}
	return fmt.Sprintf(`{"id":%q,"type":%q,"created":%d,"data":{"object":{"id":%q,"object":"charge","amount":%d,"currency":"USD",`+
		`"payment_method":"pm_card_visa","payment_id":%q,"description":null,"status":%q,"failure_code":%s,"failure_message":null,`+
		`"amount_refunded":0,"idempotency_key":"charge_%s","created_at":%q}}}`,
		id, typ, time.Now().Unix(), chargeID, amount, paymentID, status, failure, paymentID, time.Now().UTC().Format(time.RFC3339))
}

// deliver posts body, signed by signer at at, to a random API until one
// answers (the APIs are killed too), and reports whether the answer was
// status with want in its body; another answer is a violation.
func (in *injector) deliver(ctx context.Context, body string, signer signer, at time.Time, status int, want string) bool {
	id := body[strings.Index(body, `"id":"`)+6:]
	id = id[:strings.IndexByte(id, '"')]
	for ctx.Err() == nil {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, in.apiURLs[in.rng.IntN(2)]+"/v1/processor/webhooks", strings.NewReader(body))
		if err != nil {
			return false
		}
		req.Header.Set("Content-Type", "application/json")
		if err := signer.sign(req.Header, id, at, []byte(body)); err != nil {
			return false
		}
		res, err := in.client.Do(req)
		if err != nil {
			sleep(ctx, 100*time.Millisecond)
			continue
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode == http.StatusServiceUnavailable {
			sleep(ctx, 100*time.Millisecond)
			continue
		}
		if res.StatusCode != status || !strings.Contains(string(b), want) {
			// A contradiction delivered twice (a retry after a cut answer)
			// is a duplicate: the first delivery was recorded.
			if !(status == http.StatusOK && strings.Contains(string(b), `"duplicate"`)) {
				in.mu.Lock()
				in.wrong = append(in.wrong, fmt.Sprintf("%s: %d %s, want %d %s", id, res.StatusCode, b, status, want))
				in.mu.Unlock()
				return false
			}
		}
		return true
	}
	return false
}
