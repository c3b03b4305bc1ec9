package e2e

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/example/payments/tools/stacktest"
	"github.com/example/payments/tools/testdb"
	"github.com/example/payments/tools/testwait"
)

// TestAPIStartsWithoutDatabase starts the api binary while its database is
// unreachable: it serves /healthz, fails closed with 503, and serves payments
// once the database is back, without a restart.
func TestAPIStartsWithoutDatabase(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	run(t, "api", []string{"DATABASE_URL=" + db.URL, "APP_ENV=development"}, "seed")
	u, err := url.Parse(db.URL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := stacktest.NewProxy(t, u.Host)
	proxy.Cut()
	u.Host = proxy.Addr()

	s := newStack(t, db.URL)
	s.startProcessor()
	s.startWorker()
	s.api = start(t, "api", append([]string{"DATABASE_URL=" + u.String(), "API_ADDR=" + s.apiAddr, internalAddr}, webhooksEnv...))
	waitHealthy(t, s.apiURL+"/healthz", s.api)

	if status, _, _ := do(t, http.MethodGet, s.apiURL+"/readyz", "", "", ""); status != http.StatusServiceUnavailable {
		t.Fatalf("/readyz with the database down: %d", status)
	}
	status, header, body := do(t, http.MethodPost, s.apiURL+"/v1/payments", "sk_test_acme", "down-1", crashBody)
	if status != http.StatusServiceUnavailable || header.Get("Retry-After") == "" || !strings.Contains(string(body), "service_unavailable") {
		t.Fatalf("payment with the database down: %d %s", status, body)
	}

	proxy.Restore()
	waitHealthy(t, s.apiURL+"/readyz", s.api)
	testwait.Poll(t, time.Now().Add(20*time.Second), 100*time.Millisecond, func() error {
		status, _, body := do(t, http.MethodPost, s.apiURL+"/v1/payments", "sk_test_acme", "down-1", crashBody)
		if status == http.StatusCreated {
			return nil
		}
		return fmt.Errorf("after the database came back: %d %s", status, body)
	})
}
