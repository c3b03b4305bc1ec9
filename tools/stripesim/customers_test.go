package stripesim_test

import (
	"context"
	"net/http"
	"testing"

	stripego "github.com/stripe/stripe-go/v83"

	"github.com/example/payments/tools/stripesim"
)

// TestCustomers: a customer is made, found, deleted once, and then the
// stub Stripe answers.
func TestCustomers(t *testing.T) {
	t.Parallel()
	e := start(t, stripesim.Options{ManualClock: true})
	ctx := context.Background()
	made, err := e.api.V1Customers.Create(ctx, &stripego.CustomerCreateParams{Description: stripego.String("a merchant"),
		Metadata: map[string]string{"merchant": "m_1"}})
	if err != nil {
		t.Fatal(err)
	}
	got, err := e.api.V1Customers.Retrieve(ctx, made.ID, nil)
	if err != nil || got.Description != "a merchant" || got.Metadata["merchant"] != "m_1" || got.Deleted {
		t.Errorf("retrieve = %+v, %v; want what was made", got, err)
	}
	params := charge(1000, "pm_card_visa", "key")
	params.Customer = stripego.String(made.ID)
	if pi := e.mustCreate(t, params); pi.Customer == nil || pi.Customer.ID != made.ID {
		t.Errorf("payment intent's customer %v; want %s", pi.Customer, made.ID)
	}
	deleted, err := e.api.V1Customers.Delete(ctx, made.ID, nil)
	if err != nil || !deleted.Deleted || deleted.ID != made.ID {
		t.Errorf("delete = %+v, %v; want deleted", deleted, err)
	}
	if got, err := e.api.V1Customers.Retrieve(ctx, made.ID, nil); err != nil || !got.Deleted {
		t.Errorf("retrieve of the deleted = %+v, %v; want the deleted stub", got, err)
	}
	_, err = e.api.V1Customers.Delete(ctx, made.ID, nil)
	wantError(t, err, http.StatusNotFound, stripego.ErrorTypeInvalidRequest, stripego.ErrorCodeResourceMissing)
	params = charge(1000, "pm_card_visa", "key-2")
	params.Customer = stripego.String(made.ID)
	_, err = e.create(ctx, params)
	wantError(t, err, http.StatusBadRequest, stripego.ErrorTypeInvalidRequest, stripego.ErrorCodeResourceMissing)
	if cs := e.sim.Customers(); len(cs) != 1 || !cs[0].Deleted {
		t.Errorf("customers %+v; want the one, deleted", cs)
	}
}
