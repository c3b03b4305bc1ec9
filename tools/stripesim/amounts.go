package stripesim

import (
	"fmt"
	"strconv"
	"strings"
)

// minimumCharge is the minimum charge amount of each currency Stripe's
// table lists (https://docs.stripe.com/currencies#minimum-and-maximum-charge-amounts),
// in the currency's smallest unit; any other currency's is
// defaultMinimumCharge.
var minimumCharge = map[string]int64{
	"usd": 50, "aed": 200, "aud": 50, "bgn": 100, "brl": 50, "cad": 50, "chf": 50, "czk": 1500,
	"dkk": 250, "eur": 50, "gbp": 30, "hkd": 400, "huf": 17500, "inr": 50, "jpy": 50, "mxn": 1000,
	"myr": 200, "nok": 300, "nzd": 50, "pln": 200, "ron": 200, "sek": 300, "sgd": 50, "thb": 1000,
}

// defaultMinimumCharge is the minimum charge of a currency Stripe's table
// does not list, in its smallest unit.
const defaultMinimumCharge = 50

// maximumCharge is the largest amount: eight digits.
const maximumCharge = 99999999

// zeroDecimal are the currencies whose amounts are whole units, as Stripe
// lists them.
var zeroDecimal = set("bif", "clp", "djf", "gnf", "jpy", "kmf", "krw", "mga", "pyg", "rwf", "ugx", "vnd",
	"vuv", "xaf", "xof", "xpf")

// threeDecimal are the currencies whose amounts have three decimals, which
// Stripe takes only rounded to ten, a last digit of 0.
var threeDecimal = set("bhd", "jod", "kwd", "omr", "tnd")

// set is a set of names.
func set(names ...string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}

// checkCurrency refuses a currency that is not three letters.
func checkCurrency(currency string) *apiError {
	if len(currency) != 3 || strings.Trim(currency, "abcdefghijklmnopqrstuvwxyz") != "" {
		return badRequest("currency", "", fmt.Sprintf("Invalid currency: %s. Stripe currently supports these currencies: "+
			"three-letter ISO codes, in lowercase.", currency))
	}
	return nil
}

// checkAmount refuses an amount of currency that Stripe would not charge:
// less than its minimum, more than eight digits, or a three-decimal amount
// not rounded to ten.
func checkAmount(amount int64, currency string) *apiError {
	if err := checkCurrency(currency); err != nil {
		return err
	}
	minimum, ok := minimumCharge[currency]
	if !ok {
		minimum = defaultMinimumCharge
	}
	switch {
	case amount < 0:
		return badRequest("amount", "parameter_invalid_integer", "Invalid positive integer")
	case amount < minimum:
		return badRequest("amount", "amount_too_small", "Amount must be at least "+formatAmount(minimum, currency))
	case amount > maximumCharge:
		return badRequest("amount", "amount_too_large", "Amount must be no more than "+formatAmount(maximumCharge, currency))
	case threeDecimal[currency] && amount%10 != 0:
		return badRequest("amount", "", fmt.Sprintf("Invalid amount: an amount in %s, a three-decimal currency, "+
			"must end in 0 (a multiple of 10).", currency))
	}
	return nil
}

// formatAmount is amount of currency in its major unit: "0.50 usd".
func formatAmount(amount int64, currency string) string {
	decimals := 2
	switch {
	case zeroDecimal[currency]:
		decimals = 0
	case threeDecimal[currency]:
		decimals = 3
	}
	digits := strconv.FormatInt(amount, 10)
	if decimals > 0 {
		digits = fmt.Sprintf("%0*d", decimals+1, amount)
		digits = digits[:len(digits)-decimals] + "." + digits[len(digits)-decimals:]
	}
	return digits + " " + currency
}
