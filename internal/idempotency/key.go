// Package idempotency makes an operation safe to retry. It parses and
// fingerprints Idempotency-Key requests, reserves a key in one statement,
// holds a lock on it while a request executes or waits, replays the stored
// response, and runs the operation's atomic phases, each of which advances the
// key's recovery point as it commits. It knows nothing of HTTP or of payments:
// the operation supplies its phases and its responses.
package idempotency

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/gowebpki/jcs"
)

// MaxKeyLength is the longest key accepted, in characters.
const MaxKeyLength = 255

// ErrKeyInvalid reports a header value that is not a valid key.
var ErrKeyInvalid = errors.New("invalid idempotency key")

// ParseKey returns the key in an Idempotency-Key header value. It accepts the
// IETF draft's sf-string form ("abc") and Stripe's bare form (abc), which name
// the same key. A key is 1 to 255 visible ASCII characters.
func ParseKey(value string) (string, error) {
	key := value
	if strings.HasPrefix(value, `"`) {
		var err error
		if key, err = parseString(value); err != nil {
			return "", err
		}
	}
	if len(key) == 0 {
		return "", fmt.Errorf("%w: it is empty", ErrKeyInvalid)
	}
	if len(key) > MaxKeyLength {
		return "", fmt.Errorf("%w: it is longer than %d characters", ErrKeyInvalid, MaxKeyLength)
	}
	for i := 0; i < len(key); i++ {
		if c := key[i]; c < 0x21 || c > 0x7e {
			return "", fmt.Errorf("%w: it may hold only visible ASCII characters", ErrKeyInvalid)
		}
	}
	return key, nil
}

// parseString decodes an RFC 8941 sf-string: a quoted string in which only
// \" and \\ are escapes. Parameters after the string are not accepted.
func parseString(value string) (string, error) {
	var b strings.Builder
	for i := 1; i < len(value); i++ {
		switch c := value[i]; {
		case c == '\\':
			i++
			if i == len(value) || (value[i] != '"' && value[i] != '\\') {
				return "", fmt.Errorf("%w: malformed escape in quoted key", ErrKeyInvalid)
			}
			b.WriteByte(value[i])
		case c == '"':
			if i != len(value)-1 {
				return "", fmt.Errorf("%w: unexpected characters after quoted key", ErrKeyInvalid)
			}
			return b.String(), nil
		case c < 0x20 || c > 0x7e:
			return "", fmt.Errorf("%w: it may hold only visible ASCII characters", ErrKeyInvalid)
		default:
			b.WriteByte(c)
		}
	}
	return "", fmt.Errorf("%w: unterminated quoted key", ErrKeyInvalid)
}

// Fingerprint identifies a request: SHA-256 over its method, its path and the
// RFC 8785 canonical form of its JSON body, so that key order and white space
// do not matter while any other difference does. An empty body is allowed.
func Fingerprint(method, path string, body []byte) ([]byte, error) {
	var canonical []byte
	if len(body) > 0 {
		var err error
		if canonical, err = jcs.Transform(body); err != nil {
			return nil, fmt.Errorf("canonicalize body: %w", err)
		}
	}
	return sum(method, path, canonical), nil
}

// Digest identifies a request's bytes: SHA-256 over its method, its path and
// its body exactly as received, laid out as Fingerprint lays them out. It is
// a shortcut, never a second meaning: byte-identical requests have the same
// canonical form, so equal digests imply equal fingerprints, while unequal
// digests say nothing (the body may differ only in key order or white space)
// and the fingerprints decide. It does not parse the body, which may be any
// bytes.
func Digest(method, path string, body []byte) []byte {
	return sum(method, path, body)
}

// sum is SHA-256 over method, path and body. Method and path cannot hold a
// newline, so the fields cannot run together.
func sum(method, path string, body []byte) []byte {
	h := sha256.New()
	io.WriteString(h, method)
	io.WriteString(h, "\n")
	io.WriteString(h, path)
	io.WriteString(h, "\n")
	h.Write(body)
	return h.Sum(make([]byte, 0, sha256.Size))
}
