package actors

import (
	"encoding/base64"
	"encoding/json"
	"log/slog"
	"strconv"
	"strings"

	"troupe/actors/transport"
	"troupe/instructions"
	"troupe/overrides"
	"troupe/protocol"
	"troupe/spool"
	"troupe/tools"
)

// The handlers of the method table (table.go): plain functions of the
// session's view and the request. Each reads its typed params from the
// request, which the edge decoded once; what only the session may do
// (the handshake's outcome, a call, a subscription) they return as a
// sessionChange (changes.go).

// SessionState is where a session is in its life.
type SessionState uint8

// The states of a session: it awaits initialize (stateless-era requests
// are served meanwhile, as they need none), serves, and drains (refuses
// new requests, finishes its calls, ends). Draining keeps what the
// handshake negotiated, so a call in flight still gets its notices.
const (
	AwaitingInitialize SessionState = iota
	Serving
	Draining
)

// SessionView is what a handler may read of the session serving its
// request. The session implements it; handlers never reach past it.
type SessionView interface {
	// ID is the session's id (logs, observers).
	ID() string
	// State is the session's state.
	State() SessionState
	// Options are the options every session shares.
	Options() *SessionOptions
	// ToolsFor is the tool set the session serves req's caller now: the
	// session's tools, less those the caller's identity is not granted
	// (identity.Grant). A tool outside it is unknown to that caller.
	ToolsFor(req *transport.Request) *tools.Registry
	// Overrides are the working directory and environment the session set
	// for itself at initialize; nil: none.
	Overrides() *tools.Overrides
	// Output is the store the request's calls spool into and its
	// resources are read from (a stateless-era request over HTTP: its
	// caller's, shared reports that); create makes the store when there is
	// none yet, else nil is returned.
	Output(req *transport.Request, create bool) (store *spool.Store, shared bool)
	// Logger is the session's logger.
	Logger() *slog.Logger
	// Observer is told of requests and calls (nil: nobody listens).
	Observer() Observer
}

// The params types the edge decodes into (paramsType).
type (
	initializeParams struct{ protocol.InitializeParams }
	listToolsParams  struct {
		Cursor *string         `json:"cursor"`
		Meta   json.RawMessage `json:"_meta"`
	}
	// callToolParams reads _meta raw (a proxied tool passes it on as it
	// came) and the stateless era's retry members raw: only a
	// stateless-era call reads them (startCall).
	callToolParams struct {
		Name           string          `json:"name"`
		Arguments      json.RawMessage `json:"arguments"`
		Meta           json.RawMessage `json:"_meta"`
		InputResponses json.RawMessage `json:"inputResponses"`
		RequestState   json.RawMessage `json:"requestState"`
	}
	// pageParams is a list's page: the lists of the gateway's methods
	// take the cursor to their servers' pages, which the gateway tool reads
	// from the raw params (Invalid is answered there).
	pageParams struct {
		Cursor *string         `json:"cursor"`
		Meta   json.RawMessage `json:"_meta"`
	}
	// promptsGetParams names the prompt (compared with Mcp-Name); the
	// gateway tool reads the rest.
	promptsGetParams struct {
		Name string          `json:"name"`
		Meta json.RawMessage `json:"_meta"`
	}
	setLevelParams struct {
		Level protocol.LoggingLevel `json:"level"`
		Meta  json.RawMessage       `json:"_meta"`
	}
	readResourceParams struct {
		URI  string          `json:"uri"`
		Meta json.RawMessage `json:"_meta"`
	}
	cancelledParams struct {
		RequestID json.RawMessage `json:"requestId"`
		Reason    string          `json:"reason"`
		Meta      json.RawMessage `json:"_meta"`
	}
	// listenParams is the subscriptions/listen request's filter.
	listenParams struct {
		Notifications *struct {
			ToolsListChanged      bool     `json:"toolsListChanged"`
			PromptsListChanged    bool     `json:"promptsListChanged"`
			ResourcesListChanged  bool     `json:"resourcesListChanged"`
			ResourceSubscriptions []string `json:"resourceSubscriptions"`
		} `json:"notifications"`
		Meta json.RawMessage `json:"_meta"`
	}
)

func (p *initializeParams) rawMeta() json.RawMessage   { return p.Meta }
func (p *listToolsParams) rawMeta() json.RawMessage    { return p.Meta }
func (p *callToolParams) rawMeta() json.RawMessage     { return p.Meta }
func (p *setLevelParams) rawMeta() json.RawMessage     { return p.Meta }
func (p *pageParams) rawMeta() json.RawMessage         { return p.Meta }
func (p *promptsGetParams) rawMeta() json.RawMessage   { return p.Meta }
func (p *readResourceParams) rawMeta() json.RawMessage { return p.Meta }
func (p *cancelledParams) rawMeta() json.RawMessage    { return p.Meta }
func (p *listenParams) rawMeta() json.RawMessage       { return p.Meta }

// initialize answers the handshake: the session takes the negotiated
// version, capabilities and settings (initializing) and then answers.
func initialize(v SessionView, req *transport.Request) (any, error) {
	if v.State() != AwaitingInitialize {
		return nil, &Refusal{Code: protocol.CodeInvalidRequest, Message: "initialize called more than once"}
	}
	if req.Invalid != nil {
		return nil, invalidParams(describeJSONError(req.Invalid))
	}
	p := &req.Params.(*initializeParams).InitializeParams
	if p.ProtocolVersion == "" {
		return nil, invalidParams("protocolVersion is required")
	}
	// The session keeps the client's name (logs, status page) and
	// capabilities for its life: bounded, whatever the message size limit.
	if err := p.CheckSizes(); err != nil {
		return nil, invalidParams(err.Error())
	}
	change := &initializing{requested: p.ProtocolVersion}
	if len(p.Capabilities) > 0 && string(p.Capabilities) != "null" {
		var caps protocol.ClientCapabilities
		if err := json.Unmarshal(p.Capabilities, &caps); err != nil {
			return nil, invalidParams("capabilities must be an object")
		}
		change.caps = caps.Essential()
	}
	if p.ClientInfo != nil {
		change.client = *p.ClientInfo
	}
	opts := v.Options()
	over, err := overrides.Parse(req.Meta, opts.Overrides)
	if err != nil {
		return nil, invalidParams(err.Error())
	}
	change.overrides = over
	change.version = protocol.Negotiate(p.ProtocolVersion)
	info := opts.ServerInfo
	if !change.version.HasTitles() {
		info.Title = ""
	}
	if !change.version.HasIcons() {
		info.Description, info.WebsiteURL = "", ""
	}
	change.result = protocol.InitializeResult{
		ProtocolVersion: change.version,
		Capabilities: protocol.ServerCapabilities{
			Tools:     &protocol.ToolsCapability{ListChanged: true},
			Logging:   &struct{}{},
			Resources: &protocol.ResourcesCapability{},
		},
		ServerInfo:   info,
		Instructions: instructions.For(v.ToolsFor(req), change.client, opts.Instructions, opts.Gate),
	}
	gatewayCapabilities(opts.Gateway, &change.result.Capabilities, false)
	return change, nil
}

func clientInitialized(v SessionView, _ *transport.Request) sessionChange {
	v.Logger().Debug("client initialized")
	return nil
}

func ping(SessionView, *transport.Request) (any, error) { return struct{}{}, nil }

// cursorPrefix versions the opaque tools/list cursor format.
const cursorPrefix = "o1:"

func listTools(v SessionView, req *transport.Request) (any, error) {
	p := req.Params.(*listToolsParams)
	reg := v.ToolsFor(req)
	offset := 0
	if p.Cursor != nil {
		var ok bool
		if offset, ok = parseCursor(*p.Cursor, reg.Len()); !ok {
			return nil, invalidParams("unknown cursor")
		}
	}
	opts := v.Options()
	page, more := reg.Page(offset, opts.PageSize)
	for i := range page {
		page[i] = protocol.ShapeTool(req.Version, page[i])
	}
	res := listToolsResult{ListToolsResult: protocol.ListToolsResult{Tools: page},
		Meta: map[string]any{overrides.MetaKey: overrides.Meta(v.Overrides(), opts.Overrides)}}
	if more {
		res.NextCursor = base64.RawURLEncoding.EncodeToString([]byte(cursorPrefix + strconv.Itoa(offset+len(page))))
	}
	return res, nil
}

// listToolsResult is a tools/list page with troupe's _meta: what the
// session's calls use (SessionMetaKey).
type listToolsResult struct {
	protocol.ListToolsResult
	Meta map[string]any `json:"_meta,omitempty"`
}

func parseCursor(c string, n int) (int, bool) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil || !strings.HasPrefix(string(b), cursorPrefix) {
		return 0, false
	}
	off, err := strconv.Atoi(strings.TrimPrefix(string(b), cursorPrefix))
	if err != nil || off < 0 || off > n {
		return 0, false
	}
	return off, true
}

func setLevel(_ SessionView, req *transport.Request) (any, error) {
	p := req.Params.(*setLevelParams)
	if !p.Level.Valid() {
		return nil, invalidParams("level must be one of debug, info, notice, warning, error, critical, alert, emergency")
	}
	return levelChange(p.Level), nil
}

// callTool reads a tools/call and has the session start it (startingCall).
func callTool(v SessionView, req *transport.Request) (any, error) {
	p := req.Params.(*callToolParams)
	if err := nameAgrees(req, p.Name); err != nil {
		return nil, err
	}
	// _meta stays raw (proxied tools pass it downstream as it came); only
	// its two known members are read.
	var meta protocol.RequestMeta
	switch {
	case len(req.Meta) == 0:
	case req.Meta[0] != '{':
		return nil, invalidParams("_meta must be an object")
	default:
		if err := json.Unmarshal(req.Meta, &meta); err != nil {
			return nil, invalidParams("_meta: " + describeJSONError(err))
		}
	}
	if p.Name == "" {
		return nil, invalidParams("name is required")
	}
	if len(p.Arguments) > 0 && p.Arguments[0] != '{' && string(p.Arguments) != "null" {
		return nil, invalidParams("arguments must be an object")
	}
	return &startingCall{tool: p.Name, args: p.Arguments, meta: meta, registry: v.ToolsFor(req),
		inputResponses: p.InputResponses, requestState: p.RequestState}, nil
}

// callMethod serves a method of SessionOptions.Methods (Codex's former
// management methods) as a call of the tool of that name: the same
// invoker, gate, deadline, cancellation and audit as tools/call, but the
// answer is the tool's structured content, or a JSON-RPC error
// (methodAnswer).
func callMethod(v SessionView, req *transport.Request) (any, error) {
	args := req.RawParams()
	if len(args) > 0 && args[0] != '{' && string(args) != "null" {
		return nil, invalidParams(req.Method + " takes an object")
	}
	return &startingCall{tool: req.Method, args: args, registry: v.Options().Methods, method: true}, nil
}

// nameAgrees checks name, which the handler has just read from the
// request's params (tools/call's name, resources/read's uri), against the
// Mcp-Name header the request came with (stateless era over HTTP): -32020
// when they differ. The HTTP front checks that the header is there and
// well-formed; the comparison is here, after the one decoding of the
// params, so the name checked is the name used.
func nameAgrees(req *transport.Request, name string) error {
	if !req.Named || req.Name == name {
		return nil
	}
	return &Refusal{Code: protocol.CodeHeaderMismatch, Message: protocol.HeaderMismatch("Mcp-Name", req.Name, name)}
}

// discover answers server/discover: the revisions troupe speaks (newest
// first; the handshake ones through initialize), its capabilities and
// instructions for the tools this client would see.
func discover(v SessionView, req *transport.Request) (any, error) {
	opts := v.Options()
	res := protocol.DiscoverResult{
		SupportedVersions: protocol.AllVersions(),
		Capabilities: protocol.ServerCapabilities{
			Tools:     &protocol.ToolsCapability{ListChanged: true}, // through subscriptions/listen
			Logging:   &struct{}{},
			Resources: &protocol.ResourcesCapability{},
		},
		Instructions: instructions.For(v.ToolsFor(req), req.Client, opts.Instructions, opts.Gate),
	}
	gatewayCapabilities(opts.Gateway, &res.Capabilities, true)
	return res, nil
}

// listen opens a subscription (subscribing): troupe offers tools list
// changes, and prompts and resources list changes and the downstream
// servers' resources (resourceSubscriptions) when it has a gateway (its own
// resources are calls' outputs, which do not change).
func listen(v SessionView, req *transport.Request) (any, error) {
	p := req.Params.(*listenParams)
	n := p.Notifications
	gw := v.Options().Gateway != nil
	sub := subscription{tools: n != nil && n.ToolsListChanged,
		prompts: n != nil && n.PromptsListChanged && gw, resources: n != nil && n.ResourcesListChanged && gw}
	if n != nil && gw {
		sub.uris = n.ResourceSubscriptions
	}
	return &subscribing{sub: sub}, nil
}

// cancelled reads notifications/cancelled: the session ends the
// subscription or stops the call it names (cancelling).
func cancelled(v SessionView, req *transport.Request) sessionChange {
	p, _ := req.Params.(*cancelledParams)
	if p == nil || req.Invalid != nil || !req.HasParams() || p.RequestID == nil {
		v.Logger().Debug("ignoring malformed cancellation")
		return nil
	}
	c := &cancelling{reason: p.Reason}
	if err := json.Unmarshal(p.RequestID, &c.id); err != nil {
		return nil
	}
	return c
}
