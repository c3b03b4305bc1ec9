package http

import (
	"context"
	"net/http"
	"strconv"

	"github.com/go-chi/chi/v5"

	"github.com/example/payments/internal/render"
)

// list is the envelope of every list endpoint.
type list[T any] struct {
	Object  string `json:"object"`
	Data    []T    `json:"data"`
	HasMore bool   `json:"has_more"`
}

// page reads one page of the tenant's T: up to limit, after the one named
// by startingAfter when it is not empty, and whether more follow.
type page[T any] func(ctx context.Context, tenantID string, limit int, startingAfter string) ([]T, bool, error)

// writeList answers GET ...?limit=&starting_after= with one page of T.
func writeList[T any](s *Server, w http.ResponseWriter, r *http.Request, read page[T]) {
	limit, err := listLimit(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	data, more, err := read(r.Context(), tenantID(r), limit, r.URL.Query().Get("starting_after"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, list[T]{Object: "list", Data: data, HasMore: more})
}

// listLimit reads ?limit=, 1 to 100, default 10.
func listLimit(r *http.Request) (int, error) {
	raw := r.URL.Query().Get("limit")
	if raw == "" {
		return 10, nil
	}
	n, err := strconv.Atoi(raw)
	if err != nil || n < 1 || n > 100 {
		return 0, &render.InvalidRequestError{Detail: "limit must be an integer from 1 to 100."}
	}
	return n, nil
}

// listEvents handles GET /v1/events?limit=&starting_after=.
func (s *Server) listEvents(w http.ResponseWriter, r *http.Request) {
	writeList(s, w, r, s.Ops.ListEvents)
}

// getEvent handles GET /v1/events/{id}: the event exactly as its webhook
// deliveries carry it.
func (s *Server) getEvent(w http.ResponseWriter, r *http.Request) {
	e, err := s.Ops.GetEvent(r.Context(), tenantID(r), chi.URLParam(r, "id"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, e)
}
