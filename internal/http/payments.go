package http

import (
	"context"
	"net/http"
	"strconv"

	"github.com/go-chi/chi/v5"

	"github.com/example/payments/internal/idempotency"
	"github.com/example/payments/internal/payments"
	"github.com/example/payments/internal/render"
)

// createPayment handles POST /v1/payments.
func (s *Server) createPayment() http.HandlerFunc {
	return idempotentPost(s, false,
		func(r *http.Request, req idempotency.Request, np payments.NewPayment) (idempotency.Lease, any, error) {
			lease, p, err := s.Payments.Create(r.Context(), req, np)
			if p == nil {
				return lease, nil, err
			}
			return lease, *p, err
		},
		func(ctx context.Context, tenantID, id string) (any, error) {
			return s.Payments.Get(ctx, tenantID, id)
		})
}

// getPayment handles GET /v1/payments/{id}.
func (s *Server) getPayment(w http.ResponseWriter, r *http.Request) {
	spanResource(r, idempotency.Resource{Type: payments.PaymentResourceType, ID: chi.URLParam(r, "id")})
	p, err := s.Payments.Get(r.Context(), tenantID(r), chi.URLParam(r, "id"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, p)
}

// list is the envelope of every list endpoint.
type list[T any] struct {
	Object  string `json:"object"`
	Data    []T    `json:"data"`
	HasMore bool   `json:"has_more"`
}

// listPayments handles GET /v1/payments?limit=&starting_after=.
func (s *Server) listPayments(w http.ResponseWriter, r *http.Request) {
	limit, err := listLimit(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	data, more, err := s.Payments.List(r.Context(), tenantID(r), limit, r.URL.Query().Get("starting_after"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, list[payments.Payment]{Object: "list", Data: data, HasMore: more})
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
