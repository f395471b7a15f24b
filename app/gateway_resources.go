package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"troupe/downstream"
	"troupe/protocol"
	"troupe/tools"
)

// The downstream servers' resources through the gateway: resources/list
// and resources/templates/list merge troupe's own (actors passes them in)
// with the servers', resources/read goes to the server that listed the URI
// or whose template matches it, else to the servers in name order. A URI
// two servers list is the first's (name order), with a warning. URIs and
// templates are not renamed: a resource's URI is its identity.

// uriVisible says whether [resources] shows uri (a resource's URI or a
// template's uriTemplate). Its globs are path.Match's, except that a *
// spans "/" as well: a URI's slashes are not a path's, and "*" (the
// default) must match "demo://resource/1". Both sides have "/" swapped
// for a byte neither may otherwise hold, which * then matches.
func (g *gateway) uriVisible(uri string) bool {
	if g.resourcePolicy == nil {
		return true
	}
	p := g.resourcePolicy()
	swap := func(xs []string) []string {
		out := make([]string, len(xs))
		for i, x := range xs {
			out[i] = strings.ReplaceAll(x, "/", "\x00")
		}
		return out
	}
	if strings.ContainsRune(uri, 0) {
		return false
	}
	return tools.Policy{Allow: swap(p.Allow), Deny: swap(p.Deny)}.Visible(strings.ReplaceAll(uri, "/", "\x00"))
}

// maxKnownResources bounds the URIs and templates the gateway remembers
// per server for routing.
const maxKnownResources = 10000

func (g *gateway) listResources(ctx context.Context, params json.RawMessage) (any, error) {
	return g.mergedPage(ctx, params, mergedList{key: "resources",
		list: func(s gatewayServer, ctx context.Context, cursor string) (downstream.Page, error) {
			return s.src.ListResources(ctx, cursor)
		},
		expose: g.exposeResources, byServer: true})
}

func (g *gateway) listTemplates(ctx context.Context, params json.RawMessage) (any, error) {
	return g.mergedPage(ctx, params, mergedList{key: "resourceTemplates",
		list: func(s gatewayServer, ctx context.Context, cursor string) (downstream.Page, error) {
			return s.src.ListResourceTemplates(ctx, cursor)
		},
		expose: g.exposeTemplates, byServer: true})
}

// exposeResources keeps a page of s's resources as they are, leaving out
// those whose URI an earlier server listed (with a warning), and
// remembers the URIs for resources/read.
func (g *gateway) exposeResources(earlier []gatewayServer, s gatewayServer, first bool, items []json.RawMessage) []json.RawMessage {
	items = g.visibleOnly(items, "uri")
	g.mu.Lock()
	defer g.mu.Unlock()
	if first || g.uris[s.name] == nil {
		g.uris[s.name] = map[string]bool{}
	}
	known := g.uris[s.name]
	out := make([]json.RawMessage, 0, len(items))
	for _, raw := range items {
		var r struct {
			URI string `json:"uri"`
		}
		if json.Unmarshal(raw, &r) != nil || r.URI == "" {
			g.log.Warn("downstream resource left out: not a resource", "server", s.name)
			continue
		}
		if i := slices.IndexFunc(earlier, func(e gatewayServer) bool { return g.uris[e.name][r.URI] }); i >= 0 {
			g.log.Warn("resource URI collision: the downstream resource is left out", "uri", r.URI,
				"kept", fmt.Sprintf("[mcp_servers.%q]", earlier[i].name), "dropped", fmt.Sprintf("[mcp_servers.%q]", s.name))
			continue
		}
		if len(known) < maxKnownResources {
			known[r.URI] = true
		}
		out = append(out, raw)
	}
	return out
}

// exposeTemplates keeps a page of s's templates as they are and
// remembers them (as patterns) for resources/read.
func (g *gateway) exposeTemplates(_ []gatewayServer, s gatewayServer, first bool, items []json.RawMessage) []json.RawMessage {
	items = g.visibleOnly(items, "uriTemplate")
	g.mu.Lock()
	defer g.mu.Unlock()
	if first || g.templates[s.name] == nil {
		g.templates[s.name] = map[string]*regexp.Regexp{}
	}
	known := g.templates[s.name]
	out := make([]json.RawMessage, 0, len(items))
	for _, raw := range items {
		var t struct {
			URITemplate string `json:"uriTemplate"`
		}
		if json.Unmarshal(raw, &t) != nil || t.URITemplate == "" {
			g.log.Warn("downstream resource template left out: not a template", "server", s.name)
			continue
		}
		if re := templatePattern(t.URITemplate); re != nil && len(known) < maxKnownResources {
			known[t.URITemplate] = re
		}
		out = append(out, raw)
	}
	return out
}

// visibleOnly leaves out the entries whose member key (uri, uriTemplate)
// [resources] hides; an entry without it is left for the caller to judge.
func (g *gateway) visibleOnly(items []json.RawMessage, key string) []json.RawMessage {
	out := items[:0:0]
	for _, raw := range items {
		var e map[string]json.RawMessage
		var uri string
		if json.Unmarshal(raw, &e) == nil && json.Unmarshal(e[key], &uri) == nil && uri != "" && !g.uriVisible(uri) {
			continue
		}
		out = append(out, raw)
	}
	return out
}

// templateExpr is one expression of a URI template ({x}, {+x}, {?x,y}).
var templateExpr = regexp.MustCompile(`\{([+#./;?&]?)[^}]*\}`)

// templatePattern is a regular expression that matches the URIs a URI
// template (RFC 6570) expands to: a simple expression matches one path
// segment, a reserved one ({+x}, {#x}) anything, a query one ({?x}) an
// optional query. nil for what it cannot read.
func templatePattern(tmpl string) *regexp.Regexp {
	var b strings.Builder
	b.WriteString("^")
	last := 0
	for _, m := range templateExpr.FindAllStringSubmatchIndex(tmpl, -1) {
		b.WriteString(regexp.QuoteMeta(tmpl[last:m[0]]))
		switch tmpl[m[2]:m[3]] {
		case "+", "#":
			b.WriteString(".*")
		case "?", "&":
			b.WriteString(`(?:[?&].*)?`)
		default:
			b.WriteString(`[^/?#]*`)
		}
		last = m[1]
	}
	b.WriteString(regexp.QuoteMeta(tmpl[last:]))
	b.WriteString("$")
	re, err := regexp.Compile(b.String())
	if err != nil {
		return nil
	}
	return re
}

// readArgs are the arguments of resources/read's tool: the URI, and
// whether the client speaks 2026-07-28 (actors adds it), whose "not
// found" is -32602 rather than -32002.
type readArgs struct {
	URI       string `json:"uri"`
	Stateless bool   `json:"stateless"`
}

func (g *gateway) readResource(ctx context.Context, params json.RawMessage) (any, error) {
	var p readArgs
	if err := json.Unmarshal(params, &p); err != nil || p.URI == "" {
		return nil, tools.Errorf(tools.KindInvalidArgument, "uri is required")
	}
	if !g.uriVisible(p.URI) {
		return nil, notFound(p.URI, p.Stateless)
	}
	var last error
	for _, s := range usableOnly(ctx, g.readRoute(p.URI)) {
		res, err := readFrom(ctx, s, p.URI)
		if err == nil {
			return withHint(res, p.Stateless), nil
		}
		var rpc *downstream.RPCError
		if ctx.Err() != nil || errors.As(err, &rpc) && !passOn(rpc.Code) {
			return nil, eraError(err, p.Stateless)
		}
		last = err
	}
	var rpc *downstream.RPCError
	if errors.As(last, &rpc) && rpc.Code != protocol.CodeMethodNotFound {
		return nil, eraError(last, p.Stateless)
	}
	return nil, notFound(p.URI, p.Stateless)
}

// notFound is "no such resource" as the client's era says it: -32002, or
// -32602 in 2026-07-28. A resource [resources] hides is answered so too.
func notFound(uri string, stateless bool) error {
	code := int64(protocol.CodeResourceNotFound)
	if stateless {
		code = protocol.CodeInvalidParams
	}
	return &downstream.RPCError{Code: code, Message: "resource not found: " + uri}
}

// cachedReader is a source that tells a read's cache hint
// (*downstream.Server).
type cachedReader interface {
	ReadResourceCached(ctx context.Context, uri string) (downstream.Read, error)
}

// readFrom reads uri at s, with its cache hint when s can tell it.
func readFrom(ctx context.Context, s gatewayServer, uri string) (downstream.Read, error) {
	if c, ok := s.src.(cachedReader); ok {
		return c.ReadResourceCached(ctx, uri)
	}
	res, err := s.src.ReadResource(ctx, uri)
	return downstream.Read{Result: res}, err
}

// withHint is r's result for the client: for a 2026-07-28 client with the
// server's own cache hint when it gave one (else the session marks it
// private, ttl 0: nothing says it may be shared or kept).
func withHint(r downstream.Read, stateless bool) json.RawMessage {
	if !stateless || r.TTLMs == nil {
		return r.Result
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(r.Result, &obj) != nil || obj == nil {
		return r.Result
	}
	scope := protocol.CachePublic
	if r.Private {
		scope = protocol.CachePrivate
	}
	obj["ttlMs"], _ = json.Marshal(*r.TTLMs)
	obj["cacheScope"], _ = json.Marshal(scope)
	out, err := json.Marshal(obj)
	if err != nil {
		return r.Result
	}
	return out
}

// passOn says a server's error means "not mine": the next server is asked.
func passOn(code int64) bool {
	switch code {
	case protocol.CodeResourceNotFound, protocol.CodeInvalidParams, protocol.CodeMethodNotFound:
		return true
	}
	return false
}

// eraError maps a server's "resource not found" (-32002) to -32602 for a
// 2026-07-28 client, which has no -32002.
func eraError(err error, stateless bool) error {
	var rpc *downstream.RPCError
	if stateless && errors.As(err, &rpc) && rpc.Code == protocol.CodeResourceNotFound {
		return &downstream.RPCError{Code: protocol.CodeInvalidParams, Message: rpc.Message, Data: rpc.Data}
	}
	return err
}

// readRoute is the servers to ask for uri, in order: the first that
// listed it; else those with a template that matches it, then the others,
// each in name order.
func (g *gateway) readRoute(uri string) []gatewayServer {
	servers := g.servers()
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, s := range servers {
		if g.uris[s.name][uri] {
			return []gatewayServer{s}
		}
	}
	var matching, others []gatewayServer
	for _, s := range servers {
		matched := false
		for _, re := range g.templates[s.name] {
			if re.MatchString(uri) {
				matched = true
				break
			}
		}
		if matched {
			matching = append(matching, s)
		} else {
			others = append(others, s)
		}
	}
	return append(matching, others...)
}
