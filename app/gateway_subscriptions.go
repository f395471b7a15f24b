package app

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"troupe/downstream"
	"troupe/protocol"
	"troupe/tools"
)

// Resource subscriptions through the gateway: a session's
// resources/subscribe holds the URI; the first hold subscribes once at the
// server that owns it (as resources/read routes), the last one to go
// (resources/unsubscribe, or the session's end) unsubscribes. The server's
// notifications/resources/updated reach the sessions holding that URI
// only. Subscriptions are of the session-based revisions: a 2026-07-28
// client has no session to hold one.

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

	mu    sync.Mutex
	byURI map[string]*heldURI
	work  sync.WaitGroup
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
	id := req.Session.ID()
	ss.mu.Lock()
	if h, ok := ss.byURI[p.URI]; ok {
		h.sessions[id] = req.Session
		ss.mu.Unlock()
		return struct{}{}, nil
	}
	full := len(ss.byURI) >= maxSubscriptions
	ss.mu.Unlock()
	if full {
		return nil, tools.Errorf(tools.KindInvalidArgument, "too many resource subscriptions (limit %d)", maxSubscriptions)
	}
	var last error
	for _, s := range ss.g.readRoute(p.URI) {
		sub, ok := subscriberOf(s)
		if !ok {
			continue
		}
		err := sub.Subscribe(ctx, p.URI)
		if err == nil {
			ss.mu.Lock()
			h, ok := ss.byURI[p.URI]
			if !ok {
				h = &heldURI{server: s.name, sub: sub, sessions: map[string]tools.Session{}}
				ss.byURI[p.URI] = h
			}
			h.sessions[id] = req.Session
			ss.mu.Unlock()
			return struct{}{}, nil
		}
		var rpc *downstream.RPCError
		if ctx.Err() != nil || errors.As(err, &rpc) && !passOn(rpc.Code) {
			return nil, err
		}
		last = err
	}
	var rpc *downstream.RPCError
	if errors.As(last, &rpc) && rpc.Code != protocol.CodeMethodNotFound {
		return nil, last
	}
	return nil, &downstream.RPCError{Code: protocol.CodeResourceNotFound, Message: "no server can subscribe to " + p.URI}
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

// sessionEnded drops every hold of session id; URIs nobody holds any more
// are unsubscribed in the background.
func (ss *subscriptions) sessionEnded(id string) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	for uri, h := range ss.byURI {
		if _, ok := h.sessions[id]; !ok {
			continue
		}
		delete(h.sessions, id)
		if len(h.sessions) > 0 {
			continue
		}
		delete(ss.byURI, uri)
		ss.work.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), unsubscribeTimeout)
			defer cancel()
			if err := h.sub.Unsubscribe(ctx, uri); err != nil {
				ss.g.log.Debug("unsubscribing after the last session ended failed", "server", h.server, "uri", uri, "err", err)
			}
		})
	}
}

// updated relays a server's notifications/resources/updated to the
// sessions holding its URI at that server.
func (ss *subscriptions) updated(server string, params json.RawMessage) {
	var p struct {
		URI string `json:"uri"`
	}
	if json.Unmarshal(params, &p) != nil || p.URI == "" {
		return
	}
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

// Wait implements tools.SessionWaiter.
func (t subscribeTool) Wait() { t.ss.work.Wait() }
