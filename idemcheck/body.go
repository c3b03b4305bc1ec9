package idemcheck

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math/big"
	"mime"
	"strings"
)

// deriveBody returns body with its first number changed (plus one), for a
// request that differs from it in one value; an error when it holds no
// number, so that the caller gives -body2.
func deriveBody(body string) (string, error) {
	dec := json.NewDecoder(strings.NewReader(body))
	dec.UseNumber()
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return "", errors.New("cannot derive a different body: -body holds no number to change; give -body2")
		}
		if err != nil {
			return "", errors.New("-body is not JSON: " + err.Error())
		}
		n, ok := tok.(json.Number)
		if !ok {
			continue
		}
		end := int(dec.InputOffset())
		start := end - len(n)
		if start < 0 || body[start:end] != string(n) {
			return "", errors.New("cannot derive a different body; give -body2")
		}
		return body[:start] + bump(n) + body[end:], nil
	}
}

// bump returns n plus one, in the form n was written (an integer stays an
// integer of any size).
func bump(n json.Number) string {
	if i, ok := new(big.Int).SetString(string(n), 10); ok {
		return i.Add(i, big.NewInt(1)).String()
	}
	if f, ok := new(big.Float).SetString(string(n)); ok {
		return f.Add(f, big.NewFloat(1)).Text('g', -1)
	}
	return string(n) + "1"
}

// jsonMember returns the string (or number) at path, dot-separated members
// of nested objects ("id", "payment.id"), in a JSON body; "" when absent.
func jsonMember(body []byte, path string) string {
	var v any
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if dec.Decode(&v) != nil {
		return ""
	}
	for _, name := range strings.Split(path, ".") {
		obj, ok := v.(map[string]any)
		if !ok {
			return ""
		}
		v = obj[name]
	}
	switch s := v.(type) {
	case string:
		return s
	case json.Number:
		return s.String()
	}
	return ""
}

// collectIDs adds to ids every value of a member named as the last part of
// path, at any depth of a JSON body: the ids of a list, however it nests them.
func collectIDs(body []byte, path string, ids map[string]bool) {
	name := path[strings.LastIndex(path, ".")+1:]
	var v any
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if dec.Decode(&v) != nil {
		return
	}
	var walk func(any)
	walk = func(v any) {
		switch t := v.(type) {
		case map[string]any:
			for k, e := range t {
				switch id := e.(type) {
				case string:
					if k == name {
						ids[id] = true
					}
				case json.Number:
					if k == name {
						ids[id.String()] = true
					}
				default:
					walk(e)
				}
			}
		case []any:
			for _, e := range t {
				walk(e)
			}
		}
	}
	walk(v)
}

// problemBody reports whether an answer describes its error: an RFC 9457
// problem (application/problem+json), Stripe's {"error": {…}}, or a Link to
// documentation (rel="describedby"), the draft's alternative.
func problemBody(ex *Exchange) bool {
	if strings.Contains(ex.header.Get("Link"), "describedby") {
		return true
	}
	mt, _, _ := mime.ParseMediaType(ex.header.Get("Content-Type"))
	var obj map[string]json.RawMessage
	if json.Unmarshal(ex.body, &obj) != nil {
		return false
	}
	switch mt {
	case "application/problem+json":
		return true
	case "application/json":
		return len(obj["error"]) > 0 && obj["error"][0] == '{'
	}
	return false
}
