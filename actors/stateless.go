package actors

import (
	"encoding/json"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/sourcegraph/jsonrpc2"

	"troupe/actors/transport"
	"troupe/instructions"
	"troupe/protocol"
)

// modernCall is one 2026-07-28 request as the session handles it: what its
// _meta said (version, capabilities, log level) and the cache hint its
// result carries. There is no session state in that era, so the handlers
// read these instead of the session's negotiated values.
type modernCall struct {
	id    jsonrpc2.ID
	req   *protocol.ModernRequest
	cache *protocol.CacheHint
}

// handleModern serves req when it belongs to the stateless revision (its
// _meta names a protocol version, or it is server/discover) and reports
// whether it did. The same session actor serves both eras: on stdio the
// process's one session answers initialize-based and per-request clients
// alike; over HTTP a session is started for each stateless request.
func (s *session) handleModern(ctx actor.Context, req *jsonrpc2.Request) bool {
	if req.Notif {
		// Only notifications/cancelled exists for this era (stdio); the
		// legacy path would drop it before initialize.
		if req.Method == protocol.NotificationCancelled && s.phase != initialized {
			s.cancelled(ctx, req)
			return true
		}
		return false
	}
	if req.Method == protocol.MethodInitialize || !protocol.IsModern(req.Method, req.Params) {
		return false
	}
	m, perr := protocol.ParseModern(req.Params)
	if perr != nil {
		s.failWith(req.ID, perr.Code, perr.Message, perr.Data)
		return true
	}
	handler, cache, known := lookupModernMethod(req.Method)
	switch {
	case !known:
		s.fail(req.ID, protocol.CodeMethodNotFound, "method not found: "+req.Method)
	case s.draining:
		s.fail(req.ID, protocol.CodeServerBusy, "server is shutting down")
	default:
		s.current = &modernCall{id: req.ID, req: m, cache: cache}
		defer func() { s.current = nil }()
		handler(s, ctx, req)
	}
	return true
}

// nameAgrees checks name, which the handler has just decoded from req's
// params (tools/call's name, resources/read's uri), against the Mcp-Name
// header the request came with (transport.Named: 2026-07-28 over HTTP),
// and answers -32020 when they differ. The HTTP front checks that the
// header is there and well-formed; the comparison is here, after the one
// decoding of the params, so the name checked is the name used.
func (s *session) nameAgrees(req *jsonrpc2.Request, name string) bool {
	named, ok := s.out.(transport.Named)
	if !ok {
		return true
	}
	header, ok := named.RequestName(req.ID)
	if !ok || header == name {
		return true
	}
	s.fail(req.ID, protocol.CodeHeaderMismatch, protocol.HeaderMismatch("Mcp-Name", header, name))
	return false
}

// ModernMethod reports whether the stateless revision has method name:
// the HTTP front answers 404 for the others.
func ModernMethod(name string) bool {
	_, _, ok := lookupModernMethod(name)
	return ok
}

// lookupModernMethod is the dispatch table of 2026-07-28, beside
// lookupMethod's for the handshake revisions. Methods both eras share use
// the same handlers, which read the request's own version and capabilities
// (session.era, session.current). ping and logging/setLevel do not exist in
// this era; cacheable results get their hint (ttlMs 0: the tool list can
// change on a reload, and there is no subscriptions/listen yet to say so).
func lookupModernMethod(name string) (func(*session, actor.Context, *jsonrpc2.Request), *protocol.CacheHint, bool) {
	public := &protocol.CacheHint{TTLMs: 0, Scope: protocol.CachePublic}
	private := &protocol.CacheHint{TTLMs: 0, Scope: protocol.CachePrivate}
	switch name {
	case protocol.MethodServerDiscover:
		return (*session).discover, public, true
	case protocol.MethodToolsList:
		return (*session).listTools, public, true
	case protocol.MethodToolsCall:
		return (*session).callTool, nil, true
	case protocol.MethodResourcesList:
		return (*session).listResources, private, true
	case protocol.MethodResourcesRead:
		return (*session).readResource, private, true
	case protocol.MethodResourcesTemplatesList:
		return (*session).listResourceTemplates, private, true
	case protocol.MethodSubscriptionsListen:
		return (*session).listen, nil, true
	}
	return nil, nil, false
}

// discover answers server/discover: the revisions troupe speaks (newest
// first; the handshake ones through initialize), its capabilities and
// instructions for the tools this client would see.
func (s *session) discover(ctx actor.Context, req *jsonrpc2.Request) {
	s.reply(req.ID, protocol.DiscoverResult{
		SupportedVersions: protocol.AllVersions(),
		Capabilities: protocol.ServerCapabilities{
			Tools:     &protocol.ToolsCapability{ListChanged: true}, // through subscriptions/listen
			Logging:   &struct{}{},
			Resources: &protocol.ResourcesCapability{},
		},
		Instructions: instructions.For(s.registry, s.current.req.Client, s.opts.Instructions, s.opts.Gate),
	})
}

// era is the revision the request being handled speaks: its own for a
// stateless request, else the session's negotiated one.
func (s *session) era() protocol.Version {
	if s.current != nil {
		return s.current.req.Version
	}
	return s.version
}

// modernFor finds the stateless request id answers: the one being handled,
// or a call in flight that started as one. nil for the handshake era.
func (s *session) modernFor(id jsonrpc2.ID) (*protocol.ModernRequest, *protocol.CacheHint) {
	if s.current != nil && s.current.id == id {
		return s.current.req, s.current.cache
	}
	if call, ok := s.calls.get(id); ok && call.modern != nil {
		return call.modern, nil
	}
	return nil, nil
}

// completeModern adds resultType, the server's identity and the cache hint
// to a stateless request's result.
func (s *session) completeModern(raw json.RawMessage, cache *protocol.CacheHint) json.RawMessage {
	info := s.opts.ServerInfo
	out, err := protocol.DecorateResult(raw, protocol.Completion{ServerInfo: &info, Cache: cache})
	if err != nil {
		s.log.Error("completing a 2026-07-28 result", "err", err)
		return raw
	}
	return out
}

// failWith answers id with a JSON-RPC error whose data is the spec's
// (e.g. -32022's supported list), without a correlation id in it.
func (s *session) failWith(id jsonrpc2.ID, code int64, message string, data any) {
	if data == nil {
		s.fail(id, code, message)
		return
	}
	s.log.Info("request rejected", "id", id.String(), "code", code, "error", message)
	s.send(&jsonrpc2.Response{ID: id, Error: protocol.NewError(code, message, data)})
}

// subscription is one open subscriptions/listen request: what it agreed
// to deliver. troupe offers tools list changes only (it has no prompts, and
// its resources are calls' outputs, which do not change).
type subscription struct {
	tools bool
}

// listenParams is the subscriptions/listen request's filter.
type listenParams struct {
	Notifications *struct {
		ToolsListChanged      bool     `json:"toolsListChanged"`
		PromptsListChanged    bool     `json:"promptsListChanged"`
		ResourcesListChanged  bool     `json:"resourcesListChanged"`
		ResourceSubscriptions []string `json:"resourceSubscriptions"`
	} `json:"notifications"`
}

// listen opens a subscription: it acknowledges the subset of the filter
// troupe honours, first, on the request's own stream, and then leaves the
// request open. Notifications for it carry its id in _meta; it ends when
// the client cancels it (notifications/cancelled on stdio, closing the
// stream over HTTP) or, gracefully, with a result when the server drains.
func (s *session) listen(ctx actor.Context, req *jsonrpc2.Request) {
	var p listenParams
	if !s.decode(req, &p) {
		return
	}
	if _, dup := s.subs[req.ID]; dup {
		s.fail(req.ID, protocol.CodeInvalidRequest, "request id is already in use by an open subscription")
		return
	}
	if s.calls.busy(req.ID) {
		s.fail(req.ID, protocol.CodeInvalidRequest, "request id is already in use by a call in flight")
		return
	}
	sub := subscription{tools: p.Notifications != nil && p.Notifications.ToolsListChanged}
	ack := map[string]any{}
	if sub.tools {
		ack["toolsListChanged"] = true
	}
	if s.subs == nil {
		s.subs = map[jsonrpc2.ID]subscription{}
	}
	s.subs[req.ID] = sub
	id := req.ID
	s.notify(protocol.NotificationSubscriptionsAcknowledged,
		map[string]any{"_meta": map[string]any{protocol.MetaSubscriptionID: id}, "notifications": ack}, &id)
}

// toolsChangedForSubscribers tells every subscription that asked for it
// that the tool list changed.
func (s *session) toolsChangedForSubscribers() {
	for id, sub := range s.subs {
		if sub.tools {
			s.notify(protocol.NotificationToolsListChanged,
				map[string]any{"_meta": map[string]any{protocol.MetaSubscriptionID: id}}, &id)
		}
	}
}

// endSubscription forgets subscription id when the client cancels it and
// reports whether there was one. It gets no response.
func (s *session) endSubscription(id jsonrpc2.ID) bool {
	if _, ok := s.subs[id]; !ok {
		return false
	}
	delete(s.subs, id)
	s.log.Debug("subscription cancelled by client", "id", id.String())
	s.out.Unanswered(id)
	return true
}

// closeSubscriptions ends every subscription gracefully (the server is
// draining): each listen request gets its completion result.
func (s *session) closeSubscriptions() {
	for id := range s.subs {
		b, err := json.Marshal(map[string]any{"_meta": map[string]any{protocol.MetaSubscriptionID: id}})
		if err != nil {
			continue
		}
		raw := s.completeModern(b, nil)
		s.send(&jsonrpc2.Response{ID: id, Result: &raw})
	}
	s.subs = nil
}
