package idempotency_test

import (
	"bytes"
	"encoding/json"
	"maps"
	"strings"
	"testing"

	"github.com/example/payments/internal/idempotency"
)

// FuzzParseKey checks that any header value either fails or yields a key of 1
// to 255 visible ASCII characters, and that a key names itself in both
// forms: quoting an accepted key as an sf-string gives the same key back.
func FuzzParseKey(f *testing.F) {
	for _, seed := range []string{
		"abc", `"abc"`, `"a\"b"`, "", `"`, `"unterminated`, "a b",
		strings.Repeat("x", 256), "\x00", "é",
		`a"b`, `a\b`, `"a\\b"`, `""`, `"abc";p=1`, strings.Repeat("x", 255),
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, value string) {
		key, err := idempotency.ParseKey(value)
		if err != nil {
			if key != "" {
				t.Fatalf("ParseKey(%q) = %q with error %v", value, key, err)
			}
			return
		}
		if len(key) < 1 || len(key) > idempotency.MaxKeyLength {
			t.Fatalf("ParseKey(%q) = %q: %d characters", value, key, len(key))
		}
		for i := range len(key) {
			if c := key[i]; c < 0x21 || c > 0x7e {
				t.Fatalf("ParseKey(%q) = %q: byte %#x at %d is not visible ASCII", value, key, c, i)
			}
		}
		// A bare value is its own key; only a quoted one is decoded.
		if !strings.HasPrefix(value, `"`) && key != value {
			t.Fatalf("ParseKey(%q) = %q, want the bare value itself", value, key)
		}
		quoted := sfString(key)
		if got, err := idempotency.ParseKey(quoted); err != nil || got != key {
			t.Fatalf("ParseKey(%q) = %q; but ParseKey(%q) = %q, %v", value, key, quoted, got, err)
		}
		if !strings.ContainsAny(key, `"\`) {
			if got, err := idempotency.ParseKey(`"` + key + `"`); err != nil || got != key {
				t.Fatalf("ParseKey(%q) = %q; but ParseKey(%q) = %q, %v", value, key, `"`+key+`"`, got, err)
			}
		}
	})
}

// sfString writes s as an RFC 8941 sf-string.
func sfString(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}

// FuzzFingerprint checks that Fingerprint never panics, that two spellings
// of the same JSON value fingerprint the same, and that a different method or
// path always fingerprints differently.
func FuzzFingerprint(f *testing.F) {
	for _, body := range []string{
		`{"a":1,"b":2}`, `{"b":2,"a":1}`, `[]`, `{"a":1e400}`, `"\u0000"`, "\xff\xfe{",
		``, `null`, `{"a":{"c":[1,2.50,-0,1E2],"b":"\u00e9"},"é":true}`, `{"a":1,"a":2}`,
		`{"amount":100,"currency":"USD","payment_method":"pm_card_visa","metadata":{"k":null}}`,
	} {
		f.Add("POST", "/v1/payments", "POST", "/v1/payments/pay_1/refunds", []byte(body))
	}
	f.Add("POST", "/v1/payments", "PUT", "/v1/payments", []byte(`{}`))
	f.Add("POS", "T/v1/payments", "POST", "/v1/payments", []byte(`{}`))
	f.Add("POST", "/a\n", "POST", "/a", []byte(`1`))
	f.Fuzz(func(t *testing.T, method, path, method2, path2 string, body []byte) {
		fp, err := idempotency.Fingerprint(method, path, body)
		if err != nil {
			return // not JSON: refused, which is fine
		}

		// The server only ever sees methods that are tokens, which hold no
		// newline; with that, the method, path and body cannot run together.
		if !strings.Contains(method, "\n") && !strings.Contains(method2, "\n") &&
			(method != method2 || path != path2) {
			other, err := idempotency.Fingerprint(method2, path2, body)
			if err != nil {
				t.Fatalf("Fingerprint(%q, %q) failed on a body Fingerprint(%q, %q) took: %v", method2, path2, method, path, err)
			}
			if bytes.Equal(fp, other) {
				t.Fatalf("%q %q and %q %q fingerprint the same with body %q", method, path, method2, path2, body)
			}
		}

		// Re-encode the value with sorted keys and indentation: the same
		// request, so the same fingerprint. Only values encoding/json reads
		// are compared, since it is what decodes the request.
		var v any
		if err := json.Unmarshal(body, &v); err != nil {
			return
		}
		again, err := json.MarshalIndent(v, "", "\t")
		if err != nil {
			t.Fatalf("re-encode %q: %v", body, err)
		}
		fp2, err := idempotency.Fingerprint(method, path, again)
		if err != nil {
			t.Fatalf("Fingerprint took %q but not its re-encoding %q: %v", body, again, err)
		}
		if !bytes.Equal(fp, fp2) {
			t.Fatalf("%q and its re-encoding %q fingerprint differently", body, again)
		}
	})
}

// FuzzDecodeHeaders checks that stored headers decode to what
// encoding/json makes of them, whichever path decodes them: the same map,
// or an error for both.
func FuzzDecodeHeaders(f *testing.F) {
	for _, seed := range []string{
		`{"Location": "/v1/payments/pay_1", "Content-Type": "application/json"}`,
		`{"Content-Type":"application/problem+json"}`, `{}`, ` { } `, `null`, ``, `{"a": "b",}`, `{"a" "b"}`,
		`{"a": "b"} x`, `{"a": 1}`, `{"a": "\u00e9"}`, `{"a": "é"}`, `{"a": "b\"c"}`, `{"a": "b", "a": "c"}`,
		"{\"a\":\t\"b\"\n}", `{"a": "b"`, `{"a": "b"}}`, `["a"]`, `{"a": "b\x01"}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var want map[string]string
		wantErr := json.Unmarshal(b, &want)
		got, err := idempotency.DecodeHeaders(b)
		if (err != nil) != (wantErr != nil) {
			t.Fatalf("decode %q: error %v, encoding/json's %v", b, err, wantErr)
		}
		if err == nil && !maps.Equal(got, want) {
			t.Fatalf("decode %q: %q, encoding/json's %q", b, got, want)
		}
	})
}

// TestPlainHeaders checks that the headers every stored response has, as
// Postgres prints its jsonb, are read without encoding/json.
func TestPlainHeaders(t *testing.T) {
	for _, b := range []string{
		`{"Location": "/v1/payments/pay_1", "Content-Type": "application/json"}`,
		`{"Content-Type": "application/problem+json"}`, `{}`,
	} {
		if _, ok := idempotency.PlainHeaders([]byte(b)); !ok {
			t.Errorf("%s: not read directly", b)
		}
	}
}
