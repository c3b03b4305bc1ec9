// Package pgbouncer runs PgBouncer in transaction mode in front of a
// Postgres, as production runs the service behind a pooler: for the
// end-to-end tests (E2E_POOLER) and the chaos runs (CHAOS_PROFILE=pooler,
// which also kills and restarts it, and CHAOS_PROFILE=failover, where it
// reaches a Patroni pair's primary through HAProxy).
package pgbouncer

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/example/payments/tools/freeport"
)

// ErrMissing reports that the pgbouncer binary is not installed.
var ErrMissing = errors.New("pgbouncer is not installed (Debian: apt-get install pgbouncer)")

// Binary is the path of the pgbouncer binary (Debian puts it in
// /usr/sbin, which a user's PATH may lack), or ErrMissing.
func Binary() (string, error) {
	for _, name := range []string{"pgbouncer", "/usr/sbin/pgbouncer"} {
		if bin, err := exec.LookPath(name); err == nil {
			return bin, nil
		}
	}
	return "", ErrMissing
}

// Bouncer is a running PgBouncer.
type Bouncer struct {
	// Addr is where it listens, on loopback.
	Addr     string
	dir      string
	bin      string
	upstream string
	user     string // the user and password it logs in to upstream with
	password string
	poolSize int
	cmd      *exec.Cmd
	exited   chan struct{} // closed when cmd has exited
}

// Start runs PgBouncer in transaction mode on a free loopback port, in front
// of the Postgres dbURL names (its host and port) for every database,
// trusting its clients and logging in to that Postgres as dbURL's user with
// its password, with at most poolSize server connections per database and
// user, and its files in dir (which, run as root, user postgres must reach:
// not below a directory only root can enter).
func Start(dbURL string, poolSize int, dir string) (*Bouncer, error) {
	bin, err := Binary()
	if err != nil {
		return nil, err
	}
	u, err := url.Parse(dbURL)
	if err != nil {
		return nil, fmt.Errorf("pgbouncer: upstream URL: %w", err)
	}
	port := u.Port()
	if port == "" {
		port = strconv.Itoa(5432)
	}
	user := u.User.Username()
	if user == "" {
		user = "postgres"
	}
	password, _ := u.User.Password()
	// Restarted on the same port after a kill (Restart).
	addr, err := freeport.Addr()
	if err != nil {
		return nil, err
	}
	b := &Bouncer{Addr: addr, dir: dir, bin: bin, upstream: net.JoinHostPort(u.Hostname(), port),
		user: user, password: password, poolSize: poolSize}
	if err := b.writeConfig(); err != nil {
		return nil, err
	}
	if err := b.start(); err != nil {
		return nil, err
	}
	return b, nil
}

// config is transaction pooling: each transaction gets whatever server
// connection is free, as PgBouncer and the cloud poolers run in production.
// A server that went away (a failover behind HAProxy, which cuts the
// sessions to the old primary) is tried again a second after a failed login
// (server_login_retry, 15 s by default), clients failing at once meanwhile;
// and a server connection idle for 10 s is checked before it is handed out
// (server_check_query, a statement that needs no session state).
const config = `[databases]
* = host=%s port=%s

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %s
unix_socket_dir =
auth_type = trust
auth_file = %s
pool_mode = transaction
default_pool_size = %d
max_client_conn = 1000
ignore_startup_parameters = extra_float_digits
server_login_retry = 1
server_check_delay = 10
server_check_query = SELECT 1
logfile = %s
`

func (b *Bouncer) writeConfig() error {
	upHost, upPort, err := net.SplitHostPort(b.upstream)
	if err != nil {
		return fmt.Errorf("upstream %q: %w", b.upstream, err)
	}
	_, port, _ := net.SplitHostPort(b.Addr)
	// PgBouncer refuses to run as root: run as root, it is told to become
	// postgres, who must read these files.
	if err := os.Chmod(b.dir, 0o777); err != nil {
		return err
	}
	// Trusted clients must still be listed; the password is the one it
	// logs in to upstream with, so only the pooler's user may read it.
	users := filepath.Join(b.dir, "users.txt")
	if err := os.WriteFile(users, []byte(quote(b.user)+" "+quote(b.password)+"\n"), 0o600); err != nil {
		return err
	}
	if err := ownedByPooler(users); err != nil {
		return err
	}
	ini := fmt.Sprintf(config, upHost, upPort, port, users, b.poolSize, filepath.Join(b.dir, "pgbouncer.log"))
	return os.WriteFile(b.ini(), []byte(ini), 0o644)
}

func (b *Bouncer) ini() string { return filepath.Join(b.dir, "pgbouncer.ini") }

// start runs it and waits until it accepts connections.
func (b *Bouncer) start() error {
	args := []string{b.ini()}
	if os.Geteuid() == 0 {
		args = append([]string{"-u", "postgres"}, args...)
	}
	b.cmd = exec.Command(b.bin, args...)
	out, err := os.OpenFile(filepath.Join(b.dir, "stderr.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer out.Close()
	b.cmd.Stdout, b.cmd.Stderr = out, out
	// Its own process group: a signal to the test's group is not its.
	b.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := b.cmd.Start(); err != nil {
		return fmt.Errorf("start pgbouncer: %w", err)
	}
	exited := make(chan struct{})
	b.exited = exited
	go func() { _ = b.cmd.Wait(); close(exited) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		conn, err := net.DialTimeout("tcp", b.Addr, time.Second)
		if err == nil {
			conn.Close()
			return nil
		}
		select {
		case <-exited:
			log, _ := os.ReadFile(filepath.Join(b.dir, "stderr.log"))
			return fmt.Errorf("pgbouncer exited at start: %v\n%s", b.cmd.ProcessState, log)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			b.Stop()
			return fmt.Errorf("pgbouncer did not listen on %s within 10s", b.Addr)
		}
	}
}

// Dir is where its files are.
func (b *Bouncer) Dir() string { return b.dir }

// URL is dbURL with its host and port those of the bouncer.
func (b *Bouncer) URL(dbURL string) (string, error) {
	u, err := url.Parse(dbURL)
	if err != nil {
		return "", err
	}
	u.Host = b.Addr
	return u.String(), nil
}

// Kill kills it with SIGKILL, as a crash would: every client connection
// drops, mid-transaction or not.
func (b *Bouncer) Kill() {
	_ = b.cmd.Process.Signal(syscall.SIGKILL)
	<-b.exited
}

// Restart starts it again on the same port, after Kill.
func (b *Bouncer) Restart() error { return b.start() }

// Stop ends it, if it still runs.
func (b *Bouncer) Stop() {
	_ = b.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-b.exited:
	case <-time.After(5 * time.Second):
		_ = b.cmd.Process.Signal(syscall.SIGKILL)
		<-b.exited
	}
}

// quote is s as the auth file writes a field: in double quotes, each double
// quote doubled.
func quote(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

// ownedByPooler gives path to user postgres when we are root, as PgBouncer
// then runs as postgres.
func ownedByPooler(path string) error {
	if os.Geteuid() != 0 {
		return nil
	}
	pg, err := user.Lookup("postgres")
	if err != nil {
		return fmt.Errorf("pgbouncer runs as postgres when started by root: %w", err)
	}
	uid, _ := strconv.Atoi(pg.Uid)
	gid, _ := strconv.Atoi(pg.Gid)
	return os.Chown(path, uid, gid)
}
