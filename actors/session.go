package actors

import (
	"encoding/json"
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/sourcegraph/jsonrpc2"
	"golang.org/x/time/rate"

	"troupe/actors/transport"
	"troupe/gate"
	"troupe/gate/approvalstate"
	"troupe/identity"
	"troupe/limits"
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
	// Gateway serves what downstream servers offer beside tools: each tool
	// is named after the method it serves (prompts/list, prompts/get,
	// completion/complete), called with the request's params as its
	// arguments and answered like a method of Methods (gateway.go). nil
	// serves none: the methods are not found and not declared.
	Gateway *tools.Registry
	// Limits bounds each identity's counted requests (tools/call,
	// prompts/get, resources/read, completion/complete): calls per minute,
	// per tool glob, and at once. The identity is the request's
	// (transport.Request.Identity; nil is stdio's local user), so no new
	// session resets them. nil: no limits.
	Limits *limits.Limiter
	// Middleware wraps the handler of every MCP method, outside troupe's
	// own (an operator's limits, tests that look at every request); nil
	// adds none.
	Middleware []Middleware

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

// session is the MCP session actor: it owns what the protocol says about
// one client (negotiated revision, capabilities, log level), its state
// (SessionState), the table of calls in flight keyed by request id, and
// its transport. It serves requests by the method table (table.go): the
// handlers read it through SessionView and ask it for changes
// (changes.go); it answers.
type session struct {
	opts        *SessionOptions
	overHTTP    bool            // its transport is HTTP (observers name it; the server counts HTTP sessions)
	registry    *tools.Registry // the tools this session sees now; calls keep the one they started with
	view        *toolView       // the last caller's part of registry, when its identity has a grant (ToolsFor)
	log         *slog.Logger
	id          string
	version     protocol.Version
	caps        protocol.ClientCapabilities
	relay       relay        // which notices reach the client: log level, rate limit, progress (relay.go)
	calls       callTable    // calls in flight and the invokers that run them (calltable.go)
	state       SessionState // packed with the flags below: an idle session is one size class smaller
	storeShared bool         // store is the HTTP caller's, not the session's (stateless_store.go)
	usedMethods bool         // a method of opts.Methods or opts.Gateway was called: tell its tools when the session ends
	timer       *time.Timer
	exec        *hostDeps
	requests    clientRequests               // server-to-client requests awaiting answers (clientrequests.go)
	root        *actor.RootContext           // for sends outside Receive (timers)
	out         transport.Transport          // where what the session sends goes (stdio, httptransport)
	trusted     trustList                    // tools a person trusted for this session (trust.go)
	store       *spool.Store                 // calls' full output; made on first call (Output)
	credential  *[32]byte                    // the HTTP caller whose store is shared (stateless_store.go); nil: none
	overrides   *tools.Overrides             // the cwd and env this session set for itself; nil: none
	subs        map[jsonrpc2.ID]subscription // open stateless-era subscriptions/listen requests, by id
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

func newSessionID() string { return "s-" + NewCorrelationID()[2:] }

// Receive implements actor.Actor.
func (s *session) Receive(ctx actor.Context) {
	defer rethrowWithStack() // sessions have no capturePanics middleware (sessionProps)
	switch msg := ctx.Message().(type) {
	case *actor.Started:
		s.root = ctx.ActorSystem().Root
		s.out.Start(ctx, s)
		s.log.Debug("session started")
		if o := s.exec.observer; o != nil {
			o.SessionStarted(s.id, s.transportName(), s.identityName())
		}
	case *panicked:
		s.recovered(msg)
	case *transport.Inbound:
		s.Handle(ctx, msg.Request)
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
	case *listenNotice:
		s.listenNotify(msg)
	case *trustGranted:
		s.trusted.grant(msg.tool, msg.fingerprint)
		s.log.Info("tool trusted for the session", "tool", msg.tool)
	case *Drain:
		s.drain(ctx, msg.Grace)
	case *registryChanged:
		s.toolsChanged(msg.registry)
	case *gatewayChanged:
		s.gatewayChanged(msg)
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
		for id, sub := range s.subs { // listen requests' resource subscriptions
			s.unwatch(id, sub)
		}
		if s.usedMethods {
			s.opts.Methods.SessionEnded(s.id)
			s.opts.Gateway.SessionEnded(s.id) // its resource subscriptions
		}
		s.out.Stopping()
	case *actor.Stopped:
		s.log.Debug("session ended")
		if o := s.exec.observer; o != nil {
			o.SessionEnded(s.id)
		}
		s.out.Stopped()
		ctx.Send(s.exec.server, &ended{id: ctx.Self().Id, http: s.overHTTP})
	default:
		s.out.Receive(ctx, s, msg)
	}
}

// recovered answers the request the session panicked on.
func (s *session) recovered(p *panicked) {
	var req *transport.Request
	switch m := p.message.(type) {
	case *transport.Inbound:
		req = m.Request
	case interface{ Request() *transport.Request }: // a transport's own request message
		req = m.Request()
	}
	if req != nil && !req.Notif {
		s.send(&jsonrpc2.Response{ID: req.ID,
			Error: protocol.NewError(protocol.CodeInternalError, "internal error", map[string]string{"correlationId": p.cid})})
	}
}

// Handle implements transport.Session: it serves one request or
// notification, read at the transport's edge. A stateless-era request
// whose _meta was refused is answered with that; a method is looked up in
// the method table for the request's era (the methods beside MCP are the
// Methods' tools, served as calls); its handler, wrapped in the table's
// middleware, reads the session through SessionView and answers with a
// result, an error, or a change the session applies.
func (s *session) Handle(ctx actor.Context, req *transport.Request) {
	m := s.exec.table[req.Method]
	if req.Notif {
		switch {
		case m != nil && m.notification != nil:
			if c := m.notification(s, req); c != nil {
				c.apply(s, ctx, req)
			}
		case m == nil:
			s.log.Debug("ignoring unknown notification", "method", req.Method)
		}
		return
	}
	if req.Refused != nil { // the stateless era's _meta
		s.failWith(req.ID, req.Refused.Code, req.Refused.Message, req.Refused.Data)
		return
	}
	if req.Era == protocol.EraHandshake {
		// What the handshake negotiated, for the handlers to read from the
		// request as they read a stateless-era request's own.
		req.Version, req.Caps = s.version, s.caps
	}
	if m == nil || m.handle == nil || !m.eras.has(req.Era) {
		m = s.besideMCP(req)
		if m == nil {
			return
		}
	}
	res, err := m.handle(s, req)
	switch {
	case err != nil:
		s.refuse(req.ID, err)
	default:
		if c, ok := res.(sessionChange); ok {
			c.apply(s, ctx, req)
			return
		}
		s.reply(req, res, m.cache)
	}
}

// besideMCP is the row that serves req when the method table has none for
// it: a method of SessionOptions.Methods, served as a call while the tools
// it stands for are served, or nil when req has been answered -32601.
func (s *session) besideMCP(req *transport.Request) *method {
	if s.exec.methodCall.eras.has(req.Era) && s.opts.Methods != nil {
		if _, ok := s.opts.Methods.Lookup(req.Method); ok {
			hidden, served := s.methodServed(req, req.Method)
			if served {
				return s.exec.methodCall
			}
			if hidden != "" {
				s.log.Debug("method not served: the tool it stands for is not", "method", req.Method, "tool", hidden)
				s.fail(req.ID, protocol.CodeMethodNotFound, "method not found: "+req.Method+
					" (it is served only while the tool "+hidden+" is, and this server does not serve that tool)")
				return nil
			}
		}
	}
	s.fail(req.ID, protocol.CodeMethodNotFound, "method not found: "+req.Method)
	return nil
}

// refuse answers id with a handler's error: a *Refusal as it says, any
// other error as an internal one (its text stays in the log).
func (s *session) refuse(id jsonrpc2.ID, err error) {
	r, ok := err.(*Refusal)
	if !ok {
		cid := NewCorrelationID()
		s.log.Error("request failed", "id", id.String(), "err", err, "correlation_id", cid)
		s.send(&jsonrpc2.Response{ID: id,
			Error: protocol.NewError(protocol.CodeInternalError, "internal error", map[string]string{"correlationId": cid})})
		return
	}
	s.failWith(id, r.Code, r.Message, r.Data)
}

// transportName names the session's transport for observers.
// identityName is who the session serves, as records name it: the HTTP
// session's identity, "local" for stdio's.
func (s *session) identityName() string {
	if t, ok := s.out.(interface{ Identity() *identity.Identity }); ok {
		return whoString(t.Identity())
	}
	return whoString(nil)
}

func (s *session) transportName() string {
	if s.overHTTP {
		return "http"
	}
	return "stdio"
}

// methodServed reports whether the method name of SessionOptions.Methods
// is served now: MethodTools names it and the session's tool set has every
// tool named for it. When not, hiddenBy is the first of those tools the
// set lacks ("" when MethodTools does not name the method). It is asked at
// every call, so a reload's tool set decides at once.
func (s *session) methodServed(req *transport.Request, name string) (hiddenBy string, served bool) {
	need, ok := s.opts.MethodTools[name]
	if !ok {
		return "", false
	}
	for _, tool := range need {
		if _, ok := s.ToolsFor(req).Lookup(tool); !ok {
			return tool, false
		}
	}
	return "", true
}

// invoker is an idle invoker for the next call, or a new one.
func (s *session) invoker(ctx actor.Context) *actor.PID {
	if pid := s.calls.takeIdle(); pid != nil {
		return pid
	}
	return ctx.Spawn(s.exec.invokerProps)
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
		s.replyCall(msg.id, call, msg.input)
	case call.method:
		resp := methodAnswer(msg.id, msg.result)
		if call.era == protocol.EraStateless && resp.Result != nil {
			raw := s.completeStateless(*resp.Result, cachePrivate)
			resp.Result = &raw
		}
		s.send(resp)
	default:
		s.replyCall(msg.id, call, protocol.ShapeResult(call.version, msg.result))
	}
	if !msg.reusable {
		ctx.Stop(call.pid) // its tool still unwinds; childEnded forgets the call
		return
	}
	s.calls.remove(msg.id, call.pid)
	s.failClientRequests(&msg.id, "the call ended")
	if s.state == Draining || !s.calls.keepIdle(call.pid) {
		ctx.Stop(call.pid)
	}
	if s.state == Draining && s.calls.len() == 0 {
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
	if s.state == Draining && s.calls.len() == 0 {
		ctx.Stop(ctx.Self())
	}
}

// HandleFailure makes the session the supervisor of its invocations: a
// panicking invocation is stopped and its call answered with an internal
// error carrying a correlation id; the session goes on serving.
func (s *session) HandleFailure(_ *actor.ActorSystem, sup actor.Supervisor, child *actor.PID,
	_ *actor.RestartStatistics, reason any, _ any) {
	value, stack := panicDetails(reason)
	cid := NewCorrelationID()
	s.log.Error("invocation failed", "correlation_id", cid, "panic", value, "stack", stack)
	if id, call, ok := s.calls.runBy(child); ok {
		if !call.answered && !call.cancelled {
			call.answered = true
			s.replyCall(id, call, (&tools.Error{Kind: tools.KindInternal,
				Message: "internal error in " + call.tool}).Result(cid))
		}
	}
	sup.StopChildren(child)
}

func (s *session) answerError(id jsonrpc2.ID, call *inflight, e *tools.Error) {
	call.answered = true
	cid := NewCorrelationID()
	s.log.Warn("call failed", "id", id.String(), "tool", call.tool, "kind", e.Kind, "correlation_id", cid)
	s.replyCall(id, call, e.Result(cid))
}

// drain stops taking requests and ends the session once calls finish.
func (s *session) drain(ctx actor.Context, grace time.Duration) {
	if s.state == Draining {
		return
	}
	s.state = Draining
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

// reply answers req with result; a stateless-era result gets the era's
// completion (resultType, the server's identity, cache, when not nil).
func (s *session) reply(req *transport.Request, result any, cache *protocol.CacheHint) {
	if cache == cachePublic && callerSpecific(req) {
		cache = cachePrivate
	}
	s.replyTo(req.ID, req.Era == protocol.EraStateless, cache, result)
}

// callerSpecific reports whether what req is answered may differ from
// what another caller is answered (a tool list, discover's instructions):
// the front tells callers apart, and each may be granted other tools, so
// a shared cache must not hand one caller's answer to another.
func callerSpecific(req *transport.Request) bool {
	id := req.Identity
	return id != nil && (id.Kind == identity.Token || id.Kind == identity.OAuth)
}

// replyCall answers call id with result.
func (s *session) replyCall(id jsonrpc2.ID, call *inflight, result any) {
	s.replyTo(id, call.era == protocol.EraStateless, nil, result)
}

// replyTo answers request id with a result.
func (s *session) replyTo(id jsonrpc2.ID, stateless bool, cache *protocol.CacheHint, result any) {
	b, err := json.Marshal(result)
	if err != nil {
		s.log.Error("encoding result", "err", err)
		s.send(&jsonrpc2.Response{ID: id, Error: protocol.NewError(protocol.CodeInternalError, "internal error", nil)})
		return
	}
	raw := json.RawMessage(b)
	if stateless {
		raw = s.completeStateless(raw, cache)
	}
	s.send(&jsonrpc2.Response{ID: id, Result: &raw})
}

// fail answers request id with a JSON-RPC error that carries a correlation
// id, logged here with the method.
func (s *session) fail(id jsonrpc2.ID, code int64, message string) {
	cid := NewCorrelationID()
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
	if call.version.HasProgressMessage() {
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
	if s.version != "" && !reg.SameTools(old) { // initialized: serving, or draining since
		s.notify(protocol.NotificationToolsListChanged, nil, nil)
	}
	if !reg.SameTools(old) {
		s.toolsChangedForSubscribers()
	}
}

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

// ID implements SessionView.
func (s *session) ID() string { return s.id }

// State implements SessionView.
func (s *session) State() SessionState { return s.state }

// Options implements SessionView.
func (s *session) Options() *SessionOptions { return s.opts }

// ToolsFor implements SessionView: the session's tools, or the part of
// them the request's identity may use when it has a grant. The part is
// kept for the next request of the same grant (a session serves one
// identity), so only the first list or call after a change filters.
func (s *session) ToolsFor(req *transport.Request) *tools.Registry {
	var g *identity.Grant
	if req != nil && req.Identity != nil {
		g = req.Identity.Tools
	}
	if g == nil {
		return s.registry // the fast path: no grant, no filtering, no allocation
	}
	if v := s.view; v != nil && v.of == s.registry && v.grant.Same(g) {
		return v.reg
	}
	s.view = &toolView{of: s.registry, grant: g, reg: s.registry.Only(g.Allows)}
	return s.view.reg
}

// toolView is the part of a registry one grant allows.
type toolView struct {
	of    *tools.Registry
	grant *identity.Grant
	reg   *tools.Registry
}

// Overrides implements SessionView.
func (s *session) Overrides() *tools.Overrides { return s.overrides }

// Logger implements SessionView.
func (s *session) Logger() *slog.Logger { return s.log }

// Observer implements SessionView.
func (s *session) Observer() Observer { return s.exec.observer }
