package http

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/example/payments/internal/database"
	"github.com/example/payments/internal/idempotency"
	"github.com/example/payments/internal/render"
)

// writeError answers with the problem err maps to. An unreachable database
// is 503 with Retry-After: service_unavailable when nothing was executed,
// outcome_unknown when the connection went after the request's statements
// were sent, so that it may have been. An error it does not know
// becomes a generic 500, logged with the request id; nothing internal leaks.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	if database.IsDataException(err) {
		// The database refused a value the client sent: the client's error,
		// mapped here once for every query.
		err = fmt.Errorf("%w: %v", render.ErrStorable, err)
	}
	// Known errors come first: they are the client's (a body that could not
	// be read included), whatever network error lies beneath them.
	p, known := s.Render.For(err)
	switch {
	case errors.Is(err, context.Canceled) && r.Context().Err() != nil:
		return // the client went away; there is no one to answer
	case !known && database.IsUnavailable(err):
		s.countFailure(failureStore)
		s.Logger.WarnContext(r.Context(), "database unavailable", "request_id", requestIDOf(r.Context()), "err", err)
		w.Header().Set("Retry-After", strconv.Itoa(s.retryAfterSeconds()))
		if database.NotExecuted(err) {
			writeProblem(w, render.NewProblem(http.StatusServiceUnavailable, "service_unavailable", "Service unavailable",
				"The database cannot be reached; nothing was executed. Retry with the same Idempotency-Key."))
			return
		}
		// The connection went after the request's statements were sent:
		// its transaction may have committed (a lost answer to a COMMIT),
		// and only the same key can find out.
		writeProblem(w, render.NewProblem(http.StatusServiceUnavailable, "outcome_unknown", "Outcome unknown",
			"The connection to the database was lost after the request was sent, so it may have been executed. "+
				"Retry with the same Idempotency-Key to learn the outcome; a retry may meet 409 idempotency_key_in_use "+
				"until this attempt's hold on the key lapses. Never send it again under another key."))
		return
	case !known:
		s.countFailure(failureInternal)
		trace.SpanFromContext(r.Context()).RecordError(err)
		s.Logger.ErrorContext(r.Context(), "internal error", "request_id", requestIDOf(r.Context()), "method", r.Method,
			"path", r.URL.Path, "err", err)
		writeProblem(w, render.NewProblem(http.StatusInternalServerError, "internal_error", "Internal server error",
			"An unexpected error occurred. It has been logged with the request id "+requestIDOf(r.Context())+"."))
		return
	}
	switch {
	case errors.Is(err, idempotency.ErrKeyInUse):
		w.Header().Set("Retry-After", strconv.Itoa(s.retryAfterSeconds()))
		s.count(func(m *keyMetrics) prometheus.Counter { return m.inUse })
	case errors.Is(err, idempotency.ErrKeyMismatch):
		s.count(func(m *keyMetrics) prometheus.Counter { return m.mismatches })
	case errors.Is(err, render.ErrRateLimited):
		s.count(func(m *keyMetrics) prometheus.Counter { return m.limited })
	}
	if p.Status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="payments"`)
	}
	writeProblem(w, p)
}

func writeProblem(w http.ResponseWriter, p render.Problem) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(p.Status)
	w.Write(render.Encode(p)) //nolint:errcheck
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(render.Encode(v)) //nolint:errcheck
}
