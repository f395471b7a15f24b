package docs

import "net/netip"

// blockedPrefixes are the address ranges docs.fetch never connects to:
// everything that reaches the host itself, its local networks or a cloud
// provider's internal services. An IPv4-mapped IPv6 address is checked as
// the IPv4 address it maps, and the NAT64 and 6to4 prefixes as the IPv4
// address they embed (see publicAddr).
//
// The documentation ranges (192.0.2.0/24, 198.51.100.0/24, 203.0.113.0/24,
// 2001:db8::/32) are not blocked: nothing is routed to them, so nothing
// can be reached through them, and the tests use them as stand-ins for
// public addresses.
var blockedPrefixes = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),      // "this network", incl. the unspecified 0.0.0.0
	netip.MustParsePrefix("10.0.0.0/8"),     // private (RFC 1918)
	netip.MustParsePrefix("100.64.0.0/10"),  // carrier-grade NAT (RFC 6598)
	netip.MustParsePrefix("127.0.0.0/8"),    // loopback
	netip.MustParsePrefix("169.254.0.0/16"), // link-local, incl. the cloud metadata service 169.254.169.254
	netip.MustParsePrefix("172.16.0.0/12"),  // private (RFC 1918)
	netip.MustParsePrefix("192.0.0.0/24"),   // IETF protocol assignments
	netip.MustParsePrefix("192.168.0.0/16"), // private (RFC 1918)
	netip.MustParsePrefix("198.18.0.0/15"),  // benchmarking (RFC 2544), used inside networks
	netip.MustParsePrefix("224.0.0.0/4"),    // multicast
	netip.MustParsePrefix("240.0.0.0/4"),    // reserved, incl. broadcast 255.255.255.255

	netip.MustParsePrefix("::/96"),          // unspecified, loopback and the deprecated IPv4-compatible forms
	netip.MustParsePrefix("64:ff9b:1::/48"), // local-use NAT64 (RFC 8215)
	netip.MustParsePrefix("100::/64"),       // discard-only
	netip.MustParsePrefix("2001::/32"),      // Teredo, whose embedded IPv4 address is obfuscated
	netip.MustParsePrefix("fc00::/7"),       // unique local (fd00:ec2::254 is AWS's metadata service)
	netip.MustParsePrefix("fe80::/10"),      // link-local
	netip.MustParsePrefix("fec0::/10"),      // site-local (deprecated)
	netip.MustParsePrefix("ff00::/8"),       // multicast
}

var (
	nat64Prefix = netip.MustParsePrefix("64:ff9b::/96") // embeds an IPv4 address in its last 32 bits
	sixToFour   = netip.MustParsePrefix("2002::/16")    // embeds an IPv4 address in bits 16 to 47
)

// publicAddr reports whether docs.fetch may connect to a: it is a valid
// address in none of blockedPrefixes, and the IPv4 address it maps or
// embeds is not in them either.
func publicAddr(a netip.Addr) bool {
	if !a.IsValid() {
		return false
	}
	a = a.WithZone("").Unmap()
	if a.Is6() {
		b := a.As16()
		switch {
		case nat64Prefix.Contains(a):
			return publicAddr(netip.AddrFrom4([4]byte(b[12:16])))
		case sixToFour.Contains(a):
			return publicAddr(netip.AddrFrom4([4]byte(b[2:6])))
		}
	}
	if a.IsLoopback() || a.IsPrivate() || a.IsUnspecified() || a.IsMulticast() ||
		a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() || a.IsInterfaceLocalMulticast() {
		return false
	}
	for _, p := range blockedPrefixes {
		if p.Contains(a) {
			return false
		}
	}
	return true
}
