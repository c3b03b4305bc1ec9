package worker

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/riverqueue/river"

	"github.com/example/payments/internal/jobs"
	"github.com/example/payments/internal/process"
	"github.com/example/payments/tools/testdb"
	"github.com/example/payments/tools/testio"
	"github.com/example/payments/tools/testwait"
)

// dashboardPassword is distinctive, so that finding it in the logs is
// finding a leak.
const dashboardPassword = "pw-5f1c-never-logged"

// TestDashboard: with a password, River's dashboard is on the internal
// listener behind basic auth, its page, assets and API under /riverui/,
// and the configuration logged at start shows the password masked.
func TestDashboard(t *testing.T) {
	t.Parallel()
	w, db, logs := runWorker(t, func(c *Config) { c.RiverUIPassword = dashboardPassword })
	base := "http://" + w.MetricsAddr()
	job := scheduleJob(t, db)

	t.Run("NoCredentials", func(t *testing.T) {
		resp, _ := get(t, base+"/riverui/", "", "")
		if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("WWW-Authenticate") != `Basic realm="river"` {
			t.Fatalf("status %d, WWW-Authenticate %q", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
		}
	})
	t.Run("WrongCredentials", func(t *testing.T) {
		for _, c := range [][2]string{{"admin", "wrong"}, {"admin", dashboardPassword + "x"}, {"root", dashboardPassword}, {"", ""}} {
			if resp, _ := get(t, base+"/riverui/api/jobs", c[0], c[1]); resp.StatusCode != http.StatusUnauthorized {
				t.Errorf("user %q, password %q: status %d", c[0], c[1], resp.StatusCode)
			}
		}
	})
	t.Run("Page", func(t *testing.T) { checkPage(t, base) })
	t.Run("API", func(t *testing.T) {
		var list struct {
			Data []struct {
				ID   int64  `json:"id"`
				Kind string `json:"kind"`
			} `json:"data"`
		}
		getJSON(t, base+"/riverui/api/jobs?state=scheduled", &list)
		if len(list.Data) != 1 || list.Data[0].ID != job || list.Data[0].Kind != "drive_operation" {
			t.Fatalf("scheduled jobs %+v, want job %d", list.Data, job)
		}
		if state := jobState(t, base, job); state != "scheduled" {
			t.Fatalf("job %d is %q, want scheduled", job, state)
		}
	})
	t.Run("CrossOriginWrite", func(t *testing.T) { checkCrossOriginCancel(t, base, job) })
	t.Run("PasswordMasked", func(t *testing.T) {
		out := logs.String()
		if strings.Contains(out, dashboardPassword) {
			t.Fatalf("the password is in the logs:\n%s", out)
		}
		if !strings.Contains(configLine(t, out), `"RiverUIPassword":"********"`) {
			t.Fatalf("configuration line: %s", configLine(t, out))
		}
	})
}

// scheduleJob inserts a job nobody works for an hour, for the dashboard to
// show, and returns its id.
func scheduleJob(t *testing.T, db *testdb.DB) int64 {
	t.Helper()
	inserter, err := jobs.NewInserter(db.Pool, jobs.InsertCooldown, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	job, err := inserter.Insert(context.Background(), jobs.OperationArgs{ResourceType: "payment", ID: "pay_dashboard"}, &river.InsertOpts{ScheduledAt: time.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	return job.Job.ID
}

// checkPage: the dashboard's page is served under its prefix, and so is its
// script, guarded as well.
func checkPage(t *testing.T, base string) {
	t.Helper()
	resp, body := get(t, base+"/riverui/", "admin", dashboardPassword)
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") ||
		!strings.Contains(body, `<div id="root"`) || !strings.Contains(body, "<title>River</title>") {
		t.Fatalf("status %d, Content-Type %q:\n%s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	script := regexp.MustCompile(`src="(/riverui/assets/[^"]+\.js)"`).FindStringSubmatch(body)
	if script == nil {
		t.Fatalf("no script under /riverui/assets/ in:\n%s", body)
	}
	if resp, js := get(t, base+script[1], "admin", dashboardPassword); resp.StatusCode != http.StatusOK || len(js) == 0 {
		t.Fatalf("%s: status %d, %d bytes", script[1], resp.StatusCode, len(js))
	}
	if resp, _ := get(t, base+script[1], "", ""); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("%s without credentials: status %d", script[1], resp.StatusCode)
	}
}

// checkCrossOriginCancel: a cancel of job id is refused to another site's
// page and done for the dashboard's own.
func checkCrossOriginCancel(t *testing.T, base string, id int64) {
	t.Helper()
	cancel := func(fetchSite string) int {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, base+"/riverui/api/jobs/cancel", strings.NewReader(`{"ids":["`+itoa(id)+`"]}`))
		if err != nil {
			t.Fatal(err)
		}
		req.SetBasicAuth("admin", dashboardPassword)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Sec-Fetch-Site", fetchSite)
		resp, _ := do(t, req)
		return resp.StatusCode
	}
	// Another site's page, riding on the browser's cached credentials.
	if code := cancel("cross-site"); code != http.StatusForbidden {
		t.Fatalf("cross-site cancel: status %d", code)
	}
	if state := jobState(t, base, id); state != "scheduled" {
		t.Fatalf("after a cross-site cancel the job is %q", state)
	}
	// The dashboard's own page.
	if code := cancel("same-origin"); code != http.StatusOK {
		t.Fatalf("same-origin cancel: status %d", code)
	}
	if state := jobState(t, base, id); state != "cancelled" {
		t.Fatalf("after the dashboard's cancel the job is %q", state)
	}
}

// TestDashboardOff: without a password there is no dashboard, even for
// the right user, the metrics are still served, and the worker says so
// once.
func TestDashboardOff(t *testing.T) {
	t.Parallel()
	w, _, logs := runWorker(t, nil)
	base := "http://" + w.MetricsAddr()
	for _, path := range []string{"/riverui/", "/riverui/api/jobs"} {
		if resp, _ := get(t, base+path, "admin", ""); resp.StatusCode != http.StatusNotFound {
			t.Errorf("%s: status %d, want 404", path, resp.StatusCode)
		}
	}
	if resp, body := get(t, base+"/metrics", "", ""); resp.StatusCode != http.StatusOK || !strings.Contains(body, "go_goroutines") {
		t.Fatalf("/metrics: status %d", resp.StatusCode)
	}
	if n := strings.Count(logs.String(), "River dashboard off"); n != 1 {
		t.Fatalf("the dashboard's absence logged %d times:\n%s", n, logs.String())
	}
	if !strings.Contains(configLine(t, logs.String()), `"RiverUIPassword":""`) {
		t.Fatalf("configuration line: %s", configLine(t, logs.String()))
	}
}

// TestDashboardUserValidate: a password with a user nobody could log in as
// is refused; no password needs no user.
func TestDashboardUserValidate(t *testing.T) {
	t.Parallel()
	for _, user := range []string{"", "ad:min"} {
		cfg := defaults(t)
		cfg.RiverUIUser, cfg.RiverUIPassword = user, dashboardPassword
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "RIVER_UI_USER") {
			t.Errorf("user %q: err = %v", user, err)
		}
		cfg.RiverUIPassword = ""
		if err := cfg.Validate(); err != nil {
			t.Errorf("user %q without a password: %v", user, err)
		}
	}
}

// TestDashboardNotFramed: every answer of River's dashboard, the page, its
// API and the 401 before them, forbids being shown in a frame of another
// site (clickjacking its buttons).
func TestDashboardNotFramed(t *testing.T) {
	t.Parallel()
	w, _, _ := runWorker(t, func(c *Config) { c.RiverUIPassword = dashboardPassword })
	base := "http://" + w.MetricsAddr()
	testwait.For(t, "the dashboard to serve", func() bool {
		resp, _ := get(t, base+"/riverui/", "admin", dashboardPassword)
		return resp.StatusCode == http.StatusOK
	})
	for _, tt := range []struct {
		path, user, password string
		status               int
	}{
		{"/riverui/", "admin", dashboardPassword, http.StatusOK},
		{"/riverui/api/jobs?limit=1", "admin", dashboardPassword, http.StatusOK},
		{"/riverui/", "", "", http.StatusUnauthorized},
	} {
		resp, _ := get(t, base+tt.path, tt.user, tt.password)
		if resp.StatusCode != tt.status || resp.Header.Get("X-Frame-Options") != "DENY" ||
			resp.Header.Get("Content-Security-Policy") != "frame-ancestors 'none'" {
			t.Errorf("GET %s (user %q): %d, X-Frame-Options %q, Content-Security-Policy %q; want %d, DENY and frame-ancestors 'none'",
				tt.path, tt.user, resp.StatusCode, resp.Header.Get("X-Frame-Options"), resp.Header.Get("Content-Security-Policy"), tt.status)
		}
	}
}

// runWorker builds the real worker with New on a database of its own, its
// internal listener on a free port, changed by change, and runs it until
// the test ends. It returns what the worker logs.
func runWorker(t *testing.T, change func(*Config)) (*Worker, *testdb.DB, *testio.Buffer) {
	t.Helper()
	db := testdb.New(t)
	cfg := defaults(t)
	cfg.DatabaseURL, cfg.MetricsAddr, cfg.DBMaxConns = db.URL, "127.0.0.1:0", 4
	cfg.ReconcileInterval, cfg.ReapInterval = 0, 0 // no periodic jobs in the way
	if change != nil {
		change(&cfg)
	}
	logs := &testio.Buffer{}
	w, err := New(context.Background(), cfg, process.NewLogger(logs, "json", slog.LevelInfo))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
		if t.Failed() {
			t.Logf("worker logs:\n%s", logs.String())
		}
	})
	return w, db, logs
}

// jobState is the state of job id as the dashboard's API shows it.
func jobState(t *testing.T, base string, id int64) string {
	t.Helper()
	var job struct {
		ID    int64  `json:"id"`
		State string `json:"state"`
	}
	getJSON(t, base+"/riverui/api/jobs/"+itoa(id), &job)
	if job.ID != id {
		t.Fatalf("asked for job %d, got %d", id, job.ID)
	}
	return job.State
}

// getJSON fetches url from the dashboard's API into v.
func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	resp, body := get(t, url, "admin", dashboardPassword)
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		t.Fatalf("%s: status %d, Content-Type %q: %s", url, resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	if err := json.Unmarshal([]byte(body), v); err != nil {
		t.Fatalf("%s: %v: %s", url, err, body)
	}
}

// get fetches url, with basic auth unless user and password are both empty.
func get(t *testing.T, url, user, password string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if user != "" || password != "" {
		req.SetBasicAuth(user, password)
	}
	return do(t, req)
}

// do sends req and reads the whole response.
func do(t *testing.T, req *http.Request) (*http.Response, string) {
	t.Helper()
	client := &http.Client{Timeout: 10 * time.Second}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(body)
}

// configLine is the configuration record among logs.
func configLine(t *testing.T, logs string) string {
	t.Helper()
	for line := range strings.Lines(logs) {
		if strings.Contains(line, `"msg":"configuration"`) {
			return line
		}
	}
	t.Fatalf("no configuration line in:\n%s", logs)
	return ""
}

func itoa(id int64) string { return strconv.FormatInt(id, 10) }
