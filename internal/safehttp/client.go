package safehttp

import (
	"net"
	"net/http"
	"net/netip"
	"syscall"
	"time"
)

// Client returns an *http.Client for sending to tenants' URLs with the
// given total timeout. Its dialer checks, with Allowed, the address it is
// about to connect to, after DNS, so that a host that resolved to a public
// address at registration cannot be rebound to an inside one; a refusal
// wraps ErrForbiddenURL. It never uses a proxy (the check would then judge
// the proxy, not the destination) and never follows a redirect (the target
// of a redirect was never checked, and a webhook has no reason to move):
// a 3xx is returned as the response.
//
// It keeps up to perHost connections to one host open between requests: as
// many as may be in flight to it, or each request past that many dials anew.
// Each call makes a new connection pool: build one Client and share it.
func (p Policy) Client(timeout time.Duration, perHost int) *http.Client {
	dialer := &net.Dialer{
		Timeout:   timeout,
		KeepAlive: 30 * time.Second,
		Control:   p.control,
	}
	transport := &http.Transport{
		Proxy:                  nil,
		DialContext:            dialer.DialContext,
		ForceAttemptHTTP2:      true,
		MaxIdleConns:           max(100, perHost),
		MaxIdleConnsPerHost:    perHost,
		IdleConnTimeout:        90 * time.Second,
		TLSHandshakeTimeout:    10 * time.Second,
		ResponseHeaderTimeout:  timeout,
		ExpectContinueTimeout:  time.Second,
		MaxResponseHeaderBytes: 64 << 10,
	}
	return &http.Client{
		Transport: transport,
		Timeout:   timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
}

// control runs after DNS and before each connect: address is the IP and
// port the socket is about to connect to, so this is the one check DNS
// rebinding cannot get round. An address it cannot read is refused.
func (p Policy) control(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return refuse("the destination address cannot be checked")
	}
	if !p.Allowed(ap.Addr()) {
		return refuse("the destination is a non-public address (%s)", classify(ap.Addr()))
	}
	return nil
}
