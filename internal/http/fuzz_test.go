package http_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/example/payments/tools/stacktest"
)

// Bodies of the hostile classes: NUL characters, null and odd metadata.
const (
	nulDescription = `{"amount":100,"currency":"USD","payment_method":"pm_card_visa","description":"a\u0000b"}`
	nulMetadata    = `{"amount":100,"currency":"USD","payment_method":"pm_card_visa","metadata":{"k":"a\u0000b"}}`
	nulMetadataKey = `{"amount":100,"currency":"USD","payment_method":"pm_card_visa","metadata":{"k\u0000":"v"}}`
	nullMetadata   = `{"amount":100,"currency":"USD","payment_method":"pm_card_visa","metadata":{"k":null}}`
	validPayment   = `{"amount":100,"currency":"USD","payment_method":"pm_card_visa"}`
)

// contentTypes are the Content-Type values FuzzDecodeBody chooses from; ""
// sends none.
var contentTypes = []string{
	"application/json", "application/json; charset=utf-8", "", "text/plain",
	`application/json; charset="`, "APPLICATION/JSON", "application/problem+json",
}

// FuzzDecodeBody posts arbitrary bytes as a payment. Whatever the body, the
// answer is never a 5xx, and it is JSON: a payment or a problem+json.
func FuzzDecodeBody(f *testing.F) {
	for _, body := range []string{
		validPayment, nulDescription, nulMetadata, nulMetadataKey, nullMetadata,
		`{}`, `[]`, `null`, ``, `{"amount":1e400}`, `{"amount":-1}`, `{"amount":1.5}`,
		`{"amount":9223372036854775808,"currency":"USD","payment_method":"pm_card_visa"}`,
		`{"amount":100,"currency":"USD","payment_method":"pm_card_visa","amount":200}`,
		`{"amount":100,"currency":"USD\u0000","payment_method":"pm_card_visa"}`,
		`{"amount":100,"currency":"USD","payment_method":"pm_card_\u0000"}`,
		`{"amount":100,"currency":"USD","payment_method":"pm_card_visa","description":"\ud800"}`,
		`{"amount":100,"currency":"USD","payment_method":"pm_card_visa","description":"` + "\xff" + `"}`,
		`{"AMOUNT":100}`, `{"amount":"100"}`, `{"metadata":[1]}`, `{} {}`, "\xff\xfe\x00",
		`[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]`,
	} {
		f.Add([]byte(body), uint8(0))
	}
	f.Add([]byte(validPayment), uint8(3))
	f.Add([]byte(validPayment), uint8(4))
	f.Add([]byte(nulDescription), uint8(1))

	s := stacktest.New(f, stacktest.Options{})
	client := fuzzClient(f, 10*time.Second)
	var n atomic.Int64
	f.Fuzz(func(t *testing.T, body []byte, contentType uint8) {
		req, err := http.NewRequest(http.MethodPost, s.API.URL+"/v1/payments", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+stacktest.Acme)
		req.Header.Set("Idempotency-Key", fmt.Sprintf("fuzz-decode-%d", n.Add(1)))
		req.Header.Set("Prefer", "respond-async")
		if ct := contentTypes[int(contentType)%len(contentTypes)]; ct != "" {
			req.Header.Set("Content-Type", ct)
		}
		res := do(t, client, req)
		if res.Status >= 500 {
			t.Fatalf("POST /v1/payments with Content-Type %q and body %q: %d %s",
				req.Header.Get("Content-Type"), body, res.Status, res.Body)
		}
		checkJSON(t, res)
	})
}

// FuzzRouter sends arbitrary methods, paths, headers and bodies through the
// whole router to a real database. Whatever the request, the answer is never
// a 5xx and the server never panics or hangs (SPEC §7, invariant 8).
func FuzzRouter(f *testing.F) {
	type seed struct {
		method, path    string
		realKey         bool
		auth, key       string
		prefer          string
		contentType     string
		contentEncoding string
		body            string
	}
	post := func(body string) seed {
		return seed{method: "POST", path: "/v1/payments", realKey: true, key: "seed", contentType: "application/json", body: body}
	}
	get := func(path string) seed { return seed{method: "GET", path: path, realKey: true} }
	seeds := []seed{
		post(validPayment), post(nulDescription), post(nulMetadata), post(nulMetadataKey), post(nullMetadata),
		get("/v1/payments/pay_%00"), get("/v1/payments/%ff"), get("/v1/payments?starting_after=%00"),
		get("/v1/refunds/%ff"), get("/v1/events?starting_after=%ff"), get("/v1/idempotency-keys/p%2541"),
		get("/v1/idempotency-keys/%00"), get("/v1/payments?starting_after=%ff"), get("/v1/events?starting_after=%00"),
		get("/v1/refunds/re_%00"), get("/v1/payments?limit=99999999999999999999"), get("/v1/payments/%zz"),
		get("/v1/payments/pay_1/../../metrics"), get("//v1/payments"), get("/healthz"), get("/openapi.yaml"),
		{method: "POST", path: "/v1/payments/%ff/refunds", realKey: true, key: "seed", contentType: "application/json", body: `{"amount":1}`},
		{method: "POST", path: "/v1/payments/pay_%00/refunds", realKey: true, key: "seed", contentType: "application/json", body: `{}`},
		{method: "FOO", path: "/v1/payments", realKey: true},
		{method: "HEAD", path: "/v1/payments/pay_1", realKey: true},
		{method: "get", path: "/v1/payments", realKey: true},
		{method: "GET", path: "/v1/payments", auth: "Bearer sk_test_ac\xffme"},
		{method: "GET", path: "/v1/payments", auth: "Bearer "},
		{method: "POST", path: "/v1/payments", realKey: true, key: "seed-wait", prefer: "wait=99999999999999999999",
			contentType: "application/json", body: validPayment},
		{method: "POST", path: "/v1/payments", realKey: true, key: "seed-wait-2", prefer: "wait=9223372036",
			contentType: "application/json", body: validPayment},
		{method: "POST", path: "/v1/payments", realKey: true, key: "seed-gzip", contentType: "application/json",
			contentEncoding: "gzip", body: validPayment},
		{method: "POST", path: "/v1/payments", realKey: true, key: `"a\"b"`, contentType: "application/json", body: validPayment},
		{method: "POST", path: "/v1/payments", realKey: true, key: "\xff", contentType: "application/json", body: validPayment},
	}
	for i, sd := range seeds {
		// Each seed its own key, so that none is refused as a mismatch.
		if sd.key == "seed" {
			sd.key = fmt.Sprintf("seed-%d", i)
		}
		f.Add(sd.method, sd.path, sd.realKey, sd.auth, sd.key, sd.prefer, sd.contentType, sd.contentEncoding, []byte(sd.body))
	}

	s := stacktest.New(f, stacktest.Options{})
	// A worker settles the payments that valid bodies create, so that a
	// fuzzed Prefer: wait=N does not wait out all of N.
	s.StartWorker()
	// No request may take longer than the API's longest wait (stacktest's
	// MaxWait, 20s) plus the time to answer: beyond that it hangs.
	client := fuzzClient(f, 25*time.Second)
	f.Fuzz(func(t *testing.T, method, path string, realKey bool, auth, key, prefer, contentType, contentEncoding string, body []byte) {
		req := rawRequest(s.API.URL, method, path, body)
		if req == nil {
			return // not a request a client can send
		}
		if realKey {
			auth = "Bearer " + stacktest.Acme
		}
		for _, h := range []struct{ name, value string }{
			{"Authorization", auth}, {"Idempotency-Key", key}, {"Prefer", prefer},
			{"Content-Type", contentType}, {"Content-Encoding", contentEncoding},
		} {
			if !validHeaderValue(h.value) {
				return // net/http would refuse to send it
			}
			if h.value != "" {
				req.Header.Set(h.name, h.value)
			}
		}
		// Ask for no wait unless the fuzzer chose a Prefer, so each input is fast.
		if prefer == "" {
			req.Header.Set("Prefer", "respond-async")
		}
		res := do(t, client, req)
		if res.Status >= 500 {
			t.Fatalf("%s %s (headers %q, body %q): %d %s", method, path, req.Header, body, res.Status, res.Body)
		}
		if mt, _, _ := mime.ParseMediaType(res.Header.Get("Content-Type")); mt == "application/problem+json" && method != http.MethodHead {
			checkJSON(t, res)
		}
	})
}

// rawRequest builds a request for the raw path as a client would send it,
// or returns nil when no client could: the method is not a token, or the
// path holds bytes a request line cannot (NUL and invalid UTF-8 come as
// %00 and %ff).
func rawRequest(base, method, path string, body []byte) *http.Request {
	if !strings.HasPrefix(path, "/") {
		return nil
	}
	for i := range len(path) {
		if c := path[i]; c < 0x21 || c > 0x7e {
			return nil
		}
	}
	if _, err := url.Parse(base + path); err == nil {
		req, err := http.NewRequest(method, base+path, bytes.NewReader(body))
		if err != nil {
			return nil
		}
		return req
	}
	// A path url.Parse refuses, such as one with %zz, goes out as it is.
	req, err := http.NewRequest(method, base+"/", bytes.NewReader(body))
	if err != nil {
		return nil
	}
	req.URL.Opaque = path
	return req
}

// validHeaderValue reports whether net/http sends v as a header value: no
// control characters but tab.
func validHeaderValue(v string) bool {
	for i := range len(v) {
		if c := v[i]; (c < 0x20 && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}

// fuzzClient is a client of its own whose requests give up after timeout.
func fuzzClient(f *testing.F, timeout time.Duration) *http.Client {
	f.Helper()
	transport := http.DefaultTransport.(*http.Transport).Clone()
	f.Cleanup(transport.CloseIdleConnections)
	return &http.Client{Transport: transport, Timeout: timeout}
}

// do sends req and reads the whole answer; a request that fails on the wire
// or times out has found a hang or a dropped connection.
func do(t *testing.T, client *http.Client, req *http.Request) stacktest.Response {
	t.Helper()
	res, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL.RequestURI(), err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("%s %s: read body: %v", req.Method, req.URL.RequestURI(), err)
	}
	return stacktest.Response{Status: res.StatusCode, Header: res.Header, Body: b}
}

// checkJSON checks that an answer is JSON, and that a problem+json answer is
// a problem whose status is the response's.
func checkJSON(t *testing.T, res stacktest.Response) {
	t.Helper()
	mt, _, err := mime.ParseMediaType(res.Header.Get("Content-Type"))
	if err != nil || (mt != "application/json" && mt != "application/problem+json") {
		t.Fatalf("%d with Content-Type %q: %s", res.Status, res.Header.Get("Content-Type"), res.Body)
	}
	if !json.Valid(res.Body) {
		t.Fatalf("%d %s: body is not JSON: %q", res.Status, mt, res.Body)
	}
	if mt != "application/problem+json" {
		return
	}
	var p struct {
		Type   string `json:"type"`
		Title  string `json:"title"`
		Status int    `json:"status"`
		Code   string `json:"code"`
	}
	if err := json.Unmarshal(res.Body, &p); err != nil || p.Type == "" || p.Title == "" || p.Code == "" || p.Status != res.Status {
		t.Fatalf("%d: not a problem for this status: %s", res.Status, res.Body)
	}
}
