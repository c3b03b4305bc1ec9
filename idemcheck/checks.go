package idemcheck

import (
	"context"
	"fmt"
	"strings"
)

// check is one rule of the contract: its name, where the rule comes from
// (in short, then in full), and how it is checked.
type check struct {
	name  string
	cites string
	rule  string
	run   func(ctx context.Context, p *probe) verdict
}

// The sources the rules are cited from, in full and in the table.
const (
	draft      = "draft-ietf-httpapi-idempotency-key-header-06"
	stripe     = "Stripe, docs.stripe.com/api/idempotent_requests"
	draftShort = "draft-06 "
)

// checks is the contract, in the order it is run: the key's syntax first,
// then what a valid key promises, then what takes time. Adding a check is one
// line here and its function.
var checks = []check{
	{"key-missing", draftShort + "§2.7", draft + " §2.7: a missing key is 400 with a problem body", checkMissing},
	{"key-empty", draftShort + "§2.1", draft + " §2.1: the key is an Item (RFC 8941 §4.2: an empty field fails to parse)", syntaxCheck(keyEmpty)},
	{"key-too-long", "Stripe; " + draftShort + "§5", stripe + ": keys are up to 255 characters; " + draft + " §5: validate the key's published format", syntaxCheck(keyTooLong)},
	{"key-not-a-string", draftShort + "§2.1", draft + " §2.1: the value MUST be a String (RFC 8941 §3.3.3)", syntaxCheck(keyNotAString)},
	{"key-twice", draftShort + "§2.1", draft + " §2.1: one Item (RFC 8941 §4.2: two values are a list, not an Item)", syntaxCheck(keyTwice)},
	{"key-odd-characters", draftShort + "§2.1", draft + " §2.1: an sf-string holds printable ASCII only (RFC 8941 §3.3.3)", syntaxCheck(keyOddCharacters)},
	{"replay", draftShort + "§2.6; Stripe", draft + " §2.6: a retry gets the completed operation's result; " + stripe + ": the same status and body, Idempotent-Replayed: true", opened(checkReplay)},
	{"mismatch", draftShort + "§2.7; Stripe", draft + " §2.7: a key reused with another payload is 422; " + stripe + ": 400 when the parameters differ", opened(checkMismatch)},
	{"concurrent", draftShort + "§2.6, §2.7", draft + " §2.6, §2.7: a duplicate of a request still processed is 409 with a problem; Retry-After, RFC 9110 §10.2.3", checkConcurrent},
	{"per-caller", draftShort + "§5", draft + " §5: the key is a composite of the client's key and the client", checkPerCaller},
	{"validation-not-stored", "Stripe; " + draftShort + "§2.7", stripe + ": results are saved only once the endpoint began executing, so a request that failed validation may be retried; " + draft + " §2.7: a client corrects the request, then retries", checkValidationNotStored},
	{"in-progress", draftShort + "§2.6, §2.7", draft + " §2.6, §2.7: a retry while the original is still processed is 409 with a problem; Retry-After, RFC 9110 §10.2.3", checkInProgress},
	{"retention", draftShort + "§2.3; Stripe", draft + " §2.3: keys may expire by a published policy; " + stripe + ": keys pruned after 24 h, a reuse then is a new request", checkRetention},
}

// verdict is a check's outcome and what it found.
type verdict struct {
	status Status
	detail string
}

// skip is a check that could not run, and why.
func skip(format string, a ...any) verdict {
	return verdict{Skipped, fmt.Sprintf(format, a...)}
}

// findings collects what broke the rule.
type findings []string

func (f *findings) add(format string, a ...any) { *f = append(*f, fmt.Sprintf(format, a...)) }

// addIf adds problem unless it is "".
func (f *findings) addIf(problem string) {
	if problem != "" {
		*f = append(*f, problem)
	}
}

// verdict fails with the findings, or passes saying what was seen.
func (f findings) verdict(passed string) verdict {
	if len(f) > 0 {
		return verdict{Fail, strings.Join(f, "; ")}
	}
	return verdict{Pass, passed}
}

// first sends the check's first request with a fresh key and returns the key
// and the id it created, or the finding that stops the check: a body that
// creates nothing makes every check after it meaningless.
func (p *probe) first(ctx context.Context, caller int, body string, extra ...Header) (key string, ex *Exchange, id string, stop string) {
	key = p.newKey()
	ex = p.post(ctx, caller, []string{key}, body, extra...)
	id, problem := p.executed(ex)
	if problem != "" {
		return key, ex, "", "the first request " + problem + ": is -body a request that creates something, and -auth right?"
	}
	return key, ex, id, ""
}

// opening is what a check that counts what it creates starts from: the
// list's ids before it, and its first request.
type opening struct {
	before map[string]bool
	key    string
	first  *Exchange
	id     string
}

// open takes the list's ids and sends the first request, or returns the
// finding that stops the check.
func (p *probe) open(ctx context.Context) (opening, string) {
	var o opening
	var stop string
	if o.before, stop = p.snapshot(ctx); stop != "" {
		return o, stop
	}
	o.key, o.first, o.id, stop = p.first(ctx, 1, p.cfg.Body)
	return o, stop
}

// opened is a check that starts from an opening (open): check is given the
// opening and adds its findings, and returns what a pass says; the list must
// then show the first request's resource alone as created.
func opened(check func(ctx context.Context, p *probe, o opening, f *findings) (passed string)) func(context.Context, *probe) verdict {
	return func(ctx context.Context, p *probe) verdict {
		o, stop := p.open(ctx)
		if stop != "" {
			return findings{stop}.verdict("")
		}
		var f findings
		passed := check(ctx, p, o, &f)
		f.oneCreated(ctx, p, o.before, o.id)
		return f.verdict(passed)
	}
}

// oneCreated adds a finding unless the list shows exactly the ids want as
// created since before.
func (f *findings) oneCreated(ctx context.Context, p *probe, before map[string]bool, want string) {
	created, problem := p.createdSince(ctx, before)
	f.addIf(problem)
	if before != nil && problem == "" && (len(created) != 1 || created[0] != want) {
		f.add("the list (-list) shows %d resources created (%s), not just %s", len(created), strings.Join(created, ", "), want)
	}
}

// checkReplay: the same key and body again get the same status and body,
// byte for byte, marked as a replay, and nothing is created twice.
func checkReplay(ctx context.Context, p *probe, o opening, f *findings) string {
	first, id := o.first, o.id
	again := p.post(ctx, 1, []string{o.key}, p.cfg.Body)
	if again.status != first.status {
		f.add("the replay answered %s, the first %s", describe(again), first.Status)
	}
	if d := sameBytes(first.body, again.body); d != "" {
		f.add("the replay's body %s", d)
	}
	for _, h := range []string{"Content-Type", "Location"} {
		if a, b := first.header.Get(h), again.header.Get(h); a != b {
			f.add("the replay's %s is %q, the first's %q", h, b, a)
		}
	}
	if p.cfg.ReplayedHeader != "" && !p.replayed(again) {
		f.add("the replay is not marked %s: true", p.cfg.ReplayedHeader)
	}
	f.addIf(p.exists(ctx, 1, id))
	return fmt.Sprintf("%s replayed byte for byte (%d bytes), %s once", first.Status, len(first.body), id)
}

// checkMismatch: the same key with another body is refused with the
// dialect's status, and the first result still stands.
func checkMismatch(ctx context.Context, p *probe, o opening, f *findings) string {
	key, first, id := o.key, o.first, o.id
	other := p.post(ctx, 1, []string{key}, p.cfg.Body2)
	if other.status != p.cfg.Mismatch {
		f.add("the key reused with another body answered %s, not %d", describe(other), p.cfg.Mismatch)
	} else if !problemBody(other) {
		f.add("the %d has no problem body", other.status)
	}
	if got := p.id(other); got != "" && other.status == p.cfg.Mismatch {
		f.add("the refusal names a resource, %s", got)
	}
	again := p.post(ctx, 1, []string{key}, p.cfg.Body)
	if again.status != first.status || p.id(again) != id {
		f.add("after the refusal, the first request answered %s naming %q: the first result (%s, %s) no longer stands", describe(again), p.id(again), first.Status, id)
	}
	return fmt.Sprintf("another body refused with %d; the first result (%s) still stands", p.cfg.Mismatch, id)
}

// checkPerCaller: the other caller's request with the same key and body is
// an operation of its own, and the first caller's result still stands.
func checkPerCaller(ctx context.Context, p *probe) verdict {
	key, first, id, stop := p.first(ctx, 1, p.cfg.Body)
	if stop != "" {
		return findings{stop}.verdict("")
	}
	var f findings
	other := p.post(ctx, 2, []string{key}, p.cfg.Body)
	otherID, problem := p.executed(other)
	switch {
	case problem != "":
		f.add("the other caller's request with the same key %s: keys are not scoped per caller", problem)
	case otherID == id:
		f.add("the other caller got the first caller's %s", id)
	default:
		f.addIf(p.exists(ctx, 2, otherID))
	}
	again := p.post(ctx, 1, []string{key}, p.cfg.Body)
	if again.status != first.status || p.id(again) != id {
		f.add("the first caller's retry then answered %s naming %q, not its own %s", describe(again), p.id(again), id)
	}
	return f.verdict(fmt.Sprintf("one key, two callers, two resources (%s, %s)", id, otherID))
}

// checkValidationNotStored: a request refused by validation leaves its key
// free, so the same key then works with a valid body.
func checkValidationNotStored(ctx context.Context, p *probe) verdict {
	before, problem := p.snapshot(ctx)
	if problem != "" {
		return findings{problem}.verdict("")
	}
	key := p.newKey()
	var f findings
	invalid := p.post(ctx, 1, []string{key}, p.cfg.InvalidBody)
	if invalid.status < 400 || invalid.status > 499 || invalid.status == 409 {
		f.add("the invalid body (-invalid-body) answered %s, not a 4xx refusal", describe(invalid))
		return f.verdict("")
	}
	valid := p.post(ctx, 1, []string{key}, p.cfg.Body)
	id, problem := p.executed(valid)
	if problem != "" {
		f.add("the valid body, with the key of the refused request, %s: the refusal was stored", problem)
	} else {
		f.oneCreated(ctx, p, before, id)
	}
	return f.verdict(fmt.Sprintf("refused with %d, then the same key created %s", invalid.status, id))
}
