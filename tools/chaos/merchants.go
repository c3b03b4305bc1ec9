package chaos

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// receiverSchedule is the endpoints' retry schedule in a run: short enough
// for every delivery to end within the quiescence bound (about two
// minutes), long enough to outlast the receiver's outage, its kills (each
// restart fails every event's first delivery again) and its failures.
const receiverSchedule = "200ms,500ms,1s,2s,4s,8s,15s,30s,30s,30s"

// startReceiver registers a webhook endpoint for every event of each tenant
// of the load (the tarpit tenant has endpoints of its own, tarpit.go), at
// one receiver, and starts that receiver (the cmd/receiver program) with
// their secrets. It fails the first delivery of each event and answers
// after a random delay of up to receiverDelay; the killer SIGKILLs it like
// the others, and receiverOutage takes it down for a while.
func (s *stack) startReceiver(ctx context.Context) error {
	addr, err := freePort()
	if err != nil {
		return err
	}
	url := "http://" + addr + "/webhooks"
	var secrets []string
	client := &http.Client{Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()
	for _, tenant := range tenants[:tarpitTenant] {
		secret, err := registerEndpoint(ctx, client, s.apiURLs[0], tenant.apiKey, url, "chaos-endpoint")
		if err != nil {
			return err
		}
		secrets = append(secrets, secret)
	}
	s.receiverSeen = filepath.Join(s.cfg.Logs, "receiver-seen.log")
	s.receiver, err = newProc("receiver", "receiver", filepath.Join(s.cfg.Bin, "demoreceiver"), s.cfg.Logs, "http://"+addr+"/healthz",
		[]string{"LOG_FORMAT=json", "RECEIVER_ADDR=" + addr, "RECEIVER_PATH=/webhooks", "RECEIVER_SECRET=" + strings.Join(secrets, ","),
			"RECEIVER_DEDUPE_FILE=" + s.receiverSeen, "RECEIVER_FAIL_FIRST=1", "RECEIVER_DELAY=" + receiverDelay.String()})
	if err != nil {
		return err
	}
	s.kills["receiver"] = new(atomic.Int64)
	s.procs = append(s.procs, s.receiver)
	return s.receiver.start(ctx)
}

// receiverDelay bounds the receiver's random wait before it answers. The
// load asks of each tenant's one endpoint every event twice (its first
// delivery refused): with WEBHOOK_ENDPOINT_IN_FLIGHT (8) attempts at once,
// each freed place taken by the next delivery in line as soon as it frees,
// the endpoint keeps up.
const receiverDelay = 50 * time.Millisecond

// receiverOutage takes the receiver down for ten seconds at two thirds of
// the load: deliveries meanwhile fail and are retried on the schedule. The
// killer leaves the receiver alone meanwhile.
func (s *stack) receiverOutage(ctx context.Context) {
	select {
	case <-ctx.Done():
		return
	case <-time.After(2 * s.cfg.Profile.Load / 3):
	}
	s.receiver.turn.Lock()
	defer s.receiver.turn.Unlock()
	from := time.Now()
	s.receiver.kill()
	s.receiverDown.Add(1)
	sleep(ctx, 10*time.Second)
	if err := s.receiver.start(context.WithoutCancel(ctx)); err != nil {
		fmt.Fprintf(s.receiver.log, "=== chaos: restart failed: %v\n", err)
	}
	s.downs.add(down{window: window{from, time.Now()}})
}

// checkMerchantWebhooks lists what breaks "every event delivered to the
// endpoint that wants it, verified, processed exactly once, and nothing
// delivered that was not committed": each event of the run's tenants but
// the tarpit must have one delivered delivery, and the receiver's durable
// record of the events it verified and processed must hold each event
// exactly once, and only events the database has.
func checkMerchantWebhooks(ctx context.Context, pool *pgxpool.Pool, seenFile string) ([]string, error) {
	bad, err := queryStrings(ctx, pool, `
SELECT e.id || ': ' || count(d.id) || ' deliveries, ' || count(d.id) FILTER (WHERE d.status = 'delivered') || ' delivered'
FROM events e LEFT JOIN webhook_deliveries d ON d.event_id = e.id
WHERE e.tenant_id <> $1
GROUP BY e.id HAVING count(d.id) <> 1 OR count(d.id) FILTER (WHERE d.status = 'delivered') <> 1`, tarpitTenantID)
	if err != nil {
		return nil, err
	}
	seen := map[string]int{}
	f, err := os.Open(seenFile)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if id := strings.TrimSpace(sc.Text()); id != "" {
			seen[id]++
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	events, err := queryStrings(ctx, pool, `SELECT id FROM events WHERE tenant_id <> $1`, tarpitTenantID)
	if err != nil {
		return nil, err
	}
	committed := map[string]bool{}
	for _, id := range events {
		committed[id] = true
		if seen[id] != 1 {
			bad = append(bad, fmt.Sprintf("%s processed %d times by the receiver", id, seen[id]))
		}
	}
	for id, n := range seen {
		if !committed[id] {
			bad = append(bad, fmt.Sprintf("the receiver processed %s (%d times), which no committed change made", id, n))
		}
	}
	return bad, nil
}
