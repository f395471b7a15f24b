package docs

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"troupe/protocol"
	"troupe/tools"
)

type fetchArgs struct {
	URL      *string  `json:"url"`
	MaxBytes *float64 `json:"maxBytes"`
}

// fetchResult is docs.fetch's structuredContent.
type fetchResult struct {
	URL         string `json:"url"`
	Status      int    `json:"status"`
	ContentType string `json:"contentType"`
	Text        string `json:"text"`
	Truncated   bool   `json:"truncated"`
}

// userAgent is what docs.fetch tells servers it is.
const userAgent = "troupe-docs.fetch/1"

// Call fetches the page. Each call builds its own transport around the
// guard and closes its connections before it returns, so nothing outlives
// the call: no idle connection, no goroutine.
func (t *fetchTool) Call(ctx context.Context, req *tools.Request) (*protocol.CallToolResult, error) {
	var args fetchArgs
	if err := tools.DecodeArgs(Name, req.Arguments, &args); err != nil {
		return nil, err
	}
	if args.URL == nil {
		return nil, tools.Errorf(tools.KindInvalidArgument, "url is required")
	}
	limit, err := tools.IntArg("maxBytes", args.MaxBytes, t.maxBytes, 1, t.maxBytes)
	if err != nil {
		return nil, err
	}
	u, err := t.checkURL(strings.TrimSpace(*args.URL))
	if err != nil {
		return nil, err
	}

	callCtx, cancel := context.WithTimeoutCause(ctx, t.timeout, errTimeout)
	defer cancel()
	deadline, _ := callCtx.Deadline()
	tr := &http.Transport{
		Proxy: nil, // never HTTP_PROXY and friends: they would bypass the guard
		DialContext: func(dctx context.Context, network, address string) (net.Conn, error) {
			// The transport dials with a context that has the request's
			// values but not its deadline; the call's deadline applies.
			dctx, cancel := context.WithDeadline(dctx, deadline)
			defer cancel()
			return t.guard.DialContext(dctx, network, address)
		},
		ForceAttemptHTTP2:      true,
		TLSClientConfig:        t.tlsConfig.Clone(),
		TLSHandshakeTimeout:    10 * time.Second,
		MaxResponseHeaderBytes: 64 << 10,
	}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, CheckRedirect: t.checkRedirect}

	hreq, err := http.NewRequestWithContext(callCtx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, tools.Errorf(tools.KindInvalidArgument, "url %q is not a valid URL", *args.URL)
	}
	hreq.Header.Set("User-Agent", userAgent)
	hreq.Header.Set("Accept", "text/html, application/xhtml+xml, text/plain;q=0.9, application/json;q=0.9, application/xml;q=0.8, text/*;q=0.8, */*;q=0.1")
	resp, err := client.Do(hreq)
	if err != nil {
		return nil, t.failure(ctx, callCtx, u, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden {
		// The page is not public: docs.fetch sends no credential (there
		// is none to configure), and the refusal's body is the site's
		// login page or error, not documentation, so it is not shown.
		return nil, tools.Errorf(tools.KindUnauthenticated,
			"%s answered HTTP %d %s: the page needs a credential, and %s sends none (it reads public pages only); fetch a public page instead",
			pageOf(resp.Request.URL), resp.StatusCode, http.StatusText(resp.StatusCode), Name)
	}

	res, err := t.read(resp, limit)
	if err != nil {
		return nil, t.failure(ctx, callCtx, resp.Request.URL, err)
	}
	return tools.StructuredResult(res)
}

// checkURL parses the URL the model gave and refuses what may not be
// fetched: other schemes, user names and passwords, hosts not on the list.
func (t *fetchTool) checkURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, tools.Errorf(tools.KindInvalidArgument, "url %q is not a valid URL", raw)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, tools.Errorf(tools.KindInvalidArgument,
			"url %q is not an http or https URL; %s only fetches http and https URLs", raw, Name)
	}
	if u.User != nil {
		return nil, tools.Errorf(tools.KindInvalidArgument,
			"url %q has a user name or password in it; %s does not send credentials, so remove them", raw, Name)
	}
	if u.Host == "" || u.Opaque != "" {
		return nil, tools.Errorf(tools.KindInvalidArgument, "url %q has no host; write a full URL such as https://go.dev/doc/", raw)
	}
	canon, err := canonicalHost(u.Hostname())
	if err != nil {
		return nil, tools.Errorf(tools.KindInvalidArgument, "url %q: %v", raw, err)
	}
	if err := t.allow.checkHost(u.Hostname(), canon); err != nil {
		return nil, err
	}
	return u, nil
}

// checkRedirect follows a redirect only to an http or https URL on an
// allowed host, and at most maxRedirects times. Its errors reach Call
// wrapped in a *url.Error.
func (t *fetchTool) checkRedirect(req *http.Request, via []*http.Request) error {
	from := via[len(via)-1].URL
	to := req.URL
	if len(via) > t.maxRedirects {
		if t.maxRedirects == 0 {
			return tools.Errorf(tools.KindUnavailable,
				"%s redirects to %s, and %s follows no redirects here; fetch that URL if it is the page you want", from, to, Name)
		}
		return tools.Errorf(tools.KindUnavailable,
			"%s redirected more than %d times (the last one to %s); %s stops there. Fetch the last URL if it is the page you want",
			via[0].URL, t.maxRedirects, to, Name)
	}
	if to.Scheme != "http" && to.Scheme != "https" {
		return tools.Errorf(tools.KindPermissionDenied, "%s redirects to %q, which is not an http or https URL; %s does not follow it", from, to, Name)
	}
	if to.User != nil {
		return tools.Errorf(tools.KindPermissionDenied, "%s redirects to a URL with a user name or password in it; %s does not follow it", from, Name)
	}
	canon, err := canonicalHost(to.Hostname())
	if err != nil {
		return tools.Errorf(tools.KindPermissionDenied, "%s redirects to a URL whose host is not valid; %s does not follow it", from, Name)
	}
	if err := t.allow.checkHost(to.Hostname(), canon); err != nil {
		te, _ := tools.AsError(err)
		return tools.Errorf(te.Kind, "%s redirects to %s, which %s cannot follow: %s", from, to, Name, te.Message)
	}
	return nil
}

// read turns the response into the result: it refuses content that is not
// text before reading any of it, then reads at most limit bytes (and up to
// three more, to cut at a character boundary and to see whether the body
// goes on).
func (t *fetchTool) read(resp *http.Response, limit int) (*fetchResult, error) {
	res := &fetchResult{URL: resp.Request.URL.String(), Status: resp.StatusCode, ContentType: resp.Header.Get("Content-Type")}
	mediaType, params, err := mime.ParseMediaType(res.ContentType)
	if err != nil && !errors.Is(err, mime.ErrInvalidMediaParameter) {
		mediaType = ""
	}
	kind := classify(mediaType)
	if mediaType != "" && kind == unsupported {
		return nil, unsupportedError(res, mediaType)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, int64(limit+utf8.UTFMax-1)))
	if err != nil {
		return nil, err
	}
	if mediaType == "" {
		// No usable Content-Type: look at the body as a browser would.
		res.ContentType = http.DetectContentType(body)
		mediaType, params, _ = mime.ParseMediaType(res.ContentType)
		if kind = classify(mediaType); kind == unsupported {
			return nil, unsupportedError(res, mediaType)
		}
	}
	enc := textEncoding(kind, body, res.ContentType, params)
	if res.Truncated = len(body) > limit; res.Truncated {
		if enc == nil {
			body = body[:tools.UTF8Cut(body, limit)]
		} else {
			body = body[:limit]
		}
	}
	res.Text = decodeText(body, enc)
	if kind == htmlContent {
		res.Text = htmlText(res.Text)
	}
	return res, nil
}

func unsupportedError(res *fetchResult, mediaType string) error {
	return tools.Errorf(tools.KindInvalidArgument,
		"%s returned content of type %q (status %d), which %s cannot show as text; it handles HTML, plain text, JSON and XML",
		res.URL, mediaType, res.Status, Name)
}

// failure maps an error of the fetch to what the model sees. A *tools.Error
// (from the guard or checkRedirect) passes through. The end of the caller's
// ctx is returned as is; the end of callCtx by the tool's own timeout is
// deadline_exceeded. Connection failures name only the host of u, never an
// address.
func (t *fetchTool) failure(ctx, callCtx context.Context, u *url.URL, err error) error {
	if te, ok := tools.AsError(err); ok {
		return te
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	// The transport's dials run on a context of their own with the call's
	// deadline, which may fire a moment before callCtx's.
	if errors.Is(context.Cause(callCtx), errTimeout) || errors.Is(err, context.DeadlineExceeded) {
		return tools.Errorf(tools.KindDeadlineExceeded, "fetching %s took longer than %v; %s gave up", u, t.timeout, Name)
	}
	host := u.Hostname()
	var (
		dnsErr     *net.DNSError
		certErr    *tls.CertificateVerificationError
		hostErr    x509.HostnameError
		unknownErr x509.UnknownAuthorityError
		recordErr  tls.RecordHeaderError
		netErr     net.Error
	)
	switch {
	case errors.Is(err, errPrivateAddr):
		return privateHostError(host)
	case errors.As(err, &dnsErr) && dnsErr.IsNotFound:
		return tools.Errorf(tools.KindNotFound, "host %s was not found (DNS has no address for it)", host)
	case errors.As(err, &dnsErr):
		return tools.Errorf(tools.KindUnavailable, "could not resolve host %s; DNS did not answer", host)
	case errors.As(err, &certErr), errors.As(err, &hostErr), errors.As(err, &unknownErr):
		return tools.Errorf(tools.KindUnavailable, "the TLS certificate of %s could not be verified; %s does not fetch from it", host, Name)
	case errors.As(err, &recordErr), errors.Is(err, http.ErrSchemeMismatch):
		return tools.Errorf(tools.KindUnavailable, "the TLS handshake with %s failed; the server may not speak https on that port", host)
	case errors.Is(err, syscall.ECONNREFUSED):
		return tools.Errorf(tools.KindUnavailable, "%s refused the connection", host)
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return tools.Errorf(tools.KindUnavailable, "the connection to %s broke off before the response was complete", host)
	case errors.Is(err, syscall.ENETUNREACH), errors.Is(err, syscall.EHOSTUNREACH):
		return tools.Errorf(tools.KindUnavailable, "%s cannot be reached from here (no route)", host)
	case errors.As(err, &netErr) && netErr.Timeout():
		return tools.Errorf(tools.KindUnavailable, "%s did not answer in time", host)
	}
	return tools.Errorf(tools.KindUnavailable, "fetching %s failed: the connection to %s did not work", u, host)
}

// pageOf is u without its query and fragment, for an error: a redirect's
// target may carry a one-time token in its query.
func pageOf(u *url.URL) string {
	return (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}).String()
}
