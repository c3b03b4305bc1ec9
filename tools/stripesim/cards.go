package stripesim

import "strings"

// card is what a test payment method does when a PaymentIntent is
// confirmed with it. The zero card succeeds.
type card struct {
	// decline, if set, is the decline every confirmation meets.
	decline *PaymentError
	// authentication is a card that needs 3-D Secure: requires_action, or
	// declined with error_on_requires_action.
	authentication bool
	// processing stays processing Options.ProcessingFor, then succeeds.
	processing bool
	// refundFail is a card whose refunds succeed, then fail.
	refundFail bool
}

// decline is a card_declined with declineCode and Stripe's message.
func decline(declineCode, message string) *PaymentError {
	return &PaymentError{Type: typeCard, Code: "card_declined", DeclineCode: declineCode, Message: message}
}

// cards are the test payment methods that do not simply succeed: Stripe's
// own (https://docs.stripe.com/testing), the names of their aliases, and
// the simulator's pm_card_processing.
var cards = map[string]card{
	"pm_card_chargeDeclined":                       {decline: decline("generic_decline", "Your card was declined.")},
	"pm_card_visa_chargeDeclined":                  {decline: decline("generic_decline", "Your card was declined.")},
	"pm_card_insufficientFunds":                    {decline: decline("insufficient_funds", "Your card has insufficient funds.")},
	"pm_card_chargeDeclinedInsufficientFunds":      {decline: decline("insufficient_funds", "Your card has insufficient funds.")},
	"pm_card_visa_chargeDeclinedInsufficientFunds": {decline: decline("insufficient_funds", "Your card has insufficient funds.")},
	"pm_card_visa_chargeDeclinedLostCard":          {decline: decline("lost_card", "Your card was declined.")},
	"pm_card_chargeDeclinedLostCard":               {decline: decline("lost_card", "Your card was declined.")},
	"pm_card_visa_chargeDeclinedStolenCard":        {decline: decline("stolen_card", "Your card was declined.")},
	"pm_card_chargeDeclinedStolenCard":             {decline: decline("stolen_card", "Your card was declined.")},
	"pm_card_chargeDeclinedExpiredCard": {decline: &PaymentError{Type: typeCard, Code: "expired_card",
		DeclineCode: "expired_card", Message: "Your card has expired."}},
	"pm_card_chargeDeclinedIncorrectCvc": {decline: &PaymentError{Type: typeCard, Code: "incorrect_cvc",
		DeclineCode: "incorrect_cvc", Message: "Your card's security code is incorrect."}},
	"pm_card_chargeDeclinedProcessingError": {decline: &PaymentError{Type: typeCard, Code: "processing_error",
		DeclineCode: "processing_error", Message: "An error occurred while processing your card. Try again in a little bit."}},
	"pm_card_authenticationRequired": {authentication: true},
	"pm_card_processing":             {processing: true},
	"pm_card_refundFail":             {refundFail: true},
}

// authenticationRequired is the decline of a card that needs
// authentication, confirmed with error_on_requires_action.
var authenticationRequired = PaymentError{Type: typeCard, Code: "authentication_required",
	DeclineCode: "authentication_required",
	Message:     "Your card was declined. This transaction requires authentication."}

// paymentMethodExists reports whether Stripe would find payment method id:
// every pm_… is taken for a test card.
func paymentMethodExists(id string) bool {
	return strings.HasPrefix(id, "pm_") && len(id) > len("pm_")
}
