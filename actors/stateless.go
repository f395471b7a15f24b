package actors

import (
	"encoding/json"

	"github.com/sourcegraph/jsonrpc2"

	"troupe/protocol"
)

// The stateless era (2026-07-28) in the session: its results' completion,
// its errors with the spec's data, and its subscriptions. Its requests
// are read at the edge (table.go) and served by the same handlers as the
// handshake era's, which read the request's own version and capabilities.

// Serves reports whether the method table serves method as a request in
// era: the HTTP front answers 404 for a stateless-era method it does not.
func (h *Host) Serves(method string, era protocol.Era) bool {
	return h.opts.exec.table.served(method, era)
}

// completeStateless adds resultType, the server's identity and the cache
// hint to a stateless-era request's result.
func (s *session) completeStateless(raw json.RawMessage, cache *protocol.CacheHint) json.RawMessage {
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
	if rl, ok := data.(protocol.RateLimited); ok {
		s.log.Info("request rejected", "id", id.String(), "code", code, "error", message, "correlation_id", rl.CorrelationID)
	} else {
		s.log.Info("request rejected", "id", id.String(), "code", code, "error", message)
	}
	s.send(&jsonrpc2.Response{ID: id, Error: protocol.NewError(code, message, data)})
}

// subscription is one open subscriptions/listen request: what it agreed
// to deliver: tools list changes, and prompts and resources list changes
// when a gateway relays the downstream servers' (troupe's own resources
// are calls' outputs, whose list changes are not announced).
type subscription struct {
	tools     bool
	prompts   bool
	resources bool
	// uris are the resourceSubscriptions asked for (listen.go); once
	// acknowledged, those the gateway watches.
	uris []string
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
	sub, ok := s.subs[id]
	if !ok {
		return false
	}
	delete(s.subs, id)
	s.unwatch(id, sub)
	s.log.Debug("subscription cancelled by client", "id", id.String())
	s.out.Unanswered(id)
	return true
}

// closeSubscriptions ends every subscription gracefully (the server is
// draining): each listen request gets its completion result.
func (s *session) closeSubscriptions() {
	for id, sub := range s.subs {
		s.unwatch(id, sub)
		b, err := json.Marshal(map[string]any{"_meta": map[string]any{protocol.MetaSubscriptionID: id}})
		if err != nil {
			continue
		}
		raw := s.completeStateless(b, nil)
		s.send(&jsonrpc2.Response{ID: id, Result: &raw})
	}
	s.subs = nil
}
