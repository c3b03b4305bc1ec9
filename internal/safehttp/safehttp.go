// Package safehttp sends requests to URLs that tenants supply (merchant
// webhook endpoints) without letting a tenant reach the inside network:
// loopback, private ranges, cloud metadata at 169.254.169.254 and the like.
//
// There are two checks, and both are needed. CheckURL refuses a URL at
// registration, so that a tenant hears at once, in words they can act on,
// why an endpoint is refused. The Client refuses again at connect time, on
// the address actually being connected to after DNS, because a host that
// resolved to a public address at registration may resolve to 127.0.0.1 by
// the time a delivery is sent (DNS rebinding).
package safehttp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
)

// MaxURLLength is the longest URL CheckURL accepts, in bytes.
const MaxURLLength = 2048

// ErrForbiddenURL is wrapped by every refusal of a destination, at
// registration (CheckURL) and at connect time (Client), so that callers can
// tell a refused destination from a failed delivery with errors.Is.
var ErrForbiddenURL = errors.New("URL not allowed")

// Policy decides which destinations are allowed.
type Policy struct {
	// AllowPrivate lifts every restriction below (development and tests:
	// WEBHOOK_ALLOW_PRIVATE_NETWORKS=true); http is accepted only with it.
	AllowPrivate bool
	// Resolver looks hosts up; nil means net.DefaultResolver. Tests inject one.
	Resolver interface {
		LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
	}
}

// refusal is a refusal whose message a tenant may read: it names the reason,
// the URL's host and the class of address, nothing internal. The cause (a
// resolver error, which names the DNS server) is kept for errors.As and logs
// but left out of the message.
type refusal struct {
	reason string
	cause  error
}

// refuse returns a refusal for the reason, formatted as fmt.Sprintf does.
func refuse(format string, args ...any) error {
	return &refusal{reason: fmt.Sprintf(format, args...)}
}

func (r *refusal) Error() string { return ErrForbiddenURL.Error() + ": " + r.reason }

// Unwrap makes every refusal match ErrForbiddenURL, and its cause if any.
func (r *refusal) Unwrap() []error {
	if r.cause == nil {
		return []error{ErrForbiddenURL}
	}
	return []error{ErrForbiddenURL, r.cause}
}

// CheckURL validates a URL at registration: absolute, scheme https (http
// only with AllowPrivate), a host, no userinfo, a port if any in 1..65535, at
// most MaxURLLength bytes as given and once normalised; then it resolves the host (a literal IP is checked
// as is) and refuses the URL if any resolved address is not public, since the
// client may connect to any of them. With AllowPrivate the host is not
// resolved: every address would be allowed anyway, and in development the
// host may not be up yet.
//
// It returns the URL normalised: scheme and host in lower case, and without
// the fragment, which is never sent. Every refusal wraps ErrForbiddenURL; an
// error that does not is the caller's (a cancelled ctx).
func (p Policy) CheckURL(ctx context.Context, raw string) (string, error) {
	u, err := p.parse(raw)
	if err != nil {
		return "", err
	}
	if !p.AllowPrivate {
		if err := p.checkHost(ctx, u.Hostname()); err != nil {
			return "", err
		}
	}
	return u.String(), nil
}

// parse checks everything about raw that needs no lookup and returns it
// parsed and normalised.
func (p Policy) parse(raw string) (*url.URL, error) {
	switch {
	case raw == "":
		return nil, refuse("the URL is empty")
	case len(raw) > MaxURLLength:
		return nil, refuse("the URL is longer than %d bytes", MaxURLLength)
	}
	u, err := url.Parse(raw)
	if err != nil {
		// The parser's message quotes the URL back; the tenant has it.
		return nil, refuse("the URL cannot be parsed")
	}
	if !u.IsAbs() {
		return nil, refuse("the URL must be absolute, starting with https://")
	}
	if err := p.checkScheme(u.Scheme); err != nil {
		return nil, err
	}
	if u.User != nil {
		return nil, refuse("the URL must not contain a user name or password")
	}
	if u.Opaque != "" || u.Hostname() == "" {
		return nil, refuse("the URL has no host")
	}
	if err := checkPort(u); err != nil {
		return nil, err
	}
	u.Host = strings.ToLower(u.Host)
	u.Fragment, u.RawFragment = "", ""
	if len(u.String()) > MaxURLLength {
		// The normal form is what is stored and sent: percent-encoding
		// can take a URL short in its own bytes past the bound.
		return nil, refuse("the URL is longer than %d bytes once percent-encoded", MaxURLLength)
	}
	return u, nil
}

// checkScheme accepts https, and http only with AllowPrivate: a webhook
// carries payment data and a signature that must not travel in clear.
func (p Policy) checkScheme(scheme string) error {
	if scheme == "https" || (scheme == "http" && p.AllowPrivate) {
		return nil
	}
	return refuse("scheme %q is not allowed; use https", scheme)
}

// checkPort refuses a port outside 1..65535, and an empty one ("host:/"),
// which the parser lets through.
func checkPort(u *url.URL) error {
	port := u.Port()
	if port == "" {
		if strings.HasSuffix(u.Host, ":") {
			return refuse("the port is empty; remove the colon or give a port from 1 to 65535")
		}
		return nil
	}
	// The parser has already made sure the port is all digits.
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return refuse("port %s is not valid; use a port from 1 to 65535", port)
	}
	return nil
}

// checkHost refuses a host that is, or resolves to, an address that is not
// public, or that does not resolve at all.
//
// A host name that does not resolve and one that resolves to an inside
// address get the same refusal, word for word (unresolvable): were they
// told apart, a tenant could register URLs one after another to learn which
// names our DNS knows, and map the inside network. A literal address gives
// nothing away, so its refusal names its class.
func (p Policy) checkHost(ctx context.Context, host string) error {
	if addr, err := netip.ParseAddr(host); err == nil {
		if class := classify(addr); class != "" {
			return refuse("host %q is a non-public address (%s)", host, class)
		}
		return nil
	}
	resolver := p.Resolver
	if resolver == nil {
		resolver = net.DefaultResolver
	}
	addrs, err := resolver.LookupNetIP(ctx, "ip", host)
	if ctxErr := ctx.Err(); ctxErr != nil {
		// Our deadline, not the tenant's URL.
		return fmt.Errorf("resolve host: %w", ctxErr)
	}
	if err != nil {
		return unresolvable(host, err)
	}
	if len(addrs) == 0 {
		return unresolvable(host, nil)
	}
	// One bad address is enough: the client may connect to any of them.
	for _, addr := range addrs {
		if class := classify(addr); class != "" {
			return unresolvable(host, nil)
		}
	}
	return nil
}

// unresolvable is the one refusal of a host name that does not resolve to
// public addresses only: whether it does not resolve, resolves to nothing or
// resolves to an inside address, the message is the same. The resolver's
// error, if any, is kept as the cause, for errors.As and logs.
func unresolvable(host string, cause error) error {
	return &refusal{reason: fmt.Sprintf("host %q does not resolve to public addresses only", host), cause: cause}
}
