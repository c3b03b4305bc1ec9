package idemcheck

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
)

// While a slow request is in progress, a retry is sent every retryEvery,
// at most maxRetries times.
const (
	retryEvery = 100 * time.Millisecond
	maxRetries = 50
)

// checkConcurrent: the same key and body sent many times at once are
// executed once; every other answer is a 409 with Retry-After or that one
// result.
func checkConcurrent(ctx context.Context, p *probe) verdict {
	before, problem := p.snapshot(ctx)
	if problem != "" {
		return findings{problem}.verdict("")
	}
	key := p.newKey()
	answers := make([]*Exchange, p.cfg.Concurrency)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range answers {
		wg.Go(func() {
			<-start
			answers[i] = p.post(ctx, 1, []string{key}, p.cfg.Body)
		})
	}
	close(start)
	wg.Wait()
	t := p.tally(answers)
	if len(t.ids) == 1 {
		t.f.oneCreated(ctx, p, before, t.ids[0])
	}
	return t.f.verdict(fmt.Sprintf("%d at once: one execution (%s), %d told to retry, %d given its result",
		len(answers), strings.Join(t.ids, ""), t.inUse, len(answers)-t.inUse-1))
}

// checkInProgress: a retry sent while a slow first request is still in
// progress is told so, a 409 with Retry-After, promptly: neither executed
// again nor held until the first is done.
func checkInProgress(ctx context.Context, p *probe) verdict {
	if p.cfg.SlowBody == "" && len(p.cfg.SlowHeaders) == 0 {
		return skip("no -slow-body or -slow-header given: nothing makes a first request slow")
	}
	body := p.cfg.SlowBody
	if body == "" {
		body = p.cfg.Body
	}
	before, problem := p.snapshot(ctx)
	if problem != "" {
		return findings{problem}.verdict("")
	}
	key := p.newKey()
	done := make(chan *Exchange, 1)
	go func() { done <- p.post(ctx, 1, []string{key}, body, p.cfg.SlowHeaders...) }()
	var first *Exchange
	select {
	case first = <-done:
		return skip("the slow request was answered (%s) in %.0f ms, before a retry was sent after %v: make it slower (-slow-body, -slow-header)",
			first.Status, first.Elapsed, p.cfg.SlowDelay)
	case <-time.After(p.cfg.SlowDelay):
	}
	var retries []*Exchange
	for first == nil && len(retries) < maxRetries {
		retries = append(retries, p.post(ctx, 1, []string{key}, body, p.cfg.SlowHeaders...))
		select {
		case first = <-done:
		case <-time.After(retryEvery):
		}
	}
	if first == nil {
		first = <-done
	}
	t := p.tally(append([]*Exchange{first}, retries...))
	if t.inUse == 0 {
		t.f.add("none of the %d retries sent while the first request was in progress was told so with a 409 (%s)", len(retries), statuses(retries))
	}
	if len(t.ids) == 1 {
		t.f.oneCreated(ctx, p, before, t.ids[0])
	}
	return t.f.verdict(fmt.Sprintf("the first took %.0f ms; %d of %d retries meanwhile told 409 with Retry-After; one execution (%s)",
		first.Elapsed, t.inUse, len(retries), strings.Join(t.ids, "")))
}

// tally is what the answers to duplicates of one request add up to.
type tally struct {
	inUse int      // 409s
	ids   []string // the resources the other answers name, each once
	f     findings
}

// tally classifies answers to duplicates of one request: each must be a 409
// with Retry-After and a problem body, or a 2xx naming the one resource
// created; answers naming two resources are two executions.
func (p *probe) tally(answers []*Exchange) tally {
	var t tally
	var noRetryAfter, noProblem int
	results := map[int]bool{}
	for _, ex := range answers {
		switch {
		case ex.status == http.StatusConflict:
			t.inUse++
			if ex.header.Get("Retry-After") == "" {
				noRetryAfter++
			}
			if !problemBody(ex) {
				noProblem++
			}
		case ex.status >= 200 && ex.status <= 299:
			id := p.id(ex)
			if id == "" {
				t.f.add("a %s names nothing created", ex.Status)
				continue
			}
			if !slices.Contains(t.ids, id) {
				t.ids = append(t.ids, id)
			}
			// A 202 is the answer of an operation still in progress
			// (RFC 7240 respond-async), which may precede the result.
			if ex.status != http.StatusAccepted {
				results[ex.status] = true
			}
		default:
			t.f.add("answered %s: neither 409 nor the result", describe(ex))
		}
	}
	if noRetryAfter > 0 {
		t.f.add("%d of %d 409s without Retry-After", noRetryAfter, t.inUse)
	}
	if noProblem > 0 {
		t.f.add("%d of %d 409s without a problem body", noProblem, t.inUse)
	}
	if len(t.ids) > 1 {
		t.f.add("executed %d times: %s", len(t.ids), strings.Join(t.ids, ", "))
	}
	if len(results) > 1 {
		t.f.add("answered with %d different results", len(results))
	}
	if len(t.ids) == 0 && len(t.f) == 0 {
		t.f.add("no answer is the result: every one was a 409")
	}
	return t
}

// statuses summarises answers as "3×409 Conflict, 1×201 Created".
func statuses(answers []*Exchange) string {
	var order []string
	count := map[string]int{}
	for _, ex := range answers {
		s := describe(ex)
		if count[s] == 0 {
			order = append(order, s)
		}
		count[s]++
	}
	parts := make([]string, len(order))
	for i, s := range order {
		parts[i] = fmt.Sprintf("%d×%s", count[s], s)
	}
	return strings.Join(parts, ", ")
}
