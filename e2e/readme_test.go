package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/example/payments/tools/testdb"
	"github.com/example/payments/tools/testio"
	"github.com/example/payments/tools/testwait"
)

// walkthroughHeading opens the README's section that TestReadmeWalkthrough runs.
const walkthroughHeading = "## Walk through it with curl"

// TestReadmeWalkthrough starts the stack as `make run` does and runs the
// README's curl walkthrough as written, read from README.md at test time:
// each ```sh block in order, in one bash session, with only the addresses
// rewritten to the test's ports. A block followed by an ```http block must
// answer with that status line, those headers and that body (ids compared by
// shape, "…" matching anything); a block without one must not fail. Then it
// checks what the README does not show: every replay is byte for byte the
// first answer, every payment created has exactly one charge at the
// processor, and the three programs stop cleanly on SIGTERM.
func TestReadmeWalkthrough(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("curl"); err != nil {
		t.Fatal("the README's walkthrough needs curl: install it (.ci/run does)")
	}
	steps := readWalkthrough(t, "../README.md")
	runScript, err := os.ReadFile("../scripts/run.sh")
	if err != nil || !strings.Contains(string(runScript), "PROCESSOR_WEBHOOK_SECRET:-"+demoWebhookSecret) ||
		!strings.Contains(string(runScript), "PROCESSOR_WEBHOOK_URL:-") {
		t.Fatalf("scripts/run.sh no longer sets the processor's webhooks as startAsMakeRun does (%v)", err)
	}
	// startAsMakeRun gives every program the same database settings, as
	// scripts/run.sh does by setting none of its own: each program decides
	// what goes past a pooler.
	if strings.Contains(string(runScript), "DATABASE_") {
		t.Fatal("scripts/run.sh sets a DATABASE_ variable, which startAsMakeRun does not")
	}
	makefile, err := os.ReadFile("../Makefile")
	if err != nil || !strings.Contains(string(makefile), "WEBHOOK_SECRETS_KEY ?= "+demoSecretsKey) ||
		!strings.Contains(string(makefile), "RECEIVER_SECRET ?= "+demoReceiverSecret) || !strings.Contains(string(makefile), "WEBHOOK_ALLOW_PRIVATE_NETWORKS ?= true") {
		t.Fatalf("the Makefile no longer sets the demo webhooks as startAsMakeRun does (%v)", err)
	}
	s, metricsAddr := startAsMakeRun(t, testdb.NewEmpty(t))

	// The README's addresses are the defaults of make run; the test's
	// processes listen on free ports.
	addrs := strings.NewReplacer("localhost:8080", s.apiAddr, "localhost:8090", s.procAddr, "localhost:9091", metricsAddr)
	// ./bin/worker review reads the same database as the stack, as it does
	// beside make run.
	outputs := runWalkthrough(t, steps, addrs, s.serviceEnv()...)

	ids := idBindings{}
	var answers []*response
	for i, st := range steps {
		if st.want == nil {
			if m := failedRE.FindString(outputs[i]); m != "" {
				t.Errorf("README line %d: a command failed (%q)\n%s\noutput:\n%s", st.line, m, st.script, outputs[i])
			}
			continue
		}
		got, err := parseResponse(outputs[i])
		if err != nil {
			t.Errorf("README line %d: %v\n%s\noutput:\n%s", st.line, err, st.script, outputs[i])
			continue
		}
		for _, problem := range st.want.mismatches(got, ids) {
			t.Errorf("README line %d (answer at line %d): %s\n%s\noutput:\n%s", st.line, st.want.line, problem, st.script, outputs[i])
		}
		answers = append(answers, got)
	}
	if t.Failed() {
		return
	}
	checkReplays(t, answers)
	checkOneChargeEach(t, s, answers)
	// The timeout card's answer came within its wait, shorter than the
	// worker's processor call: the processor's webhook settled it.
	testwait.For(t, "the worker counting a payment settled by the processor's webhook", func() bool {
		_, _, body := do(t, http.MethodGet, "http://"+metricsAddr+"/metrics", "", "", "")
		return webhookSettledRE.Match(body)
	})
	// The demo endpoint got the walkthrough's events, verified: the
	// receiver prints each new one.
	testwait.For(t, "the demo receiver printing the walkthrough's events", func() bool {
		out := s.receiver.out.String()
		return strings.Contains(out, "event evt_") && strings.Contains(out, " payment.succeeded ") && strings.Contains(out, " refund.succeeded ")
	})

	s.api.stop(t)
	s.worker.stop(t)
	s.processor.stop(t)
	s.receiver.stop(t)
}

// The demo secrets: the processor's webhook secret scripts/run.sh sets, and
// the key of the endpoints' secrets and the demo receiver's secret the
// Makefile sets; TestReadmeWalkthrough checks that they still do.
const (
	demoWebhookSecret  = "whsec_ZGVtby1vbmx5LXByb2Nlc3Nvci13ZWJob29rLXNlY3JldA=="
	demoSecretsKey     = "ZGVtby1vbmx5LXdlYmhvb2stc2VjcmV0cy1rZXktMzI="
	demoReceiverSecret = "whsec_ZGVtby1vbmx5LXJlY2VpdmVyLXdlYmhvb2stc2VjcmV0"
)

// startAsMakeRun does what `make run` does, on free ports and databaseURL:
// api migrate, APP_ENV=development api seed, then the processor, the worker
// and the API with their default settings (but one, below) and logs as text. It returns the
// stack and the worker's metrics address. Through the pooler (E2E_POOLER),
// every program gets DATABASE_URL at it and DATABASE_SESSION_URL past it, as
// docs/SCALING.md says to run make run, and as scripts/run.sh passes them on.
func startAsMakeRun(t *testing.T, databaseURL string) (*stack, string) {
	t.Helper()
	s := newStack(t, databaseURL)
	db, text := s.serviceEnv(), "LOG_FORMAT=text"
	with := func(env ...string) []string { return append(append([]string{}, db...), env...) }
	run(t, "api", with(text), "migrate")
	// The Makefile's demo settings: the key of the endpoints' secrets, and
	// Acme's endpoint at the demo receiver, whose secret it holds.
	key, private := "WEBHOOK_SECRETS_KEY="+demoSecretsKey, "WEBHOOK_ALLOW_PRIVATE_NETWORKS=true"
	receiverAddr := freeAddr(t)
	run(t, "api", with(text, key, "APP_ENV=development"), "seed",
		"-webhook-url", "http://"+receiverAddr+"/webhooks", "-webhook-secret", demoReceiverSecret)

	metricsAddr := freeAddr(t)
	// scripts/run.sh: the processor's webhooks go to the API, with the demo
	// secret.
	secret := "PROCESSOR_WEBHOOK_SECRET=" + demoWebhookSecret
	s.processor = start(t, "fakeprocessor", with(text, "PROCESSOR_ADDR="+s.procAddr, "PROCESSOR_INTERNAL_ADDR=127.0.0.1:0", secret,
		"PROCESSOR_WEBHOOK_URL="+s.apiURL+"/v1/processor/webhooks"))
	s.worker = start(t, "worker", with(text, key, private, "METRICS_ADDR="+metricsAddr, "PROCESSOR_URL="+s.processorURL))
	// The one setting that differs: a payment answers 201 once its charge
	// is done, within the default 5 s wait on any machine a person runs the
	// walkthrough on; a test run shares its machine with every other test,
	// so it waits up to the longest wait instead. The answers are the same.
	s.api = start(t, "api", with(text, key, private, "API_ADDR="+s.apiAddr, internalAddr, "IDEMPOTENCY_DEFAULT_WAIT=30s", secret))
	s.receiver = start(t, "demoreceiver", with(text, "RECEIVER_ADDR="+receiverAddr, "RECEIVER_SECRET="+demoReceiverSecret,
		"RECEIVER_DEDUPE_FILE="+filepath.Join(t.TempDir(), "seen.log")))
	waitHealthy(t, "http://"+receiverAddr+"/healthz", s.receiver)
	waitHealthy(t, s.processorURL+"/healthz", s.processor)
	waitHealthy(t, "http://"+metricsAddr+"/healthz", s.worker)
	waitHealthy(t, s.apiURL+"/readyz", s.api)
	return s, metricsAddr
}

// step is one ```sh block of the walkthrough and the ```http block that
// follows it, if any.
type step struct {
	line   int // README line of the block's first command
	script string
	want   *answer
}

// answer is an ```http block: what the README shows a command answers.
type answer struct {
	line    int
	status  string   // "HTTP/1.1 201 Created"
	headers []string // "Name: value", as shown
	body    string   // may be trimmed with "…"
}

// readWalkthrough returns the steps of the README's walkthrough section: its
// ```sh blocks in order, each with the ```http block that follows it.
func readWalkthrough(t *testing.T, path string) []step {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	var steps []step
	in := false
	for i := 0; i < len(lines); i++ {
		switch {
		case lines[i] == walkthroughHeading:
			in = true
		case strings.HasPrefix(lines[i], "## "):
			in = false
		}
		info, isFence := strings.CutPrefix(lines[i], "```")
		if !isFence {
			continue
		}
		// A block is skipped whole, so a "## " inside one is no heading.
		end := i + 1
		for end < len(lines) && lines[end] != "```" {
			end++
		}
		if end == len(lines) {
			t.Fatalf("README line %d: a code block is never closed", i+1)
		}
		content, line := lines[i+1:end], i+2
		i = end
		if !in {
			continue
		}
		switch info {
		case "sh":
			steps = append(steps, step{line: line, script: strings.Join(content, "\n")})
		case "http":
			if len(steps) == 0 || steps[len(steps)-1].want != nil {
				t.Fatalf("README line %d: an http block without a command before it", line)
			}
			steps[len(steps)-1].want = parseAnswer(t, line, content)
		}
	}
	if len(steps) == 0 {
		t.Fatalf("%s has no section %q with ```sh blocks", path, walkthroughHeading)
	}
	return steps
}

// parseAnswer reads an ```http block: a status line, header lines, a blank
// line and a body.
func parseAnswer(t *testing.T, line int, lines []string) *answer {
	t.Helper()
	if len(lines) == 0 || !strings.HasPrefix(lines[0], "HTTP/") {
		t.Fatalf("README line %d: an http block must start with a status line", line)
	}
	a := &answer{line: line, status: lines[0]}
	i := 1
	for ; i < len(lines) && lines[i] != ""; i++ {
		if !strings.Contains(lines[i], ": ") {
			t.Fatalf("README line %d: %q is not a header", line+i, lines[i])
		}
		a.headers = append(a.headers, lines[i])
	}
	a.body = strings.TrimSpace(strings.Join(lines[i:], "\n"))
	return a
}

// runWalkthrough runs every step in one bash session, as a reader pastes
// them into one terminal, in a directory whose bin/ holds the built binaries
// (for ./bin/worker), and returns each step's output.
func runWalkthrough(t *testing.T, steps []step, addrs *strings.Replacer, env ...string) []string {
	t.Helper()
	dir := t.TempDir()
	if err := os.Symlink(binDir, filepath.Join(dir, "bin")); err != nil {
		t.Fatal(err)
	}
	var script strings.Builder
	// -e: a command that fails stops the walkthrough (curl -s without -f
	// does not fail on a 4xx; the answers are checked below).
	script.WriteString("set -euo pipefail\n")
	for i, st := range steps {
		if other := localhostRE.FindString(addrs.Replace(st.script)); other != "" {
			t.Fatalf("README line %d: %s is none of make run's addresses", st.line, other)
		}
		fmt.Fprintf(&script, "printf '\\n%s\\n'\n%s\n", marker(i), addrs.Replace(st.script))
	}
	fmt.Fprintf(&script, "printf '\\n%s\\n'\n", marker(len(steps)))
	path := filepath.Join(dir, "walkthrough.sh")
	if err := os.WriteFile(path, []byte(script.String()), 0o644); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", path)
	cmd.Dir = dir
	// Nothing between curl and the test's loopback ports.
	cmd.Env = append(os.Environ(), append(env, "NO_PROXY=127.0.0.1", "no_proxy=127.0.0.1")...)
	var stderr testio.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		reached := strings.Count(string(out), "@@readme-step-") - 1
		at := "the end"
		if reached >= 0 && reached < len(steps) {
			at = fmt.Sprintf("README line %d:\n%s", steps[reached].line, steps[reached].script)
		}
		t.Fatalf("the walkthrough failed (%v) at %s\nstderr:\n%s\noutput:\n%s", err, at, stderr.String(), out)
	}

	outputs := make([]string, len(steps))
	rest := string(out)
	for i := range steps {
		_, after, ok1 := strings.Cut(rest, "\n"+marker(i)+"\n")
		before, _, ok2 := strings.Cut(after, "\n"+marker(i+1)+"\n")
		if !ok1 || !ok2 {
			t.Fatalf("the walkthrough's output lost its step markers:\n%s", out)
		}
		outputs[i], rest = before, after
	}
	return outputs
}

// webhookSettledRE finds, in the worker's metrics, a payment settled by the
// processor's webhook.
var webhookSettledRE = regexp.MustCompile(`(?m)^payments_operations_settled_total\{path="webhook",resource_type="payment"\} [1-9]`)

// localhostRE finds an address the test did not rewrite.
var localhostRE = regexp.MustCompile(`localhost:\d+`)

// marker is printed before step i's output, and after the last step's.
func marker(i int) string { return fmt.Sprintf("@@readme-step-%d@@", i) }

// failedRE finds, in the output of a step the README shows no answer for, a
// sign that it failed: a 4xx or 5xx status line, or a problem document.
var failedRE = regexp.MustCompile(`(?m)^HTTP/[0-9.]+ [45]\d\d[^\r\n]*|"type":"https://payments\.example/problems/[a-z_]+"`)

// response is what curl -si printed.
type response struct {
	status  string
	headers http.Header
	body    string
}

func parseResponse(out string) (*response, error) {
	out = strings.ReplaceAll(out, "\r\n", "\n")
	head, body, ok := strings.Cut(out, "\n\n")
	if !ok || !strings.HasPrefix(head, "HTTP/") {
		return nil, fmt.Errorf("the README shows an answer, but the command printed no status line and headers (curl -si)")
	}
	lines := strings.Split(head, "\n")
	r := &response{status: lines[0], headers: http.Header{}, body: strings.TrimSpace(body)}
	for _, l := range lines[1:] {
		name, value, _ := strings.Cut(l, ":")
		r.headers.Add(name, strings.TrimSpace(value))
	}
	return r, nil
}

// idRE matches the ids the service and the processor make: a prefix and 24
// base62 characters (the processor's are hex).
var idRE = regexp.MustCompile(`(?:pay|re|evt|ch|req|we)_[0-9A-Za-z]{24}`)

// timeRE matches an RFC 3339 timestamp in UTC, as the API writes them.
var timeRE = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z`)

// tokenRE finds what a README answer shows that may differ in each run: ids,
// timestamps, and "…" with the spaces around it, which a trimmed JSON body
// has for legibility.
var tokenRE = regexp.MustCompile(idRE.String() + `|` + timeRE.String() + `| ?… ?`)

// idBindings pairs each id the README shows with the id the run made in its
// place: the same README id must be the same id every time, and two README
// ids two ids.
type idBindings map[string]string

// bind records that the README's want stands for got.
func (b idBindings) bind(want, got string) error {
	if prev, ok := b[want]; ok {
		if prev != got {
			return fmt.Errorf("%s is %s here but was %s before", want, got, prev)
		}
		return nil
	}
	for w, g := range b {
		if g == got {
			return fmt.Errorf("%s and %s are different ids in the README but both %s", w, want, got)
		}
	}
	b[want] = got
	return nil
}

// matches reports whether got is what the README shows as want: ids by
// shape, timestamps by form, "…" as anything; ids are bound as they match.
func (b idBindings) matches(want, got string) error {
	var pattern strings.Builder
	pattern.WriteString(`(?s)^`)
	var shown []string
	last := 0
	for _, loc := range tokenRE.FindAllStringIndex(want, -1) {
		pattern.WriteString(regexp.QuoteMeta(want[last:loc[0]]))
		tok := want[loc[0]:loc[1]]
		switch {
		case strings.Contains(tok, "…"):
			pattern.WriteString(`.*?`)
		case timeRE.MatchString(tok):
			pattern.WriteString(timeRE.String())
		default:
			prefix, _, _ := strings.Cut(tok, "_")
			pattern.WriteString(`(` + prefix + `_[0-9A-Za-z]{24})`)
			shown = append(shown, tok)
		}
		last = loc[1]
	}
	pattern.WriteString(regexp.QuoteMeta(want[last:]) + `$`)
	m := regexp.MustCompile(pattern.String()).FindStringSubmatch(got)
	if m == nil {
		return fmt.Errorf("want %q, got %q", want, got)
	}
	for i, id := range shown {
		if err := b.bind(id, m[i+1]); err != nil {
			return err
		}
	}
	return nil
}

// mismatches lists how got differs from what the README shows.
func (a *answer) mismatches(got *response, ids idBindings) []string {
	var problems []string
	if got.status != a.status {
		problems = append(problems, fmt.Sprintf("status line: want %q, got %q", a.status, got.status))
	}
	for _, h := range a.headers {
		name, value, _ := strings.Cut(h, ": ")
		values := got.headers.Values(name)
		if len(values) != 1 {
			problems = append(problems, fmt.Sprintf("header %s: want %q, got %q", name, value, values))
			continue
		}
		if err := ids.matches(value, values[0]); err != nil {
			problems = append(problems, fmt.Sprintf("header %s: %v", name, err))
		}
	}
	if a.body != "" {
		if err := ids.matches(a.body, got.body); err != nil {
			problems = append(problems, fmt.Sprintf("body: %v", err))
		}
	}
	return problems
}

// checkReplays checks that every answer marked as a replay is byte for byte
// the answer first given for the same resource, and that the walkthrough
// shows at least one.
func checkReplays(t *testing.T, answers []*response) {
	t.Helper()
	replays := 0
	for i, r := range answers {
		if r.headers.Get("Idempotent-Replayed") != "true" {
			continue
		}
		for _, first := range answers[:i] {
			loc := r.headers.Get("Location")
			if first.headers.Get("Idempotent-Replayed") == "" && loc != "" && first.headers.Get("Location") == loc {
				replays++
				if first.status != r.status || first.body != r.body {
					t.Errorf("replay differs from the first answer:\n%s\n%s\nand\n%s\n%s", first.status, first.body, r.status, r.body)
				}
			}
		}
	}
	if replays == 0 {
		t.Error("the README's walkthrough no longer shows a replay next to its first answer")
	}
}

// checkOneChargeEach asks the processor, over its own API, for the charges
// of every payment the walkthrough created (201): exactly one each, the one
// the payment names.
func checkOneChargeEach(t *testing.T, s *stack, answers []*response) {
	t.Helper()
	checked := 0
	for _, r := range answers {
		id, ok := strings.CutPrefix(r.headers.Get("Location"), "/v1/payments/")
		if !strings.HasPrefix(r.status, "HTTP/1.1 201") || !ok {
			continue
		}
		var p struct {
			ProcessorChargeID string `json:"processor_charge_id"`
		}
		if err := json.Unmarshal([]byte(r.body), &p); err != nil {
			t.Fatalf("payment %s: %v: %s", id, err, r.body)
		}
		if charges := chargesFor(t, s, id); len(charges) != 1 || charges[0] != p.ProcessorChargeID {
			t.Errorf("processor charges of %s (charge %s): %v", id, p.ProcessorChargeID, charges)
		}
		checked++
	}
	if checked == 0 {
		t.Error("the README's walkthrough no longer shows a payment created (201)")
	}
}
