package actors

import (
	"encoding/json"
	"strconv"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/sourcegraph/jsonrpc2"

	"troupe/actors/transport"
	"troupe/gate/approvalstate"
	"troupe/overrides"
	"troupe/protocol"
	"troupe/tools"
)

// What a handler asks of the session: changes to what the session alone
// owns (its lifecycle, its call table, its subscriptions, its log level).
// A handler returns one instead of a result; the session applies it, which
// answers the request (now, or when the call ends).
type sessionChange interface {
	apply(s *session, ctx actor.Context, req *transport.Request)
}

// initializing is the handshake's outcome: the session takes the
// negotiated version, the client's capabilities and its own settings, and
// serves from now on.
type initializing struct {
	requested string
	version   protocol.Version
	caps      protocol.ClientCapabilities
	client    protocol.Implementation // used here only: an idle session keeps no copy
	overrides *tools.Overrides
	result    protocol.InitializeResult
}

func (c *initializing) apply(s *session, _ actor.Context, req *transport.Request) {
	s.caps, s.overrides, s.version = c.caps, c.overrides, c.version
	s.state = Serving
	s.log = s.log.With("client", c.client.Name)
	s.log.Info("session initialized", "requested", c.requested, "version", s.version,
		"client_version", c.client.Version)
	if c.overrides != nil {
		s.log.Info("session sets its own working directory and environment", "cwd", c.overrides.Cwd, "env", overrides.EnvNames(c.overrides))
	}
	s.out.Negotiated(s.version)
	if o := s.exec.observer; o != nil {
		o.SessionInitialized(s.id, string(s.version), c.client.Name)
	}
	s.reply(req, c.result, nil)
}

// levelChange is logging/setLevel's new threshold for the session's log
// messages.
type levelChange protocol.LoggingLevel

func (c levelChange) apply(s *session, _ actor.Context, req *transport.Request) {
	s.relay.level = protocol.LoggingLevel(c)
	s.reply(req, struct{}{}, nil)
}

// startingCall is a call to start: a tools/call, or a method beside MCP
// (method).
type startingCall struct {
	tool     string
	args     json.RawMessage
	meta     protocol.RequestMeta
	registry *tools.Registry
	method   bool
	// The stateless era's retry members, as sent (callToolParams).
	inputResponses, requestState json.RawMessage
	// release gives back the identity's concurrency slot the call holds
	// (limited); the call's end runs it (callContext.release), or apply
	// when the call does not start. nil: none held.
	release func()
}

func (c *startingCall) apply(s *session, ctx actor.Context, req *transport.Request) {
	defer func() {
		if c.release != nil { // the call did not start
			c.release()
		}
	}()
	// The call keeps its _meta (proxied tools pass it downstream).
	if err := protocol.CheckSize("_meta", req.Meta, protocol.MaxMetaBytes); err != nil {
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
	if c.method {
		s.usedMethods = true
	}
	call := &inflight{tool: c.tool, method: c.method, version: req.Version, era: req.Era, level: req.Level}
	if len(c.meta.ProgressToken) > 0 && string(c.meta.ProgressToken) != "null" {
		call.token = c.meta.ProgressToken
	}
	store, shared := s.Output(req, true)
	inv := &invocation{
		id: req.ID, tool: c.tool, args: c.args,
		registry: c.registry, timeout: s.opts.CallTimeout,
		log: s.log, exec: s.exec,
		call: callContext{session: s.id, who: req.Identity, trusted: s.trusted.fingerprint(c.tool), version: s.version, gate: s.opts.Gate,
			store: store, auditor: s.exec.auditor, overrides: s.overrides,
			asker: newElicitationAsker(s.caps.FormElicitation() && s.version.HasElicitation())},
	}
	if shared {
		// A caller's output may be read through any node of a cluster:
		// its links name this one (spool.NodeOf, Host.NodeFor).
		inv.call.node = s.opts.callers.self()
	}
	if req.Era == protocol.EraStateless {
		// A stateless-era call has no session: no session overrides, and no
		// trust but a stdio connection's; it asks a person in rounds
		// (roundAsker: an input_required result and the client's retry,
		// mrtr.go).
		trusted := inv.call.trusted
		inv.call.trusted, inv.call.overrides = nil, nil
		inv.call.version = req.Version
		mrtr, ok := s.mrtrFor(req, c)
		if !ok {
			return
		}
		inv.call.asker = newRoundAsker(mrtr)
		if req.Credential == nil {
			inv.call.trusted = trusted // stdio: "for this connection" holds for the connection's calls
		}
	}
	inv.progress = call.token != nil
	inv.meta = req.Meta
	if c.meta.TimeoutMs != nil && *c.meta.TimeoutMs > 0 {
		inv.requested = time.Duration(*c.meta.TimeoutMs) * time.Millisecond
	}
	inv.call.release, c.release = c.release, nil
	call.pid, call.inv = s.invoker(ctx), inv
	ctx.Send(call.pid, &startCall{inv: inv})
	s.calls.add(req.ID, call)
}

// mrtrFor reads a stateless-era tools/call's inputResponses and
// requestState; ok is false (and the request answered with -32602) when
// they are not of the schema's types.
func (s *session) mrtrFor(req *transport.Request, c *startingCall) (*mrtrCall, bool) {
	m := &mrtrCall{sealer: s.opts.Approvals, caps: req.Caps}
	var state *string
	if (len(c.inputResponses) > 0 && json.Unmarshal(c.inputResponses, &m.responses) != nil) ||
		(len(c.requestState) > 0 && json.Unmarshal(c.requestState, &state) != nil) {
		s.fail(req.ID, protocol.CodeInvalidParams,
			"invalid params: inputResponses must be an object and requestState a string")
		return nil, false
	}
	if state != nil {
		m.state = *state
	}
	if req.Credential != nil {
		m.caller = approvalstate.CredentialCaller(*req.Credential)
	} else {
		m.caller = approvalstate.ConnectionCaller(s.id)
	}
	return m, true
}

// subscribing opens a subscriptions/listen subscription: it acknowledges
// the subset of the filter troupe honours, first, on the request's own
// stream, and then leaves the request open. Notifications for it carry
// its id in _meta; it ends when the client cancels it
// (notifications/cancelled on stdio, closing the stream over HTTP) or,
// gracefully, with a result when the server drains.
type subscribing struct{ sub subscription }

func (c *subscribing) apply(s *session, ctx actor.Context, req *transport.Request) {
	if _, dup := s.subs[req.ID]; dup {
		s.fail(req.ID, protocol.CodeInvalidRequest, "request id is already in use by an open subscription")
		return
	}
	if s.calls.busy(req.ID) {
		s.fail(req.ID, protocol.CodeInvalidRequest, "request id is already in use by a call in flight")
		return
	}
	ack := map[string]any{}
	if c.sub.tools {
		ack["toolsListChanged"] = true
	}
	if c.sub.prompts {
		ack["promptsListChanged"] = true
	}
	if c.sub.resources {
		ack["resourcesListChanged"] = true
	}
	if w, ok := resourceWatcher(s.opts.Gateway); ok && len(c.sub.uris) > 0 {
		c.sub.uris = w.Watch(&listenHolder{root: s.root, session: ctx.Self(), id: req.ID,
			holder: listenHolderID(s.id, req.ID)}, req.Identity, c.sub.uris)
		s.usedMethods = true // the session's end releases them too
	} else {
		c.sub.uris = nil
	}
	if len(c.sub.uris) > 0 {
		ack["resourceSubscriptions"] = c.sub.uris
	}
	if s.subs == nil {
		s.subs = map[jsonrpc2.ID]subscription{}
	}
	s.subs[req.ID] = c.sub
	id := req.ID
	s.notify(protocol.NotificationSubscriptionsAcknowledged,
		map[string]any{"_meta": map[string]any{protocol.MetaSubscriptionID: id}, "notifications": ack}, &id)
}

// cancelling is notifications/cancelled: the client ends a subscription
// or gives up a call.
type cancelling struct {
	id     jsonrpc2.ID
	reason string
}

func (c *cancelling) apply(s *session, ctx actor.Context, _ *transport.Request) {
	if s.endSubscription(c.id) {
		return
	}
	call, ok := s.calls.get(c.id)
	if !ok || call.cancelled || call.answered {
		return // finished already, or unknown: the spec says ignore it
	}
	call.cancelled = true
	s.log.Info("call cancelled by client", "id", c.id.String(), "tool", call.tool, "reason", c.reason)
	if call.inv.claimed.CompareAndSwap(false, true) {
		call.inv.unstarted()
	}
	ctx.Stop(call.pid)
	s.out.Unanswered(c.id)
}
