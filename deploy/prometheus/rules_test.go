// Package prometheus holds the service's Prometheus alert rules
// (alerts.yml) and their unit tests (alerts_test.yml), which promtool runs.
package prometheus

import (
	"os/exec"
	"testing"
)

// TestAlertRules checks the rules and runs their unit tests with a real
// promtool: each alert not firing, then firing. Debian's prometheus package
// ships promtool; .ci/run installs it.
func TestAlertRules(t *testing.T) {
	t.Parallel()
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatal("promtool is not installed: apt-get install prometheus (.ci/run does)")
	}
	for _, args := range [][]string{{"check", "rules", "alerts.yml"}, {"test", "rules", "alerts_test.yml"}} {
		out, err := exec.Command(promtool, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("promtool %v: %v\n%s", args, err, out)
		}
		t.Logf("promtool %v:\n%s", args, out)
	}
}
