package docs_test

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"troupe/tools"
	"troupe/tools/docs"
)

// TestPrivateAddresses checks that an allowed name is refused when it
// resolves to an address that is not public, before anything is dialled,
// and that an IP address in the URL is checked the same way.
func TestPrivateAddresses(t *testing.T) {
	w := newWeb(t)
	w.serve(page("text/plain", "public"), "public.example")
	private := map[string][]string{
		"loopback.example":   {"127.0.0.1"},
		"loopback2.example":  {"127.8.9.10"},
		"private10.example":  {"10.0.0.1"},
		"private172.example": {"172.16.5.4"},
		"private192.example": {"192.168.1.1"},
		"metadata.example":   {"169.254.169.254"},
		"cgnat.example":      {"100.64.0.1"},
		"zero.example":       {"0.0.0.0"},
		"multicast.example":  {"224.0.0.1"},
		"broadcast.example":  {"255.255.255.255"},
		"v6loopback.example": {"::1"},
		"v6unspec.example":   {"::"},
		"mapped.example":     {"::ffff:127.0.0.1"},
		"mapped10.example":   {"::ffff:10.1.2.3"},
		"ula.example":        {"fd00::1"},
		"linklocal6.example": {"fe80::1"},
		"nat64.example":      {"64:ff9b::a9fe:a9fe"}, // 169.254.169.254
		"6to4.example":       {"2002:7f00:1::1"},     // 127.0.0.1
		"mixed.example":      {"203.0.113.10", "10.0.0.1"},
		"mixed6.example":     {"203.0.113.10", "::1"},
	}
	allowed := []string{"public.example", "127.0.0.1", "::1", "[::ffff:7f00:1]", "169.254.169.254"}
	for host, ips := range private {
		w.resolveTo(host, ips...)
		allowed = append(allowed, host)
	}
	f := newFetcher(t, w.options(allowed...))
	ctx := testCtx(t, 10*time.Second)

	for host := range private {
		_, err := f.fetch(ctx, map[string]any{"url": "http://" + host + "/"})
		wantToolError(t, err, tools.KindPermissionDenied, host+" resolves to a private or local address")
	}
	// Addresses in the URL; the message names them as the URL did.
	for u, host := range map[string]string{
		"http://127.0.0.1/":                        "127.0.0.1",
		"http://[::1]:8080/":                       "::1",
		"http://[::ffff:127.0.0.1]/":               "::ffff:127.0.0.1",
		"http://169.254.169.254/latest/meta-data/": "169.254.169.254",
	} {
		_, err := f.fetch(ctx, map[string]any{"url": u})
		wantToolError(t, err, tools.KindPermissionDenied, host+" resolves to a private or local address")
	}
	if d := w.dialledAny(); len(d) != 0 {
		t.Errorf("private addresses were dialled: %v", d)
	}
	// The public host next to them works.
	if r := f.get(ctx, "http://public.example/"); r.Text != "public" {
		t.Errorf("public host: %+v", r)
	}
}

// TestDefaultDialChecksAddress checks the production dialler's own check
// of the connecting address: even handed a loopback address directly, it
// does not connect.
func TestDefaultDialChecksAddress(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := docs.DefaultDial(ctx, "tcp", ln.Addr().String())
	if err == nil {
		c.Close()
		t.Fatal("the default dialler connected to a loopback address")
	}
	var opErr *net.OpError
	if !errors.As(err, &opErr) {
		t.Errorf("got %v", err)
	}
}
