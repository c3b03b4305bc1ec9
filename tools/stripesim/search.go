package stripesim

import (
	"encoding/base64"
	"errors"
	"strconv"
	"strings"
)

// searchPrefix starts a next_page token.
const searchPrefix = "page_"

// searchResultJSON is a search's page on the wire.
type searchResultJSON struct {
	Object   string               `json:"object"`
	Data     []*paymentIntentJSON `json:"data"`
	HasMore  bool                 `json:"has_more"`
	NextPage *string              `json:"next_page"`
	URL      string               `json:"url"`
}

// searchPaymentIntents is GET /v1/payment_intents/search: the
// PaymentIntents the query matches that the index holds (those created
// their search lag ago or more), newest first, paged by next_page.
func (s *Server) searchPaymentIntents(c *call) (any, *apiError) {
	if s.opts.SearchUnavailable {
		return nil, badRequest("", "feature_not_available",
			"Search feature unavailable for merchant: search is not available to accounts in this country.")
	}
	f := c.params("query", "limit", "page", "expand[]")
	query := f.required("query")
	limit := f.limit()
	token := f.str("page")
	if f.err != nil {
		return nil, f.err
	}
	clauses, err := parseQuery(query)
	if err != nil {
		return nil, badRequest("query", "", "Invalid query: "+err.Error()+". The simulator takes "+
			"metadata['key']:'value' clauses joined by AND.")
	}
	start := len(s.paymentIntents) - 1
	if token != "" {
		pos, ok := decodePage(token, len(s.paymentIntents))
		if !ok {
			return nil, badRequest("page", "", "Invalid page: "+token)
		}
		start = pos - 1
	}
	out := searchResultJSON{Object: "search_result", Data: []*paymentIntentJSON{}, URL: "/v1/payment_intents/search"}
	last := -1
	for i := start; i >= 0; i-- {
		p := s.paymentIntents[i]
		if c.now.Before(p.searchable) || !matches(p.Metadata, clauses) {
			continue
		}
		if len(out.Data) == limit {
			out.HasMore = true
			next := encodePage(last)
			out.NextPage = &next
			break
		}
		out.Data = append(out.Data, p.wire())
		last = i
	}
	return out, nil
}

// encodePage is the next_page token of a search continuing after position
// pos.
func encodePage(pos int) string {
	return searchPrefix + base64.RawURLEncoding.EncodeToString([]byte(strconv.Itoa(pos)))
}

// decodePage is the position a next_page token continues after, if it is
// one of n PaymentIntents.
func decodePage(token string, n int) (int, bool) {
	rest, ok := strings.CutPrefix(token, searchPrefix)
	if !ok {
		return 0, false
	}
	b, err := base64.RawURLEncoding.DecodeString(rest)
	if err != nil {
		return 0, false
	}
	pos, err := strconv.Atoi(string(b))
	return pos, err == nil && pos >= 0 && pos < n
}

// clause is one term of a query: metadata['key']:'value', met by an exact
// value.
type clause struct{ key, value string }

// matches reports whether metadata meets every clause.
func matches(metadata map[string]string, clauses []clause) bool {
	for _, c := range clauses {
		if v, ok := metadata[c.key]; !ok || v != c.value {
			return false
		}
	}
	return true
}

// parseQuery reads a query of Stripe's search language as far as the
// simulator takes it: metadata clauses joined by AND.
func parseQuery(q string) ([]clause, error) {
	var out []clause
	rest := strings.TrimSpace(q)
	for {
		c, tail, err := parseClause(rest)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
		tail = strings.TrimSpace(tail)
		if tail == "" {
			return out, nil
		}
		word, after, _ := strings.Cut(tail, " ")
		if !strings.EqualFold(word, "AND") {
			return nil, errors.New("expected AND after a clause, found " + strconv.Quote(word))
		}
		rest = strings.TrimSpace(after)
	}
}

// parseClause reads metadata['key']:'value' at the start of s.
func parseClause(s string) (clause, string, error) {
	rest, ok := strings.CutPrefix(s, "metadata[")
	if !ok {
		return clause{}, "", errors.New("expected metadata[ at " + strconv.Quote(s))
	}
	key, rest, err := quoted(rest)
	if err != nil {
		return clause{}, "", err
	}
	if rest, ok = strings.CutPrefix(rest, "]:"); !ok {
		return clause{}, "", errors.New("expected ]: after the metadata key")
	}
	value, rest, err := quoted(rest)
	if err != nil {
		return clause{}, "", err
	}
	return clause{key, value}, rest, nil
}

// quoted reads the string quoted at the start of s, in single or double
// quotes, with \ escaping the next character, and returns it and what
// follows it.
func quoted(s string) (string, string, error) {
	if s == "" || (s[0] != '\'' && s[0] != '"') {
		return "", "", errors.New("expected a quoted string at " + strconv.Quote(s))
	}
	quote := s[0]
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		switch ch := s[i]; {
		case ch == '\\' && i+1 < len(s):
			i++
			b.WriteByte(s[i])
		case ch == quote:
			return b.String(), s[i+1:], nil
		default:
			b.WriteByte(ch)
		}
	}
	return "", "", errors.New("unterminated string")
}
