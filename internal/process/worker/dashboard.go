package worker

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"riverqueue.com/riverui"

	"github.com/example/payments/internal/secret"
)

// dashboardPrefix is where River's web UI is mounted on the worker's internal
// listener; its pages, assets and API all resolve under it.
const dashboardPrefix = "/riverui"

// newDashboard builds River's web UI over the worker's River client. The
// handler must be started (Start) before it serves, and stops when the
// context it was started with ends.
func newDashboard(client *river.Client[pgx.Tx], logger *slog.Logger) (*riverui.Handler, error) {
	h, err := riverui.NewHandler(&riverui.HandlerOpts{
		Endpoints: riverui.NewEndpoints(client, nil),
		Logger:    logger,
		Prefix:    dashboardPrefix,
	})
	if err != nil {
		return nil, fmt.Errorf("river dashboard: %w", err)
	}
	return h, nil
}

// protectDashboard puts next behind HTTP basic auth with user and password,
// and refuses cross-origin requests that change something: the dashboard
// can cancel, retry and delete jobs and pause queues, and a browser sends
// basic-auth credentials it has cached along with another site's forged
// POST.
func protectDashboard(user string, password secret.String, next http.Handler) http.Handler {
	next = http.NewCrossOriginProtection().Handler(next)
	// Comparing digests, which all have the same length, tells a caller
	// nothing of the lengths of the user and password from the time taken.
	wantUser, wantPassword := sha256.Sum256([]byte(user)), sha256.Sum256([]byte(password))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, p, ok := r.BasicAuth()
		gotUser, gotPassword := sha256.Sum256([]byte(u)), sha256.Sum256([]byte(p))
		// Both are compared whatever the first gives, so that the time taken
		// does not tell a right user from a wrong one.
		match := subtle.ConstantTimeCompare(gotUser[:], wantUser[:]) & subtle.ConstantTimeCompare(gotPassword[:], wantPassword[:])
		if !ok || match != 1 {
			w.Header().Set("WWW-Authenticate", `Basic realm="river"`)
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// denyFraming forbids every page of next to be shown in a frame, by old
// browsers (X-Frame-Options) and new (CSP frame-ancestors): the dashboard's
// buttons cancel, retry and delete jobs, and another site that framed it
// under a logged-in operator's cached credentials could trick the clicks
// (clickjacking). It sets them before next runs, on every answer, the 401
// included.
func denyFraming(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Frame-Options", "DENY")
		w.Header().Set("Content-Security-Policy", "frame-ancestors 'none'")
		next.ServeHTTP(w, r)
	})
}
