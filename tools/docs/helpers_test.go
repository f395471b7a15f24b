package docs_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"troupe/tools"
	"troupe/tools/docs"
	"troupe/tools/tooltest"
)

// web is a fake internet. Host names resolve to addresses the test picks:
// documentation addresses (203.0.113.0/24) for hosts served by httptest
// servers on 127.0.0.1, or private ones for the tests of the address
// check. Its Dial connects a documentation address to its server and
// records every address it is asked for, so tests can see what the tool
// dialled. Nothing leaves the machine.
type web struct {
	t        testing.TB
	mu       sync.Mutex
	hosts    map[string][]net.IPAddr // canonical name → addresses
	backends map[netip.Addr]string   // fake public address → "127.0.0.1:port"
	dialled  []string                // every address Dial was given
	lookups  map[string]int          // name → number of lookups
	next     byte                    // last octet of the next fake address
}

func newWeb(t testing.TB) *web {
	return &web{
		t: t, hosts: map[string][]net.IPAddr{}, backends: map[netip.Addr]string{},
		lookups: map[string]int{}, next: 10,
	}
}

// serve starts a server for host (and for any further names) behind a new
// fake public address and returns it; it is closed when the test ends.
func (w *web) serve(h http.Handler, hosts ...string) *httptest.Server {
	w.t.Helper()
	return w.add(httptest.NewServer(h), hosts...)
}

// add puts a started server behind a new fake public address for hosts.
func (w *web) add(srv *httptest.Server, hosts ...string) *httptest.Server {
	w.t.Helper()
	w.t.Cleanup(srv.Close)
	w.mu.Lock()
	defer w.mu.Unlock()
	addr := netip.AddrFrom4([4]byte{203, 0, 113, w.next})
	w.next++
	w.backends[addr] = srv.Listener.Addr().String()
	for _, h := range hosts {
		if a, err := netip.ParseAddr(h); err == nil {
			w.backends[a] = srv.Listener.Addr().String() // a URL naming the address
			continue
		}
		w.hosts[h] = []net.IPAddr{{IP: net.IP(addr.AsSlice())}}
	}
	return srv
}

// resolveTo makes host resolve to ips, with no server behind them.
func (w *web) resolveTo(host string, ips ...string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var as []net.IPAddr
	for _, ip := range ips {
		as = append(as, net.IPAddr{IP: net.ParseIP(ip)})
	}
	w.hosts[host] = as
}

// LookupIPAddr implements docs.Resolver.
func (w *web) LookupIPAddr(ctx context.Context, host string) ([]net.IPAddr, error) {
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	w.mu.Lock()
	defer w.mu.Unlock()
	w.lookups[host]++
	if as, ok := w.hosts[host]; ok {
		return as, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

// Dial is the tool's Options.Dial: it takes only IP addresses (the tool
// must never hand it a name) and connects fake public ones to their
// servers.
func (w *web) Dial(ctx context.Context, network, address string) (net.Conn, error) {
	ap, err := netip.ParseAddrPort(address)
	w.mu.Lock()
	w.dialled = append(w.dialled, address)
	backend, ok := w.backends[ap.Addr()]
	w.mu.Unlock()
	if err != nil {
		w.t.Errorf("Dial got %q, not an IP address and port", address)
		return nil, err
	}
	if !ok {
		return nil, &net.OpError{Op: "dial", Net: network, Err: syscall.ECONNREFUSED}
	}
	var d net.Dialer
	return d.DialContext(ctx, network, backend)
}

// dialledAny returns the addresses Dial was given.
func (w *web) dialledAny() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.dialled...)
}

// options are Options that reach this web, allowing the given domains.
func (w *web) options(allowed ...string) docs.Options {
	return docs.Options{AllowedDomains: allowed, Resolver: w, Dial: w.Dial}
}

// fetcher is docs.fetch behind a registry, called the way troupe calls it:
// Validate, then Call.
type fetcher struct {
	t     testing.TB
	entry *tools.Entry
}

func newFetcher(t testing.TB, opts docs.Options) *fetcher {
	t.Helper()
	tool, err := docs.Tool(opts)
	if err != nil {
		t.Fatal(err)
	}
	return registered(t, tool)
}

func registered(t testing.TB, tool tools.Tool) *fetcher {
	t.Helper()
	reg, err := tools.NewRegistry(tool)
	if err != nil {
		t.Fatal(err)
	}
	e, ok := reg.Lookup(docs.Name)
	if !ok {
		t.Fatalf("no tool %s", docs.Name)
	}
	return &fetcher{t: t, entry: e}
}

// result is docs.fetch's structuredContent, as a client decodes it.
type result struct {
	URL         string `json:"url"`
	Status      int    `json:"status"`
	ContentType string `json:"contentType"`
	Text        string `json:"text"`
	Truncated   bool   `json:"truncated"`
}

// fetch calls the tool with args and decodes its result. It returns the
// tool's error, checking that a success carries the same JSON as text and
// structuredContent.
func (f *fetcher) fetch(ctx context.Context, args map[string]any) (result, error) {
	f.t.Helper()
	raw, err := json.Marshal(args)
	if err != nil {
		f.t.Fatal(err)
	}
	valid, err := f.entry.Validate(raw)
	if err != nil {
		return result{}, err
	}
	res, err := f.entry.Tool.Call(ctx, &tools.Request{Arguments: valid})
	if err != nil {
		return result{}, err
	}
	sc, ok := res.StructuredContent.(json.RawMessage)
	if !ok {
		f.t.Fatalf("structuredContent is %T", res.StructuredContent)
	}
	if len(res.Content) != 1 || res.Content[0].Text != string(sc) {
		f.t.Fatalf("text content %+v differs from structuredContent %s", res.Content, sc)
	}
	var r result
	if err := json.Unmarshal(sc, &r); err != nil {
		f.t.Fatalf("%v in %s", err, sc)
	}
	return r, nil
}

// get fetches url and fails the test on an error.
func (f *fetcher) get(ctx context.Context, url string) result {
	f.t.Helper()
	r, err := f.fetch(ctx, map[string]any{"url": url})
	if err != nil {
		f.t.Fatalf("%s: %v", url, err)
	}
	return r
}

// wantToolError checks that err is a *tools.Error of the kind whose message
// contains every one of parts, and names no address of the fake web or
// the local servers.
func wantToolError(t testing.TB, err error, kind tools.Kind, parts ...string) *tools.Error {
	t.Helper()
	te := tooltest.WantError(t, err, kind)
	for _, p := range parts {
		if !strings.Contains(te.Message, p) {
			t.Errorf("message %q does not contain %q", te.Message, p)
		}
	}
	for _, leak := range []string{"203.0.113.", "127.0.0.1", "[::1]"} {
		if strings.Contains(te.Message, leak) && !strings.Contains(strings.Join(parts, " "), leak) {
			t.Errorf("message %q reveals an address (%s)", te.Message, leak)
		}
	}
	return te
}

// page is a handler that serves body with the content type; "" sends no
// Content-Type header at all.
func page(contentType, body string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if contentType != "" {
			w.Header().Set("Content-Type", contentType)
		} else {
			w.Header()["Content-Type"] = nil // net/http would detect one
		}
		w.Write([]byte(body))
	})
}

// gzipped compresses s.
func gzipped(t testing.TB, s string) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	if _, err := zw.Write([]byte(s)); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// testCtx is a context that ends before the test's own deadline, so a
// hanging call fails the test instead of the whole binary.
func testCtx(t testing.TB, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
