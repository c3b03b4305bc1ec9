package idemcheck

import (
	"context"
	"fmt"
	"net/http"
	"time"
)

// checkRetention: a key is honoured for the whole retention the server
// publishes (a retry at three quarters of it is still the first result);
// after it (and the grace given for the server's expiry to run), a retry is
// still that result, a refusal with a problem body that creates nothing (the
// key expired: 410), or a new, independent request, and nothing else.
func checkRetention(ctx context.Context, p *probe) verdict {
	d := p.cfg.Retention
	if d <= 0 {
		return skip("no -retention given: the server's key retention is not known")
	}
	key, first, id, stop := p.first(ctx, 1, p.cfg.Body)
	if stop != "" {
		return findings{stop}.verdict("")
	}
	// The server kept the key from some time between sending and answering:
	// within the retention counts from the send, after it from the answer.
	sent := first.answered.Add(-time.Duration(first.Elapsed * float64(time.Millisecond)))
	same := func(ex *Exchange) bool { return ex.status == first.status && p.id(ex) == id }
	var f findings
	if err := sleepUntil(ctx, sent.Add(d*3/4)); err != nil {
		return findings{err.Error()}.verdict("")
	}
	if within := p.post(ctx, 1, []string{key}, p.cfg.Body); !same(within) {
		f.add("a retry at three quarters of the retention answered %s naming %q, not the first result (%s, %s): the key was forgotten early",
			describe(within), p.id(within), first.Status, id)
		return f.verdict("")
	}
	expiry := first.answered.Add(d)
	every := min(time.Second, max(d/20, 50*time.Millisecond))
	var after *Exchange
	for at := expiry; ; at = at.Add(every) {
		if err := sleepUntil(ctx, at); err != nil {
			return findings{err.Error()}.verdict("")
		}
		after = p.post(ctx, 1, []string{key}, p.cfg.Body)
		if !same(after) || time.Now().After(expiry.Add(p.cfg.RetentionGrace)) {
			break
		}
	}
	late := time.Since(expiry).Round(time.Millisecond)
	switch newID, problem := p.executed(after); {
	case same(after):
		return f.verdict(fmt.Sprintf("kept for the retention; still the first result %v after it (kept longer, which the rule allows)", late))
	case problem == "" && newID != id:
		return f.verdict(fmt.Sprintf("kept for the retention; %v after it, a new request (created %s)", late, newID))
	case after.status >= 400 && after.status <= 499 && after.status != http.StatusConflict && after.status != http.StatusTooManyRequests:
		if !problemBody(after) {
			f.add("the key expired with a %d without a problem body", after.status)
		}
		if newID := p.id(after); newID != "" && newID != id {
			f.add("the refusal names %s, which is not what the key created", newID)
		}
		return f.verdict(fmt.Sprintf("kept for the retention; %v after it, refused with %d (expired)", late, after.status))
	}
	f.add("after the retention, the retry answered %s naming %q: neither the first result, an expiry refusal nor a new request", describe(after), p.id(after))
	return f.verdict("")
}

// sleepUntil waits until t, or returns the context's error.
func sleepUntil(ctx context.Context, t time.Time) error {
	// An unstopped timer is collected once unreachable (Go 1.23).
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(time.Until(t)):
		return nil
	}
}
