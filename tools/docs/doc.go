// Package docs holds docs.fetch, troupe's tool for reading documentation
// on the web: it fetches a page from an allow-listed host and returns it as
// text a model can read.
//
// # Using the tool
//
// Build it with the hosts it may reach and register it:
//
//	fetch, err := docs.Tool(docs.Options{
//		AllowedDomains: []string{"go.dev", "pkg.go.dev", "*.python.org"},
//	})
//	if err != nil {
//		return err // an allow-list entry that is not a host name
//	}
//	reg, err := tools.NewRegistry(fetch)
//
// A call takes a url and an optional maxBytes and returns the final URL
// (after redirects), the status code, the Content-Type, the text and
// whether the body was truncated. A 404 page is a result like any other;
// the status says what it is.
//
// # What may be fetched
//
// Only http and https URLs without a user name or password, whose host is
// on Options.AllowedDomains. An entry is a host name, allowing exactly that
// host, or "*." and a domain, allowing every host below the domain but not
// the domain itself: "*.python.org" allows docs.python.org, not
// python.org. Hosts are compared in lower case, without a trailing dot, in
// their ASCII (punycode) form. Every other host, and every URL when the
// list is empty, is refused with a permission_denied error that names the
// host and says how to allow it:
//
//	add "example.org" to [docs] allowed_domains in config.toml
//
// Redirects are followed, at most Options.MaxRedirects times, and only to
// http and https URLs on allowed hosts; a redirect elsewhere is refused
// with the same kind of message, naming the host it led to.
//
// # Private addresses (SSRF)
//
// An allowed name is not enough: a host that resolves to a loopback,
// private (RFC 1918, fc00::/7), link-local (169.254.0.0/16 with the cloud
// metadata address 169.254.169.254, fe80::/10), unspecified, multicast,
// carrier-grade NAT (100.64.0.0/10) or otherwise reserved address, or to
// an IPv4-mapped, NAT64 or 6to4 form of one, is refused with
// permission_denied, so the tool cannot be turned against the machine it
// runs on or the network around it. The check is on the addresses actually
// dialled, not on the name: the tool's HTTP transport dials only through
// a guard that resolves the host itself (Options.Resolver), refuses it if
// any of its addresses is not public, and hands the checked IP address,
// never the name, to Options.Dial. The default Dial checks once more, in
// its Control function, the address the socket connects to. Connections
// never go through a proxy, so HTTP_PROXY cannot route around the check.
// The documentation ranges (192.0.2.0/24, 198.51.100.0/24, 203.0.113.0/24,
// 2001:db8::/32) count as public: nothing is routed to them.
//
// # Testing without the internet
//
// The same seam lets tests serve pages from local servers while the
// address check runs as in production. The test's Resolver answers names
// with documentation addresses such as 203.0.113.10, which pass the check,
// and its Dial connects those addresses to httptest servers on 127.0.0.1.
// A name the test resolves to 127.0.0.1 is refused before Dial is called,
// exactly as in production; there is no switch that turns the check off.
// The package example shows the whole arrangement.
//
// # Text
//
// The Content-Type decides, before any of the body is read:
//
//   - text/html and application/xhtml+xml are reduced to readable text: the
//     head, scripts, styles, noscript, templates, SVG, embedded objects and
//     elements marked hidden are dropped; headings, paragraphs, list items,
//     table rows and other block elements become lines (paragraphs,
//     headings, lists, tables and code blocks set apart by a blank line);
//     list items start with "- " or their number; table cells are separated
//     by " | "; whitespace collapses except inside <pre>, so code samples
//     keep their layout; links keep their text; entities are decoded.
//   - Other text/* types, JSON, XML (and +json, +xml types), JavaScript,
//     YAML and TOML are returned as they are.
//   - Anything else (images, PDFs, archives, octet streams) is refused with
//     an invalid_argument error naming the type. When the server sends no
//     Content-Type, the type is detected from the body as browsers do
//     (http.DetectContentType) and reported in contentType.
//
// Text is always valid UTF-8. The charset is honoured for every encoding
// the WHATWG Encoding Standard names (golang.org/x/net/html/charset): from
// the header, or for HTML from a byte order mark or a <meta> tag; HTML
// that declares nothing is UTF-8 if it is valid UTF-8 and windows-1252
// otherwise, other text is UTF-8. Bytes that do not decode become U+FFFD.
//
// # Limits
//
// At most maxBytes bytes of the body are read (the argument's default and
// maximum is Options.MaxBytes, 1 MiB by default), counted after any
// Content-Encoding such as gzip is undone, so a compressed bomb reads no
// more than that. truncated tells whether the body went on. A UTF-8 body is
// cut at a character boundary, so up to three bytes fewer may be used.
//
// Options.Timeout (15 s by default) bounds the whole call: resolving,
// connecting, TLS, every redirect and reading the body. Running out of it
// is deadline_exceeded. When the caller's context ends (the client
// cancelled the call), the fetch stops at once and Call returns the
// context's error. Connection failures are unavailable, with a message
// that names the host and the kind of failure but no address; a host DNS
// does not know is not_found.
//
// Each call builds its own transport and closes its connections before it
// returns: nothing (connection, goroutine) outlives a call, and calls share
// no state.
package docs
