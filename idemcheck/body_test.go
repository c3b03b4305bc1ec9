package idemcheck

import (
	"net/http"
	"testing"
)

func TestDeriveBody(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ body, want string }{
		{`{"amount": 1999, "currency": "USD"}`, `{"amount": 2000, "currency": "USD"}`},
		{`{"currency":"USD","nested":{"n":[1.5]},"amount":7}`, `{"currency":"USD","nested":{"n":[2.5]},"amount":7}`},
		{`{"big": 123456789012345678901234567890}`, `{"big": 123456789012345678901234567891}`},
		{`{"e": 1e3}`, `{"e": 1001}`},
	} {
		got, err := deriveBody(c.body)
		if err != nil || got != c.want {
			t.Errorf("deriveBody(%s) = %s, %v; want %s", c.body, got, err, c.want)
		}
	}
	for _, body := range []string{`{"a": "b"}`, `{"a": `, `not json`} {
		if got, err := deriveBody(body); err == nil {
			t.Errorf("deriveBody(%s) = %s, want an error", body, got)
		}
	}
}

func TestJSONMembers(t *testing.T) {
	t.Parallel()
	body := []byte(`{"id":"pay_1","payment":{"id":"pay_2","n":3},"data":[{"id":"pay_3"},{"id":4}]}`)
	for path, want := range map[string]string{"id": "pay_1", "payment.id": "pay_2", "payment.n": "3", "missing": "", "id.x": ""} {
		if got := jsonMember(body, path); got != want {
			t.Errorf("jsonMember(%s) = %q, want %q", path, got, want)
		}
	}
	ids := map[string]bool{}
	collectIDs(body, "payment.id", ids)
	if len(ids) != 4 || !ids["pay_1"] || !ids["pay_2"] || !ids["pay_3"] || !ids["4"] {
		t.Errorf("collectIDs = %v", ids)
	}
}

func TestProblemBody(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		contentType, link, body string
		want                    bool
	}{
		{"application/problem+json", "", `{"type":"about:blank","status":400}`, true},
		{"application/problem+json; charset=utf-8", "", `{"title":"x"}`, true},
		{"application/json", "", `{"error":{"type":"invalid_request_error","message":"x"}}`, true},
		{"", `<https://docs.example/idempotency>; rel="describedby"`, ``, true},
		{"application/json", "", `{"message":"bad key"}`, false},
		{"application/json", "", `{"error":"bad key"}`, false},
		{"text/plain", "", `bad key`, false},
		{"application/problem+json", "", `not json`, false},
	} {
		ex := &Exchange{header: http.Header{"Content-Type": {c.contentType}, "Link": {c.link}}, body: []byte(c.body)}
		if got := problemBody(ex); got != c.want {
			t.Errorf("problemBody(%s %s %s) = %v", c.contentType, c.link, c.body, got)
		}
	}
}

func TestSameBytes(t *testing.T) {
	t.Parallel()
	if d := sameBytes([]byte(`{"a":1}`), []byte(`{"a":1}`)); d != "" {
		t.Errorf("equal bodies: %s", d)
	}
	if d := sameBytes([]byte(`{"t":"10:00:00.5Z"}`), []byte(`{"t":"10:00:00Z"}`)); d != `differs at byte 14 of 19/17 (".5Z\"}" vs "Z\"}")` {
		t.Errorf("sameBytes = %s", d)
	}
}
