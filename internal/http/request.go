package http

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/example/payments/internal/idempotency"
	"github.com/example/payments/internal/render"
)

// keyHeader returns the request's idempotency key. It runs before the body
// is read: the order is authenticate, parse key, parse body, reserve.
func keyHeader(r *http.Request) (string, error) {
	values := r.Header["Idempotency-Key"]
	switch len(values) {
	case 0:
		return "", render.ErrKeyMissing
	case 1:
		return idempotency.ParseKey(values[0])
	default:
		return "", fmt.Errorf("%w: send the header once", idempotency.ErrKeyInvalid)
	}
}

// idempotencyRequest is the request under key, with its body as received and
// the body's digest, which is all a retry of the same bytes is matched by:
// its fingerprint is left for canonical, so that such a retry's body is
// never canonicalized.
func idempotencyRequest(r *http.Request, key string, body []byte) idempotency.Request {
	return idempotency.Request{TenantID: tenantID(r), Key: key, Method: r.Method, Path: r.URL.Path, Body: body,
		Digest: idempotency.Digest(r.Method, r.URL.Path, body), RequestID: requestIDOf(r.Context())}
}

// canonical fingerprints req, once its body has been decoded and validated:
// a body that is not valid JSON is refused here.
func canonical(req *idempotency.Request) error {
	fp, err := idempotency.Fingerprint(req.Method, req.Path, req.Body)
	if err != nil {
		return &render.InvalidRequestError{Detail: "The request body is not valid JSON."}
	}
	req.Fingerprint = fp
	return nil
}

// readBody reads a request's body in full: uncompressed, at most
// MaxBodyBytes.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	if enc := firstValue(r.Header["Content-Encoding"]); enc != "" && !strings.EqualFold(enc, "identity") {
		return nil, render.ErrEncoding
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		return nil, render.ErrTooLarge
	case err != nil:
		// A slow, truncated or reset body is the client's doing, never the
		// store's: %v keeps the network error out of the chain, so that it
		// cannot be taken for a database outage.
		return nil, fmt.Errorf("%w: %v", render.ErrBodyUnreadable, err)
	}
	return body, nil
}

// jsonBody reads a request's JSON body, at most MaxBodyBytes, checking its
// media type but not its content. When the body is optional, an empty one,
// whatever its framing, is the empty object: the same request as {}, under
// the same fingerprint.
func jsonBody(w http.ResponseWriter, r *http.Request, optional bool) ([]byte, error) {
	body, err := readBody(w, r)
	switch {
	case err != nil:
		return nil, err
	case len(body) == 0 && optional:
		return []byte("{}"), nil
	}
	// The header as clients send it needs no parsing.
	if contentType := firstValue(r.Header["Content-Type"]); contentType != "application/json" {
		mediaType, _, err := mime.ParseMediaType(contentType)
		if err != nil || mediaType != "application/json" {
			return nil, render.ErrMediaType
		}
	}
	return body, nil
}

// decodeJSON decodes a JSON object body into dst. Field names must match
// exactly, unknown fields are rejected, and a value of the wrong type names
// its field.
func decodeJSON(body []byte, dst any) error {
	// Decoding into a map first makes names exact: encoding/json alone would
	// let "AMOUNT" fill amount.
	var fields map[string]json.RawMessage
	if err := strictDecode(body, &fields); err != nil || fields == nil {
		return &render.InvalidRequestError{Detail: "The request body must be a JSON object."}
	}
	known := jsonFields(dst)
	for name := range fields {
		if !known[name] {
			return &render.InvalidRequestError{Detail: fmt.Sprintf("Unknown field %q.", name)}
		}
	}
	if err := strictDecode(body, dst); err != nil {
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) {
			return &render.InvalidRequestError{Detail: fmt.Sprintf("Field %q must be %s.", typeErr.Field, describeType(typeErr.Type))}
		}
		return &render.InvalidRequestError{Detail: "The request body is not valid JSON."}
	}
	return nil
}

func strictDecode(body []byte, dst any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("trailing data after the JSON value")
	}
	return nil
}

// fieldNames caches jsonFields: a body's struct type has the same names on
// every request.
var fieldNames sync.Map // reflect.Type → map[string]bool

// jsonFields lists the JSON names of the fields of the struct v points to.
func jsonFields(v any) map[string]bool {
	t := reflect.TypeOf(v).Elem()
	if names, ok := fieldNames.Load(t); ok {
		return names.(map[string]bool)
	}
	names := make(map[string]bool, t.NumField())
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if name != "" && name != "-" {
			names[name] = true
		}
	}
	fieldNames.Store(t, names)
	return names
}

func describeType(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int64:
		return "an integer"
	case reflect.String:
		return "a string"
	case reflect.Map:
		return "an object of strings"
	default:
		return "of type " + t.String()
	}
}

// preferredWait reads RFC 7240 Prefer: respond-async asks for no wait at all,
// wait=N for N seconds (capped at MaxWait); anything else gets DefaultWait.
func (s *Server) preferredWait(r *http.Request) time.Duration {
	wait := s.DefaultWait
	for _, header := range r.Header["Prefer"] {
		for pref := range strings.SplitSeq(header, ",") {
			name, value, _ := strings.Cut(strings.TrimSpace(pref), "=")
			switch strings.ToLower(strings.TrimSpace(name)) {
			case "respond-async":
				return 0
			case "wait":
				// A number too large for any clock asks for the longest wait,
				// never (by overflow) for none.
				n, err := strconv.ParseUint(strings.Trim(strings.TrimSpace(value), `"`), 10, 64)
				switch {
				case errors.Is(err, strconv.ErrRange) || (err == nil && n > uint64(s.MaxWait/time.Second)):
					wait = s.MaxWait
				case err == nil:
					wait = time.Duration(n) * time.Second
				}
			}
		}
	}
	return min(wait, s.MaxWait)
}
