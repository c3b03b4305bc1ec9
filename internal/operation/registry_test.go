package operation_test

import (
	"net/http"
	"slices"
	"testing"

	"github.com/example/payments/internal/operation"
	"github.com/example/payments/internal/payments"
	"github.com/example/payments/internal/refunds"
	"github.com/example/payments/tools/testkind"
)

// TestRegistryRefuses: NewRegistry takes the kinds as their constructors
// declare them, and refuses, at startup, a list whose declarations the
// machinery cannot run on: among them, states that do not say what each
// status means, how it answers and what it announces.
func TestRegistryRefuses(t *testing.T) {
	t.Parallel()
	kinds, err := operation.NewRegistry(payments.New(nil), refunds.New(nil), testkind.New(nil))
	if err != nil {
		t.Fatalf("the kinds as declared: %v", err)
	}
	// A refund's success announces its payment refunded too, an event type
	// an endpoint may ask for.
	if types := kinds.EventTypes(); !slices.Contains(types, "payment.refunded") || slices.Contains(operation.EventTypes(payments.New(nil)), "payment.refunded") {
		t.Fatalf("event types %v: want payment.refunded, staged by the refund", types)
	}
	// widget is the test kind, declared as d says.
	widget := func(d operation.Declared) operation.Kind {
		k := testkind.New(nil)
		k.Declared = d
		return k
	}
	// states is the test kind with states of its own.
	states := func(states ...operation.State) operation.Kind {
		return widget(operation.Declare(testkind.Names, testkind.Widget{}, struct{}{}).WithStates(states...))
	}
	names := testkind.Names
	names.Prefix = payments.Names.Prefix
	table, noTable := testkind.Names, testkind.Names
	table.Table, noTable.Table = payments.Names.Table, ""
	for name, kinds := range map[string][]operation.Kind{
		"Undeclared":   {payments.Kind{}},
		"Twice":        {payments.New(nil), payments.New(nil)},
		"PrefixTwice":  {payments.New(nil), widget(operation.Declare(names, testkind.Widget{}, struct{}{}))},
		"TableTwice":   {payments.New(nil), widget(operation.Declare(table, testkind.Widget{}, struct{}{}))},
		"NoTable":      {widget(operation.Declare(noTable, testkind.Widget{}, struct{}{}))},
		"NilObject":    {widget(operation.Declare(testkind.Names, nil, struct{}{}))},
		"NilRequest":   {widget(operation.Declare(testkind.Names, testkind.Widget{}, nil))},
		"RuleNoStatus": {widget(operation.Declare(testkind.Names, testkind.Widget{}, struct{}{}, operation.ErrorRule{Err: testkind.ErrTooHeavy, Code: "widget_too_heavy", Title: "Too heavy"}))},
		"RuleNoError":  {widget(operation.Declare(testkind.Names, testkind.Widget{}, struct{}{}, operation.ErrorRule{Status: http.StatusBadRequest, Code: "widget_too_heavy", Title: "Too heavy"}))},
		"NoStates":     {states()},
		"NoFailure":    {states(operation.State{Status: "made", Succeeded: true, Answer: http.StatusCreated})},
		"NoSuccess":    {states(operation.State{Status: "failed", Answer: http.StatusPaymentRequired})},
		"StateTwice":   {states(append(testkind.States, testkind.States[0])...)},
		"Processing":   {states(append(testkind.States, operation.State{Status: operation.StatusProcessing, Answer: http.StatusPaymentRequired})...)},
		"NotAName":     {states(append(testkind.States, operation.State{Status: "Made!", Succeeded: true, Answer: http.StatusCreated})...)},
		"SuccessAs402": {states(append(testkind.States, operation.State{Status: "odd", Succeeded: true, Answer: http.StatusPaymentRequired})...)},
		"FailureAs201": {states(append(testkind.States, operation.State{Status: "odd", Answer: http.StatusCreated})...)},
		"OthersEvent":  {states(append(testkind.States, operation.State{Status: "odd", Succeeded: true, Answer: http.StatusCreated, Event: "payment.odd"})...)},
		"WaitingFails": {states(append(testkind.States, operation.State{Status: "odd", Answer: http.StatusPaymentRequired, Waiting: true})...)},
		// An event about a parent names a declared kind other than its own:
		// the widget's parent is the payment.
		"ParentUndeclared": {states(append(testkind.States, operation.State{Status: "odd", Succeeded: true, Answer: http.StatusCreated, Parent: "payment.widgeted"})...)},
		"ParentItself":     {payments.New(nil), states(append(testkind.States, operation.State{Status: "odd", Succeeded: true, Answer: http.StatusCreated, Parent: "widget.widgeted"})...)},
		"ParentNoWord":     {payments.New(nil), states(append(testkind.States, operation.State{Status: "odd", Succeeded: true, Answer: http.StatusCreated, Parent: "payment"})...)},
		"OnlyWaits": {states(operation.State{Status: "queued", Succeeded: true, Answer: http.StatusAccepted, Waiting: true},
			operation.State{Status: "failed", Answer: http.StatusPaymentRequired})},
	} {
		if _, err := operation.NewRegistry(kinds...); err == nil {
			t.Errorf("%s: the list is taken, want an error", name)
		}
	}
}
