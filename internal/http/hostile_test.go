package http_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	httpapi "github.com/example/payments/internal/http"
	"github.com/example/payments/internal/idempotency"
	"github.com/example/payments/tools/stacktest"
)

// Each test here is one class of hostile input that once got a wrong answer.
// Every one of them must get a clear 4xx and change nothing.

// unchanged fails the test if anything was written: no key, no payment.
func unchanged(t *testing.T, s *stacktest.Stack) {
	t.Helper()
	if n := s.Count(`SELECT (SELECT count(*) FROM idempotency_keys) + (SELECT count(*) FROM payments)`); n != 0 {
		t.Fatalf("%d rows written by a refused request", n)
	}
}

// TestTruncatedBodyIsTheClients: a body cut short is the client's error,
// never reported as a database outage.
func TestTruncatedBodyIsTheClients(t *testing.T) {
	t.Parallel()
	s := stacktest.New(t, stacktest.Options{})
	u, _ := url.Parse(s.API.URL)
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// Content-Length promises more than is sent; then the client stops sending.
	_, err = io.WriteString(conn, "POST /v1/payments HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "+acme+
		"\r\nIdempotency-Key: cut\r\nContent-Type: application/json\r\nContent-Length: 500\r\n\r\n{\"amount\": 100")
	if err != nil {
		t.Fatal(err)
	}
	if err := conn.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	if err := conn.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), `"code":"invalid_request"`) {
		t.Fatalf("truncated body: %d %s", res.StatusCode, body)
	}
	unchanged(t, s)
}

// TestUnstorableText: a NUL character, which Postgres cannot store, is
// refused by validation in every text field, naming the field.
func TestUnstorableText(t *testing.T) {
	t.Parallel()
	s := stacktest.New(t, stacktest.Options{})
	for name, body := range map[string]string{
		"description":    `{"amount": 100, "currency": "USD", "payment_method": "pm_card_visa", "description": "a\u0000b"}`,
		"metadata.order": `{"amount": 100, "currency": "USD", "payment_method": "pm_card_visa", "metadata": {"order": "4\u00002"}}`,
		"metadata":       `{"amount": 100, "currency": "USD", "payment_method": "pm_card_visa", "metadata": {"o\u0000": "42"}}`,
	} {
		res := s.Pay(acme, "nul-"+name, body)
		if res.Status != http.StatusBadRequest || !strings.Contains(string(res.Body), `"field":"`+name+`"`) {
			t.Errorf("%s: %d %s", name, res.Status, res.Body)
		}
	}
	unchanged(t, s)
}

// TestMalformedIDs: ids are checked for shape before any query, so a NUL or
// invalid UTF-8 in a path id or a cursor is 404, never a 500.
func TestMalformedIDs(t *testing.T) {
	t.Parallel()
	s := stacktest.New(t, stacktest.Options{})
	for _, path := range []string{
		"/v1/payments/pay_%00", "/v1/payments/%ff", "/v1/payments?starting_after=%00", "/v1/payments?starting_after=%ff",
		"/v1/refunds/re_%00", "/v1/refunds/%ff%fe", "/v1/events?starting_after=evt_%00", "/v1/events?starting_after=%ff",
	} {
		if res := s.Request(http.MethodGet, path, acme, ""); res.Status != http.StatusNotFound {
			t.Errorf("GET %s: %d %s", path, res.Status, res.Body)
		}
	}
	res := s.Request(http.MethodPost, "/v1/payments/%ff/refunds", acme, "", "Idempotency-Key", "bad-id")
	if res.Status != http.StatusNotFound {
		t.Errorf("refund of a malformed id: %d %s", res.Status, res.Body)
	}
	unchanged(t, s)
}

// TestKeyInspectionDecodesOnce: keys pA and p%41 are two keys, and each is
// inspected as itself.
func TestKeyInspectionDecodesOnce(t *testing.T) {
	t.Parallel()
	s := stacktest.New(t, stacktest.Options{})
	for _, key := range []string{"pA", "p%41"} {
		if res := s.Pay(acme, key, visa, "Prefer", "respond-async"); res.Status != http.StatusAccepted {
			t.Fatalf("%s: %d %s", key, res.Status, res.Body)
		}
	}
	for path, want := range map[string]string{
		"/v1/idempotency-keys/pA": "pA", "/v1/idempotency-keys/p%41": "pA", "/v1/idempotency-keys/p%2541": "p%41",
	} {
		res := s.Request(http.MethodGet, path, acme, "")
		if res.Status != http.StatusOK || decodeProblem(t, res.Body)["key"] != want {
			t.Errorf("GET %s: %d %s, want key %q", path, res.Status, res.Body, want)
		}
	}
}

// TestAuthorizationHeader: the Bearer scheme in any case (RFC 9110); two
// Authorization lines are ambiguous and refused.
func TestAuthorizationHeader(t *testing.T) {
	t.Parallel()
	s := stacktest.New(t, stacktest.Options{})
	do := func(values ...string) int {
		req, _ := http.NewRequest(http.MethodGet, s.API.URL+"/v1/payments", nil)
		for _, v := range values {
			req.Header.Add("Authorization", v)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	if got := do("bearer " + acme); got != http.StatusOK {
		t.Errorf("lower-case scheme: %d", got)
	}
	if got := do("BEARER " + acme); got != http.StatusOK {
		t.Errorf("upper-case scheme: %d", got)
	}
	if got := do("Bearer "+acme, "Bearer "+stacktest.Globex); got != http.StatusUnauthorized {
		t.Errorf("two headers: %d", got)
	}
	if got := do("Basic " + acme); got != http.StatusUnauthorized {
		t.Errorf("another scheme: %d", got)
	}
}

// TestCurrencyIsMoney: only tender currencies in use are charged.
func TestCurrencyIsMoney(t *testing.T) {
	t.Parallel()
	s := stacktest.New(t, stacktest.Options{})
	for _, code := range []string{"XXX", "XTS", "XAU", "XAG", "XDR", "USN", "DEM"} {
		res := s.Pay(acme, "cur-"+code, `{"amount": 100, "currency": "`+code+`", "payment_method": "pm_card_visa"}`)
		if res.Status != http.StatusBadRequest || !strings.Contains(string(res.Body), `"field":"currency"`) {
			t.Errorf("%s: %d %s", code, res.Status, res.Body)
		}
	}
	unchanged(t, s)
	for _, code := range []string{"USD", "eur", "XAF", "JPY"} {
		res := s.Pay(acme, "cur-"+code, `{"amount": 100, "currency": "`+code+`", "payment_method": "pm_card_visa"}`, "Prefer", "respond-async")
		if res.Status != http.StatusAccepted {
			t.Errorf("%s: %d %s", code, res.Status, res.Body)
		}
	}
}

// TestNullMetadataValue is refused, not stored as "".
func TestNullMetadataValue(t *testing.T) {
	t.Parallel()
	s := stacktest.New(t, stacktest.Options{})
	res := s.Pay(acme, "null-meta", `{"amount": 100, "currency": "USD", "payment_method": "pm_card_visa", "metadata": {"order": null}}`)
	if res.Status != http.StatusBadRequest || !strings.Contains(string(res.Body), `"field":"metadata.order"`) {
		t.Fatalf("null value: %d %s", res.Status, res.Body)
	}
	unchanged(t, s)
}

// TestHugePreferWait asks for the longest wait, never (by overflow) for none.
func TestHugePreferWait(t *testing.T) {
	t.Parallel()
	s := stacktest.New(t, stacktest.Options{})
	s.StartWorker()
	res := s.Pay(acme, "huge-wait", visa, "Prefer", "wait=99999999999999999999")
	if res.Status != http.StatusCreated {
		t.Fatalf("wait=huge: %d %s", res.Status, res.Body)
	}
	res = s.Pay(acme, "overflow-wait", visa, "Prefer", "wait=9223372036")
	if res.Status != http.StatusCreated {
		t.Fatalf("wait=2^63 ns: %d %s", res.Status, res.Body)
	}
}

// chunked is a body the client cannot size, so it is sent chunked.
type chunked struct{ io.Reader }

// TestEmptyRefundBody: no body, a zero-length chunked body and {} are the
// same refund request under the same key.
func TestEmptyRefundBody(t *testing.T) {
	t.Parallel()
	s := stacktest.New(t, stacktest.Options{})
	s.StartWorker()
	p := decodePayment(t, s.Pay(acme, "paid", visa).Body)
	send := func(body io.Reader, contentType string) (int, string) {
		req, _ := http.NewRequest(http.MethodPost, s.API.URL+"/v1/payments/"+p.ID+"/refunds", body)
		req.Header.Set("Authorization", "Bearer "+acme)
		req.Header.Set("Idempotency-Key", "same-refund")
		if contentType != "" {
			req.Header.Set("Content-Type", contentType)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	first, body := send(nil, "")
	if first != http.StatusCreated {
		t.Fatalf("no body: %d %s", first, body)
	}
	if got, body := send(chunked{strings.NewReader("")}, ""); got != first {
		t.Errorf("zero-length chunked body: %d %s", got, body)
	}
	if got, body := send(strings.NewReader("{}"), "application/json"); got != first {
		t.Errorf("{} under the same key: %d %s", got, body)
	}
}

// TestContentEncoding: a compressed body is refused as a media type the API
// does not take, saying why.
func TestContentEncoding(t *testing.T) {
	t.Parallel()
	s := stacktest.New(t, stacktest.Options{})
	res := s.Pay(acme, "gzip", visa, "Content-Encoding", "gzip")
	if res.Status != http.StatusUnsupportedMediaType || !strings.Contains(string(res.Body), "Content-Encoding") {
		t.Fatalf("gzip: %d %s", res.Status, res.Body)
	}
	unchanged(t, s)
}

// TestMethods: 405 names the allowed methods; HEAD works wherever GET does.
func TestMethods(t *testing.T) {
	t.Parallel()
	s := stacktest.New(t, stacktest.Options{})
	for path, allow := range map[string]string{
		"/v1/payments": "GET, HEAD, POST", "/v1/payments/pay_x": "GET, HEAD", "/healthz": "GET, HEAD",
	} {
		res := s.Request(http.MethodDelete, path, acme, "")
		if res.Status != http.StatusMethodNotAllowed || res.Header.Get("Allow") != allow {
			t.Errorf("DELETE %s: %d, Allow %q, want %q", path, res.Status, res.Header.Get("Allow"), allow)
		}
	}
	p := decodePayment(t, s.Pay(acme, "head", visa, "Prefer", "respond-async").Body)
	res := s.Request(http.MethodHead, "/v1/payments/"+p.ID, acme, "")
	if res.Status != http.StatusOK || len(res.Body) != 0 || res.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("HEAD: %d %q %v", res.Status, res.Body, res.Header)
	}
}

// TestRequestID: the server makes its own request ids; a client's is not
// adopted, and no id names the host.
func TestRequestID(t *testing.T) {
	t.Parallel()
	s := stacktest.New(t, stacktest.Options{})
	res := s.Request(http.MethodGet, "/healthz", "", "", "X-Request-Id", "client-chosen")
	id := res.Header.Get("X-Request-Id")
	if id == "client-chosen" || !strings.HasPrefix(id, "req_") || len(id) != len("req_")+24 {
		t.Fatalf("request id %q", id)
	}
	if other := s.Request(http.MethodGet, "/healthz", "", "").Header.Get("X-Request-Id"); other == id {
		t.Fatalf("two requests share id %q", id)
	}
}

// TestExpiredKey: after its retention, a key is a tombstone. A retry in the
// tombstone's window gets 410 naming the payment, never a second charge;
// once the tombstone is reaped too, the key is a new request.
func TestExpiredKey(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := stacktest.New(t, stacktest.Options{})
	s.StartWorker()
	first := s.Pay(acme, "old", visa)
	p := decodePayment(t, first.Body)
	s.Exec(`UPDATE idempotency_keys SET expires_at = now() - interval '1 second'`)
	if expired, deleted, err := s.Keys.Reap(ctx, idempotency.ReapPace{Batch: 10}); err != nil || expired != 1 || deleted != 0 {
		t.Fatalf("reap: %d expired, %d deleted, %v", expired, deleted, err)
	}

	retry := s.Pay(acme, "old", visa)
	problem := decodeProblem(t, retry.Body)
	resource, _ := problem["resource"].(map[string]any)
	if retry.Status != http.StatusGone || problem["code"] != "idempotency_key_expired" || resource["url"] != "/v1/payments/"+p.ID {
		t.Fatalf("retry after reaping: %d %s", retry.Status, retry.Body)
	}
	if n := s.ChargesAtProcessor(p.ID); n != 1 {
		t.Fatalf("processor charges = %d, want 1", n)
	}
	if n := s.Count(`SELECT count(*) FROM payments`); n != 1 {
		t.Fatalf("payments = %d, want 1", n)
	}
	if mismatch := s.Pay(acme, "old", `{"amount": 1, "currency": "USD", "payment_method": "pm_card_visa"}`); mismatch.Status != http.StatusUnprocessableEntity {
		t.Fatalf("another body under the expired key: %d %s", mismatch.Status, mismatch.Body)
	}
	view := decodeProblem(t, s.Request(http.MethodGet, "/v1/idempotency-keys/old", acme, "").Body)
	if view["recovery_point"] != "expired" || view["response_status"] != nil {
		t.Fatalf("key view %v", view)
	}

	s.Exec(`UPDATE idempotency_keys SET expires_at = now() - interval '1 second'`)
	if expired, deleted, err := s.Keys.Reap(ctx, idempotency.ReapPace{Batch: 10}); err != nil || expired != 0 || deleted != 1 {
		t.Fatalf("reap tombstones: %d expired, %d deleted, %v", expired, deleted, err)
	}
	again := s.Pay(acme, "old", visa)
	if again.Status != http.StatusCreated || decodePayment(t, again.Body).ID == p.ID {
		t.Fatalf("after the tombstone: %d %s", again.Status, again.Body)
	}
}

// TestRateLimit: a tenant's idempotent POSTs past its limit, new keys and
// retries alike, get 429 with Retry-After and change nothing; reads and other tenants are not limited;
// the refusals and the misuse of keys are counted per tenant.
func TestRateLimit(t *testing.T) {
	t.Parallel()
	s := stacktest.New(t, stacktest.Options{RateLimit: limit(2, time.Minute)})
	for i, key := range []string{"a", "b"} {
		if res := s.Pay(acme, key, visa, "Prefer", "respond-async"); res.Status != http.StatusAccepted {
			t.Fatalf("request %d: %d %s", i, res.Status, res.Body)
		}
	}
	res := s.Pay(acme, "c", visa, "Prefer", "respond-async")
	if retry, _ := strconv.Atoi(res.Header.Get("Retry-After")); res.Status != http.StatusTooManyRequests || retry < 59 || retry > 60 ||
		decodeProblem(t, res.Body)["code"] != "rate_limited" {
		t.Fatalf("over the limit: %d %v %s", res.Status, res.Header, res.Body)
	}
	if s.RecoveryPoint(stacktest.AcmeID, "c") != "" {
		t.Fatal("a limited request reserved its key")
	}
	// A retry of a key already made is counted too, and the 429 says so.
	retry := s.Pay(acme, "a", visa, "Prefer", "respond-async")
	if detail, _ := decodeProblem(t, retry.Body)["detail"].(string); retry.Status != http.StatusTooManyRequests ||
		!strings.Contains(detail, "new keys and retries alike") {
		t.Fatalf("a retry over the limit: %d %s", retry.Status, retry.Body)
	}
	if got := s.Request(http.MethodGet, "/v1/payments", acme, ""); got.Status != http.StatusOK {
		t.Fatalf("a read: %d", got.Status)
	}
	if got := s.Pay(stacktest.Globex, "c", visa, "Prefer", "respond-async"); got.Status != http.StatusAccepted {
		t.Fatalf("another tenant: %d %s", got.Status, got.Body)
	}
	metrics := s.APIMetrics()
	if !strings.Contains(metrics, `payments_rate_limited_total 2`) {
		t.Fatalf("metrics lack the refusal:\n%s", metrics)
	}
}

// TestKeyMisuseCounted: mismatches and in-use refusals count per tenant.
func TestKeyMisuseCounted(t *testing.T) {
	t.Parallel()
	s := stacktest.New(t, stacktest.Options{})
	s.Pay(acme, "k", visa, "Prefer", "respond-async")
	if res := s.Pay(acme, "k", `{"amount": 5, "currency": "USD", "payment_method": "pm_card_visa"}`); res.Status != http.StatusUnprocessableEntity {
		t.Fatalf("mismatch: %d", res.Status)
	}
	metrics := s.APIMetrics()
	if !strings.Contains(metrics, `payments_idempotency_key_mismatch_total 1`) {
		t.Fatalf("metrics lack the mismatch:\n%s", metrics)
	}
}

func limit(n int, window time.Duration) stacktest.RateLimit {
	return stacktest.RateLimit{Requests: n, Window: window}
}

// TestFailedAuthenticationsThrottled: past the limit of failed
// authentications, a client address is refused 429 before its key is looked
// at, even a good key, until the window ends; another address is not. The
// address is the peer's: an X-Forwarded-For from an untrusted peer changes
// nothing, from a trusted proxy it names the client.
func TestFailedAuthenticationsThrottled(t *testing.T) {
	t.Parallel()
	t.Run("UntrustedPeer", func(t *testing.T) {
		t.Parallel()
		s := stacktest.New(t, stacktest.Options{AuthThrottle: httpapi.AuthThrottle{Failures: 3, Window: time.Hour}})
		for i := range 3 {
			// A forged forwarding header does not make each try a new client.
			if res := s.Request(http.MethodGet, "/v1/payments", "sk_test_wrong", "", "X-Forwarded-For", fmt.Sprintf("203.0.113.%d", i)); res.Status != http.StatusUnauthorized {
				t.Fatalf("failure %d: %d", i+1, res.Status)
			}
		}
		res := s.Request(http.MethodGet, "/v1/payments", acme, "", "X-Forwarded-For", "203.0.113.99")
		if res.Status != http.StatusTooManyRequests || !strings.Contains(string(res.Body), "authentication_throttled") || res.Header.Get("Retry-After") == "" {
			t.Fatalf("after 3 failures, a good key: %d %s", res.Status, res.Body)
		}
	})
	t.Run("BehindTrustedProxy", func(t *testing.T) {
		t.Parallel()
		loopback := httpapi.Proxies{netip.MustParsePrefix("127.0.0.0/8")}
		s := stacktest.New(t, stacktest.Options{AuthThrottle: httpapi.AuthThrottle{Failures: 2, Window: time.Hour}, TrustedProxies: loopback})
		for range 2 {
			s.Request(http.MethodGet, "/v1/payments", "sk_test_wrong", "", "X-Forwarded-For", "198.51.100.7")
		}
		if res := s.Request(http.MethodGet, "/v1/payments", acme, "", "X-Forwarded-For", "198.51.100.7"); res.Status != http.StatusTooManyRequests {
			t.Fatalf("the throttled client: %d", res.Status)
		}
		if res := s.Request(http.MethodGet, "/v1/payments", acme, "", "X-Forwarded-For", "198.51.100.8"); res.Status != http.StatusOK {
			t.Fatalf("another client behind the same proxy: %d %s", res.Status, res.Body)
		}
	})
}

// TestHeadersBounded: a request whose headers pass the bound is refused 431
// before any handler runs.
func TestHeadersBounded(t *testing.T) {
	t.Parallel()
	s := stacktest.New(t, stacktest.Options{})
	res := s.Request(http.MethodGet, "/healthz", "", "", "X-Padding", strings.Repeat("a", 64<<10))
	if res.Status != http.StatusRequestHeaderFieldsTooLarge {
		t.Fatalf("64 KiB of headers: %d", res.Status)
	}
	if res := s.Request(http.MethodGet, "/healthz", "", "", "X-Padding", strings.Repeat("a", 8<<10)); res.Status != http.StatusOK {
		t.Fatalf("8 KiB of headers: %d", res.Status)
	}
}
