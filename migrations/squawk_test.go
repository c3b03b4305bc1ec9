package migrations_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/example/payments/migrations"
)

// squawkRelease is the squawk-cli .ci/run installs: the rule names the
// migrations' ignores use are its own.
const squawkRelease = "squawk-cli@2.66.0"

// pgVersion is the oldest PostgreSQL the service runs on (SPEC), whose
// locks squawk judges.
const pgVersion = "14"

// squawk is the path of squawk, the linter of Postgres migrations, which
// knows the lock each statement takes. npm's squawk-cli ships it; the test
// skips, saying so, without it.
func squawk(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("squawk")
	if err != nil {
		t.Skipf("squawk is not installed (npm install -g %s, as .ci/run does): the migrations are not linted", squawkRelease)
	}
	return path
}

// finding is one of squawk's, as its JSON reporter writes it (line counts
// from 0).
type finding struct {
	Line    int    `json:"line"`
	Rule    string `json:"rule_name"`
	Message string `json:"message"`
	Help    string `json:"help"`
}

// ignoreWithReason is an ignore comment followed by its reason, after a
// second "--": squawk reads the rule names up to it.
var ignoreWithReason = regexp.MustCompile(`--\s*squawk-ignore(-file)?\s+[a-z-]+(\s*,\s*[a-z-]+)*\s+--\s*\S`)

// noTransaction is goose's mark of a migration it runs outside a
// transaction.
var noTransaction = regexp.MustCompile(`(?m)^-- \+goose NO TRANSACTION\s*$`)

// TestSquawk: squawk finds nothing in any migration, but what an ignore
// comment beside it names with its reason. Only the Up part is linted:
// Migrate applies migrations up only, and a Down, run by hand to go back,
// drops what its Up added, which squawk's ban-drop rules refuse. A file
// goose runs in a transaction is linted as one; one marked NO TRANSACTION
// (a concurrent index, a validation committed apart) as the statements and
// transactions it runs itself.
func TestSquawk(t *testing.T) {
	t.Parallel()
	bin := squawk(t)
	version, err := exec.Command(bin, "--version").Output()
	if err != nil {
		t.Fatalf("squawk --version: %v", err)
	}
	names, err := fs.Glob(migrations.FS, "*.sql")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			text, err := fs.ReadFile(migrations.FS, name)
			if err != nil {
				t.Fatal(err)
			}
			for i, line := range strings.Split(string(text), "\n") {
				if strings.Contains(line, "squawk-ignore") && !ignoreWithReason.MatchString(line) {
					t.Errorf("%s:%d: an ignore without its reason (-- squawk-ignore <rule> -- <why>): %s", name, i+1, line)
				}
			}
			up, _, _ := strings.Cut(string(text), "\n-- +goose Down")
			args := []string{"--reporter=json", "--pg-version=" + pgVersion, "--stdin-filepath=" + name}
			if !noTransaction.MatchString(up) {
				args = append(args, "--assume-in-transaction")
			}
			cmd := exec.Command(bin, args...)
			cmd.Stdin = strings.NewReader(up)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			// squawk exits 1 when it finds something: its report says what.
			out, runErr := cmd.Output()
			var found []finding
			if err := json.Unmarshal(out, &found); err != nil {
				t.Fatalf("squawk %v: %v, its report unreadable (%v):\n%s%s", args, runErr, err, out, stderr.Bytes())
			}
			var report strings.Builder
			for _, f := range found {
				fmt.Fprintf(&report, "\n%s:%d: %s: %s", name, f.Line+1, f.Rule, f.Message)
				if f.Help != "" {
					fmt.Fprintf(&report, " (%s)", f.Help)
				}
			}
			if len(found) > 0 {
				t.Errorf("%s finds %d in the Up part (.ci/run installs %s); fix them, or ignore one beside it with its reason:%s",
					bytes.TrimSpace(version), len(found), squawkRelease, report.String())
			}
		})
	}
}
