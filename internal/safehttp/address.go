package safehttp

import "net/netip"

// Allowed reports whether one address may be connected to: only public
// addresses may, unless AllowPrivate. It refuses loopback, private,
// link-local (including cloud metadata at 169.254.169.254), multicast,
// unspecified, broadcast, carrier-grade NAT, benchmarking, documentation and
// reserved addresses; an IPv6 address that carries an IPv4 one
// (IPv4-mapped, NAT64 64:ff9b::/96, 6to4 2002::/16) is judged by the IPv4
// address, since that is where the packets end up.
func (p Policy) Allowed(addr netip.Addr) bool {
	return p.AllowPrivate || classify(addr) == ""
}

// special is a range of addresses that are not public, and the class a
// refusal names.
type special struct {
	prefix netip.Prefix
	class  string
}

// specialV4 lists the IPv4 ranges that are not public (RFC 6890 and the IANA
// special-purpose registry), narrowest first where they nest.
var specialV4 = []special{
	{netip.MustParsePrefix("0.0.0.0/32"), "unspecified"},
	{netip.MustParsePrefix("0.0.0.0/8"), "reserved"}, // "this network"
	{netip.MustParsePrefix("10.0.0.0/8"), "private"},
	{netip.MustParsePrefix("100.64.0.0/10"), "carrier-grade NAT"},
	{netip.MustParsePrefix("127.0.0.0/8"), "loopback"},
	{netip.MustParsePrefix("169.254.0.0/16"), "link-local"}, // cloud metadata too
	{netip.MustParsePrefix("172.16.0.0/12"), "private"},
	{netip.MustParsePrefix("192.0.0.0/24"), "reserved"}, // IETF protocol assignments
	{netip.MustParsePrefix("192.0.2.0/24"), "documentation"},
	{netip.MustParsePrefix("192.168.0.0/16"), "private"},
	{netip.MustParsePrefix("198.18.0.0/15"), "benchmarking"},
	{netip.MustParsePrefix("198.51.100.0/24"), "documentation"},
	{netip.MustParsePrefix("203.0.113.0/24"), "documentation"},
	{netip.MustParsePrefix("224.0.0.0/4"), "multicast"},
	{netip.MustParsePrefix("255.255.255.255/32"), "broadcast"},
	{netip.MustParsePrefix("240.0.0.0/4"), "reserved"},
}

// specialV6 lists the IPv6 ranges that are not public inside 2000::/3 and
// the few outside it that need a class of their own; everything else outside
// 2000::/3 is refused as reserved.
var specialV6 = []special{
	{netip.MustParsePrefix("::/128"), "unspecified"},
	{netip.MustParsePrefix("::1/128"), "loopback"},
	{netip.MustParsePrefix("fc00::/7"), "private"},
	{netip.MustParsePrefix("fe80::/10"), "link-local"},
	{netip.MustParsePrefix("ff00::/8"), "multicast"},
	{netip.MustParsePrefix("2001:db8::/32"), "documentation"},
	{netip.MustParsePrefix("3fff::/20"), "documentation"}, // RFC 9637
	// IETF protocol assignments: Teredo (whose real destination is
	// hidden in the address), benchmarking, ORCHID. No webhook lives here.
	{netip.MustParsePrefix("2001::/23"), "reserved"},
}

var (
	// globalUnicast is the only IPv6 space allocated for public use.
	globalUnicast = netip.MustParsePrefix("2000::/3")
	// nat64 carries an IPv4 address in its last 32 bits (RFC 6052).
	nat64 = netip.MustParsePrefix("64:ff9b::/96")
	// sixToFour carries an IPv4 address in bits 16 to 47 (RFC 3056).
	sixToFour = netip.MustParsePrefix("2002::/16")
)

// classify returns the class of a non-public address ("loopback",
// "private", ...), or "" for a public one. An invalid address is "invalid".
func classify(addr netip.Addr) string {
	if !addr.IsValid() {
		return "invalid"
	}
	// Prefix.Contains never matches an address with a zone, so a zone
	// (fe80::1%eth0) would otherwise slip past every range.
	addr = addr.WithZone("")
	if addr.Is4In6() {
		return classify(addr.Unmap())
	}
	if addr.Is4() {
		return lookup(specialV4, addr)
	}
	if v4, ok := embeddedV4(addr); ok {
		return classify(v4)
	}
	if class := lookup(specialV6, addr); class != "" {
		return class
	}
	if !globalUnicast.Contains(addr) {
		return "reserved"
	}
	return ""
}

// lookup returns the class of the first range in table that holds addr, or
// "" if none does.
func lookup(table []special, addr netip.Addr) string {
	for _, s := range table {
		if s.prefix.Contains(addr) {
			return s.class
		}
	}
	return ""
}

// embeddedV4 returns the IPv4 address inside a NAT64 or 6to4 address.
func embeddedV4(addr netip.Addr) (netip.Addr, bool) {
	b := addr.As16()
	switch {
	case nat64.Contains(addr):
		return netip.AddrFrom4([4]byte(b[12:16])), true
	case sixToFour.Contains(addr):
		return netip.AddrFrom4([4]byte(b[2:6])), true
	}
	return netip.Addr{}, false
}
