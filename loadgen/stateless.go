package loadgen

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
)

// StatelessVersion is the protocol revision without sessions: each request
// carries its version, capabilities and client in _meta, and over HTTP
// mirrors its version, method and name in headers.
const StatelessVersion = "2026-07-28"

// statelessMeta is the _meta of every request of the stateless revision:
// the version, the client's capabilities (none: the bench asks nothing of
// the client) and the client.
func statelessMeta(version string) string {
	v, _ := json.Marshal(version)
	return `{"io.modelcontextprotocol/protocolVersion":` + string(v) +
		`,"io.modelcontextprotocol/clientCapabilities":{}` +
		`,"io.modelcontextprotocol/clientInfo":{"name":"troupe-bench","version":"1"}}`
}

// handshakeVersion reports whether version is one of the revisions that
// begin with initialize (dated before the stateless one; the dates
// compare as strings).
func handshakeVersion(version string) bool { return version < StatelessVersion }

// openStateless prepares the callers' one endpoint for calls without a
// session, in the dialect the server speaks:
//
//   - the stateless revision (opts.ProtocolVersion, StatelessVersion by
//     default): server/discover once, and when the server lists that
//     version, each tools/call carries statelessMeta (meta, to add to the
//     call template) and the headers MCP-Protocol-Version, Mcp-Method and
//     Mcp-Name;
//   - the 2025 revisions' stateless mode (what mcp-go's WithStateLess and
//     go-sdk's Stateless served before 2026-07-28): a tools/call with no
//     session id, no initialize and no _meta, the version header
//     2025-06-18. Chosen when the server answers server/discover with
//     -32601 (method not found) or an HTTP 4xx other than 401 and 403, or
//     without asking when opts.ProtocolVersion is a 2025 revision.
//
// The endpoint's version is the dialect's, for Report.Stateless.
// openStatelessAll calls it for each URL.
func openStateless(ctx context.Context, opts Options, client *http.Client, url string) (s *httpSession, meta string, err error) {
	base := httpSession{client: client, url: url, token: opts.Target.BearerToken}
	older := func(version string) *httpSession {
		s := base
		s.version = version
		return &s
	}
	if handshakeVersion(opts.ProtocolVersion) {
		return older(opts.ProtocolVersion), "", nil
	}
	meta = statelessMeta(opts.ProtocolVersion)
	d := base
	d.version, d.method = opts.ProtocolVersion, "server/discover"
	ctx, cancel := context.WithTimeout(ctx, opts.handshakeTimeout())
	defer cancel()
	resp, err := d.post(ctx, []byte(`{"jsonrpc":"2.0","id":0,"method":"server/discover","params":{"_meta":`+meta+`}}`))
	if err != nil {
		return nil, "", fmt.Errorf("server/discover: %w", err)
	}
	m, err := readAnswer(resp, 0)
	var status *StatusError
	switch {
	case errors.As(err, &status) && status.Code/100 == 4 &&
		status.Code != http.StatusUnauthorized && status.Code != http.StatusForbidden:
		return older(fallbackVersion), "", nil
	case err != nil:
		return nil, "", fmt.Errorf("server/discover: %w", err)
	case m.kind == KindJSONRPC+strconv.Itoa(codeMethodNotFound):
		return older(fallbackVersion), "", nil
	case m.kind != "":
		return nil, "", fmt.Errorf("server/discover failed: %s %s", m.kind, m.errText)
	}
	var res struct {
		SupportedVersions []string `json:"supportedVersions"`
	}
	if err := json.Unmarshal(m.result, &res); err != nil {
		return nil, "", fmt.Errorf("server/discover: the result is not an object with supportedVersions: %w", err)
	}
	if !slices.Contains(res.SupportedVersions, opts.ProtocolVersion) {
		return nil, "", fmt.Errorf("server/discover: the server speaks %s, not %s (--protocol-version)",
			strings.Join(res.SupportedVersions, ", "), opts.ProtocolVersion)
	}
	s = &base
	s.version, s.method, s.name = opts.ProtocolVersion, "tools/call", headerValue(opts.Tool)
	return s, meta, nil
}

// openStatelessAll prepares one stateless endpoint per URL of the target
// (see openStateless), in the order of the URLs. The calls share one
// template, so every URL must speak the same dialect; one that does not
// is an error naming it.
func openStatelessAll(ctx context.Context, opts Options, client *http.Client) ([]*httpSession, string, error) {
	urls := opts.Target.urls()
	var out []*httpSession
	var meta string
	for i, url := range urls {
		s, m, err := openStateless(ctx, opts, client, url)
		if err != nil {
			if len(urls) > 1 {
				err = fmt.Errorf("%s: %w", url, err)
			}
			return nil, "", err
		}
		if i > 0 && s.version != out[0].version {
			return nil, "", fmt.Errorf("%s speaks stateless %s but %s speaks %s: spread stateless calls over servers of one kind",
				url, s.version, urls[0], out[0].version)
		}
		out, meta = append(out, s), m
	}
	return out, meta, nil
}

// fallbackVersion is the Mcp-Protocol-Version of the 2025 stateless calls
// (the revision initialize offers by default).
const fallbackVersion = "2025-06-18"

// codeMethodNotFound is JSON-RPC's "method not found".
const codeMethodNotFound = -32601

// headerValue encodes a value for an MCP header (Mcp-Name) as the
// stateless revision's transport asks: as it is when it is visible ASCII
// with inner spaces only, else "=?base64?…?=" around the base64 of its
// UTF-8; a plain value that looks like that wrapper is wrapped too.
func headerValue(v string) string {
	plain := v != "" && v == strings.TrimSpace(v) &&
		!(strings.HasPrefix(v, "=?base64?") && strings.HasSuffix(v, "?="))
	for i := 0; plain && i < len(v); i++ {
		plain = v[i] >= 0x20 && v[i] <= 0x7e
	}
	if plain {
		return v
	}
	return "=?base64?" + base64.StdEncoding.EncodeToString([]byte(v)) + "?="
}
