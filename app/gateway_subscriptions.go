package app

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"time"

	"troupe/downstream"
	"troupe/identity"
	"troupe/protocol"
	"troupe/tools"
)

// Resource subscriptions through the gateway: a session's
// resources/subscribe holds the URI; the first hold subscribes once at the
// server that owns it (as resources/read routes), the last one to go
// (resources/unsubscribe, or the session's end) unsubscribes. The server's
// notifications/resources/updated reach the sessions holding that URI
// only. A 2026-07-28 client, which has no session, holds URIs with the
// resourceSubscriptions of a subscriptions/listen request (actors'
// ResourceWatcher: watch and unwatch), for as long as that request is
// open; its holds are shared with the sessions' like any other.

// maxSubscriptions bounds the URIs held at once, over every session.
const maxSubscriptions = 10000

// unsubscribeTimeout bounds an unsubscribe made when a session ends.
const unsubscribeTimeout = 5 * time.Second

// subscriber is what subscriptions ask of a server (*downstream.Server).
type subscriber interface {
	Subscribe(ctx context.Context, uri string) error
	Unsubscribe(ctx context.Context, uri string) error
}

// heldURI is one URI subscribed downstream and the sessions holding it.
type heldURI struct {
	server   string
	sub      subscriber
	sessions map[string]tools.Session
}

// subscriptions keeps the held URIs. Its goroutines (unsubscribes after a
// session's end, subscribes again after a reconnect) are waited for by
// Wait.
type subscriptions struct {
	g *gateway

	// notices folds a server's floods of notifications/resources/updated
	// per URI (nil in tests that want each one).
	notices *coalescer

	mu    sync.Mutex
	byURI map[string]*heldURI
	// watching are the listen requests (holder ids) holding URIs now.
	watching map[string]bool
	work     sync.WaitGroup
}

// subscriberOf is s's source as a subscriber, if it can be one.
func subscriberOf(s gatewayServer) (subscriber, bool) {
	sub, ok := s.src.(subscriber)
	return sub, ok
}

// subscribe holds args' uri for the calling session.
func (ss *subscriptions) subscribe(ctx context.Context, req *tools.Request) (any, error) {
	var p struct {
		URI string `json:"uri"`
	}
	if err := json.Unmarshal(req.Arguments, &p); err != nil || p.URI == "" {
		return nil, tools.Errorf(tools.KindInvalidArgument, "uri is required")
	}
	if req.Session == nil {
		return nil, tools.Errorf(tools.KindInvalidArgument, "resources/subscribe needs a session")
	}
	if !ss.g.uriVisible(p.URI) {
		return nil, notFound(p.URI, false)
	}
	ctx = identity.NewContext(ctx, req.Identity)
	if grantOf(ctx) != nil && len(usableOnly(ctx, ss.g.readRoute(p.URI))) == 0 {
		return nil, notFound(p.URI, false) // none of its servers is the caller's (gateway_identity.go)
	}
	if err := ss.hold(ctx, p.URI, req.Session); err != nil {
		return nil, err
	}
	return struct{}{}, nil
}

// hold holds uri for holder: at once when it is held already, else after
// subscribing at the server that owns it. Only servers the caller in ctx
// may use are asked, and a URI held at another server is refused to it
// as unknown: a grant keeps a caller from hearing a server's updates as
// from reading its resources.
func (ss *subscriptions) hold(ctx context.Context, uri string, holder tools.Session) error {
	id := holder.ID()
	if grantOf(ctx) != nil {
		ss.mu.Lock()
		h, held := ss.byURI[uri]
		server := ""
		if held {
			server = h.server
		}
		ss.mu.Unlock()
		if held && !slices.ContainsFunc(usableOnly(ctx, ss.g.servers()), func(s gatewayServer) bool { return s.name == server }) {
			return notFound(uri, false)
		}
	}
	ss.mu.Lock()
	if h, ok := ss.byURI[uri]; ok {
		h.sessions[id] = holder
		ss.mu.Unlock()
		return nil
	}
	full := len(ss.byURI) >= maxSubscriptions
	ss.mu.Unlock()
	if full {
		return tools.Errorf(tools.KindInvalidArgument, "too many resource subscriptions (limit %d)", maxSubscriptions)
	}
	var last error
	for _, s := range usableOnly(ctx, ss.g.readRoute(uri)) {
		sub, ok := subscriberOf(s)
		if !ok {
			continue
		}
		err := sub.Subscribe(ctx, uri)
		if err == nil {
			ss.mu.Lock()
			h, ok := ss.byURI[uri]
			if !ok {
				h = &heldURI{server: s.name, sub: sub, sessions: map[string]tools.Session{}}
				ss.byURI[uri] = h
			}
			h.sessions[id] = holder
			ss.mu.Unlock()
			return nil
		}
		var rpc *downstream.RPCError
		if ctx.Err() != nil || errors.As(err, &rpc) && !passOn(rpc.Code) {
			return err
		}
		last = err
	}
	var rpc *downstream.RPCError
	if errors.As(last, &rpc) && rpc.Code != protocol.CodeMethodNotFound {
		return last
	}
	return &downstream.RPCError{Code: protocol.CodeResourceNotFound, Message: "no server can subscribe to " + uri}
}

// maxWatchedPerListen bounds the resourceSubscriptions one listen request
// has troupe watch.
const maxWatchedPerListen = 100

// watch holds uris for a 2026-07-28 client's listen request (holder):
// those [resources] shows, at most maxWatchedPerListen, subscribed in the
// background. It returns them.
func (ss *subscriptions) watch(holder tools.Session, who *identity.Identity, uris []string) []string {
	caller := identity.NewContext(context.Background(), who)
	var ok []string
	for _, u := range uris {
		if u == "" || !ss.g.uriVisible(u) || slices.Contains(ok, u) || len(ok) >= maxWatchedPerListen {
			continue
		}
		if grantOf(caller) != nil && len(usableOnly(caller, ss.g.readRoute(u))) == 0 {
			continue // none of its servers is the caller's, as for resources/subscribe
		}
		ok = append(ok, u)
	}
	id := holder.ID()
	ss.mu.Lock()
	ss.watching[id] = true
	ss.mu.Unlock()
	for _, u := range ok {
		ss.work.Go(func() {
			ctx, cancel := context.WithTimeout(caller, unsubscribeTimeout)
			defer cancel()
			if err := ss.hold(ctx, u, holder); err != nil {
				ss.g.log.Debug("resourceSubscriptions: subscribing downstream failed", "uri", u, "err", err)
				return
			}
			ss.mu.Lock()
			live := ss.watching[id]
			ss.mu.Unlock()
			if !live { // released while subscribing
				ss.release(func(h string) bool { return h == id })
			}
		})
	}
	return ok
}

// unwatch ends the holds of a listen request (holder id).
func (ss *subscriptions) unwatch(id string) {
	ss.mu.Lock()
	delete(ss.watching, id)
	ss.mu.Unlock()
	ss.release(func(h string) bool { return h == id })
}

// unsubscribe drops the calling session's hold on args' uri.
func (ss *subscriptions) unsubscribe(ctx context.Context, req *tools.Request) (any, error) {
	var p struct {
		URI string `json:"uri"`
	}
	if err := json.Unmarshal(req.Arguments, &p); err != nil || p.URI == "" {
		return nil, tools.Errorf(tools.KindInvalidArgument, "uri is required")
	}
	if req.Session == nil {
		return nil, tools.Errorf(tools.KindInvalidArgument, "resources/unsubscribe needs a session")
	}
	ss.mu.Lock()
	h, ok := ss.byURI[p.URI]
	if ok {
		delete(h.sessions, req.Session.ID())
		if len(h.sessions) == 0 {
			delete(ss.byURI, p.URI)
		} else {
			h = nil
		}
	}
	ss.mu.Unlock()
	if h != nil {
		if err := h.sub.Unsubscribe(ctx, p.URI); err != nil {
			ss.g.log.Debug("resources/unsubscribe downstream failed", "server", h.server, "uri", p.URI, "err", err)
		}
	}
	return struct{}{}, nil
}

// sessionEnded drops every hold of session id, its listen requests'
// (actors names their holders after the session) included; URIs nobody
// holds any more are unsubscribed in the background.
func (ss *subscriptions) sessionEnded(id string) {
	ss.mu.Lock()
	for h := range ss.watching {
		if strings.HasPrefix(h, id+"\x00") {
			delete(ss.watching, h)
		}
	}
	ss.mu.Unlock()
	ss.release(func(h string) bool { return h == id || strings.HasPrefix(h, id+"\x00") })
}

// release drops the holds of the holders match names; URIs nobody holds
// any more are unsubscribed in the background.
func (ss *subscriptions) release(match func(holder string) bool) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	for uri, h := range ss.byURI {
		for hid := range h.sessions {
			if match(hid) {
				delete(h.sessions, hid)
			}
		}
		if len(h.sessions) > 0 {
			continue
		}
		delete(ss.byURI, uri)
		ss.work.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), unsubscribeTimeout)
			defer cancel()
			if err := h.sub.Unsubscribe(ctx, uri); err != nil {
				ss.g.log.Debug("unsubscribing after the last holder ended failed", "server", h.server, "uri", uri, "err", err)
			}
		})
	}
}

// updated relays a server's notifications/resources/updated to the
// sessions holding its URI at that server. A flood for one URI is folded
// (ss.notices): the sessions get at most one per noticeInterval, the
// latest; an update for a URI nobody holds there is dropped at once.
func (ss *subscriptions) updated(server string, params json.RawMessage) {
	var p struct {
		URI string `json:"uri"`
	}
	if json.Unmarshal(params, &p) != nil || p.URI == "" || !ss.holds(server, p.URI) {
		return
	}
	ss.notices.send("updated\x00"+server+"\x00"+p.URI, func() {
		ss.mu.Lock()
		var to []tools.Session
		if h, ok := ss.byURI[p.URI]; ok && h.server == server {
			for _, s := range h.sessions {
				to = append(to, s)
			}
		}
		ss.mu.Unlock()
		for _, s := range to {
			s.Notify(protocol.NotificationResourcesUpdated, params)
		}
	})
}

// holds says some session holds uri at server.
func (ss *subscriptions) holds(server, uri string) bool {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	h, ok := ss.byURI[uri]
	return ok && h.server == server
}

// connected subscribes again, in the background, to the URIs held at
// server, whose new connection knows none of them.
func (ss *subscriptions) connected(server string) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	for uri, h := range ss.byURI {
		if h.server != server {
			continue
		}
		ss.work.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), unsubscribeTimeout)
			defer cancel()
			if err := h.sub.Subscribe(ctx, uri); err != nil {
				ss.g.log.Warn("subscribing again after a reconnect failed", "server", server, "uri", uri, "err", err)
			}
		})
	}
}

// subscribeTool is resources/subscribe or resources/unsubscribe as a
// gateway tool; it is told of sessions' ends (tools.SessionEnder) and
// waited for at shutdown (tools.SessionWaiter).
type subscribeTool struct {
	method string
	ss     *subscriptions
	serve  func(ctx context.Context, req *tools.Request) (any, error)
}

func (t subscribeTool) Spec() tools.Spec { return gatewayTool{method: t.method}.Spec() }

func (t subscribeTool) Call(ctx context.Context, req *tools.Request) (*protocol.CallToolResult, error) {
	res, err := t.serve(ctx, req)
	if err != nil {
		return gatewayError(err), nil
	}
	return &protocol.CallToolResult{StructuredContent: res}, nil
}

// SessionEnded implements tools.SessionEnder.
func (t subscribeTool) SessionEnded(id string) { t.ss.sessionEnded(id) }

// Watch implements actors.ResourceWatcher (a 2026-07-28 client's
// resourceSubscriptions).
func (t subscribeTool) Watch(holder tools.Session, who *identity.Identity, uris []string) []string {
	return t.ss.watch(holder, who, uris)
}

// Unwatch implements actors.ResourceWatcher.
func (t subscribeTool) Unwatch(holderID string) { t.ss.unwatch(holderID) }

// Wait implements tools.SessionWaiter.
func (t subscribeTool) Wait() { t.ss.work.Wait() }
