package stripesim

import (
	"maps"
	"net/http"
	"time"
)

// Customer is a customer as the simulator holds it.
type Customer struct {
	ID, Description, Email, Name string
	Metadata                     map[string]string
	Created                      time.Time
	// Deleted is true once deleted: retrieving it answers the stub Stripe
	// answers, and deleting it again is a 404.
	Deleted bool
}

// customerJSON is a customer on the wire.
type customerJSON struct {
	ID          string            `json:"id"`
	Object      string            `json:"object"`
	Created     int64             `json:"created"`
	Description *string           `json:"description"`
	Email       *string           `json:"email"`
	Livemode    bool              `json:"livemode"`
	Metadata    map[string]string `json:"metadata"`
	Name        *string           `json:"name"`
}

// deletedJSON is what Stripe answers of a deleted object.
type deletedJSON struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Deleted bool   `json:"deleted"`
}

// customerWire is cu as Stripe answers it, the stub once deleted.
func customerWire(cu *Customer) any {
	if cu.Deleted {
		return deletedJSON{ID: cu.ID, Object: "customer", Deleted: true}
	}
	return customerJSON{ID: cu.ID, Object: "customer", Created: cu.Created.Unix(), Description: nullable(cu.Description),
		Email: nullable(cu.Email), Metadata: maps.Clone(cu.Metadata), Name: nullable(cu.Name)}
}

// customerExists reports whether customer id exists and is not deleted.
func (s *Server) customerExists(id string) bool {
	cu, ok := s.customerByID[id]
	return ok && !cu.Deleted
}

// createCustomer is POST /v1/customers.
func (s *Server) createCustomer(c *call) (any, *apiError) {
	f := c.params("description", "email", "name", "metadata[]", "expand[]")
	cu := &Customer{Description: f.str("description"), Email: f.str("email"), Name: f.str("name"),
		Metadata: f.metadata(), Created: c.now}
	if f.err != nil {
		return nil, f.err
	}
	cu.ID = s.newID("cus_", 14)
	s.customers = append(s.customers, cu)
	s.customerByID[cu.ID] = cu
	return customerWire(cu), nil
}

// retrieveCustomer is GET /v1/customers/{id}.
func (s *Server) retrieveCustomer(c *call) (any, *apiError) {
	return retrieve(c, s.customerByID, customerWire, "customer", "id", "expand[]")
}

// deleteCustomer is DELETE /v1/customers/{id}.
func (s *Server) deleteCustomer(c *call) (any, *apiError) {
	if f := c.params(); f.err != nil {
		return nil, f.err
	}
	id := c.r.PathValue("id")
	cu, ok := s.customerByID[id]
	if !ok || cu.Deleted {
		return nil, noSuch(http.StatusNotFound, "customer", id, "id")
	}
	cu.Deleted = true
	return customerWire(cu), nil
}
