package http

import (
	"context"
	"net/http"
	"strconv"

	"github.com/go-chi/chi/v5/middleware"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/example/payments/internal/idempotency"
)

// current loads the resource a key created, as it stands, with its location.
type current func(ctx context.Context, tenantID, id string) (body any, location string, err error)

// idempotentPost is every POST under an Idempotency-Key, in the order the
// contract sets: parse the key, read and check the body (optional when
// bodyOptional), fingerprint, then start the operation and answer for it.
// Anything that fails before start leaves no trace.
func idempotentPost[B any](s *Server, bodyOptional bool,
	start func(r *http.Request, req idempotency.Request, body B) (idempotency.Lease, error), load current) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s.limited(w, r) {
			return
		}
		key, err := keyHeader(r)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		var decoded B
		body, err := readJSON(w, r, &decoded, bodyOptional)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		req, err := idempotencyRequest(r, key, body)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		lease, err := start(r, req, decoded)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		s.respondIdempotent(w, r, lease, load)
	}
}

// respondIdempotent answers a request that holds lease. A finished key is
// answered with its stored response. Otherwise the request waits for the
// operation to finish, as long as Prefer allows, gives up the key's lock, and
// answers with the final response or with 202 and the resource as it stands.
func (s *Server) respondIdempotent(w http.ResponseWriter, r *http.Request, lease idempotency.Lease, load current) {
	ctx := r.Context()
	key := lease.Key
	var err error
	if !key.Finished() {
		key, err = s.Keys.Wait(ctx, key.ID, s.preferredWait(r))
	}
	// The lock goes before the answer, so an immediate retry is not refused.
	if relErr := s.Keys.Release(context.WithoutCancel(ctx), lease); relErr != nil {
		s.Logger.Error("release key lock", "request_id", middleware.GetReqID(ctx), "err", relErr)
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if key.Finished() {
		if !lease.Created {
			s.count(r, func(m *keyMetrics) *prometheus.CounterVec { return m.replays })
		}
		writeStored(w, *key.Response, !lease.Created)
		return
	}
	body, location, err := load(ctx, tenantID(r), key.Resource.ID)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	w.Header().Set("Location", location)
	w.Header().Set("Retry-After", strconv.Itoa(s.retryAfterSeconds()))
	writeJSON(w, http.StatusAccepted, body)
}

// count adds one to the tenant's series of the counter which picks.
func (s *Server) count(r *http.Request, which func(*keyMetrics) *prometheus.CounterVec) {
	if s.keyMetrics != nil {
		which(s.keyMetrics).WithLabelValues(tenantID(r)).Inc()
	}
}

// writeStored writes a stored final response exactly as it was stored. A
// request that did not create the key gets it as a replay.
func writeStored(w http.ResponseWriter, resp idempotency.Response, replayed bool) {
	for name, value := range resp.Header {
		w.Header().Set(name, value)
	}
	if replayed {
		w.Header().Set("Idempotent-Replayed", "true")
	}
	w.WriteHeader(resp.Status)
	w.Write(resp.Body) //nolint:errcheck
}
