package docs_test

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"troupe/tools"
	"troupe/tools/docs"
)

const fmtPage = `<!DOCTYPE html>
<html><head><title>Ignored title</title><style>body { color: red }</style>
<script>var x = "<p>not text</p>";</script></head>
<body>
<nav aria-hidden="true">skip me</nav>
<h1>Package   fmt</h1>
<p>Package fmt implements <a href="/io">formatted I/O</a> with functions
   analogous to C&#39;s printf &amp; scanf.</p>
<p>Caf&eacute; &lt;b&gt; &quot;quoted&quot;&nbsp;here</p>
<script>alert("no")</script>
<noscript>Enable JavaScript</noscript>
<template><p>template</p></template>
<svg><text>svg text</text></svg>
<h2>Index</h2>
<ul><li>func <code>Println</code></li>
<li>func Printf</li></ul>
<ol start="3"><li>three</li><li>four</li></ol>
<pre>func main() {
	fmt.Println("hi")
}</pre>
<table><tr><th>Verb</th><th>Meaning</th></tr><tr><td>%v</td><td>the value</td></tr></table>
<div>one<br>two</div>
<p hidden>hidden</p>
</body></html>`

const fmtText = `Package fmt

Package fmt implements formatted I/O with functions analogous to C's printf & scanf.

Café <b> "quoted" here

Index

- func Println
- func Printf

3. three
4. four

func main() {
	fmt.Println("hi")
}

Verb | Meaning
%v | the value

one
two`

func TestFetchHTML(t *testing.T) {
	w := newWeb(t)
	w.serve(page("text/html; charset=utf-8", fmtPage), "docs.example")
	f := newFetcher(t, w.options("docs.example"))
	ctx := testCtx(t, 10*time.Second)

	r := f.get(ctx, "http://docs.example/pkg/fmt")
	want := result{URL: "http://docs.example/pkg/fmt", Status: 200, ContentType: "text/html; charset=utf-8", Text: fmtText}
	if r != want {
		t.Errorf("got\n%+v\ntext:\n%s\nwant text:\n%s", r, r.Text, fmtText)
	}
	for _, gone := range []string{"Ignored title", "color", "not text", "alert", "Enable JavaScript", "template", "svg text", "skip me", "hidden"} {
		if strings.Contains(r.Text, gone) {
			t.Errorf("text keeps %q", gone)
		}
	}
	// The tool dialled the fake public address, never a name.
	if d := w.dialledAny(); len(d) != 1 || d[0] != "203.0.113.10:80" {
		t.Errorf("dialled %v", d)
	}

	// Calls share nothing and may run at once.
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if r, err := f.fetch(ctx, map[string]any{"url": "http://docs.example/pkg/fmt"}); err != nil || r.Text != fmtText {
				t.Errorf("concurrent call: %v", err)
			}
		})
	}
	wg.Wait()
}

func TestFetchText(t *testing.T) {
	w := newWeb(t)
	mux := http.NewServeMux()
	pages := map[string]struct{ contentType, body string }{
		"/plain":     {"text/plain; charset=utf-8", "line one\n  line two\t<b>kept</b> &amp;\n"},
		"/json":      {"application/json", `{"name": "fmt", "doc": "caf\u00e9"}`},
		"/problem":   {"application/problem+json", `{"title": "nope"}`},
		"/xml":       {"application/xml", `<?xml version="1.0"?><a>b &amp; c</a>`},
		"/md":        {"text/markdown", "# Title\n\n* item\n"},
		"/invalid":   {"text/plain", "ok \xff\xfe end"},
		"/latin1":    {"text/plain; charset=ISO-8859-1", "caf\xe9"},
		"/bom":       {"text/plain", "\uFEFFbom"},
		"/sniffed":   {"", "<!DOCTYPE html><p>no header</p>"},
		"/nohdr":     {"", "just text"},
		"/meta":      {"text/html", `<meta charset="windows-1252"><p>caf` + "\xe9</p>"},
		"/guess":     {"text/html", "<p>caf\xc3\xa9</p>"},
		"/guess1252": {"text/html", "<p>caf\xe9</p>"},
		"/empty":     {"text/plain", ""},
	}
	for path, p := range pages {
		mux.Handle(path, page(p.contentType, p.body))
	}
	w.serve(mux, "docs.example")
	f := newFetcher(t, w.options("docs.example"))
	ctx := testCtx(t, 10*time.Second)

	for path, want := range map[string]struct{ contentType, text string }{
		"/plain":     {"text/plain; charset=utf-8", "line one\n  line two\t<b>kept</b> &amp;\n"},
		"/json":      {"application/json", `{"name": "fmt", "doc": "caf\u00e9"}`},
		"/problem":   {"application/problem+json", `{"title": "nope"}`},
		"/xml":       {"application/xml", `<?xml version="1.0"?><a>b &amp; c</a>`},
		"/md":        {"text/markdown", "# Title\n\n* item\n"},
		"/invalid":   {"text/plain", "ok \uFFFD end"},
		"/latin1":    {"text/plain; charset=ISO-8859-1", "café"},
		"/bom":       {"text/plain", "bom"},
		"/sniffed":   {"text/html; charset=utf-8", "no header"},
		"/nohdr":     {"text/plain; charset=utf-8", "just text"},
		"/meta":      {"text/html", "café"},
		"/guess":     {"text/html", "café"},
		"/guess1252": {"text/html", "café"},
		"/empty":     {"text/plain", ""},
	} {
		r := f.get(ctx, "http://docs.example"+path)
		if r.ContentType != want.contentType || r.Text != want.text || r.Status != 200 || r.Truncated {
			t.Errorf("%s: got %+v, want content type %q and text %q", path, r, want.contentType, want.text)
		}
	}
}

func TestStatusIsAResult(t *testing.T) {
	w := newWeb(t)
	w.serve(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		rw.Header().Set("Content-Type", "text/html")
		rw.WriteHeader(http.StatusNotFound)
		fmt.Fprint(rw, "<h1>Not found</h1><p>No page at "+r.URL.Path+"</p>")
	}), "docs.example")
	f := newFetcher(t, w.options("docs.example"))

	r := f.get(testCtx(t, 10*time.Second), "http://docs.example/missing")
	if r.Status != 404 || r.Text != "Not found\n\nNo page at /missing" {
		t.Errorf("404 page: %+v", r)
	}
}

// A page that needs a credential (401, 403, also after a redirect) is
// unauthenticated: docs.fetch sends none, and the site's refusal page,
// which may echo what it was sent, is not passed on.
func TestCredentialRefusalIsUnauthenticated(t *testing.T) {
	const echoed = "session-cookie-9f3a"
	w := newWeb(t)
	mux := http.NewServeMux()
	mux.HandleFunc("/private", func(rw http.ResponseWriter, r *http.Request) {
		rw.Header().Set("WWW-Authenticate", `Bearer realm="docs"`)
		rw.Header().Set("Content-Type", "text/html")
		rw.WriteHeader(http.StatusUnauthorized)
		fmt.Fprint(rw, "<p>Sign in. You sent "+echoed+"</p>")
	})
	mux.HandleFunc("/staff", func(rw http.ResponseWriter, r *http.Request) {
		rw.WriteHeader(http.StatusForbidden)
		fmt.Fprint(rw, "forbidden: "+echoed)
	})
	mux.Handle("/to-private", http.RedirectHandler("/private?token="+echoed, http.StatusFound))
	w.serve(mux, "docs.example")
	f := newFetcher(t, w.options("docs.example"))
	ctx := testCtx(t, 10*time.Second)

	for path, status := range map[string]string{"/private": "HTTP 401 Unauthorized", "/staff": "HTTP 403 Forbidden",
		"/to-private": "HTTP 401 Unauthorized"} {
		_, err := f.fetch(ctx, map[string]any{"url": "http://docs.example" + path})
		te := wantToolError(t, err, tools.KindUnauthenticated, status, "sends none")
		if te != nil && strings.Contains(te.Message, echoed) {
			t.Errorf("%s: the error passes on the site's answer: %q", path, te.Message)
		}
	}
}

func TestUnsupportedContent(t *testing.T) {
	w := newWeb(t)
	mux := http.NewServeMux()
	mux.Handle("/logo.png", page("image/png", "\x89PNG\r\n\x1a\n...."))
	mux.Handle("/spec.pdf", page("application/pdf", "%PDF-1.7 ..."))
	mux.Handle("/blob", page("application/octet-stream", "\x00\x01\x02"))
	mux.Handle("/unlabelled", page("", "\x00\x01\x02binary"))
	w.serve(mux, "docs.example")
	f := newFetcher(t, w.options("docs.example"))
	ctx := testCtx(t, 10*time.Second)

	for path, typ := range map[string]string{
		"/logo.png": "image/png", "/spec.pdf": "application/pdf",
		"/blob": "application/octet-stream", "/unlabelled": "application/octet-stream",
	} {
		_, err := f.fetch(ctx, map[string]any{"url": "http://docs.example" + path})
		wantToolError(t, err, tools.KindInvalidArgument, `"`+typ+`"`, "cannot show as text")
	}
}

func TestTruncation(t *testing.T) {
	w := newWeb(t)
	big := strings.Repeat("0123456789", 300) // 3000 bytes
	mux := http.NewServeMux()
	mux.Handle("/big", page("text/plain", big))
	mux.Handle("/euro", page("text/plain; charset=utf-8", "ab€cd")) // € is 3 bytes, at 2..4
	mux.Handle("/html", page("text/html", "<p>"+big+"</p><p>after</p>"))
	mux.Handle("/gzip", http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		// A compressed body counts by its decompressed size.
		rw.Header().Set("Content-Type", "text/plain")
		rw.Header().Set("Content-Encoding", "gzip")
		rw.Write(gzipped(t, big))
	}))
	w.serve(mux, "docs.example")
	opts := w.options("docs.example")
	opts.MaxBytes = 2000
	f := newFetcher(t, opts)
	ctx := testCtx(t, 10*time.Second)
	get := func(path string, maxBytes int) result {
		t.Helper()
		args := map[string]any{"url": "http://docs.example" + path}
		if maxBytes > 0 {
			args["maxBytes"] = maxBytes
		}
		r, err := f.fetch(ctx, args)
		if err != nil {
			t.Fatalf("%s, maxBytes %d: %v", path, maxBytes, err)
		}
		return r
	}

	if r := get("/big", 0); r.Text != big[:2000] || !r.Truncated {
		t.Errorf("default limit (Options.MaxBytes): %d bytes, truncated %v", len(r.Text), r.Truncated)
	}
	if r := get("/big", 10); r.Text != "0123456789" || !r.Truncated {
		t.Errorf("maxBytes 10: %+v", r)
	}
	if r := get("/gzip", 100); r.Text != big[:100] || !r.Truncated {
		t.Errorf("gzip, maxBytes 100: %d bytes, truncated %v", len(r.Text), r.Truncated)
	}
	if r := get("/html", 13); r.Text != "0123456789" || !r.Truncated {
		t.Errorf("html, maxBytes 13: %+v", r)
	}
	for limit, want := range map[int]string{2: "ab", 3: "ab", 4: "ab", 5: "ab€", 6: "ab€c", 7: "ab€cd", 2000: "ab€cd"} {
		if r := get("/euro", limit); r.Text != want || r.Truncated != (limit < 7) {
			t.Errorf("maxBytes %d: %q truncated %v, want %q", limit, r.Text, r.Truncated, want)
		}
	}
	// The schema's maximum is Options.MaxBytes.
	_, err := f.fetch(ctx, map[string]any{"url": "http://docs.example/big", "maxBytes": 2001})
	wantToolError(t, err, tools.KindInvalidArgument, "maxBytes")

	// Exactly the limit is not truncated.
	opts.MaxBytes = 3000
	if r := newFetcher(t, opts).get(ctx, "http://docs.example/big"); r.Text != big || r.Truncated {
		t.Errorf("body of exactly MaxBytes: %d bytes, truncated %v", len(r.Text), r.Truncated)
	}
}

func TestURLRefused(t *testing.T) {
	w := newWeb(t)
	w.serve(page("text/plain", "secret"), "docs.example")
	f := newFetcher(t, w.options("docs.example"))
	ctx := testCtx(t, 10*time.Second)

	for url, part := range map[string]string{
		"http://user:pass@docs.example/": "user name or password",
		"https://user@docs.example/":     "user name or password",
		"ftp://docs.example/file":        "not an http or https URL",
		"file:///etc/passwd":             "not an http or https URL",
		"gopher://docs.example/":         "not an http or https URL",
		"javascript:alert(1)":            "not an http or https URL",
		"docs.example/page":              "not an http or https URL",
		"//docs.example/page":            "not an http or https URL",
		"http:///page":                   "has no host",
		"http:docs.example":              "has no host",
		"http://docs.example:port/":      "not a valid URL",
		"http://docs example/":           "not a valid URL",
	} {
		_, err := f.fetch(ctx, map[string]any{"url": url})
		wantToolError(t, err, tools.KindInvalidArgument, part)
	}
	if d := w.dialledAny(); len(d) != 0 {
		t.Errorf("refused URLs were dialled: %v", d)
	}
}

func TestHTTPS(t *testing.T) {
	w := newWeb(t)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		rw.Header().Set("Content-Type", "text/plain")
		fmt.Fprintf(rw, "%s over %s", r.Host, r.Proto)
	}))
	srv.EnableHTTP2 = true
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshake is expected
	srv.StartTLS()
	// httptest's certificate is for example.com; wrong.example gets the
	// same certificate and must fail verification.
	w.add(srv, "example.com", "wrong.example")
	cfg := &tls.Config{RootCAs: srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs}
	tool, err := docs.ToolWithTLS(w.options("example.com", "wrong.example"), cfg)
	if err != nil {
		t.Fatal(err)
	}
	f := registered(t, tool)
	ctx := testCtx(t, 10*time.Second)

	if r := f.get(ctx, "https://example.com/"); r.Text != "example.com over HTTP/2.0" {
		t.Errorf("https: %+v", r)
	}
	_, err = f.fetch(ctx, map[string]any{"url": "https://wrong.example/"})
	wantToolError(t, err, tools.KindUnavailable, "TLS certificate of wrong.example")
	// https to a server that speaks plain http.
	w.serve(page("text/plain", "plain"), "plain.example")
	tool, err = docs.ToolWithTLS(w.options("plain.example"), cfg)
	if err != nil {
		t.Fatal(err)
	}
	_, err = registered(t, tool).fetch(ctx, map[string]any{"url": "https://plain.example/"})
	wantToolError(t, err, tools.KindUnavailable, "TLS handshake with plain.example failed")
}

func TestConnectionErrors(t *testing.T) {
	w := newWeb(t)
	w.resolveTo("down.example", "203.0.113.99") // no server behind it
	f := newFetcher(t, w.options("down.example", "nxdomain.example"))
	ctx := testCtx(t, 10*time.Second)

	_, err := f.fetch(ctx, map[string]any{"url": "http://down.example/"})
	wantToolError(t, err, tools.KindUnavailable, "down.example refused the connection")
	_, err = f.fetch(ctx, map[string]any{"url": "http://nxdomain.example/"})
	wantToolError(t, err, tools.KindNotFound, "nxdomain.example was not found")

	// Of several addresses, the first that answers is used.
	w.serve(page("text/plain", "second address"), "two.example")
	w.resolveTo("two.example", "203.0.113.99", "203.0.113.10") // the server is the first one served
	f = newFetcher(t, w.options("two.example"))
	if r := f.get(ctx, "http://two.example/"); r.Text != "second address" {
		t.Errorf("two addresses: %+v", r)
	}

	// An address that swallows packets gets its share of the time, not
	// all of it: with a 2s timeout and two addresses, one second.
	w.resolveTo("blackhole.example", "203.0.113.200", "203.0.113.10")
	opts := w.options("blackhole.example")
	opts.Timeout = 2 * time.Second
	dial := opts.Dial
	opts.Dial = func(ctx context.Context, network, address string) (net.Conn, error) {
		if address == "203.0.113.200:80" {
			<-ctx.Done()
			return nil, ctx.Err()
		}
		return dial(ctx, network, address)
	}
	start := time.Now()
	if r := newFetcher(t, opts).get(ctx, "http://blackhole.example/"); r.Text != "second address" {
		t.Errorf("after a silent address: %+v", r)
	}
	if d := time.Since(start); d < 900*time.Millisecond || d > 1900*time.Millisecond {
		t.Errorf("the silent address took %v, want about 1s", d)
	}

	// A server that hangs up in the middle of the body.
	w.serve(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		rw.Header().Set("Content-Type", "text/plain")
		rw.Header().Set("Content-Length", "1000")
		rw.Write([]byte("only part"))
		panic(http.ErrAbortHandler)
	}), "broken.example")
	f = newFetcher(t, w.options("broken.example"))
	_, err = f.fetch(ctx, map[string]any{"url": "http://broken.example/"})
	wantToolError(t, err, tools.KindUnavailable, "broken.example broke off")
}

// stall is a handler that sends headers (if headers is true) and then
// waits until the client goes away.
func stall(headers bool) http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if headers {
			rw.Header().Set("Content-Type", "text/plain")
			rw.Write([]byte("a start"))
			rw.(http.Flusher).Flush()
		}
		<-r.Context().Done()
	})
}

func TestTimeout(t *testing.T) {
	w := newWeb(t)
	mux := http.NewServeMux()
	mux.Handle("/no-headers", stall(false))
	mux.Handle("/slow-body", stall(true))
	mux.Handle("/redirect", http.RedirectHandler("/no-headers", http.StatusFound))
	w.serve(mux, "slow.example")
	opts := w.options("slow.example")
	opts.Timeout = 200 * time.Millisecond
	f := newFetcher(t, opts)
	ctx := testCtx(t, 10*time.Second)

	// A host whose address swallows the connection attempt.
	w.resolveTo("hole.example", "203.0.113.200")
	opts.AllowedDomains = append(opts.AllowedDomains, "hole.example")
	dial := opts.Dial
	opts.Dial = func(ctx context.Context, network, address string) (net.Conn, error) {
		if address == "203.0.113.200:80" {
			<-ctx.Done()
			return nil, ctx.Err()
		}
		return dial(ctx, network, address)
	}
	f = newFetcher(t, opts)

	for _, url := range []string{
		"http://slow.example/no-headers", "http://slow.example/slow-body",
		"http://slow.example/redirect", "http://hole.example/",
	} {
		start := time.Now()
		_, err := f.fetch(ctx, map[string]any{"url": url})
		wantToolError(t, err, tools.KindDeadlineExceeded, "took longer than 200ms")
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("%s: gave up after %v", url, d)
		}
	}
}

func TestCancel(t *testing.T) {
	w := newWeb(t)
	w.serve(stall(true), "slow.example")
	f := newFetcher(t, w.options("slow.example"))

	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	start := time.Now()
	_, err := f.fetch(ctx, map[string]any{"url": "http://slow.example/"})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled call returned %v, want context.Canceled", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("cancelled call returned after %v", d)
	}

	// Already cancelled: nothing is dialled.
	w2 := newWeb(t)
	w2.serve(page("text/plain", "x"), "docs.example")
	_, err = newFetcher(t, w2.options("docs.example")).fetch(ctx, map[string]any{"url": "http://docs.example/"})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("call with a cancelled context returned %v", err)
	}
	if d := w2.dialledAny(); len(d) != 0 {
		t.Errorf("call with a cancelled context dialled %v", d)
	}
}

// TestNoProxy checks that proxy settings in the environment are ignored:
// the tool dials the host itself, so a proxy cannot stand in for the
// address check.
func TestNoProxy(t *testing.T) {
	t.Setenv("HTTP_PROXY", "http://203.0.113.250:3128")
	t.Setenv("HTTPS_PROXY", "http://203.0.113.250:3128")
	t.Setenv("NO_PROXY", "")
	w := newWeb(t)
	w.serve(page("text/plain", "direct"), "docs.example")
	f := newFetcher(t, w.options("docs.example"))

	if r := f.get(testCtx(t, 10*time.Second), "http://docs.example/"); r.Text != "direct" {
		t.Errorf("got %+v", r)
	}
	if d := w.dialledAny(); len(d) != 1 || d[0] != "203.0.113.10:80" {
		t.Errorf("dialled %v, want only the host's own address", d)
	}
}

func TestSpec(t *testing.T) {
	tool, err := docs.Tool(docs.Options{AllowedDomains: []string{"go.dev", "*.python.org"}, MaxBytes: 5000})
	if err != nil {
		t.Fatal(err)
	}
	s := tool.Spec()
	if s.Name != "docs.fetch" || s.Title == "" {
		t.Errorf("name %q, title %q", s.Name, s.Title)
	}
	a := s.Annotations
	if a == nil || !*a.ReadOnlyHint || *a.DestructiveHint || !*a.IdempotentHint || !*a.OpenWorldHint {
		t.Errorf("annotations %+v", a)
	}
	for _, part := range []string{"go.dev, *.python.org", "5000", "15s", "at most 5"} {
		if !strings.Contains(s.Description, part) {
			t.Errorf("description does not mention %q: %s", part, s.Description)
		}
	}
	if !strings.Contains(string(s.InputSchema), `"maximum": 5000`) {
		t.Errorf("input schema: %s", s.InputSchema)
	}
	if _, err := tools.NewRegistry(tool); err != nil {
		t.Fatal(err)
	}

	empty, err := docs.Tool(docs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if d := empty.Spec().Description; !strings.Contains(d, "No hosts are allowed") || !strings.Contains(d, "1048576") {
		t.Errorf("description with an empty list: %s", d)
	}
}

func TestInvalidOptions(t *testing.T) {
	for _, opts := range []docs.Options{
		{MaxBytes: -1},
		{Timeout: -time.Second},
		{AllowedDomains: []string{"https://go.dev"}},
	} {
		if _, err := docs.Tool(opts); err == nil {
			t.Errorf("%+v: no error", opts)
		}
	}
}
