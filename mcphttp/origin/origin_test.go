package origin

import (
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in, want string // want "" means an error
		loopback bool
	}{
		{"http://localhost", "http://localhost", true},
		{"http://localhost:80", "http://localhost", true},
		{"https://localhost:443", "https://localhost", true},
		{"http://localhost:443", "http://localhost:443", true},
		{"HTTP://LocalHost:5173", "http://localhost:5173", true},
		{"http://127.0.0.1", "http://127.0.0.1", true},
		{"http://127.9.8.7:1", "http://127.9.8.7:1", true},
		{"http://[::1]:8080", "http://[::1]:8080", true},
		{"http://[0:0:0:0:0:0:0:1]", "http://[::1]", true},
		{"http://[::FFFF:127.0.0.1]", "http://[::ffff:127.0.0.1]", true},
		{"https://[2001:DB8::1]:65535", "https://[2001:db8::1]:65535", false},
		{"https://app.example", "https://app.example", false},
		{"https://xn--bcher-kva.example", "https://xn--bcher-kva.example", false},
		{"http://my_host-1.example:8080", "http://my_host-1.example:8080", false},
		{"http://0.0.0.0", "http://0.0.0.0", false},
		{"http://localhost.evil.com", "http://localhost.evil.com", false},
		{"http://127.0.0.1.evil.com", "http://127.0.0.1.evil.com", false},
		{"null", "null", false},

		{"http://127.0.0.1:1@evil.com", "", false},
		{"http://127.0.0.1@evil.com", "", false},
		{"http://u:p@localhost", "", false},
		{"http://evil.com#@127.0.0.1", "", false},
		{"http://evil.com?@127.0.0.1", "", false},
		{"http://evil.com/@127.0.0.1", "", false},
		{`http://evil.com\@127.0.0.1`, "", false},
		{"http://localhost/", "", false},
		{"http://localhost?", "", false},
		{"http://localhost#", "", false},
		{"http://localhost:", "", false},
		{"http://localhost:0", "", false},
		{"http://localhost:00080", "", false},
		{"http://localhost:65536", "", false},
		{"http://localhost:123456", "", false},
		{"http://localhost:8080:1", "", false},
		{"http://localhost: 80", "", false},
		{"http://localhost.", "", false},
		{"http://a..b", "", false},
		{"http://" + strings.Repeat("a", 64) + ".example", "", false},
		{"http://" + strings.Repeat("a.", 127) + "ab", "", false},
		{"http://LOCALHOST%2e", "", false},
		{"http://bücher.example", "", false},
		{"http://app.İnternal", "", false},      // would lower-case to app.internal
		{"http://\u212Aeep.example", "", false}, // the Kelvin sign would lower-case to k
		{"http://127.1", "", false},
		{"http://127.0.0.01", "", false},
		{"http://0x7f.0.0.1", "", false},
		{"http://evil.0x7f", "", false},
		{"http://2130706433", "", false},
		{"http://[::1", "", false},
		{"http://[::1]]", "", false},
		{"http://[::1]:", "", false},
		{"http://[::1]8080", "", false},
		{"http://[fe80::1%lo]", "", false},
		{"http://[127.0.0.1]", "", false},
		{"http://[]", "", false},
		{"http://::1", "", false},
		{"http://", "", false},
		{"http:///", "", false},
		{"ftp://localhost", "", false},
		{"blob:http://localhost", "", false},
		{"://localhost", "", false},
		{"localhost", "", false},
		{"Null", "", false},
		{"", "", false},
		{"http://a http://b", "", false},
	} {
		o, err := Parse(tc.in)
		if tc.want == "" {
			if err == nil {
				t.Errorf("Parse(%q) = %v, want an error", tc.in, o)
			}
			continue
		}
		if err != nil {
			t.Errorf("Parse(%q): %v", tc.in, err)
			continue
		}
		if o.String() != tc.want || o.Loopback() != tc.loopback {
			t.Errorf("Parse(%q) = %s (loopback %v), want %s (loopback %v)", tc.in, o, o.Loopback(), tc.want, tc.loopback)
		}
	}
}

func TestSplitHostPort(t *testing.T) {
	for _, tc := range []struct {
		in, host string
		port     int
		ok       bool
	}{
		{"localhost", "localhost", 0, true},
		{"LOCALHOST:9", "localhost", 9, true},
		{"[::1]:80", "::1", 80, true},
		{"127.0.0.1:1@evil.com", "", 0, false},
		{"evil.com:80@127.0.0.1", "", 0, false},
		{"localhost:80/x", "", 0, false},
		{"", "", 0, false},
	} {
		host, port, err := SplitHostPort(tc.in)
		if (err == nil) != tc.ok || host != tc.host || port != tc.port {
			t.Errorf("SplitHostPort(%q) = %q, %d, %v; want %q, %d, ok %v", tc.in, host, port, err, tc.host, tc.port, tc.ok)
		}
	}
}

// FuzzParse checks Parse against net/url, the parser a lenient check
// would use: whatever Parse accepts has no user information, path, query
// or fragment there either, names the same host and port, and serializes
// to a value that parses back to itself. Loopback origins name loopback
// addresses.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"http://localhost", "http://127.0.0.1:1@evil.com", "https://[::1]:8443",
		"http://evil.com#@127.0.0.1", "HTTP://LOCALHOST:80", "null", "http://[::ffff:7f00:1]", "http://a.b-c_d:65535"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		o, err := Parse(s)
		if err != nil {
			return
		}
		again, err := Parse(o.String())
		if err != nil || again != o {
			t.Fatalf("Parse(%q) = %+v, whose String %q parses as %+v, %v", s, o, o.String(), again, err)
		}
		if o.Null {
			if s != "null" {
				t.Fatalf("Parse(%q) is null", s)
			}
			return
		}
		u, err := url.Parse(s)
		if err != nil {
			t.Fatalf("Parse(%q) accepted what net/url refuses: %v", s, err)
		}
		if u.User != nil || u.Path != "" || u.RawQuery != "" || u.Fragment != "" || u.ForceQuery || u.Opaque != "" {
			t.Fatalf("Parse(%q) accepted a URL with more than an origin: %#v", s, u)
		}
		if !strings.EqualFold(u.Hostname(), o.Host) {
			if a, err := netip.ParseAddr(u.Hostname()); err != nil || a.String() != o.Host {
				t.Fatalf("Parse(%q) host %q, net/url %q", s, o.Host, u.Hostname())
			}
		}
		if p := u.Port(); p != "" && p != strconv.Itoa(o.Port) {
			t.Fatalf("Parse(%q) port %d, net/url %q", s, o.Port, p)
		}
		if o.Loopback() {
			if a, err := netip.ParseAddr(o.Host); o.Host != "localhost" && (err != nil || !a.IsLoopback()) {
				t.Fatalf("Parse(%q) says loopback for host %q", s, o.Host)
			}
		}
	})
}
