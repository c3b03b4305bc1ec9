package http

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/example/payments/internal/idempotency"
	"github.com/example/payments/internal/render"
)

// current loads the resource a key created, as it stands.
type current func(ctx context.Context, tenantID, id string) (any, error)

// starter starts the operation of a request under its key. When the request
// created the key, it may return the resource as it was created, so that an
// answer that does not wait for the operation needs no read.
type starter[B any] func(r *http.Request, req idempotency.Request, body B) (idempotency.Lease, any, error)

// idempotentPost is every POST under an Idempotency-Key, in the order the
// contract sets: parse the key, read the body (optional when bodyOptional),
// and look the key up. A key this request was sent under before is answered
// at once: the body passed its checks then. The lookup matches the body's
// raw bytes by their digest first and canonicalizes the body only when they
// differ, so a byte-identical retry is never canonicalized. Any other
// request has its body decoded and checked, then fingerprinted (a body that
// is not JSON is refused there, whatever the lookup said), then starts the
// operation and is answered for it. Anything that fails before start leaves
// no trace.
func idempotentPost[B any](s *Server, bodyOptional bool, start starter[B], load current) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s.limited(w, r) {
			return
		}
		key, err := keyHeader(r)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		trace.SpanFromContext(r.Context()).SetAttributes(attribute.String("idempotency.key", key))
		body, err := jsonBody(w, r, bodyOptional)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		wait := s.preferredWait(r)
		req := idempotencyRequest(r, key, body)
		req.Wait = wait > 0
		lease, err := s.Keys.Lookup(r.Context(), req)
		if err == nil {
			s.respondIdempotent(w, r, lease, wait, nil, load)
			return
		}
		// A new key goes straight to its first phase; on any other answer
		// (another body, a key in use, a body that is not JSON) the body's
		// own errors come first, and Start looks again.
		req.Unseen = errors.Is(err, idempotency.ErrNotFound)
		var decoded B
		if err := decodeJSON(body, &decoded); err != nil {
			s.writeError(w, r, err)
			return
		}
		if err := canonical(&req); err != nil {
			s.writeError(w, r, err)
			return
		}
		lease, created, err := start(r, req, decoded)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		s.respondIdempotent(w, r, lease, wait, created, load)
	}
}

// respondIdempotent answers a request that holds lease. A finished key is
// answered with its stored response. Otherwise the request waits for the
// operation to finish, up to wait, gives up the key's lock if it still holds
// it, and answers with the final response or with 202 and the resource as it
// stands: as created, when this request created it and did not wait.
func (s *Server) respondIdempotent(w http.ResponseWriter, r *http.Request, lease idempotency.Lease, wait time.Duration, created any, load current) {
	ctx := r.Context()
	key := lease.Key
	spanResource(r, key.Resource)
	var err error
	if !key.Finished() && wait > 0 {
		key, err = s.Keys.Wait(ctx, lease, wait)
	}
	// Finishing clears the lock; otherwise it goes before the answer, so an
	// immediate retry is not refused.
	if err != nil || !key.Finished() {
		if relErr := s.Keys.Release(context.WithoutCancel(ctx), lease); relErr != nil {
			s.Logger.ErrorContext(ctx, "release key lock", "request_id", requestIDOf(ctx), "err", relErr)
		}
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if lease.Created {
		s.count(func(m *keyMetrics) prometheus.Counter { return m.created })
	}
	if key.Finished() {
		if !lease.Created {
			s.count(func(m *keyMetrics) prometheus.Counter { return m.replays })
		}
		resp := *key.Response
		if once, ok := created.(shownOnce); ok && lease.Created {
			resp.Body = render.Encode(once.body)
		}
		writeStored(w, resp, !lease.Created)
		return
	}
	res, err := s.Render.ResourceOf(key.Resource)
	if err == nil && res == nil {
		err = fmt.Errorf("key %d is unfinished and names no resource", key.ID)
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	body := created
	if wait > 0 || body == nil {
		if body, err = load(ctx, tenantID(r), key.Resource.ID); err != nil {
			s.writeError(w, r, err)
			return
		}
	}
	w.Header().Set("Location", res.URL)
	w.Header().Set("Retry-After", strconv.Itoa(s.retryAfterSeconds()))
	writeJSON(w, http.StatusAccepted, body)
}

// countFailure counts a request the API failed.
func (s *Server) countFailure(kind string) {
	if s.keyMetrics != nil {
		s.keyMetrics.failures.WithLabelValues(kind).Inc()
	}
}

// spanResource records the resource a request is about on its span, and for
// its access log line, named for its type: payments.payment_id.
func spanResource(r *http.Request, res idempotency.ResourceRef) {
	if res.Type == "" {
		return
	}
	if f := fieldsOf(r); f != nil {
		f.resource = res
	}
	if span := trace.SpanFromContext(r.Context()); span.IsRecording() {
		span.SetAttributes(attribute.String("payments."+res.Type+"_id", res.ID))
	}
}

// count adds one to the counter which picks.
func (s *Server) count(which func(*keyMetrics) prometheus.Counter) {
	if s.keyMetrics != nil {
		which(s.keyMetrics).Inc()
	}
}

// writeStored writes a stored final response exactly as it was stored. A
// request that did not create the key gets it as a replay.
func writeStored(w http.ResponseWriter, resp idempotency.Response, replayed bool) {
	h := w.Header()
	// Every value in one array: a slice each, capped so none can grow
	// into the next.
	values := make([]string, 0, len(resp.Header)+1)
	set := func(name, value string) {
		values = append(values, value)
		h[name] = values[len(values)-1 : len(values) : len(values)]
	}
	for name, value := range resp.Header {
		set(name, value) // canonical: render.Stored names them
	}
	if replayed {
		set("Idempotent-Replayed", "true")
	}
	w.WriteHeader(resp.Status)
	w.Write(resp.Body) //nolint:errcheck
}
