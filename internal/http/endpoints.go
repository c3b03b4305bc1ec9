package http

import (
	"context"
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/example/payments/internal/idempotency"
	"github.com/example/payments/internal/webhooks"
)

// shownOnce is what the request that created a key is answered with instead
// of the stored response's body: more than is ever stored, a secret.
type shownOnce struct{ body any }

// loadEndpoint loads an endpoint as it stands, for idempotentPost.
func (s *Server) loadEndpoint(ctx context.Context, tenantID, id string) (any, error) {
	return s.Endpoints.Get(ctx, tenantID, id)
}

// createEndpoint handles POST /v1/webhook_endpoints: 201 with the endpoint
// and its secret, which replays do not show.
func (s *Server) createEndpoint() http.HandlerFunc {
	return idempotentPost(s, false,
		func(r *http.Request, req idempotency.Request, ne webhooks.NewEndpoint) (idempotency.Lease, any, error) {
			lease, e, err := s.Endpoints.Create(r.Context(), req, ne)
			return lease, shownOnceOr(e), err
		}, s.loadEndpoint)
}

// updateEndpoint handles POST /v1/webhook_endpoints/{id}.
func (s *Server) updateEndpoint() http.HandlerFunc {
	return onEndpoint(s, (*webhooks.Service).Update)
}

// rotateSecret handles POST /v1/webhook_endpoints/{id}/rotate_secret: 200
// with the endpoint and its new secret, which replays do not show.
func (s *Server) rotateSecret() http.HandlerFunc {
	return idempotentPost(s, true,
		func(r *http.Request, req idempotency.Request, rot webhooks.Rotation) (idempotency.Lease, any, error) {
			lease, e, err := s.Endpoints.RotateSecret(r.Context(), req, chi.URLParam(r, "id"), rot)
			return lease, shownOnceOr(e), err
		}, s.loadEndpoint)
}

// resend handles POST /v1/webhook_endpoints/{id}/resend: 202 with the
// delivery started again.
func (s *Server) resend() http.HandlerFunc {
	return onEndpoint(s, (*webhooks.Service).Resend)
}

// recoverEndpoint handles POST /v1/webhook_endpoints/{id}/recover: 202
// with how many failed deliveries since the given time start again.
func (s *Server) recoverEndpoint() http.HandlerFunc {
	return onEndpoint(s, (*webhooks.Service).Recover)
}

// onEndpoint handles an idempotent POST to the endpoint {id} whose first
// phase is do, a method of webhooks.Service given the decoded body, and
// which returns nothing created: the endpoint is loaded as it stands
// (loadEndpoint). do is a method expression so that s.Endpoints is read at
// each request.
func onEndpoint[B any](s *Server,
	do func(*webhooks.Service, context.Context, idempotency.Request, string, B) (idempotency.Lease, error),
) http.HandlerFunc {
	return idempotentPost(s, false,
		func(r *http.Request, req idempotency.Request, body B) (idempotency.Lease, any, error) {
			lease, err := do(s.Endpoints, r.Context(), req, chi.URLParam(r, "id"), body)
			return lease, nil, err
		}, s.loadEndpoint)
}

// shownOnceOr wraps the endpoint a request created, when it did.
func shownOnceOr(e *webhooks.Endpoint) any {
	if e == nil {
		return nil
	}
	return shownOnce{body: e}
}

// getEndpoint handles GET /v1/webhook_endpoints/{id}.
func (s *Server) getEndpoint(w http.ResponseWriter, r *http.Request) {
	e, err := s.Endpoints.Get(r.Context(), tenantID(r), chi.URLParam(r, "id"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, e)
}

// listEndpoints handles GET /v1/webhook_endpoints?limit=&starting_after=.
func (s *Server) listEndpoints(w http.ResponseWriter, r *http.Request) {
	writeList(s, w, r, s.Endpoints.List)
}

// deleted is the answer to a DELETE.
type deleted struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Deleted bool   `json:"deleted"`
}

// deleteEndpoint handles DELETE /v1/webhook_endpoints/{id}.
func (s *Server) deleteEndpoint(w http.ResponseWriter, r *http.Request) {
	e, err := s.Endpoints.Delete(r.Context(), tenantID(r), chi.URLParam(r, "id"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, deleted{ID: e.ID, Object: e.Object, Deleted: true})
}

// listDeliveries handles GET /v1/webhook_endpoints/{id}/deliveries: the
// endpoint's delivery log, an attempt a line, newest first.
func (s *Server) listDeliveries(w http.ResponseWriter, r *http.Request) {
	writeList(s, w, r, func(ctx context.Context, tenantID string, limit int, after string) ([]webhooks.Attempt, bool, error) {
		f := webhooks.LogFilter{Status: r.URL.Query().Get("status"), Type: r.URL.Query().Get("type")}
		return s.Endpoints.Log(ctx, tenantID, chi.URLParam(r, "id"), f, limit, after)
	})
}

// listEventDeliveries handles GET /v1/events/{id}/deliveries: the event's
// delivery to each endpoint that wanted it.
func (s *Server) listEventDeliveries(w http.ResponseWriter, r *http.Request) {
	writeList(s, w, r, func(ctx context.Context, tenantID string, limit int, after string) ([]webhooks.Delivery, bool, error) {
		return s.Endpoints.EventDeliveries(ctx, tenantID, chi.URLParam(r, "id"), limit, after)
	})
}
