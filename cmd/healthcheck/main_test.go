package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// TestRun: healthy on 2xx, unhealthy on any other status, on no answer and
// without exactly one URL.
func TestRun(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/healthz" {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	defer srv.Close()
	for _, tt := range []struct {
		name    string
		args    []string
		healthy bool
	}{
		{"OK", []string{srv.URL + "/healthz"}, true},
		{"Unavailable", []string{srv.URL + "/readyz"}, false},
		{"Refused", []string{closed.URL + "/healthz"}, false},
		{"NoURL", nil, false},
		{"TwoURLs", []string{srv.URL + "/healthz", srv.URL + "/healthz"}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if err := run(context.Background(), tt.args); (err == nil) != tt.healthy {
				t.Fatalf("run(%v) = %v, want healthy %v", tt.args, err, tt.healthy)
			}
		})
	}
}
