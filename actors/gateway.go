package actors

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"

	"troupe/actors/transport"
	"troupe/protocol"
	"troupe/tools"
)

// The gateway methods: what troupe's downstream servers offer beside their
// tools (prompts, completions), served to troupe's clients. Each method is
// a tool of SessionOptions.Gateway named after the method, which app builds
// over the downstream servers; the session runs it as a call (the invoker's
// deadline, cancellation, audit record, metrics and span, as for
// tools/call), with the request's params as its arguments, and answers with
// its structured content or a JSON-RPC error (methodAnswer). Talking to a
// server is network I/O, which a handler must never do: so they are calls.

// GatewayErrorCode is the key, in the data of a gateway tool's error
// (tools.Error's _meta), of the JSON-RPC error code the method answers
// with: a downstream server's own code passes through unchanged.
const GatewayErrorCode = "code"

// GatewayErrorData is the key, beside GatewayErrorCode, of the error's
// data as the downstream server sent it (raw JSON); without it the error
// has no data.
const GatewayErrorData = "data"

// gatewayCall serves a gateway method as a call of the Gateway tool of the
// method's name; without one (no downstream server is configured) the
// method does not exist.
func gatewayCall(v SessionView, req *transport.Request) (any, error) {
	reg := v.Options().Gateway
	if reg == nil {
		return nil, &Refusal{Code: protocol.CodeMethodNotFound, Message: "method not found: " + req.Method}
	}
	if _, ok := reg.Lookup(GatewayTool(req.Method)); !ok {
		return nil, &Refusal{Code: protocol.CodeMethodNotFound, Message: "method not found: " + req.Method}
	}
	args := req.RawParams()
	if len(args) > 0 && args[0] != '{' && string(args) != "null" {
		return nil, invalidParams(req.Method + " takes an object")
	}
	if p, ok := req.Params.(*promptsGetParams); ok {
		// Over HTTP in 2026-07-28, Mcp-Name names the prompt.
		if err := nameAgrees(req, p.Name); err != nil {
			return nil, err
		}
	}
	// The tool learns the request's era (a list's cache hint, the era's
	// errors) from troupe, never from the client: troupe's member comes
	// last, so it is the one a reader sees (the params are not decoded
	// again to add it).
	args = appendMember(args, "stateless", strconv.FormatBool(req.Era == protocol.EraStateless))
	return &startingCall{tool: GatewayTool(req.Method), args: args, registry: reg, method: true}, nil
}

// appendMember is the JSON object obj (checked at the edge; empty or null
// for none) with the member name: value added at its end.
func appendMember(obj json.RawMessage, name, value string) json.RawMessage {
	member := strconv.Quote(name) + ":" + value
	end := bytes.LastIndexByte(obj, '}')
	if len(obj) == 0 || obj[0] != '{' || end < 0 {
		return json.RawMessage("{" + member + "}")
	}
	out := make([]byte, 0, len(obj)+len(member)+1)
	out = append(out, obj[:end]...)
	if len(bytes.TrimSpace(obj[1:end])) > 0 {
		out = append(out, ',')
	}
	out = append(out, member...)
	return append(out, '}')
}

// gatewayCapabilities adds to caps what the Gateway serves: prompts (whose
// list may change as servers come and go), completions and resource
// subscriptions (in 2026-07-28, server/discover, when the
// resources.subscribe tool is a ResourceWatcher).
func gatewayCapabilities(reg *tools.Registry, caps *protocol.ServerCapabilities, stateless bool) {
	if reg == nil {
		return
	}
	if _, ok := reg.Lookup(GatewayTool(protocol.MethodPromptsList)); ok {
		caps.Prompts = &protocol.PromptsCapability{ListChanged: true}
	}
	if _, ok := reg.Lookup(GatewayTool(protocol.MethodCompletionComplete)); ok {
		caps.Completions = &struct{}{}
	}
	if _, ok := reg.Lookup(GatewayTool(protocol.MethodResourcesList)); ok && caps.Resources != nil {
		caps.Resources.ListChanged = true
	}
	if _, ok := reg.Lookup(GatewayTool(protocol.MethodResourcesSubscribe)); ok && caps.Resources != nil {
		// 2026-07-28 subscribes with resourceSubscriptions on
		// subscriptions/listen, which a ResourceWatcher serves.
		if _, watches := resourceWatcher(reg); !stateless || watches {
			caps.Resources.Subscribe = true
		}
	}
}

// gatewayCode is the code a gateway error's data names, if it names one.
func gatewayCode(data map[string]string) (int64, bool) {
	c, ok := data[GatewayErrorCode]
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(c, 10, 64)
	return n, err == nil
}

// GatewayTool is the name of the Gateway tool that serves method
// (tool names cannot hold "/": prompts/get is prompts.get).
func GatewayTool(method string) string { return strings.ReplaceAll(method, "/", ".") }

// gatewayChanged says a downstream server's prompt list (or, with
// resources, its resource list) changed: sent by Host.PromptsChanged and
// Host.ResourcesChanged to the server actor, which passes it to every
// session; each tells its client (session.gatewayChanged).
type gatewayChanged struct{ resources bool }

// PromptsChanged tells every session that the prompts the Gateway serves
// changed (a downstream server sent notifications/prompts/list_changed, or
// connected).
func (h *Host) PromptsChanged() {
	h.system.Root.Send(h.server, &gatewayChanged{})
}

// ResourcesChanged tells every session that the resources the Gateway
// serves changed (notifications/resources/list_changed, or a server
// connected).
func (h *Host) ResourcesChanged() {
	h.system.Root.Send(h.server, &gatewayChanged{resources: true})
}

// SetGateway makes reg the Gateway of the sessions that start from now on
// (nil: none, the methods are not declared), as a reload adds the first
// downstream server or removes the last; running sessions keep the one
// whose capabilities they declared.
func (h *Host) SetGateway(reg *tools.Registry) {
	h.system.Root.Send(h.server, &gatewaySet{gateway: reg})
}

// gatewayChanged sends the list_changed notification to an initialized
// session's client and to each subscription that asked for it.
func (s *session) gatewayChanged(msg *gatewayChanged) {
	if s.opts.Gateway == nil {
		return
	}
	method := protocol.NotificationPromptsListChanged
	if msg.resources {
		method = protocol.NotificationResourcesListChanged
	}
	if s.version != "" {
		s.notify(method, nil, nil)
	}
	for id, sub := range s.subs {
		if !msg.resources && sub.prompts || msg.resources && sub.resources {
			s.notify(method, map[string]any{"_meta": map[string]any{protocol.MetaSubscriptionID: id}}, &id)
		}
	}
}

// gatewayFor is the Gateway when it serves method, else nil.
func gatewayFor(v SessionView, method string) *tools.Registry {
	reg := v.Options().Gateway
	if reg == nil {
		return nil
	}
	if _, ok := reg.Lookup(GatewayTool(method)); !ok {
		return nil
	}
	return reg
}

// hasCursor says the list request names a cursor: a page after the first.
func hasCursor(req *transport.Request) bool {
	p, _ := req.Params.(*pageParams)
	return p != nil && p.Cursor != nil
}

// gatewayList starts the Gateway's merged list for req with troupe's own
// entries (own, on the first page) before the servers'; the arguments are
// made here, so a client cannot pass entries of its own.
func gatewayList(req *transport.Request, reg *tools.Registry, own any) (any, error) {
	if req.Invalid != nil {
		return nil, invalidParams(req.Method + ": " + describeJSONError(req.Invalid))
	}
	var cursor *string
	if p, ok := req.Params.(*pageParams); ok {
		cursor = p.Cursor
	}
	args, err := json.Marshal(map[string]any{"cursor": cursor, "own": own, "stateless": req.Era == protocol.EraStateless})
	if err != nil {
		return nil, err
	}
	return &startingCall{tool: GatewayTool(req.Method), args: args, registry: reg, method: true}, nil
}
