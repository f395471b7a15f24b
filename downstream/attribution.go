package downstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"sync"
	"time"

	"troupe/protocol"
)

// notifyTimeout bounds the notifications and answers the client sends on
// its own initiative (cancellations, answers to server requests), which
// have no caller's context.
const notifyTimeout = 5 * time.Second

// flight is one CallTool in flight: its progress token and observer.
type flight struct {
	token string
	obs   Observer
	// ctx ends when the call ends (or the connection does); elicitations
	// for the call run under it.
	ctx    context.Context
	cancel context.CancelFunc

	// mu is held while Progress or Log runs, so that once end has taken it
	// no callback runs any more: observers never outlive their CallTool.
	mu    sync.Mutex
	ended bool
	// urls are the elicitationIds of the URL-mode elicitations relayed
	// for the call, so their notifications/elicitation/complete find it.
	urls map[string]bool

	// asking counts the server's questions (elicitation/create) attributed
	// to the call whose answers are not in yet; guarded by the client's mu.
	// A call that waits for its answer (a parked one waits up to
	// approvals.timeout) is not the one asking the next question: see
	// askingFlight.
	asking int
}

// notificationElicitationComplete is sent by a server when the
// out-of-band interaction of a URL-mode elicitation is over (2025-11-25).
const notificationElicitationComplete = "notifications/elicitation/complete"

// methodSampling is the request by which a server asks the client's model
// for a completion (sampling/createMessage).
const methodSampling = "sampling/createMessage"

// maxURLElicitations bounds the elicitationIds one call remembers.
const maxURLElicitations = 64

// relayedURL records a URL-mode elicitation relayed for the call.
func (f *flight) relayedURL(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.urls == nil {
		f.urls = map[string]bool{}
	}
	if len(f.urls) < maxURLElicitations {
		f.urls[id] = true
	}
}

// elicitationComplete delivers notifications/elicitation/complete when the
// elicitation is the call's; false means it is not.
func (f *flight) elicitationComplete(id string, params json.RawMessage) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ended || !f.urls[id] {
		return false
	}
	delete(f.urls, id)
	if f.obs.ElicitationComplete != nil {
		f.obs.ElicitationComplete(params)
	}
	return true
}

// progress delivers notifications/progress unless the call has ended.
func (f *flight) progress(p, total float64, msg string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.ended && f.obs.Progress != nil {
		f.obs.Progress(p, total, msg)
	}
}

// logMessage delivers notifications/message; false means nobody took it.
func (f *flight) logMessage(level protocol.LoggingLevel, logger string, data json.RawMessage) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ended || f.obs.Log == nil {
		return false
	}
	f.obs.Log(level, logger, data)
	return true
}

func (f *flight) end() {
	f.cancel()
	f.mu.Lock()
	f.ended = true
	f.mu.Unlock()
}

// startFlight registers a CallTool under a fresh progress token.
func (c *Client) startFlight(obs Observer) *flight {
	ctx, cancel := context.WithCancel(c.life)
	f := &flight{obs: obs, ctx: ctx, cancel: cancel}
	c.mu.Lock()
	c.tokens++
	f.token = "troupe-" + strconv.FormatUint(c.tokens, 10)
	c.flights[f.token] = f
	c.mu.Unlock()
	return f
}

// endFlight forgets a CallTool; after it returns no observer of the call
// runs, and the call's elicitations see their context end.
func (c *Client) endFlight(f *flight) {
	c.mu.Lock()
	delete(c.flights, f.token)
	c.mu.Unlock()
	f.end()
}

// soleFlight is the stdio attribution rule: a server message that names no
// call (notifications/message, elicitation/create) belongs to a call only
// when exactly one call is in flight; with none or several it belongs to
// nobody, so one caller never receives another's traffic.
func (c *Client) soleFlight() *flight {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.flights) != 1 {
		return nil
	}
	for _, f := range c.flights {
		return f
	}
	return nil
}

// askingFlight is the stdio attribution rule for a server's question
// (elicitation/create), which names no call either: it belongs to the one
// call in flight that is not already waiting for the answer to a question
// of its own. A call blocked in a question does not ask the next one, so
// a call parked until its caller answers (or a person slow to answer)
// leaves the server's questions to the call that is running; with two
// calls running the question belongs to neither for sure and goes to
// nobody (declined), as with soleFlight. When the only call in flight is
// waiting already, a second question is its own (a server may ask two at
// once).
func (c *Client) askingFlight() *flight {
	c.mu.Lock()
	defer c.mu.Unlock()
	var free *flight
	n := 0
	for _, f := range c.flights {
		if f.asking == 0 {
			free, n = f, n+1
		}
	}
	switch {
	case n == 1:
		return free
	case n == 0 && len(c.flights) == 1:
		for _, f := range c.flights {
			return f
		}
	}
	return nil
}

// unnamedFlight is the call a server's request that names no call belongs
// to: a question (elicitation/create, sampling/createMessage) goes to the
// asking flight, anything else to the sole flight. It is the rule for
// every request that arrives outside a call's own stream: all of stdio's,
// and over HTTP those on the standalone GET stream, where a server that
// sends its question without relating it to the call puts it (the
// conformance suite's fixture server does: its tools ask through the
// session, not the request).
func (c *Client) unnamedFlight(method string) *flight {
	if isQuestion(method) {
		return c.askingFlight()
	}
	return c.soleFlight()
}

// isQuestion reports whether a server's request asks the client's user or
// model something on behalf of a call.
func isQuestion(method string) bool {
	return method == protocol.MethodElicitationCreate || method == methodSampling
}

// spawn runs fn in a goroutine the client owns (waited for by Close);
// false when the client is stopping and fn was not started.
func (c *Client) spawn(fn func()) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopping {
		return false
	}
	c.wg.Go(fn)
	return true
}

// notification handles a notification from the server. f is the call it is
// attributed to (the POST stream it came on, or the sole call on stdio),
// nil for none. Progress is matched by its token, never by f.
func (c *Client) notification(method string, params json.RawMessage, f *flight) {
	switch method {
	case protocol.NotificationProgress:
		var p struct {
			Token    json.RawMessage `json:"progressToken"`
			Progress float64         `json:"progress"`
			Total    *float64        `json:"total"`
			Message  string          `json:"message"`
		}
		var token string
		if json.Unmarshal(params, &p) != nil || json.Unmarshal(p.Token, &token) != nil {
			c.log.Debug("upstream: malformed notifications/progress dropped")
			return
		}
		c.mu.Lock()
		target := c.flights[token]
		c.mu.Unlock()
		if target == nil {
			c.log.Debug("upstream: progress for no call in flight dropped", "token", token)
			return
		}
		total := 0.0
		if p.Total != nil {
			total = *p.Total
		}
		target.progress(p.Progress, total, p.Message)
	case protocol.NotificationMessage:
		var m struct {
			Level  protocol.LoggingLevel `json:"level"`
			Logger string                `json:"logger"`
			Data   json.RawMessage       `json:"data"`
		}
		if json.Unmarshal(params, &m) != nil {
			c.log.Debug("upstream: malformed notifications/message dropped")
			return
		}
		if f != nil && f.logMessage(m.Level, m.Logger, m.Data) {
			return
		}
		c.logDownstream(m.Level, m.Logger, m.Data)
	case notificationElicitationComplete:
		var p struct {
			ID string `json:"elicitationId"`
		}
		if json.Unmarshal(params, &p) != nil || p.ID == "" {
			c.log.Debug("upstream: malformed notifications/elicitation/complete dropped")
			return
		}
		c.mu.Lock()
		flights := slices.Collect(maps.Values(c.flights))
		c.mu.Unlock()
		for _, f := range flights {
			if f.elicitationComplete(p.ID, params) {
				return
			}
		}
		c.log.Debug("upstream: elicitation/complete for no elicitation of a call in flight dropped", "elicitation", p.ID)
	case protocol.NotificationToolsListChanged:
		if c.h.ToolsChanged != nil {
			c.h.ToolsChanged()
		}
	case protocol.NotificationPromptsListChanged:
		if c.h.PromptsChanged != nil {
			c.h.PromptsChanged()
		}
	case protocol.NotificationResourcesListChanged:
		if c.h.ResourcesChanged != nil {
			c.h.ResourcesChanged()
		}
	case protocol.NotificationResourcesUpdated:
		if c.h.ResourceUpdated != nil {
			c.h.ResourceUpdated(params)
		}
	case protocol.NotificationCancelled:
		var p struct {
			RequestID json.RawMessage `json:"requestId"`
		}
		if json.Unmarshal(params, &p) != nil || p.RequestID == nil {
			return
		}
		c.mu.Lock()
		cancel := c.requests[idKey(p.RequestID)]
		delete(c.requests, idKey(p.RequestID))
		c.mu.Unlock()
		if cancel != nil {
			cancel()
		}
	default:
		c.log.Debug("upstream: notification ignored", "method", method)
	}
}

// maxLoggedData bounds the data of a downstream log message written to
// troupe's log.
const maxLoggedData = 4 << 10

// logDownstream writes a server's notifications/message that no call took
// to troupe's log.
func (c *Client) logDownstream(level protocol.LoggingLevel, logger string, data json.RawMessage) {
	var lv slog.Level
	switch s := level.Severity(); {
	case s <= 0:
		lv = slog.LevelDebug
	case s <= 2:
		lv = slog.LevelInfo
	case s == 3:
		lv = slog.LevelWarn
	default:
		lv = slog.LevelError
	}
	text := string(data)
	if len(text) > maxLoggedData {
		text = text[:maxLoggedData] + "…"
	}
	c.log.Log(context.Background(), lv, "upstream: downstream log message", "level", string(level), "logger", logger, "data", text)
}

// reply sends the answer to a server→client request; exactly one of
// result and rpcErr is set.
type reply func(ctx context.Context, result json.RawMessage, rpcErr *RPCError) error

// The fixed answers to server→client requests troupe does not relay.
var (
	answerEmpty   = json.RawMessage(`{}`)
	answerRoots   = json.RawMessage(`{"roots":[]}`)
	answerDecline = json.RawMessage(`{"action":"decline"}`)
	answerCancel  = json.RawMessage(`{"action":"cancel"}`)
)

// serverRequest answers a request from the server in a goroutine of the
// client (the reader goes on reading meanwhile). f is the call the request
// is attributed to, nil for none. ping gets {}, roots/list an empty list,
// elicitation/create goes to the call's Observer.Elicit (declined without
// one), sampling/createMessage to its Observer.Sample (see sample),
// anything else is -32601.
func (c *Client) serverRequest(id json.RawMessage, method string, params json.RawMessage, f *flight, send reply) {
	key := idKey(id)
	parent := c.life
	if f != nil {
		parent = f.ctx
	}
	ctx, cancel := context.WithCancel(parent)
	// A question counts as the call's from now until it is answered, so
	// the next message the reader attributes already sees it (the reader
	// calls serverRequest before it reads on).
	question := f != nil && isQuestion(method)
	c.mu.Lock()
	c.requests[key] = cancel
	if question {
		f.asking++
	}
	c.mu.Unlock()
	answered := func() {
		if question {
			c.mu.Lock()
			f.asking--
			c.mu.Unlock()
		}
	}
	started := c.spawn(func() {
		defer cancel()
		result, rpcErr := c.answer(ctx, method, params, f)
		c.mu.Lock()
		_, pending := c.requests[key]
		delete(c.requests, key)
		c.mu.Unlock()
		answered()
		if !pending || c.life.Err() != nil {
			return // the server cancelled it (no answer is due), or we are gone
		}
		sctx, scancel := context.WithTimeout(c.life, notifyTimeout)
		defer scancel()
		if err := send(sctx, result, rpcErr); err != nil {
			c.log.Debug("upstream: answer to a server request not delivered", "method", method, "err", err)
		}
	})
	if !started {
		cancel()
		answered()
	}
}

// answer computes the answer to one server→client request.
func (c *Client) answer(ctx context.Context, method string, params json.RawMessage, f *flight) (json.RawMessage, *RPCError) {
	switch method {
	case protocol.MethodPing:
		return answerEmpty, nil
	case "roots/list":
		return answerRoots, nil
	case protocol.MethodElicitationCreate:
		return c.elicit(ctx, params, f)
	case methodSampling:
		return c.sample(ctx, params, f)
	}
	return nil, &RPCError{Code: protocol.CodeMethodNotFound, Message: "method not found: " + method}
}

// elicit relays elicitation/create to the call's Observer.Elicit.
func (c *Client) elicit(ctx context.Context, params json.RawMessage, f *flight) (json.RawMessage, *RPCError) {
	var p struct {
		Mode          string `json:"mode"`
		ElicitationID string `json:"elicitationId"`
	}
	if err := json.Unmarshal(params, &p); err != nil {
		return nil, &RPCError{Code: protocol.CodeInvalidParams, Message: "elicitation/create params are not an object"}
	}
	if p.Mode != "" && p.Mode != "form" && p.Mode != "url" {
		// We declared form and URL mode; the spec has the client refuse others.
		return nil, &RPCError{Code: protocol.CodeInvalidParams, Message: "elicitation mode " + strconv.Quote(p.Mode) + " is not supported (form and url only)"}
	}
	if f == nil || f.obs.Elicit == nil {
		c.log.Debug("upstream: elicitation declined: no call to relay it to")
		return answerDecline, nil
	}
	if p.Mode == "url" && p.ElicitationID != "" {
		f.relayedURL(p.ElicitationID)
	}
	res, err := f.obs.Elicit(ctx, params)
	var rpcErr *RPCError
	switch {
	case err == nil && len(res) == 0:
		return answerDecline, nil
	case err == nil:
		return res, nil
	case errors.As(err, &rpcErr):
		return nil, rpcErr
	case ctx.Err() != nil:
		return answerCancel, nil // the call ended before anybody answered
	}
	c.log.Debug("upstream: elicitation relay failed", "err", err)
	return nil, &RPCError{Code: protocol.CodeInternalError, Message: "elicitation failed"}
}

// sample relays sampling/createMessage to the call's Observer.Sample. It is
// refused with a JSON-RPC error, and logged, when the server's
// configuration does not allow sampling (troupe did not declare it), when
// the request belongs to no call in flight (the call ended, or which call
// asked is not known) and when the caller cannot be asked; nothing is
// relayed then. Every relayed request is logged with the server's name.
func (c *Client) sample(ctx context.Context, params json.RawMessage, f *flight) (json.RawMessage, *RPCError) {
	var p struct {
		Messages json.RawMessage `json:"messages"`
	}
	switch {
	case !c.sampling:
		c.log.Warn("upstream: sampling request refused: sampling is not enabled for this server (set sampling = true in its [mcp_servers] table to relay it)")
		return nil, &RPCError{Code: protocol.CodeMethodNotFound,
			Message: "sampling is not available: troupe did not declare the sampling capability to this server"}
	case json.Unmarshal(params, &p) != nil || len(p.Messages) == 0:
		return nil, &RPCError{Code: protocol.CodeInvalidParams, Message: "sampling/createMessage params must be an object with messages"}
	case f == nil:
		c.log.Info("upstream: sampling request refused: no call to relay it to")
		return nil, &RPCError{Code: protocol.CodeInvalidRequest, Message: "sampling refused: the request belongs to no call in flight"}
	case f.obs.Sample == nil:
		c.log.Info("upstream: sampling request refused: the caller cannot be asked")
		return nil, &RPCError{Code: protocol.CodeInvalidRequest, Message: "sampling refused: the calling client cannot be asked"}
	}
	c.log.Info("upstream: sampling request relayed to the calling client", "bytes", len(params))
	res, err := f.obs.Sample(ctx, params)
	var rpcErr *RPCError
	switch {
	case err == nil:
		return res, nil
	case errors.As(err, &rpcErr):
		return nil, rpcErr
	case ctx.Err() != nil:
		return nil, &RPCError{Code: codeRequestCancelled, Message: "sampling cancelled: the call ended before the client answered"}
	}
	c.log.Debug("upstream: sampling relay failed", "err", err)
	return nil, &RPCError{Code: protocol.CodeInternalError, Message: "sampling failed"}
}

// codeRequestCancelled answers a request given up because its call ended
// (JSON-RPC's "request cancelled", as LSP and jsonrpc2 number it).
const codeRequestCancelled = -32800

// idKey normalizes a JSON-RPC id (a string or a number) for map lookups.
func idKey(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) > 0 && raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return "s:" + s
		}
	}
	return "n:" + string(raw)
}
