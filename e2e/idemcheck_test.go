package e2e

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/example/payments/idemcheck"
	"github.com/example/payments/tools/testdb"
)

// idemcheckBody is the payment the checker creates, again and again.
const idemcheckBody = `{"amount": 1999, "currency": "USD", "payment_method": "pm_card_visa", "description": "idemcheck"}`

// TestIdemcheck runs idemcheck/cmd/idemcheck, built as a user builds it, against the
// service started as `make run` starts it, with the command line of
// docs/IDEMCHECK.md's "Against this service", run as written (but for the
// address): every check passes, but the retention check, which make run's
// 24 h retention leaves skipped (TestIdemcheckRetention runs it).
func TestIdemcheck(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../docs/IDEMCHECK.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, _ := strings.Cut(string(doc), "\n## Against this service\n")
	_, block, _ := strings.Cut(section, "```sh\n")
	script, _, found := strings.Cut(block, "\n```")
	if !found || !strings.HasPrefix(script, "go run ./idemcheck/cmd/idemcheck ") {
		t.Fatalf("docs/IDEMCHECK.md has no ```sh block running go run ./idemcheck/cmd/idemcheck under \"## Against this service\"")
	}
	bin := buildIdemcheck(t)
	s, _ := startAsMakeRun(t, testdb.NewEmpty(t))
	report := filepath.Join(t.TempDir(), "report.json")
	script = strings.NewReplacer("go run ./idemcheck/cmd/idemcheck", bin, "localhost:8080", s.apiAddr).Replace(script) + " -json " + report
	out, err := exec.Command("bash", "-c", script).CombinedOutput()
	t.Logf("%s\n%s", script, out)
	if err != nil {
		t.Errorf("idemcheck: %v", err)
	}
	rep, err := idemcheck.ReadReport(report)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rep.Results {
		want := idemcheck.Pass
		if r.Name == "retention" {
			want = idemcheck.Skipped
		}
		if r.Status != want {
			t.Errorf("%s: %s, want %s: %s", r.Name, r.Status, want, r.Detail)
		}
	}
	if rep.Passed != len(rep.Results)-1 || len(rep.Results) < 13 {
		t.Errorf("%d checks, %d passed", len(rep.Results), rep.Passed)
	}
}

// TestIdemcheckRetention runs the retention check against a service that
// keeps keys for 3 s and reaps them every half second: the key is replayed
// within the retention and answers 410 once reaped.
func TestIdemcheckRetention(t *testing.T) {
	t.Parallel()
	bin := buildIdemcheck(t)
	retention := "IDEMPOTENCY_KEY_RETENTION=3s"
	s := startStack(t, testdb.New(t).URL, []string{retention}, []string{retention, "REAP_INTERVAL=500ms"})
	rep := runIdemcheck(t, bin, "-run", "^retention$", "-retention", "3s", "-retention-grace", "20s",
		"-url", s.apiURL+"/v1/payments", "-body", idemcheckBody,
		"-auth", "Bearer sk_test_acme", "-auth2", "Bearer sk_test_globex")
	if len(rep.Results) != 1 || rep.Results[0].Status != idemcheck.Pass {
		t.Fatalf("%+v", rep.Results)
	}
	if d := rep.Results[0].Detail; !strings.HasSuffix(d, "refused with 410 (expired)") {
		t.Errorf("retention: %s, want the tombstone's 410", d)
	}
}

// buildIdemcheck builds idemcheck/cmd/idemcheck, which TestMain does not.
func buildIdemcheck(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	build := exec.Command("go", "build", "-o", dir, "./idemcheck/cmd/idemcheck")
	build.Dir = ".."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build idemcheck: %v\n%s", err, out)
	}
	return filepath.Join(dir, "idemcheck")
}

// runIdemcheck runs the checker with args and returns its JSON report. It
// fails the test, showing the table, when the checker exits non-zero.
func runIdemcheck(t *testing.T, bin string, args ...string) *idemcheck.Report {
	t.Helper()
	report := filepath.Join(t.TempDir(), "report.json")
	out, err := exec.Command(bin, append(args, "-json", report)...).CombinedOutput()
	t.Logf("idemcheck:\n%s", out)
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatal(err)
	}
	if err != nil {
		t.Errorf("idemcheck exited with %v", err)
	}
	rep, err := idemcheck.ReadReport(report)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}
