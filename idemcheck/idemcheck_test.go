package idemcheck

import (
	"context"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/example/payments/idemcheck/idemchecktest"
)

// retention is what the test servers keep a key for.
const retention = 4 * time.Second

// config points the checks at the test server at url, with every option
// that makes a check run.
func config(url string) Config {
	return Config{
		URL:            url + "/v1/things",
		Body:           `{"amount": 100}`,
		Auth:           Header{"Authorization", "Bearer a"},
		Auth2:          Header{"Authorization", "Bearer b"},
		MaxKeyLength:   255,
		ReplayedHeader: "Idempotent-Replayed",
		Get:            url + "/v1/things/{id}",
		List:           url + "/v1/things",
		Retention:      retention,
		RetentionGrace: 2 * time.Second,
		SlowBody:       `{"amount": 100, "slow": true}`,
		Timeout:        10 * time.Second,
	}
}

// TestFlaws runs every check against a server that breaks one rule at a
// time: each fails exactly the checks of its rule, and the correct server
// passes them all; none is skipped.
func TestFlaws(t *testing.T) {
	t.Parallel()
	keyChecks := []string{"key-missing", "key-empty", "key-too-long", "key-not-a-string", "key-twice", "key-odd-characters"}
	want := map[idemchecktest.Flaw][]string{
		idemchecktest.Correct:                nil,
		idemchecktest.NoFingerprint:          {"mismatch"},
		idemchecktest.NoLock:                 {"concurrent", "in-progress"},
		idemchecktest.LockWithout409:         {"in-progress"},
		idemchecktest.GlobalKeys:             {"per-caller"},
		idemchecktest.StoresValidationErrors: {"validation-not-stored"},
		idemchecktest.ReplayDiffers:          {"replay"},
		idemchecktest.NoKeyValidation:        keyChecks,
		idemchecktest.ForgetsEarly:           {"retention"},
	}
	if len(want) != len(idemchecktest.Flaws) {
		t.Fatalf("%d flaws, %d expectations", len(idemchecktest.Flaws), len(want))
	}
	// The servers take their time (an execution lasts until a duplicate
	// arrives, or idemchecktest.Hold): every run goes at once, whatever
	// -parallel allows, and each is judged after.
	reports := make([]*Report, len(idemchecktest.Flaws))
	errs := make([]error, len(idemchecktest.Flaws))
	var wg sync.WaitGroup
	for i, flaw := range idemchecktest.Flaws {
		srv := httptest.NewServer(idemchecktest.New(flaw, retention))
		defer srv.Close()
		wg.Go(func() { reports[i], errs[i] = Run(context.Background(), config(srv.URL)) })
	}
	wg.Wait()
	for i, flaw := range idemchecktest.Flaws {
		t.Run(string(flaw), func(t *testing.T) {
			rep, err := reports[i], errs[i]
			if err != nil {
				t.Fatal(err)
			}
			var failed []string
			for _, r := range rep.Results {
				switch r.Status {
				case Fail:
					failed = append(failed, r.Name)
					if len(r.Evidence) == 0 {
						t.Errorf("%s failed without evidence", r.Name)
					}
				case Skipped:
					t.Errorf("%s skipped: %s", r.Name, r.Detail)
				}
			}
			if !slices.Equal(failed, want[flaw]) {
				var table strings.Builder
				_ = rep.WriteTable(&table)
				t.Errorf("failed %v, want %v\n%s", failed, want[flaw], table.String())
			}
			if len(rep.Results) != len(checks) || rep.Failed != len(want[flaw]) || rep.Passed != len(checks)-len(want[flaw]) {
				t.Errorf("totals: %d results, %d passed, %d failed", len(rep.Results), rep.Passed, rep.Failed)
			}
			if (rep.Err() == nil) != (len(want[flaw]) == 0) {
				t.Errorf("Err() = %v", rep.Err())
			}
		})
	}
}
