package docs

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"syscall"
	"time"

	"troupe/tools"
)

// guard is the only way docs.fetch opens connections: it is the HTTP
// transport's DialContext. For every connection, including each redirect's,
// it checks the host against the allow-list, resolves the name itself,
// refuses the host if any of its addresses is not public, and dials the
// checked addresses, never the name. The address dialled is the address
// checked, so a DNS answer that changes between check and connect (DNS
// rebinding) cannot slip a private address through.
type guard struct {
	allow    *allowList
	resolver Resolver
	dial     DialFunc
}

// DialContext connects to address, "host:port" as the transport derives
// it from a request's URL.
func (g *guard) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	host, portStr, err := net.SplitHostPort(address)
	if err != nil {
		return nil, err
	}
	port, err := strconv.ParseUint(portStr, 10, 16)
	if err != nil {
		return nil, fmt.Errorf("bad port in %q", address)
	}
	canon, err := canonicalHost(host)
	if err != nil {
		return nil, tools.Errorf(tools.KindInvalidArgument, "host %q is not a valid host name", host)
	}
	// The URL was checked already; checking again here means no code path
	// can open a connection to a host that is not allowed.
	if err := g.allow.checkHost(host, canon); err != nil {
		return nil, err
	}
	addrs, err := g.lookup(ctx, canon)
	if err != nil {
		return nil, err
	}
	for _, a := range addrs {
		if !publicAddr(a) {
			return nil, privateHostError(host)
		}
	}
	// The error reported is the first one, unless that was an address
	// running out of its share of time and a later one says more.
	var first error
	for i, a := range addrs {
		c, err := g.dialOne(ctx, network, netip.AddrPortFrom(a, uint16(port)).String(), len(addrs)-i)
		if err == nil {
			return c, nil
		}
		if ctx.Err() != nil {
			return nil, err
		}
		if first == nil || errors.Is(first, context.DeadlineExceeded) {
			first = err
		}
	}
	return nil, first
}

// minDialShare is the least time dialOne gives one address.
const minDialShare = time.Second

// dialOne dials one of the host's addresses. When others are left to
// try, it gets an equal share of the time that remains (but at least
// minDialShare), as net.Dialer does, so one address that swallows packets
// does not use up the whole call.
func (g *guard) dialOne(ctx context.Context, network, address string, left int) (net.Conn, error) {
	if deadline, ok := ctx.Deadline(); ok && left > 1 {
		share := max(time.Until(deadline)/time.Duration(left), minDialShare)
		if d := time.Now().Add(share); d.Before(deadline) {
			var cancel context.CancelFunc
			ctx, cancel = context.WithDeadline(ctx, d)
			defer cancel()
		}
	}
	return g.dial(ctx, network, address)
}

// lookup returns host's addresses: itself if it is an IP address,
// otherwise what the resolver says.
func (g *guard) lookup(ctx context.Context, host string) ([]netip.Addr, error) {
	if a, err := netip.ParseAddr(host); err == nil {
		return []netip.Addr{a.Unmap()}, nil
	}
	ips, err := g.resolver.LookupIPAddr(ctx, host)
	if err != nil {
		return nil, err
	}
	addrs := make([]netip.Addr, 0, len(ips))
	for _, ip := range ips {
		a, ok := netip.AddrFromSlice(ip.IP)
		if !ok {
			return nil, privateHostError(host) // an answer that is no address is not a public one
		}
		// Unmap: resolvers give IPv4 addresses in 16-byte form too, and
		// ::ffff:a.b.c.d would be dialled as IPv6.
		addrs = append(addrs, a.Unmap())
	}
	if len(addrs) == 0 {
		return nil, &net.DNSError{Err: "no addresses", Name: host, IsNotFound: true}
	}
	return addrs, nil
}

func privateHostError(host string) error {
	return tools.Errorf(tools.KindPermissionDenied,
		"%s resolves to a private or local address; %s only connects to public internet addresses", host, Name)
}

// errPrivateAddr is defaultDial's refusal of a connection to an address
// that is not public.
var errPrivateAddr = errors.New("connection to a private or local address refused")

// defaultDial is the production Dial: a net.Dialer that checks, in
// Control, the very address the socket is about to connect to. The guard
// has checked it already; this second check holds even if a future change
// hands the dialler a name.
var defaultDial DialFunc = (&net.Dialer{
	Control: func(network, address string, _ syscall.RawConn) error {
		ap, err := netip.ParseAddrPort(address)
		if err != nil || !publicAddr(ap.Addr()) {
			return errPrivateAddr
		}
		return nil
	},
}).DialContext
