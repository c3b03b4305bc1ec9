package idempotency

import (
	"encoding/json"
	"fmt"
)

// A stored response's headers are a jsonb object of strings. Every replay
// decodes them, and encoding/json takes, on the two headers a response
// stores, as long as the rest of the replay's own work together;
// decodeHeaders reads them directly when their names and values are plain
// printable ASCII, as every header render.Stored makes is, and leaves
// anything else (an escape, a byte outside it) to encoding/json: the same
// map either way, as FuzzDecodeHeaders checks.

// encodeHeaders is a response's headers as stored.
func encodeHeaders(header map[string]string) ([]byte, error) {
	b, err := json.Marshal(header)
	if err != nil {
		return nil, fmt.Errorf("encode headers: %w", err)
	}
	return b, nil
}

// decodeHeaders decodes stored headers, a JSON object of strings.
func decodeHeaders(b []byte) (map[string]string, error) {
	if header, ok := plainHeaders(b); ok {
		return header, nil
	}
	var header map[string]string
	if err := json.Unmarshal(b, &header); err != nil {
		return nil, fmt.Errorf("decode stored headers: %w", err)
	}
	return header, nil
}

// plainHeaders decodes b, a JSON object of strings, when every one of its
// strings is plain: printable ASCII but the quote and the backslash, which
// a JSON string holds as they are. It reports false for anything else.
func plainHeaders(b []byte) (map[string]string, bool) {
	i := skipSpace(b, 0)
	if i == len(b) || b[i] != '{' {
		return nil, false
	}
	header := make(map[string]string, 2)
	if i = skipSpace(b, i+1); i < len(b) && b[i] == '}' {
		return header, skipSpace(b, i+1) == len(b)
	}
	for {
		name, j, ok := plainString(b, i)
		if !ok {
			return nil, false
		}
		if j = skipSpace(b, j); j == len(b) || b[j] != ':' {
			return nil, false
		}
		value, k, ok := plainString(b, skipSpace(b, j+1))
		if !ok {
			return nil, false
		}
		header[name] = value
		switch k = skipSpace(b, k); {
		case k < len(b) && b[k] == ',':
			i = skipSpace(b, k+1)
		case k < len(b) && b[k] == '}':
			return header, skipSpace(b, k+1) == len(b)
		default:
			return nil, false
		}
	}
}

// plainString reads the plain JSON string at b[i:], returning it and the
// index after its closing quote.
func plainString(b []byte, i int) (string, int, bool) {
	if i == len(b) || b[i] != '"' {
		return "", 0, false
	}
	for j := i + 1; j < len(b); j++ {
		switch c := b[j]; {
		case c == '"':
			return string(b[i+1 : j]), j + 1, true
		case c < 0x20 || c > 0x7e || c == '\\':
			return "", 0, false
		}
	}
	return "", 0, false
}

// skipSpace is the index of the first byte at or after i that is not JSON
// whitespace.
func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}
