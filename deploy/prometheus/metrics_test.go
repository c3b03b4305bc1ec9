package prometheus

import (
	"bufio"
	"bytes"
	"encoding/json"
	"maps"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/example/payments/tools/stacktest"
)

// selector is a metric an expression reads, and the job its selector
// names ("" for any).
type selector struct{ name, job string }

// The parts of PromQL that are not metric names: label lists after by,
// without, on, ignoring and group_*; ranges and offsets; strings; Grafana's
// variables; keywords.
var (
	promqlLabelList = regexp.MustCompile(`\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	promqlRange     = regexp.MustCompile(`\[[^\]]*\]`)
	promqlName      = regexp.MustCompile(`([a-zA-Z_:][a-zA-Z0-9_:]*)\s*(\{[^}]*\})?\s*(\()?`)
	promqlJob       = regexp.MustCompile(`\bjob\s*=\s*"([^"]*)"`)
	promqlKeywords  = []string{"and", "or", "unless", "bool", "offset", "inf", "nan"}
)

// selectors lists the metrics expr reads. It is no PromQL parser: it knows
// the shapes the rules and the dashboard use (functions, aggregations with
// by, label matchers, ranges), and a metric it misread would fail the test
// that calls it rather than pass.
func selectors(expr string) []selector {
	expr = promqlLabelList.ReplaceAllString(expr, " ")
	expr = promqlRange.ReplaceAllString(expr, " ")
	var out []selector
	for _, m := range promqlName.FindAllStringSubmatch(expr, -1) {
		if m[3] != "" && m[2] == "" || slices.Contains(promqlKeywords, strings.ToLower(m[1])) {
			continue // a function or an aggregation, or a keyword
		}
		sel := selector{name: m[1]}
		if job := promqlJob.FindStringSubmatch(m[2]); job != nil {
			sel.job = job[1]
		}
		out = append(out, sel)
	}
	return out
}

// TestSelectors: the metric names of the shapes the rules and the dashboard
// use, and nothing else.
func TestSelectors(t *testing.T) {
	t.Parallel()
	for expr, want := range map[string][]selector{
		`sum by (kind, path) (rate(a_total{x="y"}[$__rate_interval])) / sum(rate(b_total[5m])) > 0.2`: {{"a_total", ""}, {"b_total", ""}},
		`histogram_quantile(0.95, sum by (le) (rate(h_bucket[5m])))`:                                  {{"h_bucket", ""}},
		`absent(up{job="api"}) or absent(g{job="worker", k=~"a|b"})`:                                  {{"up", "api"}, {"g", "worker"}},
		`max(x) > 3600 and on (instance) y unless bool z`:                                             {{"x", ""}, {"y", ""}, {"z", ""}},
	} {
		if got := selectors(expr); !slices.Equal(got, want) {
			t.Errorf("selectors(%s) = %v, want %v", expr, got, want)
		}
	}
}

// exported reads the names of a /metrics page: each family's, and a
// histogram's or a summary's series (_bucket, _sum, _count).
func exported(page string) map[string]bool {
	names := map[string]bool{"up": true} // Prometheus's own, for every target
	sc := bufio.NewScanner(strings.NewReader(page))
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) != 4 || fields[0] != "#" || fields[1] != "TYPE" {
			continue
		}
		names[fields[2]] = true
		if fields[3] == "histogram" || fields[3] == "summary" {
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				names[fields[2]+suffix] = true
			}
		}
	}
	return names
}

// dashboardExprs reads the expression of every panel's every target in the
// dashboards of deploy/grafana, by panel title; and checks that each panel
// reads the provisioned data source.
func dashboardExprs(t *testing.T) map[string][]string {
	t.Helper()
	files, err := os.ReadDir("../grafana/dashboards")
	if err != nil {
		t.Fatal(err)
	}
	type target struct {
		Expr       string
		Datasource struct{ UID string }
	}
	type panel struct {
		Title, Type string
		Targets     []target
		Panels      []json.RawMessage
	}
	out := map[string][]string{}
	for _, f := range files {
		b, err := os.ReadFile("../grafana/dashboards/" + f.Name())
		if err != nil {
			t.Fatal(err)
		}
		var dash struct {
			UID    string
			Panels []panel
		}
		if err := json.Unmarshal(b, &dash); err != nil || dash.UID == "" || len(dash.Panels) == 0 {
			t.Fatalf("dashboard %s: %v (uid %q, %d panels)", f.Name(), err, dash.UID, len(dash.Panels))
		}
		for _, p := range dash.Panels {
			if p.Type == "row" {
				continue
			}
			if len(p.Targets) == 0 {
				t.Errorf("%s: panel %q has no query", f.Name(), p.Title)
			}
			for _, tg := range p.Targets {
				if tg.Datasource.UID != "prometheus" {
					t.Errorf("%s: panel %q reads data source %q, not the provisioned prometheus", f.Name(), p.Title, tg.Datasource.UID)
				}
				out[f.Name()+": "+p.Title] = append(out[f.Name()+": "+p.Title], tg.Expr)
			}
		}
	}
	return out
}

// TestMetrics runs the three processes once and checks what they serve on
// /metrics: every metric the rules and the dashboard read is exported
// (Exported), promtool's linter finds no problem in any page (Promlint),
// and a request's and its payment's jobs' trace id are exemplars of their
// latencies' buckets in OpenMetrics (Exemplars).
func TestMetrics(t *testing.T) {
	t.Parallel()
	s := stacktest.New(t, stacktest.Options{})
	s.StartWorker()
	// The job names of prometheus.yml, each's first scrape.
	first := map[string]map[string]bool{
		"api": exported(s.APIMetrics()), "worker": exported(s.WorkerMetrics()), "fakeprocessor": exported(s.ProcessorMetrics()),
	}
	if res := s.Pay(stacktest.Acme, "metrics-exported", `{"amount":100,"currency":"USD","payment_method":"pm_card_visa"}`,
		"traceparent", traceparent); res.Status >= 300 && res.Status != 202 {
		t.Fatalf("payment: %d %s", res.Status, res.Body)
	}
	t.Run("Exported", func(t *testing.T) { testExported(t, s, first) })
	t.Run("Promlint", func(t *testing.T) { testPromlint(t, s) })
	t.Run("Exemplars", func(t *testing.T) { testExemplars(t, s) })
}

// traceparent is the payment's trace context, and traceID its trace id:
// the processes trace with a no-op provider here, which carries the
// caller's span context on.
const (
	traceID     = "4bf92f3577b34da6a3ce929d0e0e4736"
	traceparent = "00-" + traceID + "-00f067aa0ba902b7-01"
)

// testExported: every metric an alert rule or a dashboard panel reads is
// one the processes export. The rules' metrics must be there from the
// first scrape of a process that has served nothing (each counter's and
// histogram's known label values start at zero), so that rate() and
// absent() mean something from the start, and a rule naming a job reads a
// metric of that job; the dashboard's may need one request (the API's
// requests by route and status exist once one is served).
func testExported(t *testing.T, s *stacktest.Stack, first map[string]map[string]bool) {
	for _, r := range rules(t) {
		for _, sel := range selectors(r.Expr) {
			jobs := slices.Sorted(maps.Keys(first))
			if sel.job != "" {
				jobs = []string{sel.job}
			}
			if !slices.ContainsFunc(jobs, func(job string) bool { return first[job][sel.name] }) {
				t.Errorf("alert %s reads %s, which %v do not export on their first scrape", r.Alert, sel.name, jobs)
			}
		}
	}
	all := map[string]bool{}
	for _, page := range []string{s.APIMetrics(), s.WorkerMetrics(), s.ProcessorMetrics()} {
		maps.Copy(all, exported(page))
	}
	panels := dashboardExprs(t)
	for title, exprs := range panels {
		for _, expr := range exprs {
			sels := selectors(expr)
			if len(sels) == 0 {
				t.Errorf("%s: no metric in %s", title, expr)
			}
			for _, sel := range sels {
				if !all[sel.name] {
					t.Errorf("%s reads %s, which no process exports", title, sel.name)
				}
			}
		}
	}
	t.Logf("%d rules and %d panels read metrics the processes export", len(rules(t)), len(panels))
}

// testPromlint: promtool check metrics (Prometheus's linter: names, units,
// suffixes, help) finds no problem in any process's /metrics.
func testPromlint(t *testing.T, s *stacktest.Stack) {
	for process, page := range map[string]string{"api": s.APIMetrics(), "worker": s.WorkerMetrics(), "fakeprocessor": s.ProcessorMetrics()} {
		cmd := exec.Command(promtool(t), "check", "metrics")
		cmd.Stdin = strings.NewReader(page)
		if out, err := cmd.CombinedOutput(); err != nil || len(bytes.TrimSpace(out)) > 0 {
			t.Errorf("promtool check metrics on %s's /metrics: %v\n%s", process, err, out)
		}
	}
}

// testExemplars: in OpenMetrics, a bucket of the request's latency has
// the request's trace id as its exemplar, and so do a bucket of its
// operation's job and of the processor call the job made, once the worker
// has run it.
func testExemplars(t *testing.T, s *stacktest.Stack) {
	if !hasExemplar(s.APIOpenMetrics(), `payments_http_request_duration_seconds_bucket{method="POST",route="/v1/payments",`) {
		t.Errorf("no bucket of POST /v1/payments's latency has the exemplar trace_id %s:\n%s", traceID, s.APIOpenMetrics())
	}
	if hasExemplar(s.APIMetrics(), "payments_http_request_duration_seconds_bucket") {
		t.Error("the text format, which has no exemplars, shows one")
	}
	stacktest.WaitFor(t, "the payment's job and processor call with their exemplars", func() bool {
		page := s.WorkerOpenMetrics()
		return hasExemplar(page, `payments_job_run_duration_seconds_bucket{kind="drive_operation",result="ok",`) &&
			hasExemplar(page, `payments_processor_call_duration_seconds_bucket{operation="charge",outcome="ok",`)
	})
}

// hasExemplar reports whether a line of page that starts with series has
// the exemplar of traceID.
func hasExemplar(page, series string) bool {
	for line := range strings.Lines(page) {
		if strings.HasPrefix(line, series) && strings.Contains(line, ` # {trace_id="`+traceID+`"}`) {
			return true
		}
	}
	return false
}
