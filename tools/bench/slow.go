package bench

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/example/payments/internal/gateway/fake"
	"github.com/example/payments/internal/process"
	"github.com/example/payments/internal/process/worker"
	"github.com/example/payments/tools/fakeprocessor/processor"
)

// The slow processor's modes: payments end to end with enough clients to
// fill a worker at its defaults, behind a processor answering at once, then
// behind one answering after slowLatency, as a real one does; the second a
// ratio to the first, measured in the same run.
const (
	slowClients  = 512
	slowLatency  = 500 * time.Millisecond
	fastBehind   = "payments end to end, 512 clients, worker at its defaults, processor at 0 ms"
	slowBehind   = "payments end to end, 512 clients, worker at its defaults, processor at 500 ms"
	slowWaitSecs = "wait=20"
)

// slowModes measures fastBehind (against the insert ceiling) and slowBehind
// (against fastBehind), each with a worker of its own at its defaults and a
// processor of its own, the stack's worker stopped.
func (r *runner) slowModes(insert Result) error {
	r.st.stopWorker()
	if err := r.st.drain(r.ctx, r.pool); err != nil {
		return err
	}
	// A client whose connections are kept for every one of the clients.
	client := sender{http: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: slowClients * 2}, Timeout: 30 * time.Second}}
	defer client.http.CloseIdleConnections()
	measureBehind := func(name string, latency time.Duration, ceiling Result) (Result, error) {
		vacuum(r.ctx, r.pool, r.out)
		stop, err := r.st.workerBehind(r.ctx, r.logger, latency)
		if err != nil {
			return Result{}, err
		}
		defer stop()
		meter := startCPU()
		res, err := r.mode(name, slowClients, ceiling, http.StatusCreated, func() (int, error) {
			return client.post(r.st.apiURL+"/v1/payments", r.fresh("slow-"), slowWaitSecs)
		})
		if err != nil {
			return res, err
		}
		// What the mode cost the processors says what bounds it: the cores
		// all busy, and whose share.
		use, useErr := meter.stop()
		r.cost(name, use, useErr, res.Ops)
		return res, drainPayments(r.ctx, r.pool)
	}
	fast, err := measureBehind(fastBehind, 0, insert)
	if err != nil {
		return err
	}
	_, err = measureBehind(slowBehind, slowLatency, fast)
	return err
}

// workerBehind starts a fake processor that answers after latency and a
// worker at its defaults calling it, on the stack's database, and returns
// what stops both once the payments they took are settled.
func (s *stack) workerBehind(ctx context.Context, logger *slog.Logger, latency time.Duration) (func(), error) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	stop := func() { cancel(); wg.Wait() }
	var pcfg processor.Config
	if err := process.Load(&pcfg); err != nil {
		stop()
		return nil, err
	}
	pcfg.TracerProvider = s.worker.TracerProvider
	pcfg.DatabaseURL, pcfg.Addr, pcfg.InternalAddr, pcfg.Latency = s.worker.DatabaseURL, "127.0.0.1:0", "127.0.0.1:0", latency
	p, err := processor.New(ctx, pcfg, logger)
	if err != nil {
		stop()
		return nil, err
	}
	wg.Go(func() { _ = p.Run(ctx) })
	var wcfg worker.Config
	if err := process.Load(&wcfg); err != nil {
		stop()
		return nil, err
	}
	wcfg.Common, wcfg.Webhooks = s.worker.Common, s.worker.Webhooks
	wcfg.MetricsAddr = "127.0.0.1:0"
	if wcfg.Processor, err = process.NewProcessor(fake.Adapter); err != nil {
		stop()
		return nil, err
	}
	wcfg.Processor.Settings.(*fake.Settings).URL = "http://" + p.Addr()
	w, err := worker.New(ctx, wcfg, logger)
	if err != nil {
		stop()
		return nil, fmt.Errorf("a worker behind a processor at %s: %w", latency, err)
	}
	wg.Go(func() { _ = w.Run(ctx) })
	return stop, nil
}
