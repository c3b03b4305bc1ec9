package stripesim

import (
	"net/http/httptest"
	"testing"
)

// Serve serves a simulator with opts over HTTP until the test ends, and
// returns it and its URL, STRIPE_API_BASE for the code under test.
func Serve(t testing.TB, opts Options) (*Server, string) {
	t.Helper()
	sim, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(sim)
	t.Cleanup(func() {
		srv.Close()
		sim.Close()
	})
	return sim, srv.URL
}
