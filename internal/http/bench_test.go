package http_test

import (
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/example/payments/tools/stacktest"
)

// BenchmarkCreatePayment measures a payment end to end: the API's first
// phase, the worker's processor call and phases, and the NOTIFY that wakes
// the waiting request with its 201.
func BenchmarkCreatePayment(b *testing.B) {
	s := stacktest.New(b, stacktest.Options{})
	s.StartWorker()
	var n atomic.Int64
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			res := s.Pay(acme, fmt.Sprintf("bench-%d", n.Add(1)), visa)
			if res.Status != http.StatusCreated {
				b.Errorf("status %d %s", res.Status, res.Body)
				return
			}
		}
	})
	b.StopTimer()
	if got := s.Count(`SELECT count(*) FROM processor.charges`); int64(got) != n.Load() {
		b.Fatalf("%d charges for %d payments", got, n.Load())
	}
}

// BenchmarkReplay measures answering a retry from the stored response.
func BenchmarkReplay(b *testing.B) {
	s := stacktest.New(b, stacktest.Options{})
	s.StartWorker()
	if res := s.Pay(acme, "replayed", visa); res.Status != http.StatusCreated {
		b.Fatalf("status %d", res.Status)
	}
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if res := s.Pay(acme, "replayed", visa); res.Header.Get("Idempotent-Replayed") != "true" {
				b.Errorf("not a replay: %d", res.Status)
				return
			}
		}
	})
}
