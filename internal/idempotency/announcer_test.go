package idempotency_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/example/payments/internal/idempotency"
)

// TestPayloadsFitANotification: any number of ids is sent whole, every
// notification under Postgres's 8000-byte limit.
func TestPayloadsFitANotification(t *testing.T) {
	t.Parallel()
	var ids []int64
	var want []string
	for i := range int64(5000) {
		ids = append(ids, 1_000_000_000+i)
		want = append(want, strconv.FormatInt(1_000_000_000+i, 10))
	}
	payloads := idempotency.Payloads(ids)
	if len(payloads) < 2 {
		t.Fatalf("%d payloads for 5000 ids", len(payloads))
	}
	for _, p := range payloads {
		if len(p) >= 8000 {
			t.Fatalf("payload of %d bytes", len(p))
		}
	}
	if got := strings.Join(payloads, ","); got != strings.Join(want, ",") {
		t.Fatal("the payloads do not carry every id once, in order")
	}
	if got := idempotency.Payloads(nil); len(got) != 0 {
		t.Fatalf("payloads of no ids: %q", got)
	}
}
