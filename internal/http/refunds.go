package http

import (
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/example/payments/internal/idempotency"
	"github.com/example/payments/internal/payments"
	"github.com/example/payments/internal/refunds"
)

// createRefund handles POST /v1/payments/{id}/refunds. The body is optional:
// without one, all that is left is refunded.
func (s *Server) createRefund() http.HandlerFunc {
	return idempotentPost(s, true,
		func(r *http.Request, req idempotency.Request, nr refunds.NewRefund) (idempotency.Lease, any, error) {
			spanResource(r, idempotency.ResourceRef{Type: payments.Names.Type, ID: chi.URLParam(r, "id")})
			lease, err := refunds.Create(r.Context(), s.Ops, req, chi.URLParam(r, "id"), nr)
			return lease, nil, err
		},
		loadOperation(s, refunds.Get))
}

// getRefund handles GET /v1/refunds/{id}.
func (s *Server) getRefund(w http.ResponseWriter, r *http.Request) {
	getOperation(s, w, r, refunds.Names, refunds.Get)
}
