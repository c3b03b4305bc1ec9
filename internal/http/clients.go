package http

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/example/payments/internal/render"
)

// Proxies are the proxies whose forwarding headers are believed, read from
// the environment as comma-separated addresses or CIDR prefixes.
type Proxies []netip.Prefix

// Decode lets envconfig read Proxies.
func (p *Proxies) Decode(value string) error {
	var out Proxies
	for _, part := range strings.Split(value, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		prefix, err := netip.ParsePrefix(part)
		if err != nil {
			a, aerr := netip.ParseAddr(part)
			if aerr != nil {
				return fmt.Errorf("%q is not an address or a CIDR prefix", part)
			}
			prefix = netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen())
		}
		out = append(out, prefix.Masked())
	}
	*p = out
	return nil
}

// clientAddress sets r.RemoteAddr to the address of the client. Forwarding
// headers are believed only from the proxies in trusted: anyone else could
// write any address in them, and pass for anyone (or for no one, to escape
// the throttle of failed authentications). Behind trusted proxies, the
// client is the right-most address of X-Forwarded-For that is not one of
// them.
func clientAddress(trusted Proxies) func(http.Handler) http.Handler {
	isTrusted := func(a netip.Addr) bool {
		for _, p := range trusted {
			if p.Contains(a.Unmap()) {
				return true
			}
		}
		return false
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			peer, ok := addrOf(r.RemoteAddr)
			if ok && isTrusted(peer) {
				hops := strings.Split(strings.Join(r.Header.Values("X-Forwarded-For"), ","), ",")
				for i := len(hops) - 1; i >= 0; i-- {
					hop, err := netip.ParseAddr(strings.TrimSpace(hops[i]))
					if err != nil {
						break // a garbled hop: stop at the last one we can vouch for
					}
					peer = hop
					if !isTrusted(hop) {
						break
					}
				}
				r.RemoteAddr = net.JoinHostPort(peer.String(), "0")
			}
			next.ServeHTTP(w, r)
		})
	}
}

// addrOf is the address of a "host:port" remote address.
func addrOf(remote string) (netip.Addr, bool) {
	ap, err := netip.ParseAddrPort(remote)
	if err != nil {
		a, err := netip.ParseAddr(remote)
		return a, err == nil
	}
	return ap.Addr().Unmap(), true
}

// AuthThrottle limits failed authentications per client address: past
// Failures within Window, the address is refused 429 before its key is
// even looked at, until the window ends. The zero value is off.
type AuthThrottle struct {
	Failures int
	Window   time.Duration
}

// clientKey is what failures are counted by: the address, or its /64 for
// IPv6, where one client holds a whole /64.
func clientKey(r *http.Request) (netip.Prefix, bool) {
	a, ok := addrOf(r.RemoteAddr)
	if !ok {
		return netip.Prefix{}, false
	}
	bits := 32
	if a.Is6() {
		bits = 64
	}
	p, err := a.Prefix(bits)
	return p, err == nil
}

// refuseThrottled answers a client blocked for its failed authentications.
func (s *Server) refuseThrottled(w http.ResponseWriter, r *http.Request, left time.Duration) {
	w.Header().Set("Retry-After", strconv.Itoa(max(1, int(left.Round(time.Second)/time.Second))))
	s.writeError(w, r, render.ErrAuthThrottled)
}
