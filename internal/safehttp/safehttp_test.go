package safehttp_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/example/payments/internal/safehttp"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// fakeResolver maps hosts to addresses; a host it does not know does not
// exist, as a DNS server that names itself says.
type fakeResolver map[string][]string

func (r fakeResolver) LookupNetIP(ctx context.Context, _, host string) ([]netip.Addr, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	list, ok := r[host]
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: host, Server: "10.0.0.53:53", IsNotFound: true}
	}
	addrs := make([]netip.Addr, len(list))
	for i, s := range list {
		addrs[i] = netip.MustParseAddr(s)
	}
	return addrs, nil
}

// resolver is what the tests' DNS says.
var resolver = fakeResolver{
	"hooks.example.com": {"93.184.216.34"},
	"dual.example.com":  {"93.184.216.34", "2606:2800:220:1:248:1893:25c8:1946"},
	"localhost":         {"127.0.0.1", "::1"},
	"internal.example":  {"10.1.2.3"},
	"mixed.example.com": {"93.184.216.34", "10.1.2.3"},
	"mapped.example":    {"::ffff:169.254.169.254"},
	"empty.example":     {},
	"rebind.example":    {"93.184.216.34"},
}

func TestCheckURLRefuses(t *testing.T) {
	t.Parallel()
	policy := safehttp.Policy{Resolver: resolver}

	tests := []struct {
		name string
		raw  string
		want string // in the message
	}{
		{"MetadataHTTP", "http://169.254.169.254/latest/meta-data", `scheme "http"`},
		{"Metadata", "https://169.254.169.254/", "(link-local)"},
		{"LoopbackHTTP", "http://127.0.0.1/", `scheme "http"`},
		{"Loopback", "https://127.0.0.1/", "(loopback)"},
		{"Private", "https://10.0.0.1/", "(private)"},
		{"LoopbackV6", "https://[::1]/", "(loopback)"},
		{"LinkLocalV6", "https://[fe80::1]/", "(link-local)"},
		{"LinkLocalV6Zone", "https://[fe80::1%25eth0]/", "(link-local)"},
		{"MappedLoopback", "https://[::ffff:127.0.0.1]/", "(loopback)"},
		{"Unspecified", "https://0.0.0.0/", "(unspecified)"},
		// A name that resolves inside is refused as one that does not
		// resolve (TestCheckURLUnresolved).
		{"Localhost", "https://localhost/", `host "localhost" does not resolve to public addresses only`},
		{"ResolvesPrivate", "https://internal.example/hook", unresolved},
		{"ResolvesMixed", "https://mixed.example.com/hook", unresolved},
		{"ResolvesMapped", "https://mapped.example/", unresolved},
		{"ResolvesNothing", "https://empty.example/", unresolved},
		{"FTP", "ftp://example.com/", `scheme "ftp"`},
		{"File", "file:///etc/passwd", `scheme "file"`},
		{"Gopher", "gopher://hooks.example.com:70/_GET", `scheme "gopher"`},
		{"JavaScript", "javascript:alert(1)", `scheme "javascript"`},
		{"UserInfo", "https://user:pass@hooks.example.com/", "user name or password"},
		{"UserOnly", "https://user@hooks.example.com/", "user name or password"},
		{"Relative", "/hooks/payments", "absolute"},
		{"SchemeRelative", "//hooks.example.com/", "absolute"},
		{"Empty", "", "empty"},
		{"TooLong", "https://hooks.example.com/" + strings.Repeat("a", safehttp.MaxURLLength), "longer than 2048"},
		// Short enough in its own bytes, too long once percent-encoded, as
		// it is stored and sent.
		{"TooLongEncoded", "https://hooks.example.com/" + strings.Repeat("é", 998), "longer than 2048"},
		{"PlainHTTP", "http://example.com/", `scheme "http" is not allowed; use https`},
		{"NoHost", "https:///path", "no host"},
		{"Opaque", "https:hooks.example.com", "no host"},
		{"PortZero", "https://hooks.example.com:0/", "port 0"},
		{"PortTooBig", "https://hooks.example.com:65536/", "port 65536"},
		{"PortEmpty", "https://hooks.example.com:/", "port is empty"},
		{"Unparsable", "https://hooks.example.com/%zz", "cannot be parsed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := policy.CheckURL(context.Background(), tt.raw)
			if !errors.Is(err, safehttp.ErrForbiddenURL) {
				t.Fatalf("CheckURL(%.60q) = %q, %v; want ErrForbiddenURL", tt.raw, got, err)
			}
			if got != "" || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("CheckURL(%.60q) = %q, %q; want a message with %q", tt.raw, got, err, tt.want)
			}
			// A refusal names the class of address, never the address
			// a name resolved to.
			if strings.Contains(err.Error(), "10.1.2.3") {
				t.Errorf("message leaks a resolved address: %q", err)
			}
		})
	}
}

func TestCheckURLAccepts(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		policy safehttp.Policy
		raw    string
		want   string
	}{
		{"Public", safehttp.Policy{Resolver: resolver}, "https://hooks.example.com/path?x=1", "https://hooks.example.com/path?x=1"},
		{"BothFamilies", safehttp.Policy{Resolver: resolver}, "https://dual.example.com/", "https://dual.example.com/"},
		{"Port", safehttp.Policy{Resolver: resolver}, "https://hooks.example.com:8443/", "https://hooks.example.com:8443/"},
		{"MaxPort", safehttp.Policy{Resolver: resolver}, "https://hooks.example.com:65535/", "https://hooks.example.com:65535/"},
		{"Normalised", safehttp.Policy{Resolver: resolver}, "HTTPS://Hooks.Example.COM/Path?x=1#frag", "https://hooks.example.com/Path?x=1"},
		// A literal IP is checked as is; the resolver knows no such host.
		{"PublicIP", safehttp.Policy{Resolver: resolver}, "https://93.184.216.34/hook", "https://93.184.216.34/hook"},
		{"PublicIPv6", safehttp.Policy{Resolver: resolver}, "https://[2606:4700:4700::1111]/", "https://[2606:4700:4700::1111]/"},
		{"LongestAllowed", safehttp.Policy{Resolver: resolver}, longURL(safehttp.MaxURLLength), longURL(safehttp.MaxURLLength)},
		{"PrivateLoopbackHTTP", safehttp.Policy{AllowPrivate: true}, "http://127.0.0.1:9999/hook", "http://127.0.0.1:9999/hook"},
		{"PrivateNetwork", safehttp.Policy{AllowPrivate: true}, "https://10.0.0.1/", "https://10.0.0.1/"},
		{"PrivateUnresolved", safehttp.Policy{AllowPrivate: true, Resolver: resolver}, "http://receiver:8080/hook", "http://receiver:8080/hook"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := tt.policy.CheckURL(context.Background(), tt.raw)
			if err != nil || got != tt.want {
				t.Errorf("CheckURL(%.60q) = %.60q, %v; want %.60q", tt.raw, got, err, tt.want)
			}
		})
	}
}

// longURL returns an https URL to a public host, n bytes long.
func longURL(n int) string {
	const base = "https://hooks.example.com/"
	return base + strings.Repeat("a", n-len(base))
}

func TestCheckURLPolicyStillChecksShape(t *testing.T) {
	t.Parallel()
	// AllowPrivate lifts the address rules, not the rest.
	policy := safehttp.Policy{AllowPrivate: true}
	for _, raw := range []string{"ftp://127.0.0.1/", "https://user:pass@127.0.0.1/", "/relative", "", "http://127.0.0.1:99999/"} {
		if _, err := policy.CheckURL(context.Background(), raw); !errors.Is(err, safehttp.ErrForbiddenURL) {
			t.Errorf("CheckURL(%q) = %v; want ErrForbiddenURL", raw, err)
		}
	}
}

// unresolved is what the refusal of a host name that does not resolve to
// public addresses only says, whatever it resolved to.
const unresolved = "does not resolve to public addresses only"

func TestCheckURLUnresolved(t *testing.T) {
	t.Parallel()
	policy := safehttp.Policy{Resolver: resolver}
	_, err := policy.CheckURL(context.Background(), "https://nosuch.example.com/hook")
	if !errors.Is(err, safehttp.ErrForbiddenURL) {
		t.Fatalf("err = %v; want ErrForbiddenURL", err)
	}
	if want := `URL not allowed: host "nosuch.example.com" ` + unresolved; err.Error() != want {
		t.Errorf("message %q; want %q", err, want)
	}
	// The resolver's error names our DNS server: kept for logs, never in the
	// message a tenant reads.
	if strings.Contains(err.Error(), "10.0.0.53") {
		t.Errorf("message leaks the DNS server: %q", err)
	}
	var dnsErr *net.DNSError
	if !errors.As(err, &dnsErr) || !dnsErr.IsNotFound {
		t.Errorf("cause = %v; want the *net.DNSError", dnsErr)
	}
}

// TestCheckURLSameRefusal: a host name that does not resolve, and the same
// name resolving to nothing, to an inside address of any class or to a
// public and an inside one, are refused in the very same words, so that a
// tenant registering URLs cannot tell which names our DNS knows.
func TestCheckURLSameRefusal(t *testing.T) {
	t.Parallel()
	const raw = "https://probe.example/hook"
	var want string
	for _, tt := range []struct {
		name  string
		addrs []string // nil: the name does not exist
	}{
		{"NoSuchHost", nil},
		{"NoAddresses", []string{}},
		{"Loopback", []string{"127.0.0.1"}},
		{"Private", []string{"10.1.2.3"}},
		{"PrivateV6", []string{"fd00::1"}},
		{"Metadata", []string{"169.254.169.254"}},
		{"Mixed", []string{"93.184.216.34", "192.168.1.1"}},
	} {
		dns := fakeResolver{}
		if tt.addrs != nil {
			dns["probe.example"] = tt.addrs
		}
		_, err := safehttp.Policy{Resolver: dns}.CheckURL(context.Background(), raw)
		if !errors.Is(err, safehttp.ErrForbiddenURL) {
			t.Fatalf("%s: err = %v; want ErrForbiddenURL", tt.name, err)
		}
		if want == "" {
			want = err.Error()
		}
		if err.Error() != want {
			t.Errorf("%s: refused %q; want the same words as a name that does not resolve, %q", tt.name, err, want)
		}
	}
	if want != `URL not allowed: host "probe.example" `+unresolved {
		t.Errorf("refusal %q", want)
	}
}

func TestCheckURLCancelled(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	// Our own deadline is not the tenant's fault: not a refusal.
	_, err := safehttp.Policy{Resolver: resolver}.CheckURL(ctx, "https://hooks.example.com/")
	if !errors.Is(err, context.Canceled) || errors.Is(err, safehttp.ErrForbiddenURL) {
		t.Errorf("err = %v; want context.Canceled and no refusal", err)
	}
}

func TestAllowed(t *testing.T) {
	t.Parallel()
	refused := []string{
		// IPv4
		"0.0.0.0", "0.1.2.3", "0.255.255.255", // unspecified, "this network"
		"10.0.0.0", "10.1.2.3", "10.255.255.255", // private
		"100.64.0.0", "100.100.100.200", "100.127.255.255", // carrier-grade NAT
		"127.0.0.1", "127.0.0.0", "127.255.255.255", // loopback
		"169.254.169.254", "169.254.0.0", "169.254.255.255", // link-local, metadata
		"172.16.0.0", "172.20.1.1", "172.31.255.255", // private
		"192.0.0.0", "192.0.0.170", "192.0.0.255", // IETF protocol assignments
		"192.0.2.0", "192.0.2.255", "198.51.100.7", "203.0.113.255", // documentation
		"192.168.0.0", "192.168.1.1", "192.168.255.255", // private
		"198.18.0.0", "198.19.255.255", // benchmarking
		"224.0.0.1", "239.255.255.250", // multicast
		"240.0.0.0", "250.1.2.3", "255.255.255.254", // reserved
		"255.255.255.255", // broadcast
		// IPv6
		"::", "::1",
		"fc00::1", "fd12:3456:789a::1", "fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", // unique local
		"fe80::1", "fe80::1%eth0", "febf:ffff::1", // link-local, with a zone too
		"ff02::1", "ff0e::1", // multicast
		"2001:db8::1", "2001:db8:ffff:ffff:ffff:ffff:ffff:ffff", "3fff::1", // documentation
		"2001::1", "2001:2::1", "2001:1ff:ffff::1", // Teredo, benchmarking, IETF
		"::ffff:127.0.0.1", "::ffff:10.0.0.1", "::ffff:169.254.169.254", "::ffff:0.0.0.0", // IPv4-mapped
		"64:ff9b::7f00:1", "64:ff9b::a9fe:a9fe", "64:ff9b::a00:1", // NAT64 of inside IPv4
		"2002:7f00:1::1", "2002:a9fe:a9fe::", "2002:c0a8:101::1", // 6to4 of inside IPv4
		"::7f00:1", "::a00:1", // IPv4-compatible, deprecated
		"64:ff9b:1::1",                 // local-use NAT64
		"100::1",                       // discard-only
		"fec0::1",                      // site-local, deprecated
		"1fff:ffff:ffff::1", "4000::1", // outside global unicast
	}
	allowed := []string{
		// IPv4, including both sides of every edge
		"1.1.1.1", "8.8.8.8", "93.184.216.34", "1.0.0.0",
		"9.255.255.255", "11.0.0.0",
		"100.63.255.255", "100.128.0.0",
		"126.255.255.255", "128.0.0.0",
		"169.253.255.255", "169.255.0.0",
		"172.15.255.255", "172.32.0.0",
		"191.255.255.255", "192.0.1.0", "192.0.3.0",
		"192.167.255.255", "192.169.0.0",
		"198.17.255.255", "198.20.0.0",
		"198.51.99.255", "198.51.101.0",
		"203.0.112.255", "203.0.114.0",
		"223.255.255.255",
		// IPv6
		"2606:4700:4700::1111", "2001:4860:4860::8888", "2a00:1450:4001::1",
		"2000::1", "3ffe:ffff::1", "3fff:1000::1",
		"2001:200::1", "2001:db7:ffff::1", "2001:db9::1",
		"::ffff:93.184.216.34", "64:ff9b::5db8:d822", "2002:5db8:d822::1",
	}
	private := safehttp.Policy{AllowPrivate: true}
	for _, s := range refused {
		addr := netip.MustParseAddr(s)
		if (safehttp.Policy{}).Allowed(addr) {
			t.Errorf("Allowed(%s) = true; want false", s)
		}
		if !private.Allowed(addr) {
			t.Errorf("with AllowPrivate, Allowed(%s) = false; want true", s)
		}
	}
	for _, s := range allowed {
		if !(safehttp.Policy{}).Allowed(netip.MustParseAddr(s)) {
			t.Errorf("Allowed(%s) = false; want true", s)
		}
	}
	if (safehttp.Policy{}).Allowed(netip.Addr{}) {
		t.Error("Allowed(invalid address) = true; want false")
	}
}

// countingServer starts a server that answers 204 and counts the requests
// it receives.
func countingServer(t *testing.T) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		n.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

// client returns the policy's client, its idle connections closed at the
// end of the test.
func client(t *testing.T, p safehttp.Policy) *http.Client {
	t.Helper()
	c := p.Client(5*time.Second, 8)
	t.Cleanup(c.CloseIdleConnections)
	return c
}

func TestClientRefusesAtConnect(t *testing.T) {
	t.Parallel()
	srv, requests := countingServer(t)

	// No CheckURL anywhere: the client refuses on its own.
	resp, err := client(t, safehttp.Policy{}).Get(srv.URL)
	if err == nil {
		resp.Body.Close()
	}
	if !errors.Is(err, safehttp.ErrForbiddenURL) {
		t.Fatalf("Get(%s) = %v; want ErrForbiddenURL", srv.URL, err)
	}
	if !strings.Contains(err.Error(), "(loopback)") {
		t.Errorf("message %q; want the class of address", err)
	}
	if n := requests.Load(); n != 0 {
		t.Fatalf("server received %d requests; want none", n)
	}

	// The same server is reachable when private networks are allowed, so
	// the refusal above was the policy's.
	resp, err = client(t, safehttp.Policy{AllowPrivate: true}).Get(srv.URL)
	if err != nil {
		t.Fatalf("with AllowPrivate: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent || requests.Load() != 1 {
		t.Errorf("with AllowPrivate: status %d, %d requests; want 204 and 1", resp.StatusCode, requests.Load())
	}
}

func TestClientRefusesRebinding(t *testing.T) {
	t.Parallel()
	srv, requests := countingServer(t)
	policy := safehttp.Policy{Resolver: resolver}

	// At registration the host was public...
	if _, err := policy.CheckURL(context.Background(), "https://rebind.example/hook"); err != nil {
		t.Fatalf("CheckURL: %v", err)
	}
	// ...and at delivery its DNS answers 127.0.0.1: the request names the
	// host, the dialer is handed the loopback address.
	req, err := http.NewRequest(http.MethodPost, srv.URL+"/hook", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Host = "rebind.example"
	resp, err := client(t, policy).Do(req)
	if err == nil {
		resp.Body.Close()
	}
	if !errors.Is(err, safehttp.ErrForbiddenURL) {
		t.Fatalf("Do = %v; want ErrForbiddenURL", err)
	}
	if n := requests.Load(); n != 0 {
		t.Errorf("server received %d requests; want none", n)
	}
}

func TestClientRefusesBeforeConnecting(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()

	// The transport's own dialer refuses: not a check on the request's URL,
	// nor one made after the connection is up.
	transport := client(t, safehttp.Policy{}).Transport.(*http.Transport)
	conn, err := transport.DialContext(context.Background(), "tcp", ln.Addr().String())
	if err == nil {
		conn.Close()
	}
	if !errors.Is(err, safehttp.ErrForbiddenURL) {
		t.Fatalf("dial = %v; want ErrForbiddenURL", err)
	}

	// Had the refused dial connected, its connection would be first in the
	// listener's queue; the first one must be this later one.
	later, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer later.Close()
	first, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	if first.RemoteAddr().String() != later.LocalAddr().String() {
		t.Errorf("first connection from %s, not the later dial from %s: the refused dial connected",
			first.RemoteAddr(), later.LocalAddr())
	}
}

func TestClientDoesNotFollowRedirects(t *testing.T) {
	t.Parallel()
	target, requests := countingServer(t)
	redirector := httptest.NewServer(http.RedirectHandler(target.URL+"/moved", http.StatusFound))
	t.Cleanup(redirector.Close)

	resp, err := client(t, safehttp.Policy{AllowPrivate: true}).Get(redirector.URL)
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != target.URL+"/moved" {
		t.Errorf("status %d, Location %q; want the 302 itself", resp.StatusCode, resp.Header.Get("Location"))
	}
	if n := requests.Load(); n != 0 {
		t.Errorf("redirect target received %d requests; want none", n)
	}
}

func TestClientSettings(t *testing.T) {
	t.Parallel()
	c := safehttp.Policy{}.Client(7*time.Second, 24)
	transport, ok := c.Transport.(*http.Transport)
	if !ok {
		t.Fatalf("transport is %T; want *http.Transport", c.Transport)
	}
	// A proxy from the environment would be what the dialer checks.
	if transport.Proxy != nil {
		t.Error("Proxy is set; want nil, never a proxy from the environment")
	}
	if c.Timeout != 7*time.Second || transport.ResponseHeaderTimeout != 7*time.Second {
		t.Errorf("timeouts %v, %v; want 7s", c.Timeout, transport.ResponseHeaderTimeout)
	}
	// As many kept open to a host as may be in flight to it.
	if transport.MaxIdleConnsPerHost != 24 {
		t.Errorf("MaxIdleConnsPerHost = %d; want 24", transport.MaxIdleConnsPerHost)
	}
	if transport.MaxResponseHeaderBytes != 64<<10 {
		t.Errorf("MaxResponseHeaderBytes = %d; want 64 KiB", transport.MaxResponseHeaderBytes)
	}
}
