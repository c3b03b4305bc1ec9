package render

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/example/payments/internal/idempotency"
	"github.com/example/payments/internal/operation"
)

// Declined is how a kind words a failed operation's problem. Its code is the
// processor's failure code, or <type>_failed when it gave none
// (FailedCode).
type Declined struct {
	// Title is the problem's title ("Payment declined").
	Title string
	// Detail is the problem's detail.
	Detail string
}

// FailedCode is the code of a failed operation of kind n whose processor
// gave no failure code: payment_failed.
func FailedCode(n operation.Names) string { return n.Type + "_failed" }

// FinalResponse is the final response of an operation of kind n in its state st,
// as the kind declares it: st.Answer (201 or 202) with object when it
// succeeded; otherwise a problem carrying object as the member named by its
// type, 502 processor_error when the service gave up on it through the
// fence, else 402 with its failure code. Every kind renders through it, so
// that all read alike.
func FinalResponse(n operation.Names, st operation.State, id string, object any, failureCode *string, d Declined) idempotency.Response {
	location := n.Location(id)
	if st.Succeeded {
		return Stored(st.Answer, "application/json", location, Encode(object))
	}
	code, title, detail, answer := FailedCode(n), d.Title, d.Detail, st.Answer
	if failureCode != nil {
		code = *failureCode
	}
	if code == operation.FailureProcessorError {
		answer, title, detail = http.StatusBadGateway, "Processor error", n.GaveUp().FailureMessage
	}
	problem := NewProblem(answer, code, title, detail)
	problem.Member, problem.Object = n.Type, object
	return Stored(answer, "application/problem+json", location, Encode(problem))
}

// Stored is a final response to store on a key: its status, its
// Content-Type and Location (none when empty), and its body.
func Stored(status int, contentType, location string, body []byte) idempotency.Response {
	header := map[string]string{"Content-Type": contentType}
	if location != "" {
		header["Location"] = location
	}
	return idempotency.Response{Status: status, Header: header, Body: body}
}

// ResourceLink is what a key created, with where to fetch it.
type ResourceLink struct {
	Type string `json:"type"`
	ID   string `json:"id"`
	URL  string `json:"url"`
}

// ResourceOf names a key's resource and its URL: nil when the key created
// none (a stored refusal), and an error for a type that is not declared,
// never a guess.
func (r *Renderer) ResourceOf(res idempotency.ResourceRef) (*ResourceLink, error) {
	if res.Type == "" {
		return nil, nil
	}
	declared, ok := r.resources[res.Type]
	if !ok {
		return nil, fmt.Errorf("the key names a %q, which is not declared", res.Type)
	}
	return &ResourceLink{Type: res.Type, ID: res.ID, URL: declared.Path + "/" + res.ID}, nil
}

// Error is the problem of a refusal that is final and stored; it implements
// operation.Refuser.
func (r *Renderer) Error(err error) idempotency.Response {
	p, ok := r.For(err)
	if !ok {
		p = NewProblem(http.StatusInternalServerError, "internal_error", "Internal server error", "An unexpected error occurred.")
	}
	return Stored(p.Status, "application/problem+json", "", Encode(p))
}

// MarshalJSON writes the problem's members, then the operation it carries
// under the member named for its type ("payment"), when it carries one.
func (p Problem) MarshalJSON() ([]byte, error) {
	type members Problem // without this method
	b, err := json.Marshal(members(p))
	if err != nil || p.Member == "" {
		return b, err
	}
	name, err := json.Marshal(p.Member)
	if err != nil {
		return nil, err
	}
	object, err := json.Marshal(p.Object)
	if err != nil {
		return nil, err
	}
	b = bytes.TrimSuffix(b, []byte("}"))
	return append(append(append(append(b, ','), name...), ':'), append(object, '}')...), nil
}
