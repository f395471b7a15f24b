package app

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"log/slog"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"troupe/actors"
	"troupe/config"
	"troupe/downstream"
	"troupe/identity"
	"troupe/pins"
	"troupe/protocol"
	"troupe/tools"
)

// The gateway: the prompts, completions and resources of the downstream
// servers, served to troupe's clients as the methods of actors'
// SessionOptions.Gateway (tools named after the methods, run as calls:
// audited, measured, traced). Prompts and completions are in
// gateway_prompts.go, resources in gateway_resources.go and
// gateway_subscriptions.go. A merged list asks the servers page by page,
// in name order: its cursor names the server and that server's own
// cursor, so nothing is listed ahead of what the client asks for.

// promptSource is what the gateway asks of one downstream server
// (*downstream.Server).
type promptSource interface {
	ListPrompts(ctx context.Context, cursor string) (downstream.Page, error)
	GetPrompt(ctx context.Context, name string, args json.RawMessage) (json.RawMessage, error)
	Complete(ctx context.Context, params json.RawMessage) (json.RawMessage, error)
	ListResources(ctx context.Context, cursor string) (downstream.Page, error)
	ListResourceTemplates(ctx context.Context, cursor string) (downstream.Page, error)
	ReadResource(ctx context.Context, uri string) (json.RawMessage, error)
}

// gatewayServer is one server as the gateway sees it: its name, the
// prefix its names get ("" keeps its own) and how to reach it.
type gatewayServer struct {
	name, prefix string
	src          promptSource
}

// expose is the name troupe's clients see for the server's name remote.
func (s gatewayServer) expose(remote string) string { return s.prefix + remote }

// owns says whether exposed could be one of the server's names, and which.
func (s gatewayServer) owns(exposed string) (string, bool) {
	if !strings.HasPrefix(exposed, s.prefix) || len(exposed) == len(s.prefix) {
		return "", false
	}
	return exposed[len(s.prefix):], true
}

// maxKnownPrompts bounds the names the gateway remembers per server (to
// route prompts/get and refuse collisions); a server that lists more is
// still served, its further names found by asking.
const maxKnownPrompts = 10000

// gateway serves the gateway methods over the servers servers returns.
type gateway struct {
	servers func() []gatewayServer
	policy  func() tools.Policy
	// resourcePolicy is [resources]: globs over URIs (uriVisible).
	resourcePolicy func() tools.Policy
	log            *slog.Logger
	reg            *tools.Registry
	subs           *subscriptions
	// notices folds floods of the servers' list_changed and
	// resources/updated notifications (see coalescer).
	notices *coalescer
	// reviewPrompts compares a page of a server's prompts with their
	// pins and reports what changed (App.reviewPrompts): the verdicts by
	// the server's names. heldPrompt is why a server's prompt (exposed as
	// exposed, remote on the server) is held, "" when it is not. Nil
	// (tests' gateways): every prompt is trusted.
	reviewPrompts func(ctx context.Context, server string, defs []pins.Def) map[string]pins.Verdict
	heldPrompt    func(ctx context.Context, server, exposed, remote string) string

	mu sync.Mutex
	// known are the exposed prompt names each server listed last (its
	// first page starts it anew), for routing and collisions; uris and
	// templates the same for its resources' URIs and its templates.
	known     map[string]map[string]bool
	uris      map[string]map[string]bool
	templates map[string]map[string]*regexp.Regexp
	// held are the server pages being split, by kind of list (heldPage).
	held map[string]*heldPage
}

// gatewayServers are the running servers for the gateway, in name order.
func (ds *downstreams) gatewayServers() []gatewayServer {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	out := make([]gatewayServer, 0, len(ds.running))
	for _, name := range slices.Sorted(maps.Keys(ds.running)) {
		r := ds.running[name]
		prefix := ""
		if r.opts.Prefix != "" {
			prefix = r.opts.Prefix + r.opts.Separator
		}
		out = append(out, gatewayServer{name: name, prefix: prefix, src: r.d})
	}
	return out
}

// gatewayOffered says cfg configures a downstream server: then sessions
// get the gateway (its methods declared); else the methods do not exist.
func gatewayOffered(cfg *config.Config) bool {
	return cfg.Features.EnableMcpServerSurface && len(cfg.McpServers) > 0
}

// newGateway is the gateway over the servers of the running App. It is
// made whatever the configuration, since a reload may add the first
// server: gatewayOffered says whether sessions get it (App.offerGateway).
func (a *App) newGateway() *gateway {
	g := &gateway{log: a.log, known: map[string]map[string]bool{}, held: map[string]*heldPage{},
		uris: map[string]map[string]bool{}, templates: map[string]map[string]*regexp.Regexp{},
		servers: func() []gatewayServer {
			a.mu.Lock()
			r := a.run
			a.mu.Unlock()
			if r == nil {
				return nil
			}
			return r.ds.gatewayServers()
		},
		policy: func() tools.Policy {
			c := a.config()
			return tools.Policy{Allow: c.Prompts.Allow, Deny: c.Prompts.Deny}
		},
		resourcePolicy: func() tools.Policy {
			c := a.config()
			return tools.Policy{Allow: c.Resources.Allow, Deny: c.Resources.Deny}
		},
	}
	g.reviewPrompts, g.heldPrompt = a.reviewPrompts, a.heldPrompt
	g.notices = newCoalescer(noticeInterval)
	g.subs = &subscriptions{g: g, byURI: map[string]*heldURI{}, watching: map[string]bool{}, notices: g.notices}
	reg, err := tools.NewRegistry(
		gatewayTool{protocol.MethodPromptsList, g.listPrompts},
		gatewayTool{protocol.MethodPromptsGet, g.getPrompt},
		gatewayTool{protocol.MethodCompletionComplete, g.complete},
		gatewayTool{protocol.MethodResourcesList, g.listResources},
		gatewayTool{protocol.MethodResourcesTemplatesList, g.listTemplates},
		gatewayTool{protocol.MethodResourcesRead, g.readResource},
		subscribeTool{method: protocol.MethodResourcesSubscribe, ss: g.subs, serve: g.subs.subscribe},
		subscribeTool{method: protocol.MethodResourcesUnsubscribe, ss: g.subs, serve: g.subs.unsubscribe},
	)
	if err != nil {
		panic(err) // constant names and schemas: a bug
	}
	g.reg = reg
	return g
}

// offerGateway gives the sessions that start from now on the gateway
// when cfg configures a downstream server, and no gateway otherwise: a
// reload that adds the first server declares prompts, completions and
// resources to new sessions without a restart.
func (a *App) offerGateway(host *actors.Host, gw *gateway, cfg *config.Config) {
	if !gatewayOffered(cfg) {
		host.SetGateway(nil)
		return
	}
	if a.obs != nil {
		a.obs.gateway.Store(gw.reg) // metrics label its calls by name
	}
	host.SetGateway(gw.reg)
}

// wait waits for the gateway's background work (unsubscribes after
// sessions' ends).
func (g *gateway) wait() {
	g.subs.work.Wait()
}

// gatewayTool is one gateway method as a tool.
type gatewayTool struct {
	method string
	serve  func(ctx context.Context, params json.RawMessage) (any, error)
}

func (t gatewayTool) Spec() tools.Spec {
	return tools.Spec{Name: actors.GatewayTool(t.method),
		Description:     "Serves " + t.method + " from the downstream servers.",
		InputSchema:     json.RawMessage(`{"type":"object"}`),
		ServerValidates: true, SchemasFixed: true}
}

func (t gatewayTool) Call(ctx context.Context, req *tools.Request) (*protocol.CallToolResult, error) {
	res, err := t.serve(identity.NewContext(ctx, req.Identity), req.Arguments)
	if err != nil {
		return gatewayError(err), nil
	}
	return &protocol.CallToolResult{StructuredContent: res}, nil
}

// gatewayError is the result that answers a gateway method with a
// JSON-RPC error: a server's own error as it sent it, an unknown name as
// invalid params, an unreachable server as internal error.
func gatewayError(err error) *protocol.CallToolResult {
	code, msg := int64(protocol.CodeInternalError), err.Error()
	var data json.RawMessage
	var rpc *downstream.RPCError
	var te *tools.Error
	switch {
	case errors.As(err, &rpc):
		code, msg, data = rpc.Code, rpc.Message, rpc.Data
	case errors.As(err, &te) && te.Kind == tools.KindInvalidArgument:
		code, msg = protocol.CodeInvalidParams, te.Message
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled):
		msg = "the request was stopped before the server answered"
	}
	meta := map[string]string{"kind": string(tools.KindUnavailable), actors.GatewayErrorCode: strconv.FormatInt(code, 10)}
	if len(data) > 0 && json.Valid(data) {
		meta[actors.GatewayErrorData] = string(data)
	}
	return &protocol.CallToolResult{IsError: true,
		Content: []protocol.Content{protocol.TextContent(msg)},
		Meta:    map[string]any{protocol.MetaPrefix + "error": meta}}
}

// listCursor is the opaque cursor of a merged list: the server to ask
// next and its own cursor.
type listCursor struct {
	Server string `json:"s"`
	Cursor string `json:"c,omitempty"`
	// Skip is how many entries of that server page were forwarded
	// already (a page larger than maxListEntries); Pages how many of the
	// server's pages were read before it (maxServerPages).
	Skip  int `json:"k,omitempty"`
	Pages int `json:"p,omitempty"`
}

// maxGatewayPages bounds the server pages one merged list request reads
// while they come back empty (filtered out, or servers without any).
const maxGatewayPages = 20

// maxListEntries bounds the entries of one page troupe forwards: a server
// page that holds more is split over troupe's pages (the cursor names the
// offset into it), so no client gets a page of 100,000 entries at once.
const maxListEntries = 1000

// maxServerPages bounds the pages of one server one merged listing reads
// (over all of the client's requests): a server whose cursors never end
// is cut there, with a warning, and the listing goes on to the next.
const maxServerPages = 1000

// mergedList is one kind of list merged over the servers.
type mergedList struct {
	key  string // the member that holds the entries
	list func(s gatewayServer, ctx context.Context, cursor string) (downstream.Page, error)
	// expose makes a page of s's entries what troupe's clients see.
	expose func(earlier []gatewayServer, s gatewayServer, first bool, items []json.RawMessage) []json.RawMessage
	// byServer: the caller sees the entries only of the servers it may
	// use (resources: usable).
	byServer bool
}

// heldPage is a server page larger than maxListEntries that troupe's
// next pages of a list go on splitting, so the server is not asked for it
// again for each: one per kind of list (the latest split), kept at most
// heldPageTTL.
type heldPage struct {
	server, cursor string
	page           downstream.Page
	until          time.Time
}

// heldPageTTL is how long a split server page is kept for the client's
// next page; later it is asked for again.
const heldPageTTL = 30 * time.Second

// serverPage is s's page at cursor: the held one when troupe is splitting
// it (skip > 0), else asked of the server.
func (g *gateway) serverPage(ctx context.Context, m mergedList, s gatewayServer, cursor string, skip int) (downstream.Page, error) {
	if skip > 0 {
		g.mu.Lock()
		h := g.held[m.key]
		g.mu.Unlock()
		if h != nil && h.server == s.name && h.cursor == cursor && time.Now().Before(h.until) {
			return h.page, nil
		}
	}
	return m.list(s, ctx, cursor)
}

// holdPage keeps page while troupe splits it (split), and lets it go once
// its last part is forwarded.
func (g *gateway) holdPage(key, server, cursor string, page downstream.Page, split bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if split {
		g.held[key] = &heldPage{server: server, cursor: cursor, page: page, until: time.Now().Add(heldPageTTL)}
		return
	}
	if h := g.held[key]; h != nil && h.server == server && h.cursor == cursor {
		delete(g.held, key)
	}
}

// listArgs are the arguments of a merged list's tool: the client's
// cursor, and troupe's own entries (actors adds them to a first page).
type listArgs struct {
	Cursor *string           `json:"cursor"`
	Own    []json.RawMessage `json:"own"`
	// Stateless: the client speaks 2026-07-28, whose lists carry a cache
	// hint (actors sets it).
	Stateless bool `json:"stateless"`
}

// mergedPage is one page of a merged list: troupe's own entries (first
// page only), then the servers' in name order, each page of a server's
// one page of troupe's. The cache hint is the smallest TTL of the parts
// and private when any part is (the session marks the result private
// anyway: a caller's own entries are in it).
func (g *gateway) mergedPage(ctx context.Context, params json.RawMessage, m mergedList) (any, error) {
	var p listArgs
	if err := json.Unmarshal(params, &p); err != nil {
		return nil, tools.Errorf(tools.KindInvalidArgument, "invalid params: %v", err)
	}
	servers := g.servers()
	if m.byServer {
		servers = usableOnly(ctx, servers)
	}
	at, cur, skip, pages := 0, "", 0, 0
	if p.Cursor != nil {
		var c listCursor
		b, err := base64.RawURLEncoding.DecodeString(*p.Cursor)
		if err != nil || json.Unmarshal(b, &c) != nil || c.Skip < 0 || c.Pages < 0 {
			return nil, tools.Errorf(tools.KindInvalidArgument, "unknown cursor")
		}
		at = slices.IndexFunc(servers, func(s gatewayServer) bool { return s.name >= c.Server })
		if at < 0 {
			at = len(servers)
		}
		if at < len(servers) && servers[at].name == c.Server {
			cur, skip, pages = c.Cursor, c.Skip, c.Pages
		}
	}
	items := append([]json.RawMessage{}, p.Own...)
	// The cache hint: the smallest TTL of the parts (a part without one
	// cannot be cached: 0), private when any part is (a caller's own
	// outputs are).
	var ttl *int64
	private := m.key == "resources" && len(p.Own) > 0
	if len(p.Own) > 0 {
		ttl = new(int64)
	}
	for range maxGatewayPages {
		if at >= len(servers) {
			break
		}
		s := servers[at]
		page, err := g.serverPage(ctx, m, s, cur, skip)
		if err != nil {
			if ctx.Err() != nil {
				return nil, err
			}
			// Not connected, or none of these: its part is empty.
			g.log.Debug(m.key+": server skipped", "server", s.name, "err", err)
			page = downstream.Page{}
		}
		part, first := page.Items, cur == "" && skip == 0
		if skip >= len(part) {
			part = nil
		} else {
			part = part[skip:]
		}
		split := len(part) > maxListEntries
		if split {
			part = part[:maxListEntries]
		}
		items = append(items, m.expose(servers[:at], s, first, part)...)
		switch {
		case page.TTLMs == nil:
			ttl = new(int64)
		case ttl == nil || *page.TTLMs < *ttl:
			ttl = page.TTLMs
		}
		private = private || page.Private
		g.holdPage(m.key, s.name, cur, page, split)
		switch {
		case split:
			skip += maxListEntries
		case page.NextCursor != "" && pages+1 >= maxServerPages:
			g.log.Warn(m.key+": the server's list was cut: it has more than the pages troupe reads of one server",
				"server", s.name, "pages", maxServerPages)
			at, cur, skip, pages = at+1, "", 0, 0
		case page.NextCursor != "":
			cur, skip, pages = page.NextCursor, 0, pages+1
		default:
			at, cur, skip, pages = at+1, "", 0, 0
		}
		if len(items) > 0 {
			break
		}
	}
	out := map[string]any{m.key: items}
	if p.Stateless {
		if ttl == nil {
			ttl = new(int64)
		}
		out["ttlMs"], out["cacheScope"] = *ttl, protocol.CachePublic
		if private || callerSpecific(ctx) {
			out["cacheScope"] = protocol.CachePrivate
		}
	}
	if at < len(servers) {
		b, _ := json.Marshal(listCursor{Server: servers[at].name, Cursor: cur, Skip: skip, Pages: pages})
		out["nextCursor"] = base64.RawURLEncoding.EncodeToString(b)
	}
	return out, nil
}
