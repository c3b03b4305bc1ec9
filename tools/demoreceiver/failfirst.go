package demoreceiver

import (
	"bufio"
	"fmt"
	"os"
)

// failLog counts the deliveries of each event refused on purpose
// (RECEIVER_FAIL_FIRST), in a file beside the dedupe file, one id a line,
// so that a restart does not refuse an event again: with the process killed
// often (make chaos), every retry could otherwise land on a fresh process
// and be refused until the sender's schedule is spent. A line lost in a
// crash only refuses that delivery once more. Not safe for concurrent use:
// the Receiver's mutex guards it.
type failLog struct {
	f      *os.File
	counts map[string]int
}

// openFailLog opens the file at path, creating it, and loads its counts.
func openFailLog(path string) (*failLog, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open fail-first file: %w", err)
	}
	l := &failLog{f: f, counts: map[string]int{}}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if id := sc.Text(); id != "" {
			l.counts[id]++
		}
	}
	if err := sc.Err(); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("read fail-first file: %w", err)
	}
	return l, nil
}

// failed counts a delivery of id refused on purpose.
func (l *failLog) failed(id string) {
	l.counts[id]++
	_, _ = l.f.WriteString(id + "\n")
}

func (l *failLog) close() error { return l.f.Close() }
