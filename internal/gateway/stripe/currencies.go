package stripe

import (
	"strings"

	"github.com/example/payments/internal/operation"
)

// Amounts at Stripe (https://docs.stripe.com/currencies). The API takes
// ISO 4217 minor units; Stripe's API takes its own, which are the same but
// for the currencies in unitsApart. Stripe refuses a charge below its
// minimum, which it checks in the account's settlement currency after
// conversion: minimums holds the ones it lists, in the charge's currency,
// checked by the API before a key is spent (one that converts short still
// comes back a definite refusal, with nothing made). Three-decimal
// currencies take amounts whose last digit is 0.

// unitsApart are the currencies whose Stripe unit is not their ISO 4217
// minor unit: a Stripe amount is the ISO one times the factor (ISK: no
// minor unit in ISO 4217, two decimals at Stripe, which takes whole krónur
// only), or divided by it (MGA: two in ISO 4217, none at Stripe).
var unitsApart = map[string]struct {
	factor int64
	divide bool
}{
	"ISK": {factor: 100},
	"MGA": {factor: 100, divide: true},
}

// threeDecimal are the currencies of three decimals, which Stripe takes in
// multiples of ten.
var threeDecimal = map[string]bool{"BHD": true, "JOD": true, "KWD": true, "OMR": true, "TND": true}

// minimums are Stripe's minimum charges in the currencies it lists them
// for, in ISO 4217 minor units; elsewhere, one unit.
var minimums = map[string]int64{
	"USD": 50, "AED": 200, "AUD": 50, "BGN": 100, "BRL": 50, "CAD": 50, "CHF": 50, "CZK": 1500,
	"DKK": 250, "EUR": 50, "GBP": 30, "HKD": 400, "HUF": 17500, "INR": 50, "JPY": 50, "MXN": 1000,
	"MYR": 200, "NOK": 300, "NZD": 50, "PLN": 200, "RON": 200, "SEK": 300, "SGD": 50, "THB": 1000,
}

// amountRule is what Stripe takes in currency, in ISO 4217 minor units
// (operation.Processor.Amounts).
func amountRule(currency string) operation.AmountRule {
	cur := strings.ToUpper(currency)
	r := operation.AmountRule{Min: max(minimums[cur], 1), Step: 1}
	if threeDecimal[cur] {
		r.Step = 10
	}
	if u, ok := unitsApart[cur]; ok && u.divide {
		r.Step = u.factor
	}
	return r
}

// toStripe is amount, in currency's ISO 4217 minor units, in Stripe's.
func toStripe(currency string, amount int64) int64 {
	u, ok := unitsApart[strings.ToUpper(currency)]
	switch {
	case !ok:
		return amount
	case u.divide:
		return amount / u.factor
	}
	return amount * u.factor
}

// fromStripe is amount, in currency's Stripe units, in ISO 4217 minor
// units: what the ledger and the events compare with the operations.
func fromStripe(currency string, amount int64) int64 {
	u, ok := unitsApart[strings.ToUpper(currency)]
	switch {
	case !ok:
		return amount
	case u.divide:
		return amount * u.factor
	}
	return amount / u.factor
}
