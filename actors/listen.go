package actors

import (
	"encoding/json"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/sourcegraph/jsonrpc2"

	"troupe/identity"
	"troupe/protocol"
	"troupe/tools"
)

// A 2026-07-28 client's resourceSubscriptions on subscriptions/listen: the
// listen request holds the URIs for as long as it is open. The gateway
// tool of resources/subscribe, when it is a ResourceWatcher, holds them
// downstream (shared with session-based subscribers) and relays the
// servers' notifications/resources/updated to a listenHolder, which hands
// them to the session to send on the listen request's stream with its
// subscription id in _meta.

// ResourceWatcher is implemented by the gateway's resources/subscribe tool
// to serve resourceSubscriptions. Both methods run on the session's
// goroutine and must not block: talking to servers happens in the
// background.
type ResourceWatcher interface {
	// Watch holds uris for holder until Unwatch, relaying their updates
	// to holder.Notify, and returns those it will watch (the others are
	// hidden, not who's to use, or over its bounds); who is the listen
	// request's caller (nil: stdio's local user).
	Watch(holder tools.Session, who *identity.Identity, uris []string) []string
	// Unwatch drops every hold of holder (by its ID).
	Unwatch(holderID string)
}

// resourceWatcher is reg's ResourceWatcher, if it has one.
func resourceWatcher(reg *tools.Registry) (ResourceWatcher, bool) {
	if reg == nil {
		return nil, false
	}
	t, ok := reg.Lookup(GatewayTool(protocol.MethodResourcesSubscribe))
	if !ok {
		return nil, false
	}
	w, ok := t.Tool.(ResourceWatcher)
	return w, ok
}

// listenHolderID names the holder of listen request id of session: the
// session's id first, so the end of the session ends it too.
func listenHolderID(session string, id jsonrpc2.ID) string {
	return session + "\x00listen:" + id.String()
}

// listenHolder is one listen request as a holder of resource
// subscriptions (tools.Session): what it is told goes to the session as a
// listenNotice.
type listenHolder struct {
	root    *actor.RootContext
	session *actor.PID
	id      jsonrpc2.ID
	holder  string
}

// ID implements tools.Session.
func (h *listenHolder) ID() string { return h.holder }

// Notify implements tools.Session.
func (h *listenHolder) Notify(method string, params any) {
	h.root.Send(h.session, &listenNotice{id: h.id, method: method, params: params})
}

// Client implements tools.Session; a listen request asks its client
// nothing, so nothing is bound to a call.
func (h *listenHolder) Client() tools.Client {
	return &peer{root: h.root, session: h.session}
}

// listenNotice is sent by a listenHolder (the gateway relaying a server's
// notification): the session sends it on listen request id's stream, with
// the subscription id in _meta, if that request is still open.
type listenNotice struct {
	id     jsonrpc2.ID
	method string
	params any
}

// listenNotify sends n on its listen request's stream.
func (s *session) listenNotify(n *listenNotice) {
	if _, open := s.subs[n.id]; !open {
		return
	}
	b, err := json.Marshal(n.params)
	if err != nil {
		return
	}
	var params map[string]any
	if json.Unmarshal(b, &params) != nil || params == nil {
		params = map[string]any{}
	}
	meta, _ := params["_meta"].(map[string]any)
	if meta == nil {
		meta = map[string]any{}
	}
	meta[protocol.MetaSubscriptionID] = n.id
	params["_meta"] = meta
	id := n.id
	s.notify(n.method, params, &id)
}

// unwatch releases what subscription id holds downstream.
func (s *session) unwatch(id jsonrpc2.ID, sub subscription) {
	if len(sub.uris) == 0 {
		return
	}
	if w, ok := resourceWatcher(s.opts.Gateway); ok {
		w.Unwatch(listenHolderID(s.id, id))
	}
}
