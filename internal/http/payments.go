package http

import (
	"context"
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/example/payments/internal/idempotency"
	"github.com/example/payments/internal/payments"
)

// createPayment handles POST /v1/payments.
func (s *Server) createPayment() http.HandlerFunc {
	return idempotentPost(s, false,
		func(r *http.Request, req idempotency.Request, np payments.NewPayment) (idempotency.Lease, any, error) {
			lease, p, err := payments.Create(r.Context(), s.Ops, req, np)
			if p == nil {
				return lease, nil, err
			}
			return lease, *p, err
		},
		func(ctx context.Context, tenantID, id string) (any, error) {
			return payments.Get(ctx, s.Ops.DB, tenantID, id)
		})
}

// getPayment handles GET /v1/payments/{id}.
func (s *Server) getPayment(w http.ResponseWriter, r *http.Request) {
	spanResource(r, idempotency.Resource{Type: payments.Names.Type, ID: chi.URLParam(r, "id")})
	p, err := payments.Get(r.Context(), s.Ops.DB, tenantID(r), chi.URLParam(r, "id"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, p)
}

// listPayments handles GET /v1/payments?limit=&starting_after=.
func (s *Server) listPayments(w http.ResponseWriter, r *http.Request) {
	writeList(s, w, r, func(ctx context.Context, tenantID string, limit int, after string) ([]payments.Payment, bool, error) {
		return payments.List(ctx, s.Ops.DB, tenantID, limit, after)
	})
}
