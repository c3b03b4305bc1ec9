package http

import (
	"context"
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/example/payments/internal/idempotency"
	"github.com/example/payments/internal/payments"
)

// createRefund handles POST /v1/payments/{id}/refunds. The body is optional:
// without one, all that is left is refunded.
func (s *Server) createRefund() http.HandlerFunc {
	return idempotentPost(s, true,
		func(r *http.Request, req idempotency.Request, nr payments.NewRefund) (idempotency.Lease, any, error) {
			spanResource(r, idempotency.Resource{Type: payments.PaymentResourceType, ID: chi.URLParam(r, "id")})
			lease, err := s.Payments.CreateRefund(r.Context(), req, chi.URLParam(r, "id"), nr)
			return lease, nil, err
		},
		func(ctx context.Context, tenantID, id string) (any, error) {
			return s.Payments.GetRefund(ctx, tenantID, id)
		})
}

// getRefund handles GET /v1/refunds/{id}.
func (s *Server) getRefund(w http.ResponseWriter, r *http.Request) {
	spanResource(r, idempotency.Resource{Type: payments.RefundResourceType, ID: chi.URLParam(r, "id")})
	ref, err := s.Payments.GetRefund(r.Context(), tenantID(r), chi.URLParam(r, "id"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, ref)
}

// listEvents handles GET /v1/events?limit=&starting_after=.
func (s *Server) listEvents(w http.ResponseWriter, r *http.Request) {
	limit, err := listLimit(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	data, more, err := s.Payments.ListEvents(r.Context(), tenantID(r), limit, r.URL.Query().Get("starting_after"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, list[payments.Event]{Object: "list", Data: data, HasMore: more})
}
