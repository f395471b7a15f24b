package docs

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"golang.org/x/net/idna"

	"troupe/tools"
)

// allowList is Options.AllowedDomains, normalised: exact host names (and
// IP addresses) and the suffixes of "*." entries, all in canonical form.
type allowList struct {
	exact    []string // "go.dev"
	suffixes []string // ".python.org" for "*.python.org"
}

// hostProfile maps host names the way a lookup does (case folding, width
// mapping, punycode) but lets "_" and other characters DNS permits through,
// as browsers do.
var hostProfile = idna.New(idna.MapForLookup(), idna.BidiRule(), idna.StrictDomainName(false))

// canonicalHost returns the form of host the allow-list compares: an IP
// address in its standard notation (IPv6 without brackets or zone), or a
// host name in lower-case ASCII without a trailing dot.
func canonicalHost(host string) (string, error) {
	h := strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if a, err := netip.ParseAddr(h); err == nil {
		return a.WithZone("").String(), nil
	}
	h = strings.TrimSuffix(host, ".")
	if h == "" {
		return "", fmt.Errorf("empty host name")
	}
	a, err := hostProfile.ToASCII(h)
	if err != nil {
		return "", fmt.Errorf("%q is not a valid host name", host)
	}
	a = strings.ToLower(a)
	if a == "" || strings.HasPrefix(a, ".") || strings.HasSuffix(a, ".") || strings.Contains(a, "..") ||
		strings.ContainsAny(a, "/:@*?#[]\\% ") {
		return "", fmt.Errorf("%q is not a valid host name", host)
	}
	return a, nil
}

func newAllowList(entries []string) (*allowList, error) {
	l := &allowList{}
	for _, e := range entries {
		e = strings.TrimSpace(e)
		rest, wild := strings.CutPrefix(e, "*.")
		if strings.Contains(e, "://") || strings.ContainsAny(e, "/") {
			return nil, fmt.Errorf("docs: allowed domain %q: write a host name such as \"go.dev\" or \"*.python.org\", not a URL", e)
		}
		h, err := canonicalHost(rest)
		if err != nil {
			return nil, fmt.Errorf("docs: allowed domain %q: %v; write a host name such as \"go.dev\" or \"*.python.org\"", e, err)
		}
		if wild {
			if _, err := netip.ParseAddr(h); err == nil {
				return nil, fmt.Errorf("docs: allowed domain %q: \"*.\" needs a domain name, not an IP address", e)
			}
			if !slices.Contains(l.suffixes, "."+h) {
				l.suffixes = append(l.suffixes, "."+h)
			}
		} else if !slices.Contains(l.exact, h) {
			l.exact = append(l.exact, h)
		}
	}
	return l, nil
}

// allows reports whether the canonical host h is on the list.
func (l *allowList) allows(h string) bool {
	if slices.Contains(l.exact, h) {
		return true
	}
	if _, err := netip.ParseAddr(h); err == nil {
		return false // wildcards never match addresses
	}
	for _, s := range l.suffixes {
		if strings.HasSuffix(h, s) {
			return true
		}
	}
	return false
}

func (l *allowList) empty() bool       { return len(l.exact) == 0 && len(l.suffixes) == 0 }
func (l *allowList) hasWildcard() bool { return len(l.suffixes) > 0 }

// String lists the entries as an operator wrote them (in canonical form).
func (l *allowList) String() string {
	all := slices.Clone(l.exact)
	for _, s := range l.suffixes {
		all = append(all, "*"+s)
	}
	return strings.Join(all, ", ")
}

// checkHost refuses a host that is not on the list. shown is the host as
// the URL gave it, canon its canonical form; the message tells the model
// what is allowed and an operator how to allow the host.
func (l *allowList) checkHost(shown, canon string) error {
	if l.allows(canon) {
		return nil
	}
	named := fmt.Sprintf("%q", shown)
	if shown != canon {
		named = fmt.Sprintf("%q (%s)", shown, canon)
	}
	if l.empty() {
		return tools.Errorf(tools.KindPermissionDenied,
			"host %s is not allowed: %s may not fetch from any host yet; to allow it, add %q to [docs] allowed_domains in config.toml",
			named, Name, canon)
	}
	return tools.Errorf(tools.KindPermissionDenied,
		"host %s is not allowed: %s only fetches from %s; to allow it, add %q to [docs] allowed_domains in config.toml",
		named, Name, l, canon)
}
