package http

import (
	"net/http"
	"net/url"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/example/payments/internal/idempotency"
)

// keyView is an idempotency key as GET /v1/idempotency-keys/{key} shows it.
type keyView struct {
	Object         string     `json:"object"`
	Key            string     `json:"key"`
	RecoveryPoint  string     `json:"recovery_point"`
	RequestMethod  string     `json:"request_method"`
	RequestPath    string     `json:"request_path"`
	Locked         bool       `json:"locked"`
	ResponseStatus *int       `json:"response_status"`
	Resource       *resource  `json:"resource"`
	CreatedAt      time.Time  `json:"created_at"`
	UpdatedAt      time.Time  `json:"updated_at"`
	FinishedAt     *time.Time `json:"finished_at"`
	ExpiresAt      *time.Time `json:"expires_at"`
}

type resource struct {
	Type string `json:"type"`
	ID   string `json:"id"`
}

// getIdempotencyKey handles GET /v1/idempotency-keys/{key}.
func (s *Server) getIdempotencyKey(w http.ResponseWriter, r *http.Request) {
	raw, err := url.PathUnescape(chi.URLParam(r, "key"))
	if err != nil {
		s.writeError(w, r, idempotency.ErrKeyInvalid)
		return
	}
	name, err := idempotency.ParseKey(raw)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	k, err := s.Keys.Get(r.Context(), tenantID(r), name)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	view := keyView{
		Object: "idempotency_key", Key: k.Key, RecoveryPoint: k.RecoveryPoint,
		RequestMethod: k.Method, RequestPath: k.Path, Locked: k.LockedAt != nil && time.Since(*k.LockedAt) < s.Keys.LockTimeout,
		CreatedAt: k.CreatedAt, UpdatedAt: k.UpdatedAt, FinishedAt: k.FinishedAt, ExpiresAt: k.ExpiresAt,
	}
	if k.Response != nil {
		view.ResponseStatus = &k.Response.Status
	}
	if k.Resource.ID != "" {
		view.Resource = &resource{Type: k.Resource.Type, ID: k.Resource.ID}
	}
	writeJSON(w, http.StatusOK, view)
}
