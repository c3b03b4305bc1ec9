package demoreceiver_test

import (
	"strings"
	"testing"

	"github.com/example/payments/internal/signing"
	"github.com/example/payments/tools/demoreceiver"
)

// The service's own tests (e2e, internal/http) verify with the sender's
// secrets: they must stay a Verifier.
var _ demoreceiver.Verifier = signing.Secrets{}

// TestParseSecrets: secrets are read as the sender gives them, one or
// several; anything else is refused, with an error that shows no secret.
func TestParseSecrets(t *testing.T) {
	t.Parallel()
	one, two := signing.NewSecret(), signing.NewSecret()
	for _, c := range []struct {
		in   string
		want string
	}{
		{"", "(0 secrets)"},
		{one, "(1 secrets)"},
		{one + "," + two, "(2 secrets)"},
		{" " + one + ", " + two + " ", "(2 secrets)"},
	} {
		s, err := demoreceiver.ParseSecrets(c.in)
		if err != nil || s.String() != c.want {
			t.Errorf("ParseSecrets(%q) = %v, %v; want %s", c.in, s, err, c.want)
		}
	}
	for _, bad := range []string{
		strings.TrimPrefix(one, "whsec_"),     // no prefix
		"whsec_",                              // no key
		"whsec_c2hvcnQ=",                      // a key too short
		"whsec_" + strings.Repeat("QUFB", 22), // 66 bytes, too long
		"whsec_not base64!",                   // not base64
		one + ",whsec_",                       // the second one bad
	} {
		_, err := demoreceiver.ParseSecrets(bad)
		if err == nil {
			t.Errorf("ParseSecrets(%q) accepted it", bad)
			continue
		}
		if key := strings.TrimPrefix(bad, "whsec_"); len(key) > 4 && strings.Contains(err.Error(), key) {
			t.Errorf("ParseSecrets(%q): the error shows the secret: %v", bad, err)
		}
	}
}
