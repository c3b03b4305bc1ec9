// Package testdb gives each test a database of its own, cloned from a migrated
// template, on the Postgres named by TEST_DATABASE_URL, else the local server,
// else a container started with dockertest when Docker is there.
package testdb

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/ory/dockertest/v3"
	"github.com/ory/dockertest/v3/docker"

	"github.com/example/payments/internal/database"
	"github.com/example/payments/internal/tenants"
	"github.com/example/payments/migrations"
	"github.com/example/payments/tools/fakeprocessor"
	fakemigrations "github.com/example/payments/tools/fakeprocessor/migrations"
)

// DefaultURL is the local server the tests use when TEST_DATABASE_URL is unset.
const DefaultURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

// DB is one test's own database.
type DB struct {
	// URL connects to this database alone.
	URL string
	// Pool is open on URL and closed when the test ends.
	Pool *pgxpool.Pool
}

var (
	setupOnce sync.Once
	serverURL string // the admin database of the server in use
	template  string // the migrated template database
	setupErr  error
)

// Option prepares a database New makes, before New returns it.
type Option func(t testing.TB, db *DB)

// New creates a database for t from the migrated template, prepared by each
// of opts, and drops it when t ends.
func New(t testing.TB, opts ...Option) *DB {
	t.Helper()
	mustSetup(t)
	ctx := context.Background()

	name := "test_" + randomHex(8)
	admin, err := pgx.Connect(ctx, serverURL)
	if err != nil {
		t.Fatalf("connect admin: %v", err)
	}
	defer admin.Close(ctx)
	if err := createFromTemplate(ctx, admin, name, template); err != nil {
		t.Fatalf("clone template: %v", err)
	}
	t.Cleanup(func() { drop(t, name) })

	dbURL := withDatabase(serverURL, name)
	pool, err := database.Connect(ctx, dbURL, 0)
	if err != nil {
		t.Fatalf("connect %s: %v", name, err)
	}
	t.Cleanup(pool.Close)
	db := &DB{URL: dbURL, Pool: pool}
	for _, opt := range opts {
		opt(t, db)
	}
	return db
}

// Exec runs a statement on db, failing t if it fails: a test's setup, or
// time made to pass for a row by moving its timestamps back.
func (db *DB) Exec(t testing.TB, sql string, args ...any) {
	t.Helper()
	if _, err := db.Pool.Exec(context.Background(), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// Count runs a query of one integer, such as a count(*), on db, failing t
// if it fails.
func (db *DB) Count(t testing.TB, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := db.Pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// DemoTenants is the Option that creates the demo tenants (tenants.Demos),
// for tests that act as one of them.
func DemoTenants(t testing.TB, db *DB) {
	t.Helper()
	if err := (&tenants.Store{DB: db.Pool}).SeedDemos(context.Background()); err != nil {
		t.Fatalf("seed the demo tenants: %v", err)
	}
}

// mustSetup finds the server and builds the template once per test binary.
func mustSetup(t testing.TB) {
	t.Helper()
	setupOnce.Do(func() { serverURL, template, setupErr = setup() })
	if setupErr != nil {
		t.Fatalf("test database: %v", setupErr)
	}
}

// drop removes a test database, closing any connection still open to it.
func drop(t testing.TB, name string) {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, serverURL)
	if err != nil {
		t.Errorf("connect admin for cleanup: %v", err)
		return
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
		t.Errorf("drop %s: %v", name, err)
	}
}

// createFromTemplate clones the template, retrying while another session is
// briefly connected to it (SQLSTATE 55006).
func createFromTemplate(ctx context.Context, admin *pgx.Conn, name, tmpl string) error {
	sql := fmt.Sprintf("CREATE DATABASE %s TEMPLATE %s", pgx.Identifier{name}.Sanitize(), pgx.Identifier{tmpl}.Sanitize())
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := admin.Exec(ctx, sql)
		if err == nil || !database.IsCode(err, "55006") || time.Now().After(deadline) {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// setup finds a server and makes sure the template for the current migrations
// exists. Test binaries of several packages run at once, so the template is
// built under an advisory lock and renamed into place only when complete.
func setup() (string, string, error) {
	ctx := context.Background()
	base := os.Getenv("TEST_DATABASE_URL")
	if base == "" {
		base = DefaultURL
	}
	admin, err := pgx.Connect(ctx, base)
	if err != nil {
		var dockerErr error
		base, dockerErr = startContainer()
		if dockerErr != nil {
			return "", "", fmt.Errorf("no Postgres at %s (%v) and no Docker fallback (%v)", DefaultURL, err, dockerErr)
		}
		if admin, err = pgx.Connect(ctx, base); err != nil {
			return "", "", err
		}
	}
	defer admin.Close(ctx)

	tmpl, err := templateName()
	if err != nil {
		return "", "", err
	}
	if _, err := admin.Exec(ctx, `SELECT pg_advisory_lock(hashtext('payments-testdb-template'))`); err != nil {
		return "", "", err
	}
	defer admin.Exec(ctx, `SELECT pg_advisory_unlock(hashtext('payments-testdb-template'))`) //nolint:errcheck

	var exists bool
	if err := admin.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, tmpl).Scan(&exists); err != nil {
		return "", "", err
	}
	if exists {
		return base, tmpl, nil
	}

	building := tmpl + "_building"
	if _, err := admin.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{building}.Sanitize()+" WITH (FORCE)"); err != nil {
		return "", "", err
	}
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{building}.Sanitize()); err != nil {
		return "", "", err
	}
	pool, err := database.Connect(ctx, withDatabase(base, building), 0)
	if err != nil {
		return "", "", err
	}
	err = database.Migrate(ctx, pool, slog.New(slog.DiscardHandler))
	if err == nil {
		// The stand-in processor's schema too: the tests run it on the
		// service's database.
		err = fakeprocessor.Migrate(ctx, pool, slog.New(slog.DiscardHandler))
	}
	pool.Close()
	if err != nil {
		return "", "", err
	}
	if _, err := admin.Exec(ctx, fmt.Sprintf("ALTER DATABASE %s RENAME TO %s", pgx.Identifier{building}.Sanitize(), pgx.Identifier{tmpl}.Sanitize())); err != nil {
		return "", "", err
	}
	return base, tmpl, nil
}

// templateName is derived from the migration files, the service's and the
// fake processor's, so a changed migration gets a fresh template instead of
// a stale one.
func templateName() (string, error) {
	h := sha256.New()
	for _, fsys := range []fs.FS{migrations.FS, fakemigrations.FS} {
		err := fs.WalkDir(fsys, ".", func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			b, err := fs.ReadFile(fsys, path)
			if err != nil {
				return err
			}
			fmt.Fprintf(h, "%s\x00%s\x00", path, b)
			return nil
		})
		if err != nil {
			return "", err
		}
	}
	return "template_payments_" + hex.EncodeToString(h.Sum(nil))[:12], nil
}

// startContainer runs a throwaway Postgres with dockertest; it expires on its own.
func startContainer() (string, error) {
	pool, err := dockertest.NewPool("")
	if err != nil {
		return "", err
	}
	if err := pool.Client.Ping(); err != nil {
		return "", err
	}
	res, err := pool.RunWithOptions(&dockertest.RunOptions{
		Repository: "postgres",
		Tag:        "16-alpine",
		Env:        []string{"POSTGRES_HOST_AUTH_METHOD=trust"},
	}, func(hc *docker.HostConfig) {
		hc.AutoRemove = true
		hc.RestartPolicy = docker.RestartPolicy{Name: "no"}
	})
	if err != nil {
		return "", err
	}
	_ = res.Expire(900)
	u := fmt.Sprintf("postgres://postgres@%s/postgres?sslmode=disable", res.GetHostPort("5432/tcp"))
	err = pool.Retry(func() error {
		conn, err := pgx.Connect(context.Background(), u)
		if err != nil {
			return err
		}
		return conn.Close(context.Background())
	})
	return u, err
}

func withDatabase(raw, name string) string {
	u, err := url.Parse(raw)
	if err != nil {
		panic(err)
	}
	u.Path = "/" + name
	return u.String()
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// NewEmpty returns the URL of a database that does not exist yet on the
// test server, for tests of the commands that create and migrate it. It is
// dropped when t ends.
func NewEmpty(t testing.TB) string {
	t.Helper()
	mustSetup(t)
	name := "test_" + randomHex(8)
	t.Cleanup(func() { drop(t, name) })
	return withDatabase(serverURL, name)
}
