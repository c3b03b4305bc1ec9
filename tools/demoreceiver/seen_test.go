package demoreceiver_test

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/example/payments/internal/signing"
	"github.com/example/payments/tools/demoreceiver"
)

// TestConcurrentDuplicates: deliveries of one event at once are processed
// once, and all answered 200. Each verified delivery waits for the others
// just before its id is checked, so that all of them are checked at the
// same moment.
func TestConcurrentDuplicates(t *testing.T) {
	t.Parallel()
	const n = 20
	var (
		mu      sync.Mutex
		arrived int
		all     = make(chan struct{})
	)
	barrier := func() {
		mu.Lock()
		if arrived++; arrived == n {
			close(all)
		}
		mu.Unlock()
		select {
		case <-all:
		case <-time.After(20 * time.Second): // a delivery never came; the counts below fail
		}
	}
	e := start(t, testConfig(t, signing.NewSecret()), func(rc *demoreceiver.Receiver) { demoreceiver.SetBeforeRecord(rc, barrier) })
	body := eventBody("evt_race")
	h := signed(t, e.cfg.Secret, "evt_race", time.Now(), body)
	answers := make([]string, n)
	statuses := make([]int, n)
	begin := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-begin
			statuses[i], answers[i] = e.post(h.Clone(), body)
		})
	}
	close(begin)
	wg.Wait()
	fresh := 0
	for i := range n {
		if statuses[i] != http.StatusOK {
			t.Errorf("delivery %d: %d %s", i, statuses[i], answers[i])
		}
		if answers[i] == accepted {
			fresh++
		}
	}
	if fresh != 1 {
		t.Errorf("%d deliveries answered as new, want 1", fresh)
	}
	if got := e.printed("evt_race"); got != 1 {
		t.Errorf("printed %d times:\n%s", got, e.out)
	}
	if got := e.recorded(); got != "evt_race\n" {
		t.Errorf("dedupe file = %q", got)
	}
}

// TestDurable: a receiver started on the dedupe file of one that stopped
// knows the events that one processed.
func TestDurable(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, signing.NewSecret())
	first := start(t, cfg)
	if status, _ := first.deliver("evt_before"); status != http.StatusOK {
		t.Fatalf("first receiver: %d", status)
	}
	first.stop()

	second := start(t, cfg)
	if got := second.rcv.Seen(); got != 1 {
		t.Fatalf("the second receiver loaded %d ids", got)
	}
	if status, answer := second.deliver("evt_before"); status != http.StatusOK || answer != duplicate {
		t.Fatalf("redelivery after the restart: %d %s", status, answer)
	}
	second.wantProcessed("evt_after", "evt_before\nevt_after\n")
}

// TestTornLastLine: a last line without its newline, an append a crash
// cut short before it was synced, is dropped rather than read as an id or
// glued to the next one.
func TestTornLastLine(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, signing.NewSecret())
	if err := os.WriteFile(cfg.DedupeFile, []byte("evt_whole\nevt_to"), 0o600); err != nil {
		t.Fatal(err)
	}
	e := start(t, cfg)
	if got := e.rcv.Seen(); got != 1 {
		t.Fatalf("loaded %d ids, want 1", got)
	}
	if status, answer := e.deliver("evt_torn"); status != http.StatusOK || answer != accepted {
		t.Fatalf("delivery: %d %s", status, answer)
	}
	if got := e.recorded(); got != "evt_whole\nevt_torn\n" {
		t.Fatalf("dedupe file = %q", got)
	}
}

// fileChecker is a stdout that, when an event is printed, reads the dedupe
// file to see whether the event was recorded first.
type fileChecker struct {
	path string
	mu   sync.Mutex
	// recordedFirst is the dedupe file's content when each line was printed.
	recordedFirst []string
}

func (f *fileChecker) Write(p []byte) (int, error) {
	data, err := os.ReadFile(f.path)
	if err != nil {
		return 0, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.recordedFirst = append(f.recordedFirst, string(data))
	return len(p), nil
}

// TestRecordedBeforeProcessed: the event id is in the dedupe file before
// the event is processed, so that a crash after processing, before the
// answer, brings a retry that is known for a duplicate.
func TestRecordedBeforeProcessed(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, signing.NewSecret())
	out := &fileChecker{path: cfg.DedupeFile}
	rcv, err := demoreceiver.New(cfg, slog.New(slog.NewTextHandler(t.Output(), nil)), out)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, cfg: cfg, rcv: rcv, srv: httptest.NewServer(rcv)}
	t.Cleanup(e.stop)
	if status, answer := e.deliver("evt_order"); status != http.StatusOK {
		t.Fatalf("delivery: %d %s", status, answer)
	}
	out.mu.Lock()
	defer out.mu.Unlock()
	if len(out.recordedFirst) != 1 || out.recordedFirst[0] != "evt_order\n" {
		t.Fatalf("the dedupe file when the event was printed: %q", out.recordedFirst)
	}
}
