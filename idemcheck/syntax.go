package idemcheck

import (
	"context"
	"fmt"
	"net/http"
	"strings"
)

// badKey returns the Idempotency-Key fields of a malformed key, or why this
// server's dialect has no such rule.
type badKey func(p *probe) (keys []string, skipped string)

// keyEmpty is one empty field.
func keyEmpty(*probe) ([]string, string) { return []string{""}, "" }

// keyTooLong is one character longer than the longest key accepted.
func keyTooLong(p *probe) ([]string, string) {
	if p.cfg.MaxKeyLength <= 0 {
		return nil, "no -max-key-length: the server sets no limit"
	}
	k := strings.Repeat("k", p.cfg.MaxKeyLength+1)
	if p.cfg.Dialect == IETF {
		k = `"` + k + `"`
	}
	return []string{k}, ""
}

// keyNotAString is a quoted string left open: neither an sf-string nor,
// with its quote, a key a careful server takes.
func keyNotAString(p *probe) ([]string, string) {
	if p.cfg.Dialect != IETF {
		return nil, "the stripe dialect's keys are any string, not sf-strings"
	}
	return []string{`"` + strings.Trim(p.newKey(), `"`)}, ""
}

// keyTwice is two fields, each a valid key.
func keyTwice(p *probe) ([]string, string) { return []string{p.newKey(), p.newKey()}, "" }

// keyOddCharacters is a key with bytes outside ASCII (UTF-8 "é").
func keyOddCharacters(p *probe) ([]string, string) {
	k := strings.Replace(p.newKey(), "idemcheck", "idemch\u00e9ck", 1)
	return []string{k}, ""
}

// checkMissing: without a key, a server that requires one refuses.
func checkMissing(ctx context.Context, p *probe) verdict {
	if p.cfg.KeyOptional {
		return skip("-key-required=false: the server takes requests without a key")
	}
	return refusedKey(ctx, p, nil)
}

// syntaxCheck is a check that a malformed key is refused: a 4xx with a
// problem body, and nothing created.
func syntaxCheck(bad badKey) func(context.Context, *probe) verdict {
	return func(ctx context.Context, p *probe) verdict {
		keys, skipped := bad(p)
		if skipped != "" {
			return skip("%s", skipped)
		}
		return refusedKey(ctx, p, keys)
	}
}

// refusedKey sends the body with the key fields keys and requires a refusal
// of the key: a 4xx that is not about something else (credentials, route,
// a key in use, a rate), with a problem body, creating nothing.
func refusedKey(ctx context.Context, p *probe, keys []string) verdict {
	before, problem := p.snapshot(ctx)
	if problem != "" {
		return findings{problem}.verdict("")
	}
	ex := p.post(ctx, 1, keys, p.cfg.Body)
	var f findings
	switch ex.status {
	case http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound, http.StatusMethodNotAllowed, http.StatusConflict, http.StatusTooManyRequests:
		f.add("answered %s: a refusal, but not of the key (check -url and -auth)", describe(ex))
	default:
		if ex.status < 400 || ex.status > 499 {
			f.add("answered %s, not a 4xx", describe(ex))
		} else if !problemBody(ex) {
			f.add("the %d has no problem body (application/problem+json, a JSON \"error\" object, or a Link rel=describedby)", ex.status)
		}
	}
	if loc := ex.header.Get("Location"); loc != "" {
		f.add("the answer has a Location, %s", loc)
	}
	if ex.status >= 200 && ex.status <= 299 {
		if id := p.id(ex); id != "" {
			f.add("it created %s", id)
		}
	}
	created, problem := p.createdSince(ctx, before)
	f.addIf(problem)
	if len(created) > 0 {
		f.add("the list (-list) shows %s created", strings.Join(created, ", "))
	}
	seen := "by its answer"
	if before != nil {
		seen = "the list unchanged"
	}
	return f.verdict(fmt.Sprintf("refused with %d, nothing created (%s)", ex.status, seen))
}
