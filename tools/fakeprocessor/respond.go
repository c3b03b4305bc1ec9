package fakeprocessor

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
)

// Error types, as Stripe names them.
const (
	typeInvalidRequest = "invalid_request_error"
	typeCard           = "card_error"
	typeAPI            = "api_error"
	typeIdempotency    = "idempotency_error"
)

// maxBodyBytes bounds a request body.
const maxBodyBytes = 64 << 10

// apiError is the error member of every error response.
type apiError struct {
	Type    string `json:"type"`
	Code    string `json:"code"`
	Message string `json:"message"`
	// Charge is the declined charge of a card_error.
	Charge string `json:"charge,omitempty"`
}

// errorBody is the JSON of an error response.
func errorBody(e apiError) []byte {
	return marshal(struct {
		Error apiError `json:"error"`
	}{e})
}

// marshal encodes v, which is always one of this package's own types and so
// cannot fail, followed by a newline for the benefit of curl.
func marshal(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("processor: marshal %T: %v", v, err))
	}
	return append(b, '\n')
}

// writeRaw writes an already encoded JSON body.
func writeRaw(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// writeJSON encodes v and writes it.
func writeJSON(w http.ResponseWriter, status int, v any) {
	writeRaw(w, status, marshal(v))
}

// writeError writes an error response.
func writeError(w http.ResponseWriter, status int, e apiError) {
	writeRaw(w, status, errorBody(e))
}

// invalid is a 400 invalid_request_error with the given message.
func invalid(code, message string) apiError {
	return apiError{Type: typeInvalidRequest, Code: code, Message: message}
}

// internalError is what a caller sees when something unexpected failed:
// nothing internal leaks, and nothing was committed.
var internalError = apiError{Type: typeAPI, Code: "api_error", Message: "An unexpected error occurred. Try again with the same Idempotency-Key."}

// decodeBody decodes one JSON object into dst, rejecting unknown fields,
// trailing data and bodies over maxBodyBytes.
func decodeBody(w http.ResponseWriter, r *http.Request, dst any) error {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		if errors.Is(err, io.EOF) {
			return errors.New("the request body is empty")
		}
		return fmt.Errorf("invalid JSON body: %w", err)
	}
	if err := dec.Decode(&struct{}{}); !errors.Is(err, io.EOF) {
		return errors.New("invalid JSON body: more than one value")
	}
	return nil
}
