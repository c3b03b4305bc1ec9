package http

import (
	"net/http"
	"net/url"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/example/payments/internal/idempotency"
	"github.com/example/payments/internal/render"
)

// keyView is an idempotency key as GET /v1/idempotency-keys/{key} shows it.
type keyView struct {
	Object         string               `json:"object"`
	Key            string               `json:"key"`
	RecoveryPoint  string               `json:"recovery_point"`
	RequestMethod  string               `json:"request_method"`
	RequestPath    string               `json:"request_path"`
	Locked         bool                 `json:"locked"`
	ResponseStatus *int                 `json:"response_status"`
	Resource       *render.ResourceLink `json:"resource"`
	CreatedAt      time.Time            `json:"created_at"`
	UpdatedAt      time.Time            `json:"updated_at"`
	FinishedAt     *time.Time           `json:"finished_at"`
	ExpiresAt      *time.Time           `json:"expires_at"`
}

// pathParam returns a URL parameter decoded exactly once. chi matches on the
// raw, escaped path when the request has one (so "%2F" stays inside a
// parameter) and on the decoded path otherwise; only the first needs decoding.
func pathParam(r *http.Request, name string) (string, error) {
	v := chi.URLParam(r, name)
	if r.URL.RawPath == "" {
		return v, nil
	}
	return url.PathUnescape(v)
}

// getIdempotencyKey handles GET /v1/idempotency-keys/{key}.
func (s *Server) getIdempotencyKey(w http.ResponseWriter, r *http.Request) {
	raw, err := pathParam(r, "key")
	if err != nil {
		s.writeError(w, r, idempotency.ErrKeyInvalid)
		return
	}
	name, err := idempotency.ParseKey(raw)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	k, locked, err := s.Keys.Inspect(r.Context(), tenantID(r), name)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	view := keyView{
		Object: "idempotency_key", Key: k.Key, RecoveryPoint: k.RecoveryPoint,
		RequestMethod: k.Method, RequestPath: k.Path, Locked: locked,
		CreatedAt: k.CreatedAt, UpdatedAt: k.UpdatedAt, FinishedAt: k.FinishedAt, ExpiresAt: k.ExpiresAt,
	}
	if k.Response != nil {
		view.ResponseStatus = &k.Response.Status
	}
	if view.Resource, err = s.Render.ResourceOf(k.Resource); err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, view)
}
