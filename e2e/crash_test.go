package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/example/payments/tools/testdb"
	"github.com/example/payments/tools/testwait"
)

const crashBody = `{"amount": 4200, "currency": "USD", "payment_method": "pm_card_visa"}`

// TestCrashPoints kills a real process at each crash point with SIGKILL,
// restarts it without the crash point, and proves that the payment ends
// succeeded with exactly one processor charge, one job and a replayable
// response. The relay's point kills the worker between its insert of the
// job into River's queue and its commit.
func TestCrashPoints(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		process string // which process crashes
		point   string
	}{
		{"APIAfterFirstPhase", "api", "after_first_phase"},
		{"WorkerAfterProcessorResponse", "worker", "payment_after_processor_response"},
		{"WorkerInRelay", "worker", "in_relay"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			crash := []string{"APP_ENV=test", "CRASH_POINT=" + tc.point}
			// A short lock timeout lets a retry take over the dead API's lock.
			restartEnv := []string{"IDEMPOTENCY_LOCK_TIMEOUT=2s", "IDEMPOTENCY_MAX_WAIT=1s", "IDEMPOTENCY_DEFAULT_WAIT=1s"}
			apiEnv, workerEnv := restartEnv, []string(nil)
			if tc.process == "api" {
				apiEnv = append(append([]string{}, restartEnv...), crash...)
			} else {
				workerEnv = crash
			}
			db := testdb.New(t)
			s := startStack(t, db.URL, apiEnv, workerEnv)

			status, _, body := do(t, http.MethodPost, s.apiURL+"/v1/payments", "sk_test_acme", "crash-1", crashBody)
			if tc.process == "api" {
				if status != 0 {
					t.Fatalf("the API answered %d %s instead of dying", status, body)
				}
				s.api.killed(t)
				s.startAPI(restartEnv...)
			} else {
				if status != http.StatusAccepted {
					t.Fatalf("with the worker dying: %d %s", status, body)
				}
				s.worker.killed(t)
				s.startWorker()
			}

			// Retry as a client would until the final answer.
			var final []byte
			testwait.Poll(t, time.Now().Add(60*time.Second), 200*time.Millisecond, func() error {
				status, header, body := do(t, http.MethodPost, s.apiURL+"/v1/payments", "sk_test_acme", "crash-1", crashBody)
				if status == http.StatusCreated {
					final = body
					return nil
				}
				if status != http.StatusAccepted && status != http.StatusConflict {
					t.Fatalf("retry: %d %v %s", status, header, body)
				}
				return fmt.Errorf("no final response in time; last %d %s", status, body)
			})

			var p struct{ ID, Status string }
			if err := json.Unmarshal(final, &p); err != nil || p.Status != "succeeded" {
				t.Fatalf("final payment %s: %v", final, err)
			}
			status, header, replay := do(t, http.MethodPost, s.apiURL+"/v1/payments", "sk_test_acme", "crash-1", crashBody)
			if status != http.StatusCreated || !bytes.Equal(replay, final) || header.Get("Idempotent-Replayed") != "true" {
				t.Fatalf("replay: %d %s", status, replay)
			}
			if charges := chargesFor(t, s, p.ID); len(charges) != 1 {
				t.Fatalf("processor charges for %s: %v", p.ID, charges)
			}
			var jobs int
			if err := db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM river_job
WHERE kind = 'drive_operation' AND args->>'id' = $1`, p.ID).Scan(&jobs); err != nil || jobs != 1 {
				t.Fatalf("jobs for %s = %d, %v; want 1", p.ID, jobs, err)
			}
		})
	}
}

// TestRefundCrashPoints kills the worker with SIGKILL once a refund's
// processor call is answered and before the answer is recorded, and restarts
// it: the refund settles with no client retry, within minutes (River rescues
// the dead worker's job, or the sweep hands the quiet refund to the
// reconciler), with exactly one refund at the processor.
func TestRefundCrashPoints(t *testing.T) {
	t.Parallel()
	for _, point := range []string{"refund_after_processor_response"} {
		t.Run(point, func(t *testing.T) {
			t.Parallel()
			s := startStack(t, testdb.New(t).URL, nil, []string{"APP_ENV=test", "CRASH_POINT=" + point})

			status, _, body := do(t, http.MethodPost, s.apiURL+"/v1/payments", "sk_test_acme", "paid", crashBody, "Prefer", "wait=10")
			var p struct{ ID, Status string }
			if err := json.Unmarshal(body, &p); err != nil || status != http.StatusCreated {
				t.Fatalf("payment: %d %s", status, body)
			}
			status, _, body = do(t, http.MethodPost, s.apiURL+"/v1/payments/"+p.ID+"/refunds", "sk_test_acme", "refund-1",
				`{"amount": 1500}`, "Prefer", "respond-async")
			var r struct{ ID, Status string }
			if err := json.Unmarshal(body, &r); err != nil || status != http.StatusAccepted {
				t.Fatalf("refund: %d %s", status, body)
			}
			s.worker.killed(t)
			s.startWorker()

			// No client retry: only reads, until the refund's key is finished.
			killed := time.Now()
			testwait.Poll(t, killed.Add(3*time.Minute), 200*time.Millisecond, func() error {
				_, _, body := do(t, http.MethodGet, s.apiURL+"/v1/idempotency-keys/refund-1", "sk_test_acme", "", "")
				var key struct {
					RecoveryPoint string `json:"recovery_point"`
				}
				if err := json.Unmarshal(body, &key); err != nil {
					t.Fatalf("key %s", body)
				}
				if key.RecoveryPoint == "finished" {
					return nil
				}
				return fmt.Errorf("refund %s still at %q 3 minutes after the kill", r.ID, key.RecoveryPoint)
			})
			t.Logf("settled %s after the kill", time.Since(killed).Round(time.Second))
			_, _, body = do(t, http.MethodGet, s.apiURL+"/v1/refunds/"+r.ID, "sk_test_acme", "", "")
			if err := json.Unmarshal(body, &r); err != nil || r.Status != "succeeded" {
				t.Fatalf("refund ended %s", body)
			}
			var pay struct {
				AmountRefunded int64 `json:"amount_refunded"`
			}
			_, _, body = do(t, http.MethodGet, s.apiURL+"/v1/payments/"+p.ID, "sk_test_acme", "", "")
			if err := json.Unmarshal(body, &pay); err != nil || pay.AmountRefunded != 1500 {
				t.Fatalf("payment after the refund: %s", body)
			}
			if refunds := processorList(t, s, "/v1/refunds?idempotency_key=refund_"+r.ID); len(refunds) != 1 {
				t.Fatalf("processor refunds for %s: %v", r.ID, refunds)
			}
			status, _, replay := do(t, http.MethodPost, s.apiURL+"/v1/payments/"+p.ID+"/refunds", "sk_test_acme", "refund-1", `{"amount": 1500}`)
			if status != http.StatusCreated {
				t.Fatalf("replay: %d %s", status, replay)
			}
		})
	}
}
