package downstream

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"troupe/protocol"
)

// Limits and timings of the streamable HTTP transport.
const (
	// maxJSONBody bounds an application/json answer.
	maxJSONBody = 16 << 20
	// maxResumes is how many times in a row a call's SSE stream is resumed
	// (GET with Last-Event-ID) without an event in between.
	maxResumes = 3
	// defaultRetry is the reconnection delay when the server set none.
	defaultRetry = time.Second
	// maxRetry caps the server's retry field, so a hostile value cannot
	// park a call for hours.
	maxRetry = 30 * time.Second
)

// httpTransport speaks MCP's streamable HTTP transport (2025-03-26 and
// later): each message is a POST whose answer is JSON or an SSE stream,
// and a standalone GET stream carries what the server sends outside of
// calls.
type httpTransport struct {
	c       *Client
	url     string
	where   string // the endpoint as errors show it: no userinfo, no query
	headers map[string]string
	token   string
	hc      *http.Client
	tr      *http.Transport

	mu      sync.Mutex
	session string           // Mcp-Session-Id from initialize
	version protocol.Version // sent as MCP-Protocol-Version after initialize

	wg sync.WaitGroup // the standalone GET stream
}

func newHTTP(c *Client, cfg Config) (*httpTransport, error) {
	u, err := url.Parse(cfg.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, errors.New("url must be an absolute http or https URL")
	}
	shown := url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}
	tr := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
		IdleConnTimeout:       90 * time.Second,
		MaxIdleConnsPerHost:   16,
		ForceAttemptHTTP2:     true,
		// No ResponseHeaderTimeout: a call answered as JSON sends its
		// headers only when the tool is done. The caller's ctx governs.
	}
	return &httpTransport{
		c: c, url: cfg.URL, where: shown.String(), headers: cfg.Headers, token: cfg.BearerToken, tr: tr,
		hc: &http.Client{
			Transport: tr,
			// A redirect would re-send the body elsewhere; MCP has none.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
	}, nil
}

func (h *httpTransport) setVersion(v protocol.Version) {
	h.mu.Lock()
	h.version = v
	h.mu.Unlock()
}

func (h *httpTransport) sessionID() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.session
}

// do sends one HTTP request with the configured and the session headers;
// mcp, for a request to a modern server, adds the headers that mirror its
// body.
func (h *httpTransport) do(ctx context.Context, method string, body []byte, accept, lastEventID string, mcp *mcpHeaders) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, h.url, rd)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, h.where, err)
	}
	for k, v := range h.headers {
		req.Header.Set(k, v)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	h.mu.Lock()
	session, version := h.session, h.version
	h.mu.Unlock()
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
	}
	if version != "" {
		req.Header.Set("MCP-Protocol-Version", string(version))
	}
	if mcp != nil {
		mcp.set(req.Header)
	}
	if h.token != "" {
		req.Header.Set("Authorization", "Bearer "+h.token)
	}
	if lastEventID != "" {
		req.Header.Set("Last-Event-ID", lastEventID)
	}
	resp, err := h.hc.Do(req)
	if err != nil {
		// url.Error repeats the full URL (query and all); say where
		// without it.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("%s %s: %w", method, h.where, err)
	}
	return resp, nil
}

// failed maps a request's failure: the caller's ctx, the client's end, or
// a transport failure, which means the server is unreachable and ends the
// connection.
func (h *httpTransport) failed(ctx context.Context, err error) error {
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case h.c.life.Err() != nil:
		return h.c.closedErr()
	}
	h.c.lost(err)
	return h.c.closedErr()
}

// status checks an HTTP answer: 2xx passes; 401 and 403 are an
// *AuthError; 404 on a session means the session is gone (the connection
// ends); anything else is an error, an
// *RPCError when the body is a JSON-RPC error. The body is closed unless
// the status passed.
func (h *httpTransport) status(resp *http.Response, what string) error {
	if resp.StatusCode/100 == 2 {
		return nil
	}
	defer resp.Body.Close()
	if authStatus(resp.StatusCode) {
		// The body is not read out: it is the server's, and may echo
		// what troupe sent.
		return h.c.authError(resp.StatusCode)
	}
	snippet, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
	if resp.StatusCode == http.StatusNotFound && h.sessionID() != "" {
		h.c.lost(fmt.Errorf("the server no longer knows the session (HTTP 404 on %s)", what))
		return h.c.closedErr()
	}
	if rpc := rpcErrorIn(snippet); rpc != nil {
		return rpc
	}
	return fmt.Errorf("%s: HTTP %d from %s: %q", what, resp.StatusCode, h.where, bytes.TrimSpace(snippet))
}

// message is one JSON-RPC message as it arrives over HTTP.
type message struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int64           `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	} `json:"error"`
}

// outcome is the result or error of a response.
func (m *message) outcome() (json.RawMessage, error) {
	if m.Error != nil {
		return nil, &RPCError{Code: m.Error.Code, Message: m.Error.Message, Data: m.Error.Data}
	}
	if m.Result == nil {
		return json.RawMessage("null"), nil
	}
	return m.Result, nil
}

func (h *httpTransport) call(ctx context.Context, id int64, method string, params json.RawMessage, f *flight) (json.RawMessage, error) {
	body := []byte(`{"jsonrpc":"2.0","id":` + strconv.FormatInt(id, 10) + `,"method":` + strconv.Quote(method))
	if params != nil {
		body = append(append(body, `,"params":`...), params...)
	}
	body = append(body, '}')
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(h.c.life, cancel)()
	var mcp *mcpHeaders
	if h.c.era == protocol.EraStateless {
		mcp = modernHeaders(method, params)
	}
	resp, err := h.do(rctx, http.MethodPost, body, "application/json, text/event-stream", "", mcp)
	if err != nil {
		return nil, h.failed(ctx, err)
	}
	if method == protocol.MethodServerDiscover && h.c.version == "" && resp.StatusCode/100 == 4 && !authStatus(resp.StatusCode) {
		return nil, probeRefused(resp)
	}
	if method == protocol.MethodInitialize {
		if sid := resp.Header.Get("Mcp-Session-Id"); sid != "" {
			h.mu.Lock()
			h.session = sid
			h.mu.Unlock()
		}
	}
	if err := h.status(resp, method); err != nil {
		return nil, err
	}
	defer func() { resp.Body.Close() }()
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	want := json.RawMessage(strconv.FormatInt(id, 10))
	switch mt {
	case "application/json":
		b, err := io.ReadAll(io.LimitReader(resp.Body, maxJSONBody+1))
		if err != nil {
			return nil, h.failed(ctx, fmt.Errorf("reading the answer to %s: %w", method, err))
		}
		if len(b) > maxJSONBody {
			return nil, fmt.Errorf("%s: the answer exceeds %d bytes", method, maxJSONBody)
		}
		var m message
		if err := json.Unmarshal(b, &m); err != nil || idKey(m.ID) != idKey(want) || m.Method != "" {
			return nil, fmt.Errorf("%s: the answer is not the JSON-RPC response to request %d", method, id)
		}
		return m.outcome()
	case "text/event-stream":
		return h.readCall(ctx, rctx, &resp.Body, want, method, f)
	}
	return nil, fmt.Errorf("%s: unexpected Content-Type %q", method, mt)
}

// readCall reads a call's SSE stream until the response: the requests and
// notifications before it belong to the call. A stream that ends before
// the response is resumed with GET and Last-Event-ID, as the spec has the
// client do (the server may close it at any time after an event id).
// *body is replaced by each resumed stream, so the caller closes the last.
func (h *httpTransport) readCall(ctx, rctx context.Context, body *io.ReadCloser, want json.RawMessage, method string, f *flight) (json.RawMessage, error) {
	sse := newSSEReader(*body)
	lastID, retry, resumes := "", defaultRetry, 0
	for {
		ev, err := sse.next()
		if err != nil {
			if ctx.Err() != nil || h.c.life.Err() != nil {
				return nil, h.failed(ctx, err)
			}
			if lastID == "" || resumes >= maxResumes || h.c.era == protocol.EraStateless { // the stateless revision resumes nothing
				if errors.Is(err, io.EOF) {
					return nil, fmt.Errorf("%s: the server ended the response stream without answering", method)
				}
				return nil, h.failed(ctx, fmt.Errorf("reading the answer to %s: %w", method, err))
			}
			resumes++
			(*body).Close()
			if !sleep(rctx, retry) {
				return nil, h.failed(ctx, ctx.Err())
			}
			resp, err := h.do(rctx, http.MethodGet, nil, "text/event-stream", lastID, nil)
			if err != nil {
				return nil, h.failed(ctx, err)
			}
			*body = resp.Body
			if err := h.status(resp, method+" (resuming)"); err != nil {
				*body = http.NoBody
				return nil, err
			}
			sse = newSSEReader(resp.Body)
			continue
		}
		resumes = 0
		if ev.id != "" {
			lastID = ev.id
		}
		if ev.retry > 0 {
			retry = min(time.Duration(ev.retry)*time.Millisecond, maxRetry)
		}
		if len(ev.data) == 0 || (ev.event != "" && ev.event != "message") {
			continue // a priming event, or one MCP does not define
		}
		var m message
		if err := json.Unmarshal(ev.data, &m); err != nil {
			h.c.log.Debug("upstream: undecodable SSE event dropped", "err", err)
			continue
		}
		if m.Method == "" && idKey(m.ID) == idKey(want) {
			return m.outcome()
		}
		h.dispatch(&m, f)
	}
}

// dispatch hands a server message that is not the awaited response to the
// client: f is the call whose stream carried it, nil for the GET stream.
// A notification on the GET stream belongs to no call (the server said so
// by sending it there), but a request there still needs an answerer: it
// is attributed as on stdio (Client.unnamedFlight), so a server that asks
// its question outside the call's stream still reaches the caller.
func (h *httpTransport) dispatch(m *message, f *flight) {
	switch {
	case m.Method != "" && m.ID == nil:
		h.c.notification(m.Method, m.Params, f)
	case m.Method != "":
		if f == nil {
			f = h.c.unnamedFlight(m.Method)
		}
		id := m.ID
		h.c.serverRequest(id, m.Method, m.Params, f, func(ctx context.Context, result json.RawMessage, rpcErr *RPCError) error {
			return h.respond(ctx, id, result, rpcErr)
		})
	default:
		h.c.log.Debug("upstream: response to no pending request dropped")
	}
}

// respond POSTs the answer to a server→client request (202 expected).
func (h *httpTransport) respond(ctx context.Context, id, result json.RawMessage, rpcErr *RPCError) error {
	body := []byte(`{"jsonrpc":"2.0","id":`)
	body = append(body, id...)
	if rpcErr != nil {
		e, _ := json.Marshal(struct {
			Code    int64           `json:"code"`
			Message string          `json:"message"`
			Data    json.RawMessage `json:"data,omitempty"`
		}{rpcErr.Code, rpcErr.Message, rpcErr.Data})
		body = append(append(body, `,"error":`...), e...)
	} else {
		body = append(append(body, `,"result":`...), result...)
	}
	return h.post(ctx, append(body, '}'), "response")
}

func (h *httpTransport) notify(ctx context.Context, method string, params json.RawMessage) error {
	body := []byte(`{"jsonrpc":"2.0","method":` + strconv.Quote(method))
	if params != nil {
		body = append(append(body, `,"params":`...), params...)
	}
	return h.post(ctx, append(body, '}'), method)
}

// post sends a notification or response and expects 202 (or any 2xx).
func (h *httpTransport) post(ctx context.Context, body []byte, what string) error {
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(h.c.life, cancel)()
	resp, err := h.do(rctx, http.MethodPost, body, "application/json, text/event-stream", "", nil)
	if err != nil {
		return h.failed(ctx, err)
	}
	if err := h.status(resp, what); err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	return nil
}

// abandoned needs nothing: the aborted POST is the request's end here.
func (h *httpTransport) abandoned(int64) {}

// ready opens the standalone GET stream.
func (h *httpTransport) ready() { h.wg.Go(h.listen) }

// listen keeps the standalone GET stream open for the session's life and
// hands its messages to the client. 405 means the server has none. A
// stream that ends is reopened (after the server's retry delay); a
// reconnect that fails outright (unreachable, 404) ends the connection.
func (h *httpTransport) listen() {
	life := h.c.life
	lastID, retry, delay := "", defaultRetry, time.Duration(0)
	for {
		if !sleep(life, delay) {
			return
		}
		resp, err := h.do(life, http.MethodGet, nil, "text/event-stream", lastID, nil)
		if err != nil {
			if life.Err() == nil {
				h.c.lost(fmt.Errorf("the standalone SSE stream failed: %w", err))
			}
			return
		}
		switch {
		case resp.StatusCode == http.StatusMethodNotAllowed:
			resp.Body.Close()
			h.c.log.Debug("upstream: the server offers no standalone SSE stream")
			return
		case resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusNotFound && lastID != "":
			// The events are no longer kept: open a fresh stream.
			resp.Body.Close()
			lastID, delay = "", 0
			continue
		}
		if err := h.status(resp, "GET stream"); err != nil {
			if !errors.Is(err, ErrClosed) {
				h.c.log.Warn("upstream: no standalone SSE stream", "err", err)
			}
			return
		}
		sse := newSSEReader(resp.Body)
		for {
			ev, err := sse.next()
			if err != nil {
				// A clean end is the server's polling pattern: come back
				// after retry. A broken stream is retried at once; if the
				// server is gone, that reconnect fails and ends us.
				delay = retry
				if !errors.Is(err, io.EOF) {
					delay = 100 * time.Millisecond
				}
				break
			}
			if ev.id != "" {
				lastID = ev.id
			}
			if ev.retry > 0 {
				retry = min(time.Duration(ev.retry)*time.Millisecond, maxRetry)
			}
			if len(ev.data) == 0 || (ev.event != "" && ev.event != "message") {
				continue
			}
			var m message
			if json.Unmarshal(ev.data, &m) != nil {
				continue
			}
			h.dispatch(&m, nil)
		}
		resp.Body.Close()
	}
}

// sleep waits d or until ctx ends; false when ctx ended.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// shutdown waits for the GET stream (ended with the life context), ends
// the session with DELETE, and drops idle connections.
func (h *httpTransport) shutdown(bool) {
	h.wg.Wait()
	if h.sessionID() != "" {
		ctx, cancel := context.WithTimeout(context.Background(), notifyTimeout)
		resp, err := h.do(ctx, http.MethodDelete, nil, "", "", nil)
		if err != nil {
			h.c.log.Debug("upstream: DELETE of the session failed", "err", err)
		} else {
			resp.Body.Close()
			// 404 (already gone) and 405 (the server keeps sessions) are fine.
			h.c.log.Debug("upstream: session deleted", "status", resp.StatusCode)
		}
		cancel()
	}
	h.tr.CloseIdleConnections()
}

// mcpHeaders are the headers a request to a modern server carries beside
// its body: the protocol version, the method and, for the methods that
// name something, that name.
type mcpHeaders struct {
	method string
	name   string // "" when the method names nothing
}

// modernHeaders reads what a request's headers must mirror from its body.
func modernHeaders(method string, params json.RawMessage) *mcpHeaders {
	m := &mcpHeaders{method: method}
	field := ""
	switch method {
	case protocol.MethodToolsCall, "prompts/get":
		field = "name"
	case protocol.MethodResourcesRead:
		field = "uri"
	}
	if field != "" {
		var p map[string]json.RawMessage
		_ = json.Unmarshal(params, &p)
		_ = json.Unmarshal(p[field], &m.name)
	}
	return m
}

func (m *mcpHeaders) set(hd http.Header) {
	hd.Set("MCP-Protocol-Version", string(modernVersion))
	hd.Set("Mcp-Method", m.method)
	if m.name != "" {
		hd.Set("Mcp-Name", headerValue(m.name))
	}
}

// headerValue encodes a name for an Mcp-Name header: as it is when it is
// visible ASCII (spaces inside), else as "=?base64?…?=" around the base64
// of its UTF-8, as the transport specifies.
func headerValue(v string) string {
	plain := v != "" && v[0] != ' ' && v[len(v)-1] != ' '
	for i := 0; plain && i < len(v); i++ {
		plain = v[i] >= 0x20 && v[i] <= 0x7e
	}
	if plain && !strings.HasPrefix(v, "=?base64?") {
		return v
	}
	return "=?base64?" + base64.StdEncoding.EncodeToString([]byte(v)) + "?="
}

// probeRefused reads a 4xx answer to the server/discover probe: a modern
// JSON-RPC error in the body is the server's (the caller tells modern
// errors from others); anything else says the server is legacy.
func probeRefused(resp *http.Response) error {
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if rpc := rpcErrorIn(body); rpc != nil && isModernError(rpc.Code) {
		return rpc
	}
	return errNotModern
}

// rpcErrorIn is the JSON-RPC error an HTTP answer's body carries, nil when
// it carries none.
func rpcErrorIn(body []byte) *RPCError {
	var msg struct {
		Error *struct {
			Code    int64           `json:"code"`
			Message string          `json:"message"`
			Data    json.RawMessage `json:"data"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &msg) != nil || msg.Error == nil {
		return nil
	}
	return &RPCError{Code: msg.Error.Code, Message: msg.Error.Message, Data: msg.Error.Data}
}
