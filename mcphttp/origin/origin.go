// Package origin parses the values of the HTTP Origin header (RFC 6454)
// and of Host-like authorities strictly, so that the HTTP front's browser
// checks compare what a browser can actually send and nothing that merely
// looks like it.
//
// A serialized origin is scheme "://" host [":" port] and nothing else: no
// user information, path, query or fragment. Browsers send it lower-cased,
// with IDNs in punycode, IPv4 addresses in dotted decimal and default ports
// left out; anything outside that grammar is an error here, because a
// lenient parser is how "http://127.0.0.1:1@evil.com" passed for a loopback
// origin (its "port" swallowed "1@evil.com").
package origin

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Origin is one parsed origin, normalised: Scheme and Host lower-case,
// Host without brackets for IPv6 (in its canonical form), Port the
// effective port (the scheme's default when the value named none). The
// opaque origin "null" has Null set and nothing else.
type Origin struct {
	Null   bool
	Scheme string // "http" or "https"
	Host   string
	Port   int
}

// Parse parses an Origin header value. Only "null" and http(s) origins
// exist for troupe: other schemes cannot reach an HTTP server from a page.
// Scheme and host are case-insensitive; "null" is not.
func Parse(s string) (Origin, error) {
	if s == "null" {
		return Origin{Null: true}, nil
	}
	scheme, authority, ok := strings.Cut(s, "://")
	if !ok {
		return Origin{}, errors.New(`not scheme "://" host [":" port]`)
	}
	var o Origin
	switch o.Scheme = strings.ToLower(scheme); o.Scheme {
	case "http":
		o.Port = 80
	case "https":
		o.Port = 443
	default:
		return Origin{}, fmt.Errorf("scheme %q is not http or https", scheme)
	}
	host, port, err := SplitHostPort(authority)
	if err != nil {
		return Origin{}, err
	}
	o.Host = host
	if port != 0 {
		o.Port = port
	}
	return o, nil
}

// String is the origin's serialization with the default port left out, so
// two values of one origin have one String.
func (o Origin) String() string {
	if o.Null {
		return "null"
	}
	host := o.Host
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	if (o.Scheme == "http" && o.Port == 80) || (o.Scheme == "https" && o.Port == 443) {
		return o.Scheme + "://" + host
	}
	return o.Scheme + "://" + host + ":" + strconv.Itoa(o.Port)
}

// Loopback reports whether o is a page served from this machine's loopback:
// localhost, 127.0.0.0/8 or ::1 (also as an IPv4-mapped address).
func (o Origin) Loopback() bool {
	return !o.Null && LoopbackHost(o.Host)
}

// LoopbackHost reports whether host, as SplitHostPort returns it, names
// this machine's loopback. Subdomains of localhost do not count.
func LoopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// SplitHostPort parses host [":" port], the authority of an origin or a
// Host header, and nothing else. It returns the host normalised as in
// Origin and the port, or 0 when none was given. The host is a bracketed
// IPv6 address without zone, a dotted-decimal IPv4 address, or a DNS name
// of ASCII letters, digits, '-' and '_' in non-empty dot-separated labels
// whose last label is not a number (browsers turn "127.1" or "0x7f.0.0.1"
// into dotted decimal, so those spellings never come from one). The port is
// 1 to 65535 in decimal, without sign or leading zeros.
func SplitHostPort(s string) (host string, port int, err error) {
	hostPart, portPart, hasPort := s, "", false
	if strings.HasPrefix(s, "[") {
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return "", 0, errors.New("IPv6 address without ']'")
		}
		hostPart, rest := s[:end+1], s[end+1:]
		if rest != "" {
			if rest[0] != ':' {
				return "", 0, fmt.Errorf("%q after the IPv6 address", rest)
			}
			portPart, hasPort = rest[1:], true
		}
		ip, perr := netip.ParseAddr(hostPart[1:end])
		if perr != nil || !ip.Is6() || ip.Zone() != "" {
			return "", 0, fmt.Errorf("%q is not an IPv6 address", hostPart)
		}
		host = ip.String()
	} else {
		if i := strings.IndexByte(s, ':'); i >= 0 {
			hostPart, portPart, hasPort = s[:i], s[i+1:], true
		}
		if host, err = hostName(hostPart); err != nil {
			return "", 0, err
		}
	}
	if hasPort {
		if port, err = parsePort(portPart); err != nil {
			return "", 0, err
		}
	}
	return host, port, nil
}

// hostName checks a dotted-decimal IPv4 address or a DNS name and returns
// it lower-cased.
func hostName(s string) (string, error) {
	if s == "" {
		return "", errors.New("no host")
	}
	if len(s) > 253 {
		return "", errors.New("host name longer than 253 characters")
	}
	if ip, err := netip.ParseAddr(s); err == nil && ip.Is4() {
		return s, nil
	}
	// Only ASCII is lower-cased and checked: strings.ToLower maps some
	// other letters onto ASCII ones ("İ" to "i", the Kelvin sign to "k"),
	// which would let a host no origin has match an allowed one.
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return "", errors.New("host is not ASCII (a browser sends an international name in its punycode form)")
		}
	}
	s = strings.ToLower(s)
	labels := strings.Split(s, ".")
	for _, label := range labels {
		if label == "" || len(label) > 63 {
			return "", fmt.Errorf("host %q has an empty or overlong label", s)
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return "", fmt.Errorf("host %q contains %q, which no origin's host does", s, c)
			}
		}
	}
	if last := labels[len(labels)-1]; numeric(last) {
		return "", fmt.Errorf("host %q is not a dotted-decimal IPv4 address nor a name", s)
	}
	return s, nil
}

// numeric reports whether a label would make a browser read the host as an
// IPv4 address (decimal, or hexadecimal with 0x).
func numeric(label string) bool {
	digits := label
	hex := strings.HasPrefix(label, "0x")
	if hex {
		digits = label[2:]
	}
	for i := 0; i < len(digits); i++ {
		c := digits[i]
		if !(c >= '0' && c <= '9' || hex && c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

func parsePort(s string) (int, error) {
	if s == "" || len(s) > 5 || s[0] == '0' {
		return 0, fmt.Errorf("port %q is not a number from 1 to 65535", s)
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, fmt.Errorf("port %q is not a number from 1 to 65535", s)
		}
	}
	n, _ := strconv.Atoi(s)
	if n > 65535 {
		return 0, fmt.Errorf("port %q is not a number from 1 to 65535", s)
	}
	return n, nil
}
