package docs_test

import (
	"context"
	"fmt"
	"log"
	"net"
	"net/http"
	"net/http/httptest"

	"troupe/tools"
	"troupe/tools/docs"
)

// Example builds docs.fetch, registers it and calls it the way troupe
// does: look the tool up, validate the arguments, call it. The page comes
// from a local server: the Resolver gives docs.example a documentation
// address (203.0.113.7), which passes the tool's address check like any
// public address, and Dial connects that address to the server. Nothing
// touches the network, yet the check runs as in production.
func Example() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, `<html><head><title>fmt</title><script>track()</script></head><body>
			<h1>Package fmt</h1>
			<p>Package fmt implements <a href="#io">formatted I/O</a> &amp; more.</p>
			<ul><li>Printf</li><li>Println</li></ul>
			</body></html>`)
	}))
	defer srv.Close()

	fetch, err := docs.Tool(docs.Options{
		AllowedDomains: []string{"docs.example", "*.python.org"},
		Resolver:       fakeDNS{"docs.example": "203.0.113.7"},
		Dial: func(ctx context.Context, network, address string) (net.Conn, error) {
			if address != "203.0.113.7:80" {
				return nil, fmt.Errorf("no route to %s", address)
			}
			var d net.Dialer
			return d.DialContext(ctx, network, srv.Listener.Addr().String())
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	reg, err := tools.NewRegistry(fetch)
	if err != nil {
		log.Fatal(err)
	}
	entry, _ := reg.Lookup(docs.Name)
	args, err := entry.Validate([]byte(`{"url": "http://docs.example/pkg/fmt"}`))
	if err != nil {
		log.Fatal(err)
	}
	res, err := entry.Tool.Call(context.Background(), &tools.Request{Arguments: args})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Content[0].Text)

	// A host that is not on the list is refused before anything is dialled.
	_, err = entry.Tool.Call(context.Background(), &tools.Request{Arguments: []byte(`{"url": "https://python.org/"}`)})
	fmt.Println(err)

	// Output:
	// {"url":"http://docs.example/pkg/fmt","status":200,"contentType":"text/html; charset=utf-8","text":"Package fmt\n\nPackage fmt implements formatted I/O \u0026 more.\n\n- Printf\n- Println","truncated":false}
	// permission_denied: host "python.org" is not allowed: docs.fetch only fetches from docs.example, *.python.org; to allow it, add "python.org" to [docs] allowed_domains in config.toml
}

// fakeDNS maps host names to one address each.
type fakeDNS map[string]string

func (m fakeDNS) LookupIPAddr(_ context.Context, host string) ([]net.IPAddr, error) {
	if ip, ok := m[host]; ok {
		return []net.IPAddr{{IP: net.ParseIP(ip)}}, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}
