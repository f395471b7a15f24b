package actors

import (
	"bytes"
	"encoding/json"

	"github.com/sourcegraph/jsonrpc2"

	"troupe/actors/transport"
	"troupe/protocol"
)

// The method table: every MCP method troupe serves is one row, naming the
// eras that serve it, its params' type, its handler and, for the stateless
// era, the cache hint of its result. A request is read once at its
// transport's edge (ReadRequest, which decodes the params into the row's
// type), and the session looks its row up and runs the row's handler
// wrapped in the table's middleware (middleware.go). Adding a method is
// one row here and one handler (handlers.go).
//
// The methods beside MCP (SessionOptions.Methods, Codex's former
// management methods) have no row: they are tools, served by the session
// as calls (session.callMethod) with their raw params as arguments.

// Handler serves one request. It reads what it needs of the session
// through v and never touches the session itself: it returns the result to
// answer with, an error to answer with (a *Refusal for a JSON-RPC error of
// its choosing; any other error is an internal one), or a change only the
// session may make (starting a call, completing the handshake, opening a
// subscription), which the session makes and then answers.
type Handler func(v SessionView, req *transport.Request) (any, error)

// Notifier handles one notification: it answers nothing.
type Notifier func(v SessionView, req *transport.Request) sessionChange

// Middleware wraps the handler of every method with what applies to every
// request (the serving checks, timing, an operator's limits); method is
// the row's name. SessionOptions.Middleware adds to troupe's own, which
// run first.
type Middleware func(method string, next Handler) Handler

// eraSet is the eras a method is served in.
type eraSet uint8

const (
	inHandshake eraSet = 1 << iota
	inStateless
	inBoth = inHandshake | inStateless
)

func (s eraSet) has(e protocol.Era) bool {
	if e == protocol.EraStateless {
		return s&inStateless != 0
	}
	return s&inHandshake != 0
}

// method is one row of the table.
type method struct {
	name string
	eras eraSet
	// needsInit: in the handshake era, only after initialize.
	needsInit bool
	// params makes a value of the method's params type, which the edge
	// decodes the params into; nil reads only their _meta.
	params func() paramsType
	// strict: params that do not decode are refused (-32602); methods
	// that take none ignore what comes.
	strict bool
	// cache is the stateless era's cache hint on the result (ttlMs 0: the
	// tool list can change on a reload).
	cache *protocol.CacheHint
	// isCall: a tools/call, observed by its invocation from start to end.
	isCall bool
	// counted: the request counts against its identity's limits
	// (SessionOptions.Limits, middleware.go's limited).
	counted      bool
	handle       Handler
	notification Notifier
}

// paramsType is a method's params as the edge decodes them: every type
// keeps its _meta raw, which decides the era and, in the stateless era,
// says who the client is.
type paramsType interface{ rawMeta() json.RawMessage }

// methodTable maps method names to rows; it is built once per Host and
// never changed.
type methodTable map[string]*method

var (
	cachePublic  = &protocol.CacheHint{TTLMs: 0, Scope: protocol.CachePublic}
	cachePrivate = &protocol.CacheHint{TTLMs: 0, Scope: protocol.CachePrivate}
)

// newMethodTable builds the table, each handler wrapped in troupe's
// middleware and then in extra (the operator's, outermost last).
func newMethodTable(extra []Middleware) methodTable {
	rows := []*method{
		{name: protocol.MethodInitialize, eras: inHandshake, strict: true,
			params: func() paramsType { return &initializeParams{} }, handle: initialize},
		{name: protocol.MethodPing, eras: inHandshake, handle: ping},
		{name: protocol.MethodToolsList, eras: inBoth, needsInit: true, strict: true, cache: cachePublic,
			params: func() paramsType { return &listToolsParams{} }, handle: listTools},
		{name: protocol.MethodToolsCall, eras: inBoth, needsInit: true, strict: true, isCall: true, counted: true,
			params: func() paramsType { return &callToolParams{} }, handle: callTool},
		{name: protocol.MethodLoggingSetLevel, eras: inHandshake, needsInit: true, strict: true,
			params: func() paramsType { return &setLevelParams{} }, handle: setLevel},
		{name: protocol.MethodResourcesList, eras: inBoth, needsInit: true, cache: cachePrivate,
			params: func() paramsType { return &pageParams{} }, handle: listResources},
		{name: protocol.MethodResourcesRead, eras: inBoth, needsInit: true, strict: true, cache: cachePrivate, counted: true,
			params: func() paramsType { return &readResourceParams{} }, handle: readResource},
		{name: protocol.MethodResourcesTemplatesList, eras: inBoth, needsInit: true, cache: cachePrivate,
			params: func() paramsType { return &pageParams{} }, handle: listResourceTemplates},
		{name: protocol.MethodPromptsList, eras: inBoth, needsInit: true, cache: cachePrivate,
			params: func() paramsType { return &pageParams{} }, handle: gatewayCall},
		{name: protocol.MethodPromptsGet, eras: inBoth, needsInit: true, cache: cachePrivate, counted: true,
			params: func() paramsType { return &promptsGetParams{} }, handle: gatewayCall},
		{name: protocol.MethodCompletionComplete, eras: inBoth, needsInit: true, cache: cachePrivate, counted: true,
			handle: gatewayCall},
		{name: protocol.MethodResourcesSubscribe, eras: inHandshake, needsInit: true, handle: gatewayCall},
		{name: protocol.MethodResourcesUnsubscribe, eras: inHandshake, needsInit: true, handle: gatewayCall},
		{name: protocol.MethodServerDiscover, eras: inStateless, cache: cachePublic, handle: discover},
		{name: protocol.MethodSubscriptionsListen, eras: inStateless, strict: true,
			params: func() paramsType { return &listenParams{} }, handle: listen},
		{name: protocol.NotificationInitialized, eras: inHandshake, notification: clientInitialized},
		{name: protocol.NotificationCancelled, eras: inBoth, params: func() paramsType { return &cancelledParams{} },
			notification: cancelled},
	}
	t := make(methodTable, len(rows))
	for _, m := range rows {
		if m.handle != nil {
			m.handle = wrap(m, m.handle, extra)
		}
		t[m.name] = m
	}
	return t
}

// besideMCP is the row of the methods beside MCP (SessionOptions.Methods):
// calls of the tool each names, after the same checks as tools/call.
func (methodTable) besideMCP(extra []Middleware) *method {
	// They count against the identity's limits as the calls they are
	// (execOneOffCommand is shell.exec's power): no way around them.
	m := &method{name: "", eras: inHandshake, needsInit: true, isCall: true, counted: true}
	m.handle = wrap(m, callMethod, extra)
	return m
}

// served reports whether the table serves name as a request in era.
func (t methodTable) served(name string, era protocol.Era) bool {
	m, ok := t[name]
	return ok && m.handle != nil && m.eras.has(era)
}

// metaOnly is the params of methods that take none: only _meta is read.
type metaOnly struct {
	Meta json.RawMessage `json:"_meta"`
}

func (p *metaOnly) rawMeta() json.RawMessage { return p.Meta }

// ReadRequest reads msg, a request or notification as framing decoded it,
// into the Request the session serves: the one decode of its params (into
// the type the method table names), its era and, in the stateless era,
// what its _meta says of the client. statelessHint says the transport
// already knows the request is of the stateless era (over HTTP, an
// MCP-Protocol-Version header that names a stateless revision). It runs on
// the transport's goroutine, not the session's. The transport then adds
// what only it knows (Request.Credential, Request.Name).
func (h *Host) ReadRequest(msg *jsonrpc2.Request, statelessHint bool) *transport.Request {
	return h.opts.exec.table.read(msg, statelessHint)
}

func (t methodTable) read(msg *jsonrpc2.Request, statelessHint bool) *transport.Request {
	req := transport.NewRequest(msg)
	m := t[msg.Method]
	var p paramsType
	if m != nil && m.params != nil {
		p = m.params()
	} else {
		p = &metaOnly{}
	}
	notObject := false
	if req.HasParams() {
		if raw := req.RawParams(); m == nil && !mentionsVersion(raw) {
			// A method without a row (one beside MCP) whose params name
			// no version: nothing of them is troupe's to read.
		} else if err := req.DecodeParams(p); err != nil {
			req.Invalid = err
			notObject = len(raw) > 0 && raw[0] != '{'
		}
	}
	if m != nil && m.params != nil {
		req.Params = p
	}
	req.Meta = p.rawMeta()
	if len(req.Meta) == 0 || string(req.Meta) == "null" {
		req.Meta = nil
	}
	switch {
	case msg.Method == protocol.MethodInitialize:
		return req // the handshake itself, whatever its _meta says
	case msg.Method == protocol.MethodServerDiscover, statelessHint, protocol.NamesVersion(req.Meta):
		req.Era = protocol.EraStateless
	default:
		return req
	}
	if notObject {
		req.Refused = protocol.ParamsNotObject()
		return req
	}
	sm, refused := protocol.ReadStatelessMeta(req.Meta)
	if refused != nil {
		req.Refused = refused
		if sm != nil {
			req.Version = sm.Version // what it asked for, refused
		}
		return req
	}
	req.Version, req.Caps, req.Client, req.Level = sm.Version, sm.Caps, sm.Client, sm.Level
	return req
}

// mentionsVersion is the cheap test whether raw params may name a
// protocol version in their _meta.
func mentionsVersion(raw json.RawMessage) bool {
	return bytes.Contains(raw, []byte(protocol.MetaProtocolVersion))
}
