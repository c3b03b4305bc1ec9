package webhooks

import (
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/example/payments/tools/testdb"
)

// TestHealthEndsAFailingRun: a 2xx ends the endpoint's run of failures even
// within a minute of the last 2xx recorded, so that one more failure, long
// after, starts a new run instead of disabling a healthy endpoint (2xx,
// failure, 2xx, then a failure past DisableAfter).
func TestHealthEndsAFailingRun(t *testing.T) {
	t.Parallel()
	db := testdb.New(t, testdb.DemoTenants)
	db.Exec(t, insertEndpoint, "we_blip", "ten_acme", "https://merchant.example/hooks", []string{"*"}, "", time.Now())
	disableAfter := 5 * time.Second
	fails := func() (disabled bool) {
		t.Helper()
		err := db.Pool.QueryRow(t.Context(), failing, "we_blip", disableAfter).Scan(&disabled)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) { // no row: the failure wrote nothing
			t.Fatal(err)
		}
		return disabled
	}

	db.Exec(t, healthy, "we_blip")
	if fails() {
		t.Fatal("disabled by the first failure")
	}
	db.Exec(t, healthy, "we_blip") // within the minute of the first 2xx
	// Time passes: both marks move back past DisableAfter, in their order.
	db.Exec(t, `UPDATE webhook_endpoints SET last_success_at = last_success_at - interval '1 hour',
		failing_since = failing_since - interval '1 hour' WHERE id = 'we_blip'`)
	if fails() {
		t.Fatal("a failure an hour after a 2xx disabled the endpoint: the 2xx did not end the run of failures")
	}
	if n := db.Count(t, `SELECT count(*) FROM webhook_endpoints WHERE id = 'we_blip' AND status = 'enabled'`); n != 1 {
		t.Fatalf("endpoint enabled: %d rows", n)
	}

	// A run that does last DisableAfter with no 2xx still disables it.
	db.Exec(t, `UPDATE webhook_endpoints SET failing_since = failing_since - interval '1 minute' WHERE id = 'we_blip'`)
	if !fails() {
		t.Fatal("a run of failures past DisableAfter did not disable the endpoint")
	}
}
