package http

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"
)

// TestObserveCheap: recording a request of a route allocates nothing once
// its route was seen and its bucket has its exemplar, and resolves no label
// but the status class: on the request path, recording stays one
// counter and one histogram observation.
//
// Not parallel: AllocsPerRun counts the whole process's allocations, and
// refuses a parallel test; it takes microseconds.
func TestObserveCheap(t *testing.T) {
	m := newMetrics(prometheus.NewRegistry())
	router := chi.NewRouter()
	router.Route("/v1", func(r chi.Router) {
		r.Post("/payments", func(http.ResponseWriter, *http.Request) {})
	})
	m.route(router)
	rc := chi.NewRouteContext()
	rc.RoutePatterns = []string{"/v1/*", "/payments"}
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{1}})
	ctx := trace.ContextWithSpanContext(context.WithValue(context.Background(), chi.RouteCtxKey, rc), sc)
	req := httptest.NewRequestWithContext(ctx, http.MethodPost, "/v1/payments", nil)
	if _, ok := m.byRoute[routeKey{"POST", "/v1/payments"}]; !ok {
		t.Fatalf("POST /v1/payments not resolved up front: %v", m.byRoute)
	}
	if allocs := testing.AllocsPerRun(100, func() { m.observe(req, http.StatusCreated, 30*time.Millisecond) }); allocs != 0 {
		t.Fatalf("%v allocations a request, want none", allocs)
	}
	if rm := m.series(req); rm != m.byRoute[routeKey{"POST", "/v1/payments"}] {
		t.Fatal("the request's series are not its route's")
	}
}
