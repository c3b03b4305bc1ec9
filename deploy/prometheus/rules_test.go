// Package prometheus holds the service's Prometheus configuration: the alert
// rules (alerts.yml), their unit tests (alerts_test.yml), which promtool
// runs, and the scrape configuration that loads them (prometheus.yml). Its
// tests also check deploy/grafana's dashboard against the running service.
package prometheus

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"gopkg.in/yaml.v2"
)

// promtool is the path of a real promtool. Debian's prometheus package
// ships it; .ci/run installs it.
func promtool(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatal("promtool is not installed: apt-get install prometheus (.ci/run does)")
	}
	return path
}

// TestAlertRules checks the rules and runs their unit tests with a real
// promtool: each alert not firing, then firing, its annotations rendered.
func TestAlertRules(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"check", "rules", "alerts.yml"}, {"test", "rules", "alerts_test.yml"}} {
		out, err := exec.Command(promtool(t), args...).CombinedOutput()
		if err != nil {
			t.Fatalf("promtool %v: %v\n%s", args, err, out)
		}
		t.Logf("promtool %v:\n%s", args, out)
	}
}

// TestScrapeConfig: promtool accepts prometheus.yml, and with it the rule
// files it loads, which must be alerts.yml.
func TestScrapeConfig(t *testing.T) {
	t.Parallel()
	out, err := exec.Command(promtool(t), "check", "config", "prometheus.yml").CombinedOutput()
	if err != nil {
		t.Fatalf("promtool check config: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "Checking alerts.yml") {
		t.Fatalf("prometheus.yml does not load alerts.yml:\n%s", out)
	}
}

// rule is an alerting rule of alerts.yml.
type rule struct {
	Alert       string
	Expr        string
	Annotations map[string]string
}

// rules reads alerts.yml.
func rules(t *testing.T) []rule {
	t.Helper()
	b, err := os.ReadFile("alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	var file struct{ Groups []struct{ Rules []rule } }
	if err := yaml.Unmarshal(b, &file); err != nil {
		t.Fatal(err)
	}
	var out []rule
	for _, g := range file.Groups {
		out = append(out, g.Rules...)
	}
	return out
}

// runbooks is where every rule's runbook_url points: a section of
// docs/OPERATIONS.md on GitHub, anchored by the alert's name.
const runbooks = "https://github.com/example/payments/blob/main/docs/OPERATIONS.md#"

// TestRunbooks: every rule has a summary, a description and a runbook_url
// into docs/OPERATIONS.md, where a heading makes its anchor (GitHub's:
// the heading in lower case).
func TestRunbooks(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../../docs/OPERATIONS.md")
	if err != nil {
		t.Fatal(err)
	}
	anchors := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^#+ +(.+)$`).FindAllStringSubmatch(string(doc), -1) {
		anchors[strings.ToLower(strings.Trim(m[1], "` "))] = true
	}
	all := rules(t)
	if len(all) == 0 {
		t.Fatal("no rules in alerts.yml")
	}
	for _, r := range all {
		for _, key := range []string{"summary", "description", "runbook_url"} {
			if strings.TrimSpace(r.Annotations[key]) == "" {
				t.Errorf("%s has no %s", r.Alert, key)
			}
		}
		url := r.Annotations["runbook_url"]
		anchor, ok := strings.CutPrefix(url, runbooks)
		if !ok || anchor != strings.ToLower(r.Alert) || !anchors[anchor] {
			t.Errorf("%s: runbook_url %q, want %s%s and a heading %s in docs/OPERATIONS.md", r.Alert, url, runbooks, strings.ToLower(r.Alert), r.Alert)
		}
	}
}
