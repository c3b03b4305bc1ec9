package http

import (
	"context"
	"net/http"

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
		loadOperation(s, payments.Get))
}

// getPayment handles GET /v1/payments/{id}.
func (s *Server) getPayment(w http.ResponseWriter, r *http.Request) {
	getOperation(s, w, r, payments.Names, payments.Get)
}

// listPayments handles GET /v1/payments?limit=&starting_after=.
func (s *Server) listPayments(w http.ResponseWriter, r *http.Request) {
	writeList(s, w, r, func(ctx context.Context, tenantID string, limit int, after string) ([]payments.Payment, bool, error) {
		return payments.List(ctx, s.Ops.DB, tenantID, limit, after)
	})
}
