// Package catalog is what the service is made of: the list of its operations
// (package operation), the one place where a kind of operation is added,
// and the list of the processors it can run against (package gateway), the
// one place where a processor's adapter is added. Everything generic (the
// first phase, the worker, the sweep, the reconciler, the processor's
// webhooks, events and their deliveries, the error table, metrics and
// traces) reads these lists, and nothing else names a kind or a processor.
// docs/FORKING.md adds one of each.
package catalog

import (
	"errors"
	"fmt"
	"strings"

	"github.com/example/payments/internal/gateway"
	"github.com/example/payments/internal/gateway/fake"
	"github.com/example/payments/internal/gateway/stripe"
	"github.com/example/payments/internal/operation"
	"github.com/example/payments/internal/payments"
	"github.com/example/payments/internal/refunds"
)

// Processor is every call the operations make at the processor: each kind's
// calls (operation.Calls). What else than the one call of each a processor
// can do (a lookup, a fence, a ledger) is its declaration's to say, and its
// adapter has those calls exactly where it says so (Open checks).
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

// Processors are the processors the service can run against, PROCESSOR
// naming one: the first when it is unset.
var Processors = []gateway.Adapter{
	fake.Adapter,
	stripe.Adapter,
}

// Every adapter of the list makes every kind's calls.
var (
	_ Processor = (*fake.Client)(nil)
	_ Processor = (*stripe.Client)(nil)
)

// Adapter is the processor PROCESSOR=name picks; for any other name, an
// error naming the known ones.
func Adapter(name string) (gateway.Adapter, error) {
	var known []string
	for _, a := range Processors {
		if a.Name == name {
			return a, nil
		}
		known = append(known, a.Name)
	}
	return gateway.Adapter{}, fmt.Errorf("PROCESSOR (%q) names no processor of this service: it must be one of %s", name, strings.Join(known, ", "))
}

// Open is the worker's client of the processor that s, an adapter's
// settings, declare, and the declaration: every kind's calls, checked
// against the declaration (operation.Processor.Check and CheckCalls).
func Open(s gateway.Settings, opts gateway.Options) (Processor, operation.Processor, error) {
	declared := s.Processor()
	calls, err := s.Calls(opts)
	if err != nil {
		return nil, operation.Processor{}, err
	}
	p, ok := calls.(Processor)
	if !ok {
		return nil, operation.Processor{}, fmt.Errorf("processor %s: its client (%T) does not make every kind's call", declared.Name, calls)
	}
	kinds := Kinds(p)
	if err := errors.Join(declared.Check(kinds), declared.CheckCalls(kinds)); err != nil {
		return nil, operation.Processor{}, err
	}
	return p, declared, nil
}
