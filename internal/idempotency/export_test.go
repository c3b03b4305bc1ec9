package idempotency

// Waiting returns how many waiters are subscribed to key id.
func (l *Listener) Waiting(id int64) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.waiters[id])
}

// Payloads is payloads, for its test.
var Payloads = payloads

// DecodeHeaders and PlainHeaders are decodeHeaders and its fast path, for
// their tests.
var (
	DecodeHeaders = decodeHeaders
	PlainHeaders  = plainHeaders
)
