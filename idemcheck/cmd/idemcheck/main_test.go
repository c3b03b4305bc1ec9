package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/example/payments/idemcheck"
	"github.com/example/payments/idemcheck/idemchecktest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// args is a command line against srv, running the checks that match only.
func args(srv *httptest.Server, only string, extra ...string) []string {
	return append([]string{
		"-url", srv.URL + "/v1/things", "-body", `{"amount": 100}`,
		"-auth", "Bearer a", "-auth2", "Authorization: Bearer b",
		"-list", srv.URL + "/v1/things", "-get", srv.URL + "/v1/things/{id}", "-run", only,
	}, extra...)
}

// TestPasses: against a server that keeps the contract, the command prints
// each check passed, skips say so, writes the JSON report and returns nil.
func TestPasses(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(idemchecktest.New(idemchecktest.Correct, 0))
	defer srv.Close()
	report := filepath.Join(t.TempDir(), "report.json")
	var out bytes.Buffer
	if err := run(context.Background(), args(srv, "^(key-twice|replay|retention)$", "-json", report), &out); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	for _, want := range []string{"key-twice ", "replay ", "pass", "retention ", "skipped  draft-06 §2.3; Stripe  no -retention given", "2 passed, 0 failed, 1 skipped"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	rep, err := idemcheck.ReadReport(report)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Passed != 2 || rep.Skipped != 1 || len(rep.Results) != 3 || rep.Results[1].Rule == "" {
		t.Errorf("JSON report %+v", rep)
	}
}

// TestFails: against a server that breaks a rule, the command prints the
// failure with the requests and answers that broke it, and returns an
// error, so that it exits non-zero.
func TestFails(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(idemchecktest.New(idemchecktest.NoFingerprint, 0))
	defer srv.Close()
	var out bytes.Buffer
	err := run(context.Background(), args(srv, "^mismatch$"), &out)
	if err == nil || !strings.Contains(err.Error(), "1 of 1 checks failed") {
		t.Fatalf("run: %v", err)
	}
	for _, want := range []string{
		"--- FAIL mismatch: the key reused with another body answered 201 Created, not 422",
		"rule: draft-ietf-httpapi-idempotency-key-header-06 §2.7",
		`> {"amount": 101}`, "< Idempotent-Replayed: true", "> Authorization: Bearer ****",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "Bearer a") {
		t.Errorf("the output shows a credential:\n%s", out.String())
	}
}

// TestUsage: -h lists the flags; a command line that cannot run says why.
func TestUsage(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	if err := run(context.Background(), []string{"-h"}, &out); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("-h: %v", err)
	}
	for _, want := range []string{"usage: idemcheck", "-auth2", "-mismatch", "-retention", "-slow-header", "-json"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("-h lacks %q", want)
		}
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-body", "{}", "-auth", "a", "-auth2", "b"}, "no URL"},
		{[]string{"-url", "http://x", "-body", "{}", "-auth", "a"}, "-auth2: missing"},
		{[]string{"-url", "http://x", "-body", `{"a":"b"}`, "-auth", "a", "-auth2", "b"}, "give -body2"},
		{[]string{"-url", "http://x", "-body", "{}", "-auth", "a", "-auth2", "b", "-dialect", "soap"}, "unknown dialect"},
		{[]string{"-url", "http://x", "extra"}, "unexpected arguments"},
	} {
		out.Reset()
		if err := run(context.Background(), c.args, &out); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q", c.args, err, c.want)
		}
	}
}
