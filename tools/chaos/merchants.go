package chaos

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// receiverSchedule is the endpoints' retry schedule in a run: short enough
// for every delivery to end within the quiescence bound (about two
// minutes), long enough to outlast the receiver's outage, its kills (each
// restart fails every event's first delivery again) and its failures.
const receiverSchedule = "200ms,500ms,1s,2s,4s,8s,15s,30s,30s,30s"

// startReceiver registers a webhook endpoint for every event of each tenant,
// at one receiver, and starts that receiver (the cmd/receiver program) with
// their secrets. It fails the first delivery of each event and answers
// after a random delay of up to 200 ms; the killer SIGKILLs it like the
// others, and receiverOutage takes it down for a while.
func (s *stack) startReceiver(ctx context.Context) error {
	addr, err := freePort()
	if err != nil {
		return err
	}
	url := "http://" + addr + "/webhooks"
	var secrets []string
	client := &http.Client{Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()
	for _, tenant := range tenants {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.apiURLs[0]+"/v1/webhook_endpoints",
			strings.NewReader(`{"url":"`+url+`","enabled_events":["*"]}`))
		if err != nil {
			return err
		}
		req.Header.Set("Authorization", "Bearer "+tenant.apiKey)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", "chaos-endpoint")
		res, err := client.Do(req)
		if err != nil {
			return fmt.Errorf("register an endpoint: %w", err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		var e struct{ Secret string }
		if err := json.Unmarshal(body, &e); err != nil || res.StatusCode != http.StatusCreated || e.Secret == "" {
			return fmt.Errorf("register an endpoint: %d %s", res.StatusCode, body)
		}
		secrets = append(secrets, e.Secret)
	}
	s.receiverSeen = filepath.Join(s.cfg.Logs, "receiver-seen.log")
	s.receiver, err = newProc("receiver", "receiver", filepath.Join(s.cfg.Bin, "demoreceiver"), s.cfg.Logs, "http://"+addr+"/healthz",
		[]string{"LOG_FORMAT=json", "RECEIVER_ADDR=" + addr, "RECEIVER_PATH=/webhooks", "RECEIVER_SECRET=" + strings.Join(secrets, ","),
			"RECEIVER_DEDUPE_FILE=" + s.receiverSeen, "RECEIVER_FAIL_FIRST=1", "RECEIVER_DELAY=200ms"})
	if err != nil {
		return err
	}
	s.kills["receiver"] = new(atomic.Int64)
	s.procs = append(s.procs, s.receiver)
	return s.receiver.start(ctx)
}

// receiverOutage takes the receiver down for ten seconds at two thirds of
// the load: deliveries meanwhile fail and are retried on the schedule.
func (s *stack) receiverOutage(ctx context.Context) {
	select {
	case <-ctx.Done():
		return
	case <-time.After(2 * s.cfg.Profile.Load / 3):
	}
	s.receiver.kill()
	s.receiverDown.Add(1)
	sleep(ctx, 10*time.Second)
	if err := s.receiver.start(context.WithoutCancel(ctx)); err != nil {
		fmt.Fprintf(s.receiver.log, "=== chaos: restart failed: %v\n", err)
	}
}

// checkMerchantWebhooks lists what breaks "every event delivered to the
// endpoint that wants it, verified, processed exactly once, and nothing
// delivered that was not committed": each event of the run must have one
// delivered delivery, and the receiver's durable record of the events it
// verified and processed must hold each event exactly once, and only
// events the database has.
func checkMerchantWebhooks(ctx context.Context, pool *pgxpool.Pool, seenFile string) ([]string, error) {
	rows, err := pool.Query(ctx, `
SELECT e.id || ': ' || count(d.id) || ' deliveries, ' || count(d.id) FILTER (WHERE d.status = 'delivered') || ' delivered'
FROM events e LEFT JOIN webhook_deliveries d ON d.event_id = e.id
GROUP BY e.id HAVING count(d.id) <> 1 OR count(d.id) FILTER (WHERE d.status = 'delivered') <> 1`)
	if err != nil {
		return nil, err
	}
	bad, err := pgx.CollectRows(rows, pgx.RowTo[string])
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
	rows, err = pool.Query(ctx, `SELECT id FROM events`)
	if err != nil {
		return nil, err
	}
	events, err := pgx.CollectRows(rows, pgx.RowTo[string])
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
