package docs

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"troupe/protocol"
	"troupe/tools"
)

// Name is the tool's name, as clients see it in tools/list.
const Name = "docs.fetch"

// The defaults Options falls back to.
const (
	DefaultMaxBytes     = 1 << 20 // 1 MiB
	DefaultTimeout      = 15 * time.Second
	DefaultMaxRedirects = 5
)

// Options configures the tool Tool builds.
type Options struct {
	// AllowedDomains are the hosts docs.fetch may fetch from. An entry is
	// either a host name, which allows exactly that host ("go.dev" allows
	// go.dev but not tip.go.dev), or "*." and a domain, which allows every
	// host below that domain at any depth but not the domain itself
	// ("*.python.org" allows docs.python.org and a.b.python.org, not
	// python.org; list both to allow both). Matching ignores case and a
	// trailing dot, and compares the ASCII (punycode) form of
	// internationalised names, so "bücher.example" and
	// "xn--bcher-kva.example" are the same entry. An IP address is allowed
	// only as an exact entry, and still only if it is public. Empty means
	// every URL is refused.
	AllowedDomains []string
	// MaxBytes is the most a call reads of a response body (after any
	// Content-Encoding is undone): the default and the maximum of the
	// maxBytes argument. 0 means DefaultMaxBytes.
	MaxBytes int
	// Timeout bounds a whole call: resolving, connecting, every redirect
	// and reading the body. 0 means DefaultTimeout.
	Timeout time.Duration
	// MaxRedirects is how many redirects a call follows. 0 means
	// DefaultMaxRedirects; a negative value means none.
	MaxRedirects int
	// Resolver resolves host names; nil means net.DefaultResolver. Every
	// address it returns is checked before anything is dialled.
	Resolver Resolver
	// Dial connects to an address the tool has already checked: an IP
	// address that is public, and a port. nil means a net.Dialer whose
	// Control function checks the connecting address once more. Tests set
	// it to reach local servers through public-looking addresses; see the
	// package documentation.
	Dial DialFunc
}

// Resolver looks up a host's addresses. *net.Resolver is one.
type Resolver interface {
	LookupIPAddr(ctx context.Context, host string) ([]net.IPAddr, error)
}

// DialFunc connects to address ("ip:port") over network ("tcp").
// (*net.Dialer).DialContext is one.
type DialFunc func(ctx context.Context, network, address string) (net.Conn, error)

// Tool returns docs.fetch configured by opts, or an error naming the first
// allow-list entry that is not a host name or "*." pattern, or a negative
// limit.
func Tool(opts Options) (tools.Tool, error) {
	return newFetchTool(opts)
}

// fetchTool is docs.fetch.
type fetchTool struct {
	allow        *allowList
	maxBytes     int
	timeout      time.Duration
	maxRedirects int
	guard        *guard
	// tlsConfig is the client TLS configuration; nil means the system
	// roots. Only the package's tests set it (export_test.go).
	tlsConfig *tls.Config
	spec      tools.Spec
}

func newFetchTool(opts Options) (*fetchTool, error) {
	allow, err := newAllowList(opts.AllowedDomains)
	if err != nil {
		return nil, err
	}
	t := &fetchTool{
		allow:        allow,
		maxBytes:     opts.MaxBytes,
		timeout:      opts.Timeout,
		maxRedirects: opts.MaxRedirects,
	}
	switch {
	case t.maxBytes < 0:
		return nil, fmt.Errorf("docs: MaxBytes is %d; it must be positive, or 0 for the default", t.maxBytes)
	case t.maxBytes == 0:
		t.maxBytes = DefaultMaxBytes
	}
	switch {
	case t.timeout < 0:
		return nil, fmt.Errorf("docs: Timeout is %v; it must be positive, or 0 for the default", t.timeout)
	case t.timeout == 0:
		t.timeout = DefaultTimeout
	}
	switch {
	case t.maxRedirects < 0:
		t.maxRedirects = 0
	case t.maxRedirects == 0:
		t.maxRedirects = DefaultMaxRedirects
	}
	var resolver Resolver = net.DefaultResolver
	if opts.Resolver != nil {
		resolver = opts.Resolver
	}
	dial := opts.Dial
	if dial == nil {
		dial = defaultDial
	}
	t.guard = &guard{allow: allow, resolver: resolver, dial: dial}
	t.spec = t.buildSpec()
	return t, nil
}

// Spec describes docs.fetch.
func (t *fetchTool) Spec() tools.Spec { return t.spec }

const inputSchema = `{
  "type": "object",
  "properties": {
    "url": {
      "type": "string",
      "minLength": 1,
      "maxLength": 8192,
      "description": "The http or https URL of the page to fetch. Its host must be on the allow-list given in the tool description."
    },
    "maxBytes": {
      "type": "integer",
      "minimum": 1,
      "maximum": %[1]d,
      "default": %[1]d,
      "description": "Read at most this many bytes of the response body."
    }
  },
  "required": ["url"],
  "additionalProperties": false
}`

const outputSchema = `{
  "type": "object",
  "properties": {
    "url": {"type": "string", "description": "The URL the text came from, after redirects."},
    "status": {"type": "integer", "description": "The HTTP status code, as the server sent it."},
    "contentType": {"type": "string", "description": "The Content-Type header, or the detected type when the server sent none."},
    "text": {"type": "string", "description": "The body as text; HTML reduced to readable text."},
    "truncated": {"type": "boolean", "description": "Whether the body was longer than maxBytes."}
  },
  "required": ["url", "status", "contentType", "text", "truncated"],
  "additionalProperties": false
}`

func (t *fetchTool) buildSpec() tools.Spec {
	yes, no := true, false
	return tools.Spec{
		Name:         Name,
		Title:        "Fetch documentation page",
		Description:  t.description(),
		InputSchema:  json.RawMessage(fmt.Sprintf(inputSchema, t.maxBytes)),
		SchemasFixed: true, // constants; CheckSchemas in the tests
		OutputSchema: json.RawMessage(outputSchema),
		Annotations: &protocol.ToolAnnotations{
			Title:           "Fetch documentation page",
			ReadOnlyHint:    &yes,
			DestructiveHint: &no,
			IdempotentHint:  &yes,
			OpenWorldHint:   &yes, // it reaches the internet
		},
	}
}

// description is what the model reads about the tool: what it may fetch
// and what it gets back.
func (t *fetchTool) description() string {
	var b strings.Builder
	b.WriteString("Fetch a documentation page from the web by URL and return it as text. ")
	if t.allow.empty() {
		b.WriteString("No hosts are allowed at the moment: every URL is refused until an operator adds domains to [docs] allowed_domains in config.toml. ")
	} else {
		fmt.Fprintf(&b, "Only http and https URLs on these hosts can be fetched: %s", t.allow)
		if t.allow.hasWildcard() {
			b.WriteString(` ("*.example.org" means any subdomain of example.org, not example.org itself)`)
		}
		b.WriteString("; other hosts are refused. ")
	}
	if t.maxRedirects > 0 {
		fmt.Fprintf(&b, "Redirects are followed, at most %d, and only to allowed hosts. ", t.maxRedirects)
	} else {
		b.WriteString("Redirects are not followed. ")
	}
	fmt.Fprintf(&b, "HTML is reduced to readable text: scripts, styles and markup are dropped, headings, paragraphs and list items become lines, and code blocks keep their layout. "+
		"Plain text, JSON and XML are returned as they are; images, PDFs and other binary content are refused. "+
		"At most maxBytes bytes of the body are read (default and maximum %d); truncated tells whether there was more. "+
		"The status code is returned as is: an error page such as a 404 is a result, not an error. "+
		"Hosts that resolve to private, loopback or link-local addresses are refused. "+
		"A fetch must finish within %v.", t.maxBytes, t.timeout)
	return b.String()
}

// errTimeout is the cause of a call's context when Options.Timeout ends it.
var errTimeout = errors.New("docs.fetch timeout")
