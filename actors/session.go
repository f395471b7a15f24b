package actors

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/sourcegraph/jsonrpc2"
	"golang.org/x/time/rate"

	"troupe/actors/transport"
	"troupe/gate"
	"troupe/gate/approvalstate"
	"troupe/instructions"
	"troupe/overrides"
	"troupe/protocol"
	"troupe/spool"
	"troupe/tools"
)

// SessionOptions configure every session a Host creates. The zero value of
// each limit means its default.
type SessionOptions struct {
	ServerInfo protocol.Implementation
	// Instructions is the operator's own text for initialize's
	// instructions. Each session gets instructions generated from the
	// tools it sees, named as its client shows them, with this text
	// appended as a paragraph of its own ("" adds nothing).
	Instructions string
	Registry     *tools.Registry
	// PageSize is the number of tools per tools/list page (default 100).
	PageSize int
	// MaxInFlight bounds concurrent tools/call requests per session
	// (default 64); more are refused with CodeServerBusy.
	MaxInFlight int
	// CallTimeout is the server-side deadline of one tool call (default 120 s).
	CallTimeout time.Duration
	// DefaultLogLevel is the notifications/message threshold until the
	// client calls logging/setLevel (default warning).
	DefaultLogLevel protocol.LoggingLevel
	// LogRate bounds notifications/message per second (default 50, burst 100).
	LogRate rate.Limit
	// Gate is the operator's approval policy (timeout, trusted tools).
	Gate gate.Policy
	// Approvals seals the requestState of approvals asked of 2026-07-28
	// clients (multi round-trip requests); nil refuses those calls.
	Approvals *approvalstate.Sealer
	// SpoolDir is where sessions keep their calls' full output ("" = the
	// system temp directory); each session has its own directory in it,
	// removed when the session ends.
	SpoolDir string
	// Spool bounds the output a session keeps.
	Spool spool.Limits
	// Overrides is what a client may set for its own session (working
	// directory, environment) in initialize's _meta; nothing by default.
	Overrides overrides.Policy
	// Methods are JSON-RPC methods served beside MCP on the session's
	// connection (Codex's former management methods): each is the tool
	// whose name is the method, called with the request's params as its
	// arguments, behind the same gate, deadline and audit as tools/call,
	// and answered with its structured content (methodAnswer). They are
	// never listed by tools/list nor callable through tools/call. nil
	// serves none.
	Methods *tools.Registry
	// MethodTools names, for each method of Methods, the tools whose power
	// it has (execOneOffCommand shell.exec's, Codex's methods codex's and
	// codex-reply's). A method is served only while the session's tool
	// set (Registry, as Host.SetRegistry changes it on a reload) has every
	// one of them, so what hides a tool (tools.allow and tools.deny, a
	// disabled [codex] or [shell]) hides its methods too; otherwise the
	// method is not found (-32601) and nothing starts. A method it does
	// not name is never served.
	MethodTools map[string][]string

	// callers keeps the output of 2026-07-28 HTTP requests per caller
	// (stateless_store.go); set by NewHost.
	callers *callerStores
}

func (o SessionOptions) withDefaults() SessionOptions {
	if o.PageSize <= 0 {
		o.PageSize = 100
	}
	if o.MaxInFlight <= 0 {
		o.MaxInFlight = 64
	}
	if o.CallTimeout <= 0 {
		o.CallTimeout = 120 * time.Second
	}
	if !o.DefaultLogLevel.Valid() {
		o.DefaultLogLevel = protocol.LevelWarning
	}
	if o.LogRate <= 0 {
		o.LogRate = 50
	}
	return o
}

// Drain asks a session to finish: refuse new requests, let calls in flight
// complete within Grace, then stop what is left and end.
type Drain struct{ Grace time.Duration }

// callFinished is an invocation's answer, sent to its session.
type callFinished struct {
	id     jsonrpc2.ID
	from   *actor.PID // the invocation: a reused id may name a newer call
	result *protocol.CallToolResult
	// input, when set, is the answer instead of result: a 2026-07-28
	// MRTR round's input_required result.
	input *protocol.InputRequiredResult
	// refused, when set, is the answer instead of result: a JSON-RPC
	// error (a refused MRTR round, or a state over its bound).
	refused *jsonrpc2.Error
	// reusable: the invoker can run the session's next call (its tool
	// has returned); else the session stops it.
	reusable bool
}

// invocationGone is the session's note to itself that an invocation has
// stopped, queued behind whatever that invocation sent before stopping.
type invocationGone struct {
	quiet
	pid *actor.PID
}

// drainDeadline fires when a draining session's grace period is over.
type drainDeadline struct{ quiet }

type phase uint8

const (
	awaitingInitialize phase = iota
	initialized
)

// session is the MCP session actor: it owns everything the protocol says
// about one client (negotiated revision, capabilities, log level) and the
// table of calls in flight, keyed by request id.
type session struct {
	opts        *SessionOptions
	httpOwner   *[32]byte       // HTTP: the credential the request came with (zero without auth); nil on stdio
	registry    *tools.Registry // the tools this session sees now; calls keep the one they started with
	log         *slog.Logger
	id          string
	version     protocol.Version
	caps        protocol.ClientCapabilities
	relay       relay     // which notices reach the client: log level, rate limit, progress (relay.go)
	calls       callTable // calls in flight and the invokers that run them (calltable.go)
	phase       phase     // packed with the flags below: an idle session is one size class smaller
	draining    bool
	storeShared bool // store is the HTTP caller's, not the session's (stateless_store.go)
	usedMethods bool // a method of opts.Methods was called: tell its tools when the session ends
	timer       *time.Timer
	exec        *hostDeps
	requests    clientRequests               // server-to-client requests awaiting answers (clientrequests.go)
	root        *actor.RootContext           // for sends outside Receive (timers)
	out         transport.Transport          // where what the session sends goes (stdio, httptransport)
	trusted     trustList                    // tools a person trusted for this session (trust.go)
	store       *spool.Store                 // calls' full output; made on first call (outputStore)
	overrides   *tools.Overrides             // the cwd and env this session set for itself; nil: none
	current     *modernCall                  // the 2026-07-28 request being dispatched (stateless.go); nil else
	subs        map[jsonrpc2.ID]subscription // open 2026-07-28 subscriptions/listen requests, by id
}

// newSession makes a session with opts, which has its defaults applied and
// is shared by every session (never changed, so it is copied by no one),
// served through out.
func newSession(opts *SessionOptions, log *slog.Logger, host *hostOptions, out transport.Transport) *session {
	id := newSessionID()
	return &session{
		opts:     opts,
		id:       id,
		log:      log.With("session", id),
		relay:    relay{level: opts.DefaultLogLevel, rate: opts.LogRate},
		registry: opts.Registry,
		exec:     host.exec,
		out:      out,
	}
}

// panicked tells a session that it panicked handling message, which its
// guardian resumed it from: a request gets an internal error with the
// correlation id of the log line that has the stack.
type panicked struct {
	message any
	cid     string
}

func newSessionID() string { return "s-" + newCorrelationID()[2:] }

// Receive implements actor.Actor.
func (s *session) Receive(ctx actor.Context) {
	defer rethrowWithStack() // sessions have no capturePanics middleware (sessionProps)
	switch msg := ctx.Message().(type) {
	case *actor.Started:
		s.root = ctx.ActorSystem().Root
		s.out.Start(ctx, s)
		s.log.Debug("session started")
		if o := s.exec.observer; o != nil {
			o.SessionStarted(s.id, s.transportName())
		}
	case *panicked:
		s.recovered(msg)
	case *transport.Inbound:
		s.handle(ctx, msg.Request)
	case *callFinished:
		s.finish(ctx, msg)
	case *transport.InboundResponse:
		s.out.Touch()
		s.clientResponded(msg.Response)
	case *clientRequest:
		s.sendClientRequest(msg)
	case *clientRequestAbandoned:
		s.abandonClientRequest(msg.reply)
	case *toolNotice:
		s.notice(msg)
	case *sessionNotice:
		s.notify(msg.method, msg.params, nil)
	case *trustGranted:
		s.trusted.grant(msg.tool, msg.fingerprint)
		s.log.Info("tool trusted for the session", "tool", msg.tool)
	case *Drain:
		s.drain(ctx, msg.Grace)
	case *registryChanged:
		s.toolsChanged(msg.registry)
	case *drainDeadline:
		s.stopRemaining(ctx)
	case *actor.Terminated:
		// System messages overtake user messages: the invocation's
		// callFinished may still be queued. Look again behind it.
		ctx.Send(ctx.Self(), &invocationGone{pid: msg.Who})
	case *invocationGone:
		s.childEnded(ctx, msg.pid)
	case *actor.Stopping:
		if s.timer != nil {
			s.timer.Stop()
		}
		s.failClientRequests(nil, "the session ended")
		s.calls.all(func(_ jsonrpc2.ID, call *inflight) {
			if !call.answered && call.inv.claimed.CompareAndSwap(false, true) {
				call.inv.unstarted()
			}
		})
		s.dropStore()
		if s.usedMethods {
			s.opts.Methods.SessionEnded(s.id)
		}
		s.out.Stopping()
	case *actor.Stopped:
		s.log.Debug("session ended")
		if o := s.exec.observer; o != nil {
			o.SessionEnded(s.id)
		}
		s.out.Stopped()
		ctx.Send(s.exec.server, &ended{id: ctx.Self().Id, http: s.httpOwner != nil})
	default:
		s.out.Receive(ctx, s, msg)
	}
}

// recovered answers the request the session panicked on.
func (s *session) recovered(p *panicked) {
	var req *jsonrpc2.Request
	switch m := p.message.(type) {
	case *transport.Inbound:
		req = m.Request
	case interface{ Request() *jsonrpc2.Request }: // a transport's own request message
		req = m.Request()
	}
	if req != nil && !req.Notif {
		s.send(&jsonrpc2.Response{ID: req.ID,
			Error: protocol.NewError(protocol.CodeInternalError, "internal error", map[string]string{"correlationId": p.cid})})
	}
}

// handle dispatches one inbound message by method.
func (s *session) handle(ctx actor.Context, req *jsonrpc2.Request) {
	if s.handleModern(ctx, req) {
		return
	}
	m, known := lookupMethod(req.Method)
	if req.Notif {
		if known && m.notification != nil && (s.phase == initialized || !m.needsInit) {
			m.notification(s, ctx, req)
		} else if !known {
			s.log.Debug("ignoring unknown notification", "method", req.Method)
		}
		return
	}
	var hidden string // the tool whose absence hides the method asked for
	if !known && s.opts.Methods != nil {
		if _, ok := s.opts.Methods.Lookup(req.Method); ok {
			var served bool
			if hidden, served = s.methodServed(req.Method); served {
				known, m = true, method{needsInit: true, isMethod: true, request: (*session).callMethod}
			}
		}
	}
	switch {
	case hidden != "":
		s.log.Debug("method not served: the tool it stands for is not", "method", req.Method, "tool", hidden)
		s.fail(req.ID, protocol.CodeMethodNotFound, "method not found: "+req.Method+
			" (it is served only while the tool "+hidden+" is, and this server does not serve that tool)")
	case !known || m.request == nil:
		s.fail(req.ID, protocol.CodeMethodNotFound, "method not found: "+req.Method)
	case s.draining:
		s.fail(req.ID, protocol.CodeServerBusy, "server is shutting down")
	case m.needsInit && s.phase != initialized:
		s.fail(req.ID, protocol.CodeInvalidRequest, "session not initialized: send initialize first")
	case s.exec.observer != nil && req.Method != protocol.MethodToolsCall && !m.isMethod:
		// Calls are observed by their invocation, from start to end.
		began := time.Now()
		m.request(s, ctx, req)
		s.exec.observer.RequestServed(s.id, req.Method, began)
	default:
		m.request(s, ctx, req)
	}
}

// transportName names the session's transport for observers.
func (s *session) transportName() string {
	if s.httpOwner != nil {
		return "http"
	}
	return "stdio"
}

// method is one entry of the dispatch table. A request handler must answer
// (now, or later from a child's message); a notification handler never does.
type method struct {
	needsInit    bool
	isMethod     bool // one of SessionOptions.Methods: a call, observed by its invocation
	request      func(*session, actor.Context, *jsonrpc2.Request)
	notification func(*session, actor.Context, *jsonrpc2.Request)
}

// lookupMethod is the dispatch table of the handshake-based revisions
// (2024-11-05 … 2025-11-25). The stateless 2026-07-28 revision would get a
// table of its own, chosen per request from its _meta, reusing the handlers
// whose methods are the same.
func lookupMethod(name string) (method, bool) {
	switch name {
	case protocol.MethodInitialize:
		return method{request: (*session).initialize}, true
	case protocol.MethodPing:
		return method{request: (*session).ping}, true
	case protocol.MethodToolsList:
		return method{needsInit: true, request: (*session).listTools}, true
	case protocol.MethodToolsCall:
		return method{needsInit: true, request: (*session).callTool}, true
	case protocol.MethodLoggingSetLevel:
		return method{needsInit: true, request: (*session).setLevel}, true
	case protocol.MethodResourcesList:
		return method{needsInit: true, request: (*session).listResources}, true
	case protocol.MethodResourcesRead:
		return method{needsInit: true, request: (*session).readResource}, true
	case protocol.MethodResourcesTemplatesList:
		return method{needsInit: true, request: (*session).listResourceTemplates}, true
	case protocol.NotificationInitialized:
		return method{notification: (*session).clientInitialized}, true
	case protocol.NotificationCancelled:
		return method{needsInit: true, notification: (*session).cancelled}, true
	}
	return method{}, false
}

func (s *session) clientInitialized(actor.Context, *jsonrpc2.Request) {
	s.log.Debug("client initialized")
}

func (s *session) initialize(ctx actor.Context, req *jsonrpc2.Request) {
	if s.phase != awaitingInitialize {
		s.fail(req.ID, protocol.CodeInvalidRequest, "initialize called more than once")
		return
	}
	var p protocol.InitializeParams
	if !s.decode(req, &p) {
		return
	}
	if p.ProtocolVersion == "" {
		s.fail(req.ID, protocol.CodeInvalidParams, "invalid params: protocolVersion is required")
		return
	}
	// The session keeps the client's name (logs, status page) and
	// capabilities for its life: bounded, whatever the message size limit.
	if err := p.CheckSizes(); err != nil {
		s.fail(req.ID, protocol.CodeInvalidParams, "invalid params: "+err.Error())
		return
	}
	if len(p.Capabilities) > 0 && string(p.Capabilities) != "null" {
		var caps protocol.ClientCapabilities
		if err := json.Unmarshal(p.Capabilities, &caps); err != nil {
			s.fail(req.ID, protocol.CodeInvalidParams, "invalid params: capabilities must be an object")
			return
		}
		s.caps = caps.Essential()
	}
	var client protocol.Implementation // used here only: an idle session keeps no copy
	if p.ClientInfo != nil {
		client = *p.ClientInfo
	}
	over, err := overrides.Parse(req.Params, s.opts.Overrides)
	if err != nil {
		s.fail(req.ID, protocol.CodeInvalidParams, "invalid params: "+err.Error())
		return
	}
	s.overrides = over
	s.version = protocol.Negotiate(p.ProtocolVersion)
	s.phase = initialized
	s.log = s.log.With("client", client.Name)
	s.log.Info("session initialized", "requested", p.ProtocolVersion, "version", s.version,
		"client_version", client.Version)
	if over != nil {
		s.log.Info("session sets its own working directory and environment", "cwd", over.Cwd, "env", overrides.EnvNames(over))
	}
	s.out.Negotiated(s.version)
	if o := s.exec.observer; o != nil {
		o.SessionInitialized(s.id, string(s.version), client.Name)
	}

	info := s.opts.ServerInfo
	if !s.version.HasTitles() {
		info.Title = ""
	}
	if !s.version.HasIcons() {
		info.Description, info.WebsiteURL = "", ""
	}
	s.reply(req.ID, protocol.InitializeResult{
		ProtocolVersion: s.version,
		Capabilities: protocol.ServerCapabilities{
			Tools:     &protocol.ToolsCapability{ListChanged: true},
			Logging:   &struct{}{},
			Resources: &protocol.ResourcesCapability{},
		},
		ServerInfo:   info,
		Instructions: instructions.For(s.registry, client, s.opts.Instructions, s.opts.Gate),
	})
}

func (s *session) ping(ctx actor.Context, req *jsonrpc2.Request) {
	s.reply(req.ID, struct{}{})
}

// cursorPrefix versions the opaque tools/list cursor format.
const cursorPrefix = "o1:"

func (s *session) listTools(ctx actor.Context, req *jsonrpc2.Request) {
	var p protocol.ListToolsParams
	if !s.decode(req, &p) {
		return
	}
	offset := 0
	if p.Cursor != nil {
		var ok bool
		if offset, ok = parseCursor(*p.Cursor, s.registry.Len()); !ok {
			s.fail(req.ID, protocol.CodeInvalidParams, "invalid params: unknown cursor")
			return
		}
	}
	page, more := s.registry.Page(offset, s.opts.PageSize)
	for i := range page {
		page[i] = protocol.ShapeTool(s.era(), page[i])
	}
	res := listToolsResult{ListToolsResult: protocol.ListToolsResult{Tools: page},
		Meta: map[string]any{overrides.MetaKey: overrides.Meta(s.overrides, s.opts.Overrides)}}
	if more {
		res.NextCursor = base64.RawURLEncoding.EncodeToString([]byte(cursorPrefix + strconv.Itoa(offset+len(page))))
	}
	s.reply(req.ID, res)
}

// listToolsResult is a tools/list page with troupe's _meta: what the
// session's calls use (overrides.MetaKey).
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

func (s *session) setLevel(ctx actor.Context, req *jsonrpc2.Request) {
	var p protocol.SetLevelParams
	if !s.decode(req, &p) {
		return
	}
	if !p.Level.Valid() {
		s.fail(req.ID, protocol.CodeInvalidParams,
			"invalid params: level must be one of debug, info, notice, warning, error, critical, alert, emergency")
		return
	}
	s.relay.level = p.Level
	s.reply(req.ID, struct{}{})
}

func (s *session) callTool(ctx actor.Context, req *jsonrpc2.Request) {
	// One decode of the params: _meta stays raw (proxied tools pass it
	// downstream as it came) and only its two known members are read.
	var p struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
		Meta      json.RawMessage `json:"_meta"`
	}
	if !s.decode(req, &p) || !s.nameAgrees(req, p.Name) {
		return
	}
	var meta protocol.RequestMeta
	switch {
	case len(p.Meta) == 0 || string(p.Meta) == "null":
		p.Meta = nil
	case p.Meta[0] != '{':
		s.fail(req.ID, protocol.CodeInvalidParams, "invalid params: _meta must be an object")
		return
	default:
		if err := json.Unmarshal(p.Meta, &meta); err != nil {
			s.fail(req.ID, protocol.CodeInvalidParams, "invalid params: _meta: "+describeJSONError(err))
			return
		}
	}
	if p.Name == "" {
		s.fail(req.ID, protocol.CodeInvalidParams, "invalid params: name is required")
		return
	}
	if len(p.Arguments) > 0 && p.Arguments[0] != '{' && string(p.Arguments) != "null" {
		s.fail(req.ID, protocol.CodeInvalidParams, "invalid params: arguments must be an object")
		return
	}
	s.startCall(ctx, req, p.Name, p.Arguments, p.Meta, &meta, s.registry)
}

// methodServed reports whether the method name of SessionOptions.Methods
// is served now: MethodTools names it and the session's tool set has every
// tool named for it. When not, hiddenBy is the first of those tools the
// set lacks ("" when MethodTools does not name the method). It is asked at
// every call, so a reload's tool set decides at once.
func (s *session) methodServed(name string) (hiddenBy string, served bool) {
	need, ok := s.opts.MethodTools[name]
	if !ok {
		return "", false
	}
	for _, tool := range need {
		if _, ok := s.registry.Lookup(tool); !ok {
			return tool, false
		}
	}
	return "", true
}

// callMethod serves a method of SessionOptions.Methods (Codex's former
// management methods) as a call of the tool of that name: the same
// invoker, gate, deadline, cancellation and audit as tools/call, but the
// answer is the tool's structured content, or a JSON-RPC error
// (methodAnswer).
func (s *session) callMethod(ctx actor.Context, req *jsonrpc2.Request) {
	var args json.RawMessage
	if req.Params != nil {
		args = *req.Params
	}
	if len(args) > 0 && args[0] != '{' && string(args) != "null" {
		s.fail(req.ID, protocol.CodeInvalidParams, "invalid params: "+req.Method+" takes an object")
		return
	}
	s.usedMethods = true
	s.startCall(ctx, req, req.Method, args, nil, &protocol.RequestMeta{}, s.opts.Methods)
}

// startCall starts the call req of tool name in registry, once its params
// have been read.
func (s *session) startCall(ctx actor.Context, req *jsonrpc2.Request, name string, args, rawMeta json.RawMessage,
	meta *protocol.RequestMeta, registry *tools.Registry) {
	// The call keeps its _meta (proxied tools pass it downstream).
	if err := protocol.CheckSize("_meta", rawMeta, protocol.MaxMetaBytes); err != nil {
		s.fail(req.ID, protocol.CodeInvalidParams, "invalid params: "+err.Error())
		return
	}
	// An answered or cancelled call still in the table is stopping; the
	// client may reuse its id (JSON-RPC ids need only be unique among
	// requests in flight).
	if s.calls.busy(req.ID) {
		s.fail(req.ID, protocol.CodeInvalidRequest, "request id is already in use by a call in flight")
		return
	}
	if s.calls.len() >= s.opts.MaxInFlight {
		s.fail(req.ID, protocol.CodeServerBusy,
			"too many calls in flight (limit "+strconv.Itoa(s.opts.MaxInFlight)+"); retry when one finishes")
		return
	}
	call := &inflight{tool: name, method: registry != s.registry}
	if len(meta.ProgressToken) > 0 && string(meta.ProgressToken) != "null" {
		call.token = meta.ProgressToken
	}
	s.outputStore(true)
	inv := &invocation{
		id: req.ID, tool: name, args: args,
		registry: registry, timeout: s.opts.CallTimeout,
		log: s.log, exec: s.exec,
		call: callContext{session: s.id, trusted: s.trusted.fingerprint(name), form: s.caps.FormElicitation() && s.version.HasElicitation(),
			version: s.version, gate: s.opts.Gate, store: s.store, auditor: s.exec.auditor, overrides: s.overrides},
	}
	if s.current != nil {
		// A 2026-07-28 call has no session: no session overrides, and no
		// trust but a stdio connection's; it asks a person through MRTR
		// (an input_required result and the client's retry, mrtr.go).
		call.modern = s.current.req
		trusted := inv.call.trusted
		inv.call.trusted, inv.call.form, inv.call.overrides, inv.call.stateless = nil, false, nil, true
		inv.call.version = s.current.req.Version
		mrtr, ok := s.mrtrFor(req)
		if !ok {
			return
		}
		inv.call.mrtr = mrtr
		if s.httpOwner == nil {
			inv.call.trusted = trusted // stdio: "for this connection" holds for the connection's calls
		}
	}
	inv.progress = call.token != nil
	inv.meta = rawMeta
	if meta.TimeoutMs != nil && *meta.TimeoutMs > 0 {
		inv.requested = time.Duration(*meta.TimeoutMs) * time.Millisecond
	}
	call.pid, call.inv = s.invoker(ctx), inv
	ctx.Send(call.pid, &startCall{inv: inv})
	s.calls.add(req.ID, call)
}

// invoker is an idle invoker for the next call, or a new one.
func (s *session) invoker(ctx actor.Context) *actor.PID {
	if pid := s.calls.takeIdle(); pid != nil {
		return pid
	}
	return ctx.Spawn(s.exec.invokerProps)
}

func (s *session) cancelled(ctx actor.Context, req *jsonrpc2.Request) {
	var p protocol.CancelledParams
	if req.Params == nil || json.Unmarshal(*req.Params, &p) != nil || p.RequestID == nil {
		s.log.Debug("ignoring malformed cancellation")
		return
	}
	var id jsonrpc2.ID
	if err := json.Unmarshal(p.RequestID, &id); err != nil {
		return
	}
	if s.endSubscription(id) {
		return
	}
	call, ok := s.calls.get(id)
	if !ok || call.cancelled || call.answered {
		return // finished already, or unknown: the spec says ignore it
	}
	call.cancelled = true
	s.log.Info("call cancelled by client", "id", id.String(), "tool", call.tool, "reason", p.Reason)
	if call.inv.claimed.CompareAndSwap(false, true) {
		call.inv.unstarted()
	}
	ctx.Stop(call.pid)
	s.out.Unanswered(id)
}

// finish sends an invocation's result, unless the call was cancelled,
// and keeps its invoker for the next call or stops it.
func (s *session) finish(ctx actor.Context, msg *callFinished) {
	call, ok := s.calls.get(msg.id)
	if !ok || call.cancelled || call.answered || (msg.from != nil && !call.pid.Equal(msg.from)) {
		return // a cancelled call's invoker is stopping already
	}
	call.answered = true
	switch {
	case msg.refused != nil:
		s.send(&jsonrpc2.Response{ID: msg.id, Error: msg.refused})
	case msg.input != nil:
		s.reply(msg.id, msg.input)
	case call.method:
		s.send(methodAnswer(msg.id, msg.result))
	default:
		v := s.version
		if call.modern != nil {
			v = call.modern.Version
		}
		s.reply(msg.id, protocol.ShapeResult(v, msg.result))
	}
	if !msg.reusable {
		ctx.Stop(call.pid) // its tool still unwinds; childEnded forgets the call
		return
	}
	s.calls.remove(msg.id, call.pid)
	s.failClientRequests(&msg.id, "the call ended")
	if s.draining || !s.calls.keepIdle(call.pid) {
		ctx.Stop(call.pid)
	}
	if s.draining && s.calls.len() == 0 {
		ctx.Stop(ctx.Self())
	}
}

// childEnded forgets an invoker once it has stopped, and its call.
func (s *session) childEnded(ctx actor.Context, who *actor.PID) {
	id, call, ok := s.calls.invokerGone(who)
	if !ok {
		return
	}
	s.failClientRequests(&id, "the call ended")
	if !call.answered && !call.cancelled {
		// An invocation always answers before it stops; this is a bug, but
		// the client must still get an answer.
		s.log.Error("invocation ended without an answer", "id", id.String(), "tool", call.tool)
		s.answerError(id, call, &tools.Error{Kind: tools.KindInternal, Message: "the call ended without a result"})
	}
	if s.draining && s.calls.len() == 0 {
		ctx.Stop(ctx.Self())
	}
}

// HandleFailure makes the session the supervisor of its invocations: a
// panicking invocation is stopped and its call answered with an internal
// error carrying a correlation id; the session goes on serving.
func (s *session) HandleFailure(_ *actor.ActorSystem, sup actor.Supervisor, child *actor.PID,
	_ *actor.RestartStatistics, reason any, _ any) {
	value, stack := panicDetails(reason)
	cid := newCorrelationID()
	s.log.Error("invocation failed", "correlation_id", cid, "panic", value, "stack", stack)
	if id, call, ok := s.calls.runBy(child); ok {
		if !call.answered && !call.cancelled {
			call.answered = true
			s.reply(id, (&tools.Error{Kind: tools.KindInternal,
				Message: "internal error in " + call.tool}).Result(cid))
		}
	}
	sup.StopChildren(child)
}

func (s *session) answerError(id jsonrpc2.ID, call *inflight, e *tools.Error) {
	call.answered = true
	cid := newCorrelationID()
	s.log.Warn("call failed", "id", id.String(), "tool", call.tool, "kind", e.Kind, "correlation_id", cid)
	s.reply(id, e.Result(cid))
}

// drain stops taking requests and ends the session once calls finish.
func (s *session) drain(ctx actor.Context, grace time.Duration) {
	if s.draining {
		return
	}
	s.draining = true
	s.closeSubscriptions()
	if s.calls.len() == 0 {
		ctx.Stop(ctx.Self())
		return
	}
	s.log.Info("draining", "in_flight", s.calls.len(), "grace", grace)
	self, root := ctx.Self(), ctx.ActorSystem().Root
	s.timer = time.AfterFunc(grace, func() { root.Send(self, &drainDeadline{}) })
}

// stopRemaining answers the calls still running when the grace period
// ends, then stops the session (and with it every invocation).
func (s *session) stopRemaining(ctx actor.Context) {
	s.calls.all(func(id jsonrpc2.ID, call *inflight) {
		if !call.answered && !call.cancelled {
			s.answerError(id, call, &tools.Error{Kind: tools.KindUnavailable,
				Message: "troupe is shutting down; the call was stopped before it finished"})
		}
	})
	ctx.Stop(ctx.Self())
}

// decode unmarshals params into v, answering -32602 when they do not fit.
func (s *session) decode(req *jsonrpc2.Request, v any) bool {
	if req.Params == nil || string(*req.Params) == "null" {
		return true
	}
	if err := json.Unmarshal(*req.Params, v); err != nil {
		s.fail(req.ID, protocol.CodeInvalidParams, "invalid params: "+describeJSONError(err))
		return false
	}
	return true
}

// describeJSONError turns a decoding error into client-safe text.
func describeJSONError(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field != "" {
		return te.Field + " must be " + jsonKind(te.Type.Kind().String())
	}
	return "params do not match the method's schema"
}

func jsonKind(goKind string) string {
	switch goKind {
	case "string":
		return "a string"
	case "struct", "map":
		return "an object"
	case "slice":
		return "an array"
	case "bool":
		return "a boolean"
	}
	return "a number"
}

// reply answers request id with a result.
func (s *session) reply(id jsonrpc2.ID, result any) {
	b, err := json.Marshal(result)
	if err != nil {
		s.log.Error("encoding result", "err", err)
		s.send(&jsonrpc2.Response{ID: id, Error: protocol.NewError(protocol.CodeInternalError, "internal error", nil)})
		return
	}
	raw := json.RawMessage(b)
	if m, cache := s.modernFor(id); m != nil {
		raw = s.completeModern(raw, cache)
	}
	s.send(&jsonrpc2.Response{ID: id, Result: &raw})
}

// fail answers request id with a JSON-RPC error that carries a correlation
// id, logged here with the method.
func (s *session) fail(id jsonrpc2.ID, code int64, message string) {
	cid := newCorrelationID()
	s.log.Info("request rejected", "id", id.String(), "code", code, "error", message, "correlation_id", cid)
	s.send(&jsonrpc2.Response{ID: id, Error: protocol.NewError(code, message, map[string]string{"correlationId": cid})})
}

// send hands a message to the transport for the client.
func (s *session) send(msg any) {
	s.out.Send(&transport.Outbound{Message: msg})
}

// notice relays a running tool's progress or log message to the client:
// progress only when the call has a progress token and the value grows, log
// messages only at or above the session's level and within the rate limit.
// Nothing is sent for a call that was answered or cancelled.
func (s *session) notice(n *toolNotice) {
	sent := false
	defer func() {
		if !sent && n.written != nil {
			n.written()
		}
	}()
	call, ok := s.calls.get(n.id)
	if !ok || call.answered || call.cancelled {
		return
	}
	if n.method != "" {
		params, _ := n.data.(map[string]any)
		if params == nil || !s.relay.allowLog(n, call) {
			return
		}
		// The tool's own _meta members (Codex's threadId) stay; the
		// request id is troupe's to set.
		meta, _ := params["_meta"].(map[string]any)
		if meta == nil {
			meta = map[string]any{}
			params["_meta"] = meta
		}
		meta["requestId"] = n.id
		sent = s.notifyWritten(n.method, params, &n.id, n.written)
		return
	}
	if n.isLog {
		if !s.relay.allowLog(n, call) {
			return
		}
		sent = s.notifyWritten(protocol.NotificationMessage, protocol.LoggingMessageParams{Level: n.level, Logger: n.tool, Data: n.data}, &n.id, n.written)
		return
	}
	if !s.relay.allowProgress(n.done, call) {
		return
	}
	p := protocol.ProgressParams{ProgressToken: call.token, Progress: n.done}
	if n.total > 0 {
		p.Total = &n.total
	}
	if s.version.HasProgressMessage() || (call.modern != nil && call.modern.Version.HasProgressMessage()) {
		p.Message = n.message
	}
	sent = s.notifyWritten(protocol.NotificationProgress, p, &n.id, n.written)
}

// notify sends a notification to the client; related is the request it
// belongs to (HTTP sends it on that request's stream), nil for none.
func (s *session) notify(method string, params any, related *jsonrpc2.ID) {
	s.notifyWritten(method, params, related, nil)
}

// notifyWritten is notify with a callback for when the transport has
// handed the notification to the client; it reports whether the
// notification was sent (if not, written is not called).
func (s *session) notifyWritten(method string, params any, related *jsonrpc2.ID, written func()) bool {
	req := &jsonrpc2.Request{Method: method, Notif: true}
	if params != nil {
		b, err := json.Marshal(params)
		if err != nil {
			s.log.Error("encoding notification", "method", method, "err", err)
			return false
		}
		raw := json.RawMessage(b)
		req.Params = &raw
	}
	s.out.Send(&transport.Outbound{Message: req, Related: related, Written: written})
	return true
}

// toolsChanged swaps the session's registry. Calls in flight keep the one
// they started with; the client is told when the list it sees changed.
func (s *session) toolsChanged(reg *tools.Registry) {
	old := s.registry
	s.registry = reg
	if s.phase == initialized && !reg.SameTools(old) {
		s.notify(protocol.NotificationToolsListChanged, nil, nil)
	}
	if !reg.SameTools(old) {
		s.toolsChangedForSubscribers()
	}
}

// Handle implements transport.Session: a transport's own message carried
// a request (HTTP).
func (s *session) Handle(ctx actor.Context, req *jsonrpc2.Request) { s.handle(ctx, req) }

// InputEnded implements transport.Session: no response can come in any
// more, so requests waiting for one (approvals) fail now instead of at the
// end of the grace period, and the session drains: it finishes its calls
// within the grace period, then ends.
func (s *session) InputEnded(ctx actor.Context) {
	s.failClientRequests(nil, "the client can no longer answer (its input ended)")
	s.drain(ctx, s.exec.grace)
}

// MaxInFlight implements transport.Session.
func (s *session) MaxInFlight() int { return s.opts.MaxInFlight }
