package idemcheck

import (
	"context"
	"io"
	"net/http/httptest"
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/example/payments/idemcheck/idemchecktest"
)

func TestParseFlags(t *testing.T) {
	t.Parallel()
	o, err := ParseFlags([]string{
		"-url", "http://localhost:8080/v1/payments", "-body", `{"amount":100}`,
		"-auth", "Bearer sk_test_acme", "-auth2", "X-Api-Key: globex",
		"-header", "Stripe-Version: 2024-06-20", "-slow-header", "Prefer: wait=5", "-slow-header", "X-Slow: 1",
		"-mismatch", "400", "-key-required=false", "-retention", "2s", "-json", "r.json",
	}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	c := o.Config
	if c.Auth != (Header{"Authorization", "Bearer sk_test_acme"}) || c.Auth2 != (Header{"X-Api-Key", "globex"}) {
		t.Errorf("credentials %+v %+v", c.Auth, c.Auth2)
	}
	if !slices.Equal(c.Headers, []Header{{"Stripe-Version", "2024-06-20"}}) || len(c.SlowHeaders) != 2 || c.SlowHeaders[0] != (Header{"Prefer", "wait=5"}) {
		t.Errorf("headers %+v, slow %+v", c.Headers, c.SlowHeaders)
	}
	if c.Mismatch != 400 || !c.KeyOptional || c.Retention != 2*time.Second || c.Dialect != IETF || o.JSON != "r.json" || c.MaxKeyLength != 255 {
		t.Errorf("config %+v, json %q", c, o.JSON)
	}
	if _, err := ParseFlags([]string{"-header", "no colon"}, io.Discard); err == nil {
		t.Error("a header without a colon was taken")
	}
	c.Only = regexp.MustCompile("^nothing$")
	if _, err := Run(context.Background(), c); err == nil || err.Error() != `no check's name matches "^nothing$"` {
		t.Errorf("a -run matching no check: %v", err)
	}
}

// TestSkipped: a check that cannot run is reported skipped with its
// reason, never passed, and does not fail the run.
func TestSkipped(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(idemchecktest.New(idemchecktest.Correct, 0))
	defer srv.Close()
	cfg := config(srv.URL)
	cfg.Retention, cfg.SlowBody, cfg.MaxKeyLength, cfg.KeyOptional, cfg.Dialect = 0, "", 0, true, Stripe
	cfg.Only = regexp.MustCompile(`^(key-missing|key-too-long|key-not-a-string|in-progress|retention)$`)
	rep, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"key-missing":      "-key-required=false: the server takes requests without a key",
		"key-too-long":     "no -max-key-length: the server sets no limit",
		"key-not-a-string": "the stripe dialect's keys are any string, not sf-strings",
		"in-progress":      "no -slow-body or -slow-header given: nothing makes a first request slow",
		"retention":        "no -retention given: the server's key retention is not known",
	}
	for _, r := range rep.Results {
		if r.Status != Skipped || r.Detail != want[r.Name] {
			t.Errorf("%s: %s %q", r.Name, r.Status, r.Detail)
		}
	}
	if len(rep.Results) != len(want) || rep.Skipped != len(want) || rep.Err() != nil {
		t.Errorf("%d results, %d skipped, %v", len(rep.Results), rep.Skipped, rep.Err())
	}
}

// TestStripeDialect: Stripe's dialect sends bare keys and wants 400 for a
// key reused with another body, which the test server (422) does not give.
func TestStripeDialect(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(idemchecktest.New(idemchecktest.Correct, 0))
	defer srv.Close()
	cfg := config(srv.URL)
	cfg.Dialect, cfg.Only = Stripe, regexp.MustCompile(`^(replay|mismatch)$`)
	rep, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Results) != 2 || rep.Results[0].Status != Pass || rep.Results[1].Status != Fail ||
		rep.Results[1].Detail != "the key reused with another body answered 422 Unprocessable Entity, not 400" {
		t.Fatalf("%+v", rep.Results)
	}
	post := rep.Results[1].Evidence[1] // after the list's GET
	if k := post.Headers[len(post.Headers)-1]; k.Name != "Idempotency-Key" || k.Value[0] == '"' {
		t.Errorf("the stripe dialect sent the key %+v", k)
	}
}
