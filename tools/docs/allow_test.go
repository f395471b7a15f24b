package docs_test

import (
	"net/http"
	"strconv"
	"testing"
	"time"

	"troupe/tools"
	"troupe/tools/docs"
)

func TestBlockedHost(t *testing.T) {
	w := newWeb(t)
	w.serve(page("text/plain", "secret"), "evil.example", "docs.example")
	ctx := testCtx(t, 10*time.Second)

	f := newFetcher(t, w.options("docs.example", "*.python.org"))
	_, err := f.fetch(ctx, map[string]any{"url": "http://evil.example/page"})
	wantToolError(t, err, tools.KindPermissionDenied,
		`host "evil.example" is not allowed`, "docs.example, *.python.org",
		`add "evil.example" to [docs] allowed_domains in config.toml`)

	// An empty list refuses everything, with the same advice.
	f = newFetcher(t, w.options())
	_, err = f.fetch(ctx, map[string]any{"url": "http://docs.example/"})
	wantToolError(t, err, tools.KindPermissionDenied, `host "docs.example" is not allowed`,
		"may not fetch from any host yet", `add "docs.example" to [docs] allowed_domains in config.toml`)

	// The advice gives the ASCII form of an internationalised name.
	_, err = f.fetch(ctx, map[string]any{"url": "http://Bücher.example/"})
	wantToolError(t, err, tools.KindPermissionDenied, `"Bücher.example" (xn--bcher-kva.example)`,
		`add "xn--bcher-kva.example" to [docs] allowed_domains`)

	if d := w.dialledAny(); len(d) != 0 {
		t.Errorf("refused hosts were dialled: %v", d)
	}
	if len(w.lookups) != 0 {
		t.Errorf("refused hosts were looked up: %v", w.lookups)
	}
}

// TestAllowListRules checks which hosts each kind of entry lets through.
// Every host resolves to a server; only the list decides.
func TestAllowListRules(t *testing.T) {
	w := newWeb(t)
	hosts := []string{
		"go.dev", "tip.go.dev", "go.dev.evil.example", "evilgo.dev",
		"python.org", "docs.python.org", "a.b.python.org", "evilpython.org", "python.org.evil.example",
		"xn--bcher-kva.example", "sub.xn--bcher-kva.example", "203.0.113.7",
	}
	w.serve(page("text/plain", "ok"), hosts...)
	ctx := testCtx(t, 10*time.Second)

	cases := []struct {
		allowed []string
		yes, no []string // URLs
	}{
		{
			[]string{"go.dev"},
			[]string{"http://go.dev/doc/", "http://GO.DEV/", "http://go.dev./x", "http://go.dev:8443/"},
			[]string{"http://tip.go.dev/", "http://go.dev.evil.example/", "http://evilgo.dev/"},
		},
		{
			[]string{"*.python.org"},
			[]string{"http://docs.python.org/3/", "http://A.B.Python.Org./", "http://docs.python.org:8080/"},
			[]string{"http://python.org/", "http://evilpython.org/", "http://python.org.evil.example/"},
		},
		{
			[]string{"python.org", "*.python.org"},
			[]string{"http://python.org/", "http://docs.python.org/"},
			[]string{"http://evilpython.org/"},
		},
		{
			// Entries are normalised the same way: case, trailing dot, IDNA.
			[]string{"GO.DEV.", "bücher.example"},
			[]string{"http://go.dev/", "http://xn--bcher-kva.example/", "http://BÜCHER.example/"},
			[]string{"http://sub.xn--bcher-kva.example/"},
		},
		{
			[]string{"*.xn--bcher-kva.example"},
			[]string{"http://sub.bücher.example/"},
			[]string{"http://bücher.example/"},
		},
		{
			// An IP address only matches exactly; it is public here.
			[]string{"203.0.113.7"},
			[]string{"http://203.0.113.7/"},
			[]string{"http://docs.python.org/"},
		},
	}
	for _, c := range cases {
		f := newFetcher(t, w.options(c.allowed...))
		for _, u := range c.yes {
			if r, err := f.fetch(ctx, map[string]any{"url": u}); err != nil || r.Text != "ok" {
				t.Errorf("allow-list %q: %s: %+v, %v", c.allowed, u, r, err)
			}
		}
		for _, u := range c.no {
			_, err := f.fetch(ctx, map[string]any{"url": u})
			if te, ok := tools.AsError(err); !ok || te.Kind != tools.KindPermissionDenied {
				t.Errorf("allow-list %q: %s: got %v, want permission_denied", c.allowed, u, err)
			}
		}
	}
}

func TestInvalidAllowList(t *testing.T) {
	for _, entry := range []string{
		"", "*", "*.", "**.go.dev", "docs.*.org", "go.*", "http://go.dev", "go.dev/doc",
		"go.dev:443", "user@go.dev", "*.203.0.113.7", "go..dev", ".go.dev", "go dev",
	} {
		if _, err := docs.Tool(docs.Options{AllowedDomains: []string{"go.dev", entry}}); err == nil {
			t.Errorf("entry %q: no error", entry)
		}
	}
	for _, entry := range []string{"go.dev", " go.dev ", "*.go.dev", "bücher.example", "my_host.example", "::1", "[2001:db8::1]"} {
		if _, err := docs.Tool(docs.Options{AllowedDomains: []string{entry}}); err != nil {
			t.Errorf("entry %q: %v", entry, err)
		}
	}
}

func TestRedirects(t *testing.T) {
	w := newWeb(t)
	mux := http.NewServeMux()
	mux.Handle("/final", page("text/plain", "final page"))
	mux.Handle("/to-final", http.RedirectHandler("/final", http.StatusMovedPermanently))
	mux.Handle("/to-other", http.RedirectHandler("http://other.example/landing", http.StatusFound))
	mux.Handle("/to-evil", http.RedirectHandler("http://evil.example/steal", http.StatusFound))
	mux.Handle("/to-private", http.RedirectHandler("http://internal.example/", http.StatusFound))
	mux.Handle("/to-metadata", http.RedirectHandler("http://169.254.169.254/latest/meta-data/", http.StatusFound))
	mux.Handle("/to-ftp", http.RedirectHandler("ftp://docs.example/file", http.StatusFound))
	mux.Handle("/to-userinfo", http.RedirectHandler("http://user:pw@docs.example/final", http.StatusFound))
	mux.HandleFunc("/chain/{n}", func(rw http.ResponseWriter, r *http.Request) {
		n, err := strconv.Atoi(r.PathValue("n"))
		if err != nil || n == 0 {
			page("text/plain", "end of chain").ServeHTTP(rw, r)
			return
		}
		http.Redirect(rw, r, "/chain/"+strconv.Itoa(n-1), http.StatusFound)
	})
	w.serve(mux, "docs.example")
	w.serve(page("text/plain", "other landing"), "other.example")
	w.serve(page("text/plain", "stolen"), "evil.example")
	w.resolveTo("internal.example", "10.0.0.1")
	opts := w.options("docs.example", "other.example", "internal.example", "169.254.169.254")
	opts.MaxRedirects = 3
	f := newFetcher(t, opts)
	ctx := testCtx(t, 10*time.Second)

	if r := f.get(ctx, "http://docs.example/to-final"); r.URL != "http://docs.example/final" || r.Text != "final page" {
		t.Errorf("same host: %+v", r)
	}
	if r := f.get(ctx, "http://docs.example/to-other"); r.URL != "http://other.example/landing" || r.Text != "other landing" {
		t.Errorf("other allowed host: %+v", r)
	}
	if r := f.get(ctx, "http://docs.example/chain/3"); r.URL != "http://docs.example/chain/0" || r.Text != "end of chain" {
		t.Errorf("MaxRedirects redirects: %+v", r)
	}

	_, err := f.fetch(ctx, map[string]any{"url": "http://docs.example/to-evil"})
	wantToolError(t, err, tools.KindPermissionDenied, "redirects to http://evil.example/steal",
		`host "evil.example" is not allowed`, `add "evil.example" to [docs] allowed_domains in config.toml`)
	_, err = f.fetch(ctx, map[string]any{"url": "http://docs.example/to-private"})
	wantToolError(t, err, tools.KindPermissionDenied, "internal.example resolves to a private or local address")
	_, err = f.fetch(ctx, map[string]any{"url": "http://docs.example/to-metadata"})
	wantToolError(t, err, tools.KindPermissionDenied, "169.254.169.254 resolves to a private or local address")
	_, err = f.fetch(ctx, map[string]any{"url": "http://docs.example/to-ftp"})
	wantToolError(t, err, tools.KindPermissionDenied, "not an http or https URL")
	_, err = f.fetch(ctx, map[string]any{"url": "http://docs.example/to-userinfo"})
	wantToolError(t, err, tools.KindPermissionDenied, "user name or password")
	_, err = f.fetch(ctx, map[string]any{"url": "http://docs.example/chain/4"})
	wantToolError(t, err, tools.KindUnavailable, "redirected more than 3 times", "http://docs.example/chain/0")

	for _, d := range w.dialledAny() {
		if d != "203.0.113.10:80" && d != "203.0.113.11:80" {
			t.Errorf("dialled %s: only docs.example and other.example may be", d)
		}
	}

	// With redirects off, the first one is an error that says where it leads.
	opts.MaxRedirects = -1
	_, err = newFetcher(t, opts).fetch(ctx, map[string]any{"url": "http://docs.example/to-final"})
	wantToolError(t, err, tools.KindUnavailable, "redirects to http://docs.example/final", "follows no redirects")
}
