// Package hapg runs a real highly available PostgreSQL for tests: one etcd
// and two Patroni nodes, pg1 and pg2, running PostgreSQL 15 in synchronous
// mode on loopback, and HAProxy in front of them forwarding to whichever is
// the primary (as it asks each node's Patroni REST API), through the script
// hapg.sh beside this file, built in (whose header says how to run the same
// cluster by hand).
//
// It needs the Debian packages patroni, etcd-server and haproxy
//
//	apt-get install -y --no-install-recommends patroni etcd-server haproxy
//
// (Start skips the test when they are missing), PostgreSQL 15 in
// /usr/lib/postgresql/15/bin (or HAPG_PG_BIN), curl and jq, and root (the
// daemons run as user postgres) or user postgres.
//
// A test starts a cluster, connects through the multi-host URL or through
// HAProxy (ProxyURL), and kills and restarts nodes:
//
//	c := hapg.Start(t) // a leader, a streaming synchronous standby, HAProxy on the leader
//	pool, err := pgxpool.New(ctx, c.URL())
//	killed, err := c.KillPrimary() // SIGKILL its Patroni and Postgres
//	leader, err := c.WaitPrimary(ctx) // the standby took over, HAProxy too (~10s)
//	err = c.Restart(killed)           // it rewinds and rejoins
//	sync, err := c.WaitSyncStandby(ctx)
//
// The cluster is stopped and its directory removed when the test ends (set
// HAPG_KEEP=1 to keep the directory, with its logs, for a look). A program
// (the chaos run) starts one with Run and stops it with Stop.
package hapg

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/example/payments/internal/timer"
)

// Nodes are the names of the cluster's Patroni nodes, in port order.
var Nodes = []string{"pg1", "pg2"}

// Port offsets from the base port, as hapg.sh lays them out.
const (
	restOffset  = 100 // Patroni REST API of node i: base+100+i
	etcdOffset  = 200 // etcd client base+200, peer base+201
	proxyOffset = 300 // HAProxy base+300
)

// Cluster is a running cluster.
type Cluster struct {
	logf   func(format string, args ...any) // hapg.sh's log lines
	dir    string
	script string
	base   int
	url    string
	proxy  string // the URL through HAProxy
	http   *http.Client
}

// Start starts a cluster in a fresh directory on free ports, waits until a
// leader runs, a synchronous standby streams from it and HAProxy forwards to
// it, and stops it and removes the directory when t ends. It skips t when
// patroni, etcd or haproxy is not installed.
func Start(t testing.TB) *Cluster {
	t.Helper()
	if err := Installed(); err != nil {
		t.Skipf("%v (Debian: apt-get install -y --no-install-recommends patroni etcd-server haproxy)", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, err := Run(ctx, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(c.Tails(25))
		}
		if err := c.Stop(); err != nil {
			t.Error(err)
		}
	})
	return c
}

// Installed returns an error naming what the cluster needs and this machine
// lacks: the patroni, etcd or haproxy command (Debian puts haproxy in
// /usr/sbin, which a user's PATH may lack).
func Installed() error {
	for _, bins := range [][]string{{"patroni"}, {"etcd"}, {"haproxy", "/usr/sbin/haproxy"}} {
		found := false
		for _, bin := range bins {
			if _, err := exec.LookPath(bin); err == nil {
				found = true
			}
		}
		if !found {
			return fmt.Errorf("hapg: %s is not installed", bins[0])
		}
	}
	return nil
}

// Run starts a cluster as Start does, for a program rather than a test: the
// script's log lines go to logf, and the caller stops the cluster with Stop.
// On an error nothing is left running.
func Run(ctx context.Context, logf func(format string, args ...any)) (*Cluster, error) {
	dir, err := postgresDir()
	if err != nil {
		return nil, err
	}
	script, err := scriptIn(dir)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	base, err := freeBase()
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	c := &Cluster{logf: logf, dir: dir, script: script, base: base, http: &http.Client{Timeout: 2 * time.Second}}
	began := time.Now()
	if _, err := c.run(ctx, "start", dir); err != nil {
		logf("%s", c.Tails(25))
		return nil, errors.Join(fmt.Errorf("hapg: start: %w", err), c.Stop())
	}
	for f, to := range map[string]*string{"url": &c.url, "proxy_url": &c.proxy} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			return nil, errors.Join(fmt.Errorf("hapg: %w", err), c.Stop())
		}
		*to = strings.TrimSpace(string(b))
	}
	logf("hapg: cluster up in %v in %s (postgres ports %d,%d; REST %d,%d; etcd %d; HAProxy %d)",
		time.Since(began).Round(time.Millisecond), dir, base, base+1, base+restOffset, base+restOffset+1, base+etcdOffset, base+proxyOffset)
	return c, nil
}

// URL is the multi-host URL that reaches whichever node is the primary
// (target_session_attrs=read-write), as user postgres with its password.
func (c *Cluster) URL() string { return c.url }

// ProxyURL is the URL through HAProxy, which forwards to the node whose
// Patroni answers GET /primary with 200 and cuts every session to a node it
// finds is not (within two seconds), as user postgres with its password.
func (c *Cluster) ProxyURL() string { return c.proxy }

// NodeURL is the URL of one node alone, whatever its role.
func (c *Cluster) NodeURL(node string) (string, error) {
	i, err := index(node)
	if err != nil {
		return "", err
	}
	// postgres://USER:PASS@HOST:PORT,HOST:PORT/postgres?...: one host.
	u := c.url
	at := strings.Index(u, "@")
	slash := at + strings.Index(u[at:], "/")
	u = u[:at+1] + net.JoinHostPort("127.0.0.1", strconv.Itoa(c.base+i)) + u[slash:]
	return strings.Replace(u, "&target_session_attrs=read-write", "", 1), nil
}

// Dir is the cluster's directory: configs, data, logs (NODE/patroni.log,
// NODE/log/postgresql.log, etcd.log, haproxy.log).
func (c *Cluster) Dir() string { return c.dir }

// Primary returns the running leader, as a node's REST API sees it.
func (c *Cluster) Primary() (string, error) {
	st, err := c.status()
	if err != nil {
		return "", err
	}
	if m, ok := st.member("leader", "running"); ok {
		return m.Name, nil
	}
	return "", fmt.Errorf("hapg: no running leader: %s", st)
}

// KillPrimary SIGKILLs the leader's Patroni and its Postgres (postmaster and
// backends) at once, like a crash, and returns its name.
func (c *Cluster) KillPrimary() (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := c.run(ctx, "kill-primary", c.dir)
	if err != nil {
		return "", err
	}
	name := strings.TrimSpace(out)
	if _, err := index(name); err != nil {
		return "", fmt.Errorf("hapg: kill-primary printed %q", out)
	}
	return name, nil
}

// Restart starts a killed node's Patroni again; it recovers, rewinds and
// rejoins as a standby (WaitSyncStandby waits for that).
func (c *Cluster) Restart(node string) error {
	if _, err := index(node); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := c.run(ctx, "restart", node, c.dir)
	return err
}

// WaitPrimary waits until a node is the leader (its REST API answers
// GET /primary with 200) and accepts a write, directly and through HAProxy:
// a transaction that takes a transaction id commits on it both ways. It
// returns that node.
func (c *Cluster) WaitPrimary(ctx context.Context) (string, error) {
	return c.until(ctx, "no writable primary", c.writablePrimary)
}

// until calls try every 100 ms until it returns a node, or ctx ends; then
// the daemons' last log lines go to the cluster's log, for a post-mortem.
func (c *Cluster) until(ctx context.Context, what string, try func(context.Context) (string, error)) (string, error) {
	var last error
	for {
		name, err := try(ctx)
		if err == nil {
			return name, nil
		}
		last = err
		if err := timer.Sleep(ctx, 100*time.Millisecond); err != nil {
			c.logf("hapg: %s; the daemons' logs:\n%s", what, c.Tails(25))
			return "", fmt.Errorf("hapg: %s: %w (last: %v)", what, err, last)
		}
	}
}

func (c *Cluster) writablePrimary(ctx context.Context) (string, error) {
	for i, name := range Nodes {
		resp, err := c.get(ctx, i, "/primary")
		if err != nil {
			continue
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			continue
		}
		u, _ := c.NodeURL(name)
		for _, u := range []string{u, c.proxy} {
			port, err := write(ctx, u)
			if err != nil {
				return "", fmt.Errorf("%s: %w", name, err)
			}
			if port != c.base+i {
				return "", fmt.Errorf("HAProxy forwards to port %d, not to %s's", port, name)
			}
		}
		return name, nil
	}
	return "", errors.New("no node answers GET /primary with 200")
}

// write commits a transaction that takes a transaction id through dbURL, and
// returns the port of the server it reached.
func write(ctx context.Context, dbURL string) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return 0, err
	}
	defer conn.Close(context.Background())
	var port int
	err = conn.QueryRow(ctx, "SELECT inet_server_port(), pg_current_xact_id()::text").Scan(&port, new(string))
	return port, err
}

// WaitSyncStandby waits until a leader runs and a synchronous standby both is
// named so in etcd and streams from it with sync_state 'sync' (the leader's
// pg_stat_replication), and returns that standby.
func (c *Cluster) WaitSyncStandby(ctx context.Context) (string, error) {
	return c.until(ctx, "no streaming synchronous standby", c.syncStandby)
}

func (c *Cluster) syncStandby(ctx context.Context) (string, error) {
	st, err := c.status()
	if err != nil {
		return "", err
	}
	leader, ok := st.member("leader", "running")
	if !ok {
		return "", fmt.Errorf("no running leader: %s", st)
	}
	sync, ok := st.member("sync_standby", "running")
	if !ok {
		return "", fmt.Errorf("no running sync standby: %s", st)
	}
	i, err := index(leader.Name)
	if err != nil {
		return "", err
	}
	resp, err := c.get(ctx, i, "/patroni")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var p struct {
		Role        string `json:"role"`
		Replication []struct {
			Name      string `json:"application_name"`
			State     string `json:"state"`
			SyncState string `json:"sync_state"`
		} `json:"replication"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&p); err != nil {
		return "", fmt.Errorf("%s GET /patroni: %w", leader.Name, err)
	}
	for _, r := range p.Replication {
		if p.Role == "master" && r.Name == sync.Name && r.State == "streaming" && r.SyncState == "sync" {
			return sync.Name, nil
		}
	}
	return "", fmt.Errorf("%s is not streaming to leader %s as sync: %+v", sync.Name, leader.Name, p.Replication)
}

type member struct {
	Name     string `json:"name"`
	Role     string `json:"role"`
	State    string `json:"state"`
	Timeline int    `json:"timeline"`
}

type status struct {
	Members []member `json:"members"`
}

func (s status) member(role, state string) (member, bool) {
	for _, m := range s.Members {
		if m.Role == role && m.State == state {
			return m, true
		}
	}
	return member{}, false
}

func (s status) String() string {
	var b strings.Builder
	b.WriteString("[")
	for i, m := range s.Members {
		if i > 0 {
			b.WriteString(" ")
		}
		fmt.Fprintf(&b, "%s:%s/%s/tl%d", m.Name, m.Role, m.State, m.Timeline)
	}
	b.WriteString("]")
	return b.String()
}

// status is GET /cluster from the first node whose REST API answers.
func (c *Cluster) status() (status, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var errs []error
	for i := range Nodes {
		resp, err := c.get(ctx, i, "/cluster")
		if err != nil {
			errs = append(errs, err)
			continue
		}
		var st status
		err = json.NewDecoder(resp.Body).Decode(&st)
		resp.Body.Close()
		if err != nil {
			errs = append(errs, fmt.Errorf("%s GET /cluster: %w", Nodes[i], err))
			continue
		}
		return st, nil
	}
	return status{}, fmt.Errorf("hapg: no REST API answers: %w", errors.Join(errs...))
}

func (c *Cluster) get(ctx context.Context, node int, path string) (*http.Response, error) {
	url := fmt.Sprintf("http://127.0.0.1:%d%s", c.base+restOffset+node, path)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	return c.http.Do(req)
}

// run runs hapg.sh and returns its standard output; its log lines (standard
// error) go to logf.
func (c *Cluster) run(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "bash", append([]string{c.script}, args...)...)
	cmd.Env = append(os.Environ(), "HAPG_BASE_PORT="+strconv.Itoa(c.base), "HAPG_WAIT=0")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	if s := strings.TrimSpace(stderr.String()); s != "" {
		c.logf("%s", s)
	}
	if err != nil {
		return stdout.String(), fmt.Errorf("hapg.sh %s: %w", strings.Join(args, " "), err)
	}
	return stdout.String(), nil
}

// Tails is the last n lines of each daemon's log, for a post-mortem.
func (c *Cluster) Tails(n int) string {
	var b strings.Builder
	for _, f := range []string{"pg1/patroni.log", "pg1/log/postgresql.log", "pg2/patroni.log", "pg2/log/postgresql.log", "etcd.log", "haproxy.log"} {
		fmt.Fprintf(&b, "hapg: last lines of %s:\n%s\n", f, tail(filepath.Join(c.dir, f), n))
	}
	return b.String()
}

// Stop stops everything the cluster runs at once (SIGKILL: its data is not
// kept) and removes its directory, unless HAPG_KEEP is set.
func (c *Cluster) Stop() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", c.script, "stop", c.dir)
	cmd.Env = append(os.Environ(), "HAPG_STOP=kill")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("hapg: stop: %w\n%s", err, out)
	}
	if os.Getenv("HAPG_KEEP") != "" {
		c.logf("hapg: kept %s (HAPG_KEEP)", c.dir)
		return nil
	}
	return os.RemoveAll(c.dir)
}

func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func index(node string) (int, error) {
	for i, n := range Nodes {
		if n == node {
			return i, nil
		}
	}
	return 0, fmt.Errorf("hapg: no node %q (have %v)", node, Nodes)
}

// script is hapg.sh, built in: a binary built with -trimpath (make test,
// the chaos tool) cannot find the file beside this one.
//
//go:embed hapg.sh
var script []byte

// scriptIn writes hapg.sh into dir and returns its path, or HAPG_SCRIPT when
// set.
func scriptIn(dir string) (string, error) {
	if s := os.Getenv("HAPG_SCRIPT"); s != "" {
		return s, nil
	}
	path := filepath.Join(dir, "hapg.sh")
	if err := os.WriteFile(path, script, 0o755); err != nil {
		return "", fmt.Errorf("hapg: %w", err)
	}
	return path, nil
}

// postgresDir makes a directory that user postgres owns: t.TempDir is no
// good, as its parent is only root's. A short path, for the Unix sockets
// (at most 107 bytes) that Postgres puts in it.
func postgresDir() (string, error) {
	dir, err := os.MkdirTemp(os.TempDir(), "hapg-")
	if err != nil {
		return "", err
	}
	if os.Geteuid() != 0 {
		return dir, nil // the daemons run as us: we must be postgres
	}
	pg, err := user.Lookup("postgres")
	if err != nil {
		os.RemoveAll(dir)
		return "", fmt.Errorf("hapg: %w (the postgres package creates that user)", err)
	}
	uid, _ := strconv.Atoi(pg.Uid)
	gid, _ := strconv.Atoi(pg.Gid)
	if err := os.Chown(dir, uid, gid); err != nil {
		os.RemoveAll(dir)
		return "", err
	}
	return dir, nil
}

// Base ports are drawn below Linux's ephemeral range (32768 and up), so that
// no outgoing connection takes a killed node's port before it restarts, and
// not handed out twice by this process.
var bases struct {
	sync.Mutex
	given map[int]bool // every port of every set handed out
}

// freeBase returns a base port whose whole set (Postgres base, base+1; REST
// base+100, base+101; etcd base+200, base+201; HAProxy base+300) is free now.
func freeBase() (int, error) {
	bases.Lock()
	defer bases.Unlock()
	if bases.given == nil {
		bases.given = make(map[int]bool)
	}
next:
	for range 200 {
		base := 20000 + rand.IntN(32000-20000-proxyOffset-1)
		ports := []int{base, base + 1, base + restOffset, base + restOffset + 1, base + etcdOffset, base + etcdOffset + 1, base + proxyOffset}
		for _, p := range ports {
			if bases.given[p] {
				continue next
			}
		}
		if !allFree(ports...) {
			continue
		}
		for _, p := range ports {
			bases.given[p] = true
		}
		return base, nil
	}
	return 0, errors.New("hapg: no free set of loopback ports from 20000 to 32000")
}

func allFree(ports ...int) bool {
	for _, p := range ports {
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			return false
		}
		ln.Close()
	}
	return true
}
