package fakeprocessor

// Charge and Refund are the API's charge and refund objects, for the tests
// to read answers with the type the processor writes them from.
type (
	Charge = charge
	Refund = refund
)
