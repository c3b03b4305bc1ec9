package http

import (
	"context"
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/example/payments/internal/database"
	"github.com/example/payments/internal/idempotency"
	"github.com/example/payments/internal/operation"
)

// getter reads the tenant's operation id of one kind, or an error wrapping
// operation.ErrNotFound: payments.Get, refunds.Get.
type getter[T any] func(ctx context.Context, db database.DBTX, tenantID, id string) (T, error)

// getOperation answers GET <Path>/{id} of the kind named n with the
// operation get reads.
func getOperation[T any](s *Server, w http.ResponseWriter, r *http.Request, n operation.Names, get getter[T]) {
	id := chi.URLParam(r, "id")
	spanResource(r, idempotency.ResourceRef{Type: n.Type, ID: id})
	v, err := get(r.Context(), s.Ops.DB, tenantID(r), id)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, v)
}

// loadOperation is how a POST that starts an operation of one kind reads it
// as it stands, with get, for a 202 (see idempotentPost).
func loadOperation[T any](s *Server, get getter[T]) current {
	return func(ctx context.Context, tenantID, id string) (any, error) {
		return get(ctx, s.Ops.DB, tenantID, id)
	}
}
