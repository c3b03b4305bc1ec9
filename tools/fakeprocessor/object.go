package fakeprocessor

import (
	"slices"

	"github.com/go-chi/chi/v5"
)

// object is one kind of thing the processor makes (a charge, a refund), each
// declared in a file of its own: its routes (its POST, its close, its
// listings) and the codes of its definite refusals.
type object struct {
	// failureCodes are the codes of what it refuses or declines for good.
	failureCodes []string
	// routes adds its routes under /v1.
	routes func(r chi.Router, s *Server)
}

// FailureCodes are the codes of every definite refusal the processor gives,
// which the service passes on as the code of a failed operation.
func FailureCodes() []string {
	var codes []string
	for _, o := range objects {
		codes = append(codes, o.failureCodes...)
	}
	return slices.Compact(codes)
}
