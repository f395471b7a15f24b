package mcphttp

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

	"github.com/sourcegraph/jsonrpc2"

	"troupe/actors/httptransport"
	"troupe/actors/transport"
	"troupe/identity"
	"troupe/protocol"
)

// statelessByBody reports whether a message that came with an
// Mcp-Session-Id belongs to the stateless era by its body alone:
// server/discover, or a _meta protocol version that is not one of the
// handshake revisions (those have sessions, and the session refuses the
// request itself).
func statelessByBody(m message) bool {
	if m.req == nil || m.req.Era != protocol.EraStateless {
		return false
	}
	return m.req.Method == protocol.MethodServerDiscover || !m.req.Version.HasHandshake()
}

// refuseSessionID answers a 2026-07-28 request that came with an
// Mcp-Session-Id: 400 with -32600 (Invalid Request). Served in that
// session it would skip this era's header checks and run with the
// session's state; served without it, the client would believe its
// session carried it. The answer mints and echoes no session id, as the
// transport asks of a stateless-era server.
func (h *Handler) refuseSessionID(w http.ResponseWriter, m message) {
	var id *jsonrpc2.ID
	if !m.req.Notif {
		id = &m.req.ID
	}
	const msg = "Invalid Request: a 2026-07-28 request carries no Mcp-Session-Id " +
		"(sessions belong to the initialize-based revisions): send it without the header"
	h.log.Debug("2026-07-28 request refused", "status", http.StatusBadRequest, "reason", "Mcp-Session-Id")
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id,
		"error": protocol.NewError(protocol.CodeInvalidRequest, msg, nil)})
	if err != nil {
		h.refuse(w, http.StatusInternalServerError, "cannot encode the error")
		return
	}
	h.refused(http.StatusBadRequest)
	writeJSON(w, http.StatusBadRequest, body)
}

// postStateless serves one stateless-era request. There is no session in
// that era: the request's _meta (as the edge read it) and headers are
// checked here (-32602, -32022, -32020, 404 with -32601, each with 400 as
// the transport asks), then a hidden session serves this request alone
// (requestSession), answers as JSON or as an SSE
// stream scoped to the request, and is closed. No session id is issued. A
// client that closes the response stream before the answer cancels the
// call: closing the session stops it.
func (h *Handler) postStateless(w http.ResponseWriter, r *http.Request, m message, acceptJSON, acceptSSE bool) {
	if m.req.Notif {
		// The revision defines no client notification over HTTP (closing
		// the stream cancels); accept and ignore, as the transport says.
		w.WriteHeader(http.StatusAccepted)
		return
	}
	id := m.req.ID
	if perr := m.req.Refused; perr != nil {
		h.statelessError(w, http.StatusBadRequest, id, perr.Code, perr.Message, perr.Data)
		return
	}
	name, named, msg := headerMismatch(r, m.req)
	if msg != "" {
		h.statelessError(w, http.StatusBadRequest, id, protocol.CodeHeaderMismatch, msg, nil)
		return
	}
	if !h.host.Serves(m.req.Method, protocol.EraStateless) {
		h.statelessError(w, http.StatusNotFound, id, protocol.CodeMethodNotFound, "Method not found: "+m.req.Method, nil)
		return
	}
	m.req.Name, m.req.Named = name, named
	if h.routeStateless(w, r, m) {
		return // another node issued the request's state, or keeps the output it reads (cluster.go)
	}
	if m.req.Method == protocol.MethodSubscriptionsListen && !acceptSSE {
		h.refuse(w, http.StatusNotAcceptable, "subscriptions/listen answers with an event stream: Accept must include text/event-stream")
		return
	}
	listen := m.req.Method == protocol.MethodSubscriptionsListen
	owner := *m.req.Credential
	s, release, ok := h.requestSession(w, m.req.Identity, listen)
	if !ok {
		return
	}
	answered := false
	defer func() {
		release()
		// A session whose request was answered serves the caller's next
		// one (no actor is started per request); one whose client left
		// before the answer is closed, which stops the call.
		if !answered || listen || h.closing.Load() || !h.pool.put(owner, s) {
			s.Close()
		}
	}()
	st := s.Request(m.req, acceptSSE, acceptJSON)
	detach, err := st.Attach()
	if err != nil {
		h.refuse(w, http.StatusConflict, err.Error())
		return
	}
	defer detach()
	ctx, stop := untilSessionEnds(r.Context(), s)
	defer stop()
	events, done, err := st.Read(ctx, 0, 0)
	if err != nil {
		return // the client left before anything was ready: Close cancels the call
	}
	if len(events) == 0 && done {
		w.Header().Set("Retry-After", "5")
		h.refuse(w, http.StatusServiceUnavailable, "the request was not answered (the server is shutting down)")
		return
	}
	if events[0].Final && acceptJSON || !acceptSSE {
		final := awaitFinal(ctx, st, events, done)
		if final == nil {
			return // the client left (Close cancels), or the server stopped the call
		}
		s.Delivered(st)
		if retry, ok := protocol.RetryAfter(final.Error); ok {
			w.Header().Set("Retry-After", strconv.Itoa(retry))
			h.refused(http.StatusTooManyRequests) // counted with the front's own refusals
		}
		writeJSON(w, answerStatus(final.Error), final.Data)
		answered = true
		return
	}
	answered = h.streamEvents(w, ctx, s, st, 0, events, done)
}

// requestSession starts the hidden session that serves one stateless-era
// request (or takes an idle one of the same caller from the pool). It is no session in the protocol's sense, so it takes no slot
// of http.max_sessions: it holds one of http.max_stateless_requests, or for
// subscriptions/listen (open as long as the client wants) one of
// http.max_subscriptions, from now until the session has ended. Over its
// bound the request gets the same 503 as an initialize over max_sessions.
func (h *Handler) requestSession(w http.ResponseWriter, who *identity.Identity, listen bool) (*httptransport.Handle, func(), bool) {
	if h.shuttingDown(w) {
		return nil, nil, false
	}
	count, limit, what, key := &h.stateless, h.opts.MaxStatelessRequests, "2026-07-28 requests in flight", "http.max_stateless_requests"
	if listen {
		count, limit, what, key = &h.listening, h.opts.MaxSubscriptions, "open subscriptions", "http.max_subscriptions"
	}
	h.mu.Lock()
	if *count >= limit {
		h.mu.Unlock()
		h.overLimit(w, what, key, limit)
		return nil, nil, false
	}
	*count++
	h.mu.Unlock()
	release := func() { // the request's end
		h.mu.Lock()
		*count--
		h.mu.Unlock()
	}
	if !listen {
		if s := h.pool.take(who.Owner()); s != nil {
			return s, release, true
		}
	}
	s, err := h.host.StartHTTPSession(newSessionID(), who, nil)
	if err != nil {
		release()
		h.log.Error("starting a 2026-07-28 request's session", "err", err)
		h.refuse(w, http.StatusServiceUnavailable, "cannot start serving the request")
		return nil, nil, false
	}
	return s, release, true
}

// statelessInFlight is how many 2026-07-28 requests and subscriptions hold
// a slot now.
func (h *Handler) statelessInFlight() (requests, subscriptions int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.stateless, h.listening
}

// answerStatus is the HTTP status of a 2026-07-28 answer, from the error
// it answers with (httptransport.Event.Error; nil for a result, an
// input_required result included): 400 for the errors the transport says
// are client faults, 429 for a request over its identity's limits (the
// session refused it before serving it; Retry-After is the error's), 200
// otherwise.
func answerStatus(e *jsonrpc2.Error) int {
	if e != nil {
		switch e.Code {
		case protocol.CodeHeaderMismatch, protocol.CodeMissingCapability, protocol.CodeUnsupportedVersion:
			return http.StatusBadRequest
		case protocol.CodeRateLimited:
			return http.StatusTooManyRequests
		}
	}
	return http.StatusOK
}

// statelessError answers with a JSON-RPC error that names the request.
func (h *Handler) statelessError(w http.ResponseWriter, status int, id jsonrpc2.ID, code int64, message string, data any) {
	h.log.Debug("2026-07-28 request refused", "status", status, "code", code, "reason", message)
	body, err := json.Marshal(&jsonrpc2.Response{ID: id, Error: protocol.NewError(code, message, data)})
	if err != nil {
		h.refuse(w, http.StatusInternalServerError, "cannot encode the error")
		return
	}
	writeJSON(w, status, body)
}

// namedMethods are the methods whose Mcp-Name header mirrors params.name
// or params.uri.
var namedMethods = map[string]bool{
	protocol.MethodToolsCall:     true,
	protocol.MethodResourcesRead: true,
	"prompts/get":                true,
}

// headerMismatch checks the headers 2026-07-28 requires against the body
// and returns the -32020 message, or "" when they agree. For a method
// whose params name something (namedMethods) it returns Mcp-Name's value,
// checked for presence and form only: the session compares it with the
// name it decodes from the params (transport.Named), so the header is
// checked against the very value the request then uses, never against a
// second reading of the body.
func headerMismatch(r *http.Request, req *transport.Request) (name string, named bool, msg string) {
	pv := r.Header.Get("Mcp-Protocol-Version")
	switch {
	case pv == "":
		return "", false, "Header mismatch: the MCP-Protocol-Version header is required"
	case pv != string(req.Version):
		return "", false, protocol.HeaderMismatch("MCP-Protocol-Version", pv, string(req.Version))
	}
	method := r.Header.Get("Mcp-Method")
	switch {
	case method == "":
		return "", false, "Header mismatch: the Mcp-Method header is required"
	case method != req.Method:
		return "", false, protocol.HeaderMismatch("Mcp-Method", method, req.Method)
	}
	if !namedMethods[req.Method] {
		return "", false, ""
	}
	values := r.Header.Values("Mcp-Name")
	if len(values) == 0 {
		return "", false, "Header mismatch: the Mcp-Name header is required for " + req.Method
	}
	got, ok := decodeHeaderValue(values[0])
	switch {
	case len(values) > 1:
		return "", false, "Header mismatch: Mcp-Name is given more than once"
	case !ok:
		return "", false, "Header mismatch: the Mcp-Name header value is malformed"
	}
	return got, true, ""
}

// decodeHeaderValue undoes the transport's value encoding: a plain value
// of visible ASCII, space and tab, or "=?base64?…?=" around the base64 of
// UTF-8 text.
func decodeHeaderValue(v string) (string, bool) {
	for i := 0; i < len(v); i++ {
		if c := v[i]; (c < 0x20 && c != '\t') || c > 0x7e {
			return "", false
		}
	}
	if strings.HasPrefix(v, "=?base64?") && strings.HasSuffix(v, "?=") && len(v) >= len("=?base64??=") {
		b, err := base64.StdEncoding.DecodeString(v[len("=?base64?") : len(v)-len("?=")])
		if err != nil {
			return "", false
		}
		return string(b), true
	}
	return v, true
}
