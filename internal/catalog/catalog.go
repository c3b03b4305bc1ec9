// Package catalog is the list of the service's operations: the one place
// where a kind of operation (package operation) is added to the service.
// Everything generic (the first phase, the worker, the sweep, the
// reconciler, the processor's webhooks, events and their deliveries, the
// error table, metrics and traces) reads this list, and nothing else names a
// kind. docs/FORKING.md adds one.
package catalog

import (
	"github.com/example/payments/internal/operation"
	"github.com/example/payments/internal/payments"
	"github.com/example/payments/internal/refunds"
)

// Processor is every call the operations make at the processor; its adapter
// (package gateway) implements it.
type Processor interface {
	payments.Processor
	refunds.Processor
}

// Kinds are the service's operations, their processor calls made by p. The
// API, which calls no processor, passes nil.
func Kinds(p Processor) *operation.Registry {
	return operation.MustRegistry(
		payments.New(p),
		refunds.New(p),
	)
}
