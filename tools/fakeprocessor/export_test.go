package fakeprocessor

import "encoding/json"

// Charge and Refund are the API's charge and refund objects, and EventBody
// a webhook's body with its object left raw, for the tests to read answers
// with the types the processor writes them from.
type (
	Charge    = charge
	Refund    = refund
	EventBody = eventJSON[json.RawMessage]
)
