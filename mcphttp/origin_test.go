package mcphttp

import (
	"testing"
)

// Origin values a browser could never send for the loopback server, each
// of which an attacker's page may try (or a sloppy parser may confuse with
// a loopback origin).
var foreignOrigins = []string{
	"http://127.0.0.1:1@evil.com", // the attack: the port swallowed "1@evil.com"
	"http://127.0.0.1@evil.com",
	"http://localhost@evil.com",
	"http://localhost:80@evil.com",
	"http://[::1]:8080@evil.com",
	"http://user:pass@localhost",
	"http://localhost.evil.com",
	"http://127.0.0.1.evil.com",
	"http://evil.com#@127.0.0.1",
	"http://evil.com?@127.0.0.1",
	"http://evil.com/@127.0.0.1",
	`http://evil.com\@127.0.0.1`,
	"http://localhost/",
	"http://localhost/path",
	"http://localhost?x",
	"http://localhost#x",
	"http://localhost:",
	"http://localhost:0",
	"http://localhost:65536",
	"http://localhost:99999999999999999999",
	"http://localhost:+80",
	"http://localhost:-1",
	"http://localhost:080",
	"http://localhost:8080:80",
	"http://localhost:80x",
	"http://localhost.",
	"http://.localhost",
	"http://local%68ost",
	"http://lоcalhost", // Cyrillic о
	"http://localhost http://evil.com",
	"http://localhost,http://evil.com",
	"ftp://localhost",
	"ws://localhost",
	"file://",
	"javascript://localhost",
	"null",
	"localhost",
	"localhost:8080",
	"//localhost",
	"http:/localhost",
	"http:localhost",
	"http://",
	"://localhost",
	"http://[::1",
	"http://[::1]x",
	"http://[::1]:",
	"http://::1",
	"http://[fe80::1%25lo]",
	"http://[127.0.0.1]",
	"http://127.1",
	"http://0x7f.0.0.1",
	"http://2130706433",
	"http://127.000.0.1",
	"http://0.0.0.0",
	"http://10.0.0.1",
	"http://[::]",
	"https://evil.example",
	"http://evil.example:80",
}

// TestOriginDefaultLoopback checks the default policy (no allow-list):
// exactly the loopback origins over http or https, any port.
func TestOriginDefaultLoopback(t *testing.T) {
	r := newRig(t, rigConfig{opts: Options{CheckHost: true}})
	id := r.initialize("2025-06-18")
	ping := `{"jsonrpc":"2.0","id":1,"method":"ping"}`
	for _, o := range []string{
		"http://localhost", "http://localhost:5173", "https://localhost:8443", "http://localhost:80",
		"http://127.0.0.1", "http://127.0.0.1:8080", "http://127.1.2.3:9", "https://127.255.255.254:65535",
		"http://[::1]", "http://[::1]:8080", "https://[0:0:0:0:0:0:0:1]:443", "http://[::ffff:7f00:1]",
		"HTTP://LOCALHOST:3000", "http://LocalHost", "Https://[::1]",
	} {
		if resp, body := r.post(id, ping, "Origin", o); resp.StatusCode != 200 {
			t.Errorf("loopback Origin %q: %d %s, want 200", o, resp.StatusCode, body)
		}
	}
	for _, o := range foreignOrigins {
		resp, body := r.post(id, ping, "Origin", o)
		if resp.StatusCode != 403 {
			t.Errorf("Origin %q: %d %s, want 403", o, resp.StatusCode, body)
			continue
		}
		checkRefusal(t, resp, body, -32000)
	}
}

// TestOriginAllowListExact checks a configured list: exact scheme, host
// and port after normalising case and default ports, nothing else.
func TestOriginAllowListExact(t *testing.T) {
	r := newRig(t, rigConfig{opts: Options{AllowedOrigins: []string{
		"https://app.example", "http://App.Example:8080", "http://[2001:db8::1]:8443", "https://app.example:443"}}})
	id := r.initialize("2025-06-18")
	ping := `{"jsonrpc":"2.0","id":1,"method":"ping"}`
	for _, o := range []string{
		"https://app.example", "HTTPS://APP.EXAMPLE", "https://app.example:443", "http://app.example:8080",
		"http://[2001:DB8::1]:8443", "http://[2001:db8:0:0::1]:8443",
	} {
		if resp, body := r.post(id, ping, "Origin", o); resp.StatusCode != 200 {
			t.Errorf("allowed Origin %q: %d %s, want 200", o, resp.StatusCode, body)
		}
	}
	for _, o := range append([]string{
		"https://app.example/", "https://app.example:1@evil.com", "https://app.example@evil.com",
		"https://user@app.example", "https://app.example.evil.com", "http://app.example", "https://app.example:8443",
		"https://app.example#", "https://app.example?", "http://app.example:8080/", "http://[2001:db8::1]",
		"http://localhost:3000", "http://127.0.0.1",
	}, foreignOrigins...) {
		resp, body := r.post(id, ping, "Origin", o)
		if resp.StatusCode != 403 {
			t.Errorf("Origin %q: %d %s, want 403", o, resp.StatusCode, body)
			continue
		}
		checkRefusal(t, resp, body, -32000)
	}
}

// TestOriginNullConfigured checks that "null" (sandboxed frames, file:
// pages) passes only when the operator lists it.
func TestOriginNullConfigured(t *testing.T) {
	r := newRig(t, rigConfig{opts: Options{AllowedOrigins: []string{"null"}}})
	if resp, body := r.post("", initBody("2025-06-18"), "Origin", "null"); resp.StatusCode != 200 {
		t.Fatalf("configured null: %d %s", resp.StatusCode, body)
	}
	for _, o := range []string{"NULL", "nul", "null null", "http://localhost"} {
		if resp, body := r.post("", initBody("2025-06-18"), "Origin", o); resp.StatusCode != 403 {
			t.Errorf("Origin %q: %d %s, want 403", o, resp.StatusCode, body)
		}
	}
}

// TestOriginBadListFailsClosed checks that a list whose entries are all
// malformed allows nothing, rather than falling back to loopback.
func TestOriginBadListFailsClosed(t *testing.T) {
	r := newRig(t, rigConfig{opts: Options{AllowedOrigins: []string{"https://user@app.example", "app.example"}}})
	for _, o := range []string{"http://localhost", "https://app.example", "https://user@app.example"} {
		if resp, body := r.post("", initBody("2025-06-18"), "Origin", o); resp.StatusCode != 403 {
			t.Errorf("Origin %q: %d %s, want 403", o, resp.StatusCode, body)
		}
	}
}

// TestHostHeaderStrict checks that the DNS-rebinding check parses the Host
// header as strictly as an origin's host [":" port]. (net/http itself
// refuses a Host with '@' with 400 before the handler sees it.)
func TestHostHeaderStrict(t *testing.T) {
	r := newRig(t, rigConfig{opts: Options{CheckHost: true}})
	for _, host := range []string{"[::1]:x", "localhost:", "localhost:0", "127.0.0.1:99999", "[::1]:080",
		"localhost.evil.com", "127.0.0.1.evil.com", "127.1"} {
		resp, body := r.post("", initBody("2025-06-18"), "Host", host)
		if resp.StatusCode != 403 {
			t.Errorf("Host %q: %d %s, want 403", host, resp.StatusCode, body)
			continue
		}
		checkRefusal(t, resp, body, -32000)
	}
}
