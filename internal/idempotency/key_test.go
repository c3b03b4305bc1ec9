package idempotency_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/example/payments/internal/idempotency"
)

func TestParseKey(t *testing.T) {
	t.Parallel()
	max := strings.Repeat("a", idempotency.MaxKeyLength)
	for _, tc := range []struct {
		name, value, want string
	}{
		{"Bare", "order-42", "order-42"},
		{"Quoted", `"order-42"`, "order-42"},
		{"QuotedEscapes", `"a\"b\\c"`, `a"b\c`},
		{"BareWithQuoteInside", `ab"c`, `ab"c`},
		{"UUID", "7f9c1a52-1e0b-4c7e-9d0a-1b2c3d4e5f60", "7f9c1a52-1e0b-4c7e-9d0a-1b2c3d4e5f60"},
		{"MaxLength", max, max},
		{"MaxLengthQuoted", `"` + max + `"`, max},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := idempotency.ParseKey(tc.value)
			if err != nil || got != tc.want {
				t.Fatalf("ParseKey(%q) = %q, %v; want %q", tc.value, got, err, tc.want)
			}
		})
	}

	for _, tc := range []struct{ name, value string }{
		{"ErrEmpty", ""},
		{"ErrEmptyQuoted", `""`},
		{"ErrTooLong", max + "a"},
		{"ErrTooLongQuoted", `"` + max + `a"`},
		{"ErrSpace", "a b"},
		{"ErrSpaceQuoted", `"a b"`},
		{"ErrNonASCII", "clé"},
		{"ErrControl", "a\tb"},
		{"ErrUnterminated", `"abc`},
		{"ErrTrailing", `"abc";p=1`},
		{"ErrBadEscape", `"a\nb"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got, err := idempotency.ParseKey(tc.value); !errors.Is(err, idempotency.ErrKeyInvalid) {
				t.Fatalf("ParseKey(%q) = %q, %v; want ErrKeyInvalid", tc.value, got, err)
			}
		})
	}
}

func TestFingerprint(t *testing.T) {
	t.Parallel()
	base := `{"amount":1999,"currency":"USD","metadata":{"a":"1","b":"2"}}`
	fp := func(t *testing.T, method, path, body string) []byte {
		t.Helper()
		b, err := idempotency.Fingerprint(method, path, []byte(body))
		if err != nil {
			t.Fatalf("Fingerprint(%s): %v", body, err)
		}
		return b
	}
	want := fp(t, "POST", "/v1/payments", base)

	for _, tc := range []struct {
		name, method, path, body string
		same                     bool
	}{
		{"KeyOrder", "POST", "/v1/payments", `{"metadata":{"b":"2","a":"1"},"currency":"USD","amount":1999}`, true},
		{"WhiteSpace", "POST", "/v1/payments", "{\n  \"amount\": 1999,\n  \"currency\": \"USD\",\n  \"metadata\": {\"a\": \"1\", \"b\": \"2\"}\n}\n", true},
		{"NumberForm", "POST", "/v1/payments", `{"amount":1.999e3,"currency":"USD","metadata":{"a":"1","b":"2"}}`, true},
		{"StringEscape", "POST", "/v1/payments", `{"amount":1999,"currency":"\u0055SD","metadata":{"a":"1","b":"2"}}`, true},
		{"OtherAmount", "POST", "/v1/payments", `{"amount":2000,"currency":"USD","metadata":{"a":"1","b":"2"}}`, false},
		{"OtherMetadata", "POST", "/v1/payments", `{"amount":1999,"currency":"USD","metadata":{"a":"1"}}`, false},
		{"OtherPath", "POST", "/v1/payments/pay_1/refunds", base, false},
		{"OtherMethod", "PUT", "/v1/payments", base, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := fp(t, tc.method, tc.path, tc.body)
			if bytes.Equal(got, want) != tc.same {
				t.Fatalf("same fingerprint = %v, want %v", !tc.same, tc.same)
			}
		})
	}

	t.Run("ErrNotJSON", func(t *testing.T) {
		t.Parallel()
		if _, err := idempotency.Fingerprint("POST", "/v1/payments", []byte(`{"amount":`)); err == nil {
			t.Fatal("no error for malformed JSON")
		}
	})
}

// TestDigest: the digest is of the bytes as sent, so it tells byte-identical
// requests apart from all others, even those with the same fingerprint, and
// takes bytes that are not JSON.
func TestDigest(t *testing.T) {
	t.Parallel()
	base := `{"amount":1999,"currency":"USD"}`
	want := idempotency.Digest("POST", "/v1/payments", []byte(base))
	if got := idempotency.Digest("POST", "/v1/payments", []byte(base)); !bytes.Equal(got, want) || len(got) != 32 {
		t.Fatalf("the same request's digest = %x, want %x", got, want)
	}
	for _, tc := range []struct{ name, method, path, body string }{
		{"KeyOrder", "POST", "/v1/payments", `{"currency":"USD","amount":1999}`},
		{"WhiteSpace", "POST", "/v1/payments", `{"amount": 1999, "currency": "USD"}`},
		{"OtherPath", "POST", "/v1/payments/pay_1/refunds", base},
		{"OtherMethod", "PUT", "/v1/payments", base},
		{"NotJSON", "POST", "/v1/payments", `{"amount":`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if bytes.Equal(idempotency.Digest(tc.method, tc.path, []byte(tc.body)), want) {
				t.Fatal("same digest as the first request")
			}
		})
	}
}
