package e2e

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/example/payments/tools/stacktest"
	"github.com/example/payments/tools/testdb"
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

	s := &stack{t: t, db: "DATABASE_URL=" + db.URL, procAddr: freeAddr(t), apiAddr: freeAddr(t)}
	s.apiURL, s.processorURL = "http://"+s.apiAddr, "http://"+s.procAddr
	s.processor = start(t, "fakeprocessor", []string{s.db, "PROCESSOR_ADDR=" + s.procAddr, "PROCESSOR_INTERNAL_ADDR=127.0.0.1:0"})
	waitHealthy(t, s.processorURL+"/healthz", s.processor)
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
	deadline := time.Now().Add(20 * time.Second)
	for {
		status, _, body = do(t, http.MethodPost, s.apiURL+"/v1/payments", "sk_test_acme", "down-1", crashBody)
		if status == http.StatusCreated {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the database came back: %d %s", status, body)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
