// Package mcphttp serves MCP over the streamable HTTP transport
// (revisions 2025-03-26, 2025-06-18 and 2025-11-25).
//
// The Handler is a thin front: it checks what HTTP must check (Host,
// Origin, bearer token, methods, headers, body size), turns POST bodies
// into messages for the session's actors, and writes what the actors put on
// the session's streams back as application/json or text/event-stream. The
// session itself (negotiated version, calls in flight, log level) is the
// same session actor stdio uses; see package actors.
//
//	POST   /mcp      one JSON-RPC message (a batch under 2025-03-26)
//	GET    /mcp      the session's standalone SSE stream; with Last-Event-ID, resume a stream
//	DELETE /mcp      end the session and everything running in it
//	GET    /healthz  liveness, without authentication
//	GET    /readyz   readiness (a cluster node: joined and able to route), without authentication
//	GET    /metrics, /status, /status/  the operators' views (Options.Admin), behind the token
package mcphttp

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sourcegraph/jsonrpc2"
	"golang.org/x/time/rate"

	"troupe/actors"
	"troupe/actors/httptransport"
	"troupe/auth"
	"troupe/identity"
	"troupe/limits"
	"troupe/mcphttp/origin"
	"troupe/protocol"
)

// Options configure a Handler. Zero values mean the documented defaults.
type Options struct {
	// Path is the MCP endpoint (default "/mcp").
	Path string
	// BearerToken, when set, is required as "Authorization: Bearer <token>"
	// on the MCP endpoint: one static token named "default". Auth, when
	// set, replaces it.
	BearerToken string
	// Auth says who a request is from (named tokens, OAuth); nil: as
	// BearerToken says. A session stays bound to the identity that made
	// it, whichever credential of that identity comes later.
	Auth *auth.Chain
	// ResourceMetadata is the URL of the RFC 9728 protected resource
	// metadata, named in every 401's and 403's WWW-Authenticate. "": when
	// Auth has an OAuth validator, the URL it names (http.public_url's
	// origin), else the one on the request's own origin (the Host it was
	// served under); without OAuth, none is named.
	ResourceMetadata string
	// AllowedOrigins lists the Origin values browsers may send (scheme,
	// host and port, e.g. "https://app.example"; "null" allows pages with
	// an opaque origin). An Origin matches when it parses as an origin
	// (package origin) and equals an entry after normalising the case of
	// scheme and host and default ports; entries that are not origins match
	// nothing. Empty means loopback origins only (http or https, localhost,
	// 127.0.0.0/8 or [::1], any port). Requests without Origin (non-browser
	// clients) are not affected.
	AllowedOrigins []string
	// CheckHost refuses Host headers other than loopback names: the
	// defence against DNS rebinding when listening on loopback.
	CheckHost bool
	// MaxSessions bounds concurrent sessions (default 10000); over it,
	// initialize gets 503 with Retry-After. Only the handshake revisions'
	// sessions count: 2026-07-28 requests have bounds of their own.
	MaxSessions int
	// Limits bounds each identity's sessions (max_sessions per identity,
	// apart from MaxSessions): an initialize over it gets 429 with
	// Retry-After and a -31429 JSON-RPC error, and a session gives its slot
	// back when it ends. Its call limits are the sessions' (the Host's
	// SessionOptions.Limits, the same Limiter): a 2026-07-28 request
	// refused by one is answered 429 too. nil: no limits.
	Limits *limits.Limiter
	// MaxStatelessRequests bounds the 2026-07-28 requests served at once
	// (default 1024), apart from subscriptions/listen; over it, 503 with
	// Retry-After. A bound of their own, so that neither era's traffic can
	// lock the other's clients out.
	MaxStatelessRequests int
	// MaxSubscriptions bounds the open subscriptions/listen streams
	// (default 256); over it, 503 with Retry-After. A stream stays open as
	// long as its client wants, so it counts here and not among the
	// requests in flight.
	MaxSubscriptions int
	// MaxBodyBytes bounds a POST body (default 4 MiB); over it, 413.
	MaxBodyBytes int64
	// KeepAlive is the interval of SSE comments on idle streams (default 25 s).
	KeepAlive time.Duration
	// WriteTimeout bounds one write to a client (default 30 s): a client
	// that stops reading is disconnected instead of holding its stream.
	WriteTimeout time.Duration
	// Logger receives the handler's logs; nil discards them.
	Logger *slog.Logger
	// OnRefused, when set, learns the status of every request the handler
	// refuses (4xx and 5xx it answers itself: metrics). It must be quick.
	OnRefused func(status int)
	// Cluster, when set, makes this handler one front of a cluster: it
	// forwards requests for sessions other nodes own, names this node in
	// the ids of the sessions it makes, and answers /readyz by the node's
	// standing (cluster.go). nil serves one process.
	Cluster Cluster
	// Admin, when set, serves the operators' paths (/metrics, /status and
	// /status/, see admin.go) behind the MCP endpoint's checks and token,
	// which a browser may present as a cookie got from /status?token=….
	Admin http.Handler
}

func (o Options) withDefaults() Options {
	if o.Path == "" {
		o.Path = "/mcp"
	}
	if o.MaxSessions <= 0 {
		o.MaxSessions = 10000
	}
	if o.MaxStatelessRequests <= 0 {
		o.MaxStatelessRequests = 1024
	}
	if o.MaxSubscriptions <= 0 {
		o.MaxSubscriptions = 256
	}
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = 4 << 20
	}
	if o.KeepAlive <= 0 {
		o.KeepAlive = 25 * time.Second
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = 30 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// Handler serves the MCP endpoint and /healthz.
type Handler struct {
	host    *actors.Host
	opts    Options
	log     *slog.Logger
	origins map[string]bool            // AllowedOrigins, normalised (origin.Origin.String)
	auth    atomic.Pointer[auth.Chain] // who may call (a zero Chain: anyone); SetAuth changes it

	mu       sync.Mutex
	sessions map[string]*httptransport.Handle
	// stateless and listening count the 2026-07-28 requests whose
	// (hidden) session has not ended yet: subscriptions/listen in
	// listening, the others in stateless (guarded by mu).
	stateless, listening int
	// pool keeps the hidden sessions of answered 2026-07-28 requests for
	// their callers' next ones (pool.go).
	pool    sessionPool
	closing atomic.Bool
	denials denialLog
	// logins are the status page's logins (/status?token=…), admin.go.
	logins statusLogins
}

// New returns a Handler serving sessions on host.
func New(host *actors.Host, opts Options) *Handler {
	opts = opts.withDefaults()
	h := &Handler{host: host, opts: opts, log: opts.Logger, sessions: map[string]*httptransport.Handle{},
		origins: map[string]bool{}}
	for _, s := range opts.AllowedOrigins {
		o, err := origin.Parse(s)
		if err != nil {
			h.log.Warn("ignoring an allowed origin that is not an origin", "origin", s, "err", err)
			continue
		}
		h.origins[o.String()] = true
	}
	if opts.Auth != nil {
		h.SetAuth(opts.Auth)
	} else {
		h.SetBearerToken(opts.BearerToken)
	}
	return h
}

// SetAuth changes who later requests may come from. Sessions stay bound
// to the identity that created them: one whose token was removed answers
// 404 to every credential.
func (h *Handler) SetAuth(c *auth.Chain) {
	if c == nil {
		c = &auth.Chain{}
	}
	h.auth.Store(c)
}

// EndSessionsOf ends every session, and every pooled hidden session of
// the 2026-07-28 era, whose identity gone says may no longer call (a
// reload removed or renamed its token: its holder could not reach them
// any more, and their calls must not run on for it). It returns how many
// it ended; each ends as on a DELETE, its calls stopped.
func (h *Handler) EndSessionsOf(gone func(*identity.Identity) bool) int {
	var ending []*httptransport.Handle
	h.mu.Lock()
	for _, s := range h.sessions {
		if gone(s.Identity()) {
			ending = append(ending, s)
		}
	}
	h.mu.Unlock()
	for _, s := range ending {
		h.log.Info("http session ended: its identity may no longer call", "http_session", s.ID()[:8], "identity", s.Identity().String())
		s.Close()
	}
	return len(ending) + h.pool.dropIf(gone)
}

// SetBearerToken makes token the one static token, named "default",
// later requests must carry ("" turns authentication off).
func (h *Handler) SetBearerToken(token string) {
	h.SetAuth(&auth.Chain{Tokens: auth.NewTokens([]auth.StaticToken{{Name: "default", Token: token, Operator: true}})})
}

// Sessions is the number of live sessions.
func (h *Handler) Sessions() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.sessions)
}

// StopAccepting makes new sessions fail with 503 (shutdown has begun),
// and closes the pooled sessions of 2026-07-28 requests.
func (h *Handler) StopAccepting() {
	h.closing.Store(true)
	h.pool.drop()
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case h.opts.Path:
		h.serveMCP(w, r)
	case "/readyz":
		h.serveReady(w, r)
	case "/healthz":
		if !h.getOrHead(w, r) {
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n"))
	default:
		if h.resourceMetadataRequest(r) {
			h.serveResourceMetadata(w, r)
			return
		}
		if h.adminRequest(r) {
			h.serveAdmin(w, r)
			return
		}
		http.NotFound(w, r)
	}
}

// getOrHead refuses (405) a probe's request that is neither GET nor HEAD,
// and reports whether r is one.
func (h *Handler) getOrHead(w http.ResponseWriter, r *http.Request) bool {
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		return true
	}
	w.Header().Set("Allow", "GET, HEAD")
	h.refused(http.StatusMethodNotAllowed)
	http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
	return false
}

// checkSource refuses a request whose Host is not a loopback name (when
// CheckHost: DNS rebinding) or whose Origin is not allowed: the checks
// every path but /healthz passes first. It reports whether r passed.
func (h *Handler) checkSource(w http.ResponseWriter, r *http.Request) bool {
	if h.opts.CheckHost && !loopbackHost(r.Host) {
		h.deny(w, r, http.StatusForbidden, "Host header is not a loopback name (DNS rebinding protection)")
		return false
	}
	if o := r.Header.Get("Origin"); o != "" {
		if err := h.checkOrigin(o); err != nil {
			h.deny(w, r, http.StatusForbidden, "Origin "+strconv.Quote(o)+" "+err.Error())
			return false
		}
	}
	return true
}

func (h *Handler) serveMCP(w http.ResponseWriter, r *http.Request) {
	if !h.checkSource(w, r) {
		return
	}
	who, ok := h.authenticate(w, r)
	if !ok {
		return
	}
	if h.route(w, r) {
		return // another node owns the session (cluster.go)
	}
	switch r.Method {
	case http.MethodPost:
		h.post(w, r, who)
	case http.MethodGet:
		h.get(w, r, who)
	case http.MethodDelete:
		h.delete(w, r, who)
	default:
		w.Header().Set("Allow", "GET, POST, DELETE")
		h.refuse(w, http.StatusMethodNotAllowed, "method not allowed")
	}
}

// authenticate says who sent the request, or refuses it: 401 (403 for a
// valid token without a needed scope) with a WWW-Authenticate challenge
// naming the protected resource metadata.
func (h *Handler) authenticate(w http.ResponseWriter, r *http.Request) (*identity.Identity, bool) {
	who, refusal := h.auth.Load().Authenticate(r)
	if refusal != nil {
		h.challenge(w, r, refusal)
		return nil, false
	}
	return who, true
}

// challenge answers a refused credential: RFC 6750's WWW-Authenticate
// (error, scope) with RFC 9728's resource_metadata, and the JSON-RPC
// error body every refusal has.
func (h *Handler) challenge(w http.ResponseWriter, r *http.Request, refusal *auth.Refusal) {
	params := []string{`realm="troupe"`}
	if u := h.resourceMetadataURL(r); u != "" {
		params = append(params, `resource_metadata="`+u+`"`)
	}
	if refusal.Code != "" {
		params = append(params, `error="`+refusal.Code+`"`)
	}
	if refusal.Scope != "" {
		params = append(params, `scope="`+refusal.Scope+`"`)
	}
	w.Header().Set("WWW-Authenticate", "Bearer "+strings.Join(params, ", "))
	h.deny(w, r, refusal.Status, refusal.Message)
}

// session finds the session a request names. It answers 400 when the
// header is missing and 404 when the session is unknown, ended, or belongs
// to another credential (all the same to the client: re-initialize).
func (h *Handler) session(w http.ResponseWriter, r *http.Request, who *identity.Identity) (*httptransport.Handle, bool) {
	id := r.Header.Get("Mcp-Session-Id")
	if id == "" {
		h.refuse(w, http.StatusBadRequest, "Mcp-Session-Id header is required (send initialize first)")
		return nil, false
	}
	h.mu.Lock()
	s, ok := h.sessions[id]
	h.mu.Unlock()
	if !ok || s == nil || s.Owner() != who.Owner() { // nil: a slot reserved while a session starts
		h.refuse(w, http.StatusNotFound, "session not found: initialize a new one")
		return nil, false
	}
	if msg := versionHeaderRefusal(r.Header.Get("Mcp-Protocol-Version")); msg != "" {
		h.refuse(w, http.StatusBadRequest, msg)
		return nil, false
	}
	return s, true
}

// newSession starts a session for an initialize request (m), within the
// server's bound and its identity's.
func (h *Handler) newSession(w http.ResponseWriter, who *identity.Identity, m message) (*httptransport.Handle, bool) {
	if h.shuttingDown(w) {
		return nil, false
	}
	id := h.newSessionID()
	h.mu.Lock()
	if len(h.sessions) >= h.opts.MaxSessions {
		h.mu.Unlock()
		h.overLimit(w, "sessions", "http.max_sessions", h.opts.MaxSessions)
		return nil, false
	}
	h.sessions[id] = nil // reserve the slot while the actors start
	h.mu.Unlock()
	release := func() {}
	if h.opts.Limits != nil {
		var over *limits.Exceeded
		if release, over = h.opts.Limits.Session(who); over != nil {
			h.mu.Lock()
			delete(h.sessions, id)
			h.mu.Unlock()
			h.rateLimited(w, m.req.ID, over)
			return nil, false
		}
	}
	s, err := h.host.StartHTTPSession(id, who, func() {
		h.mu.Lock()
		delete(h.sessions, id)
		h.mu.Unlock()
		release()
	})
	if err != nil {
		release()
		h.mu.Lock()
		delete(h.sessions, id)
		h.mu.Unlock()
		h.log.Error("starting a session", "err", err)
		h.refuse(w, http.StatusServiceUnavailable, "cannot start a session")
		return nil, false
	}
	h.mu.Lock()
	h.sessions[id] = s
	h.mu.Unlock()
	return s, true
}

// shuttingDown refuses a request that would start a session once
// shutdown has begun (503 with Retry-After), and reports whether it did.
func (h *Handler) shuttingDown(w http.ResponseWriter) bool {
	if !h.closing.Load() {
		return false
	}
	w.Header().Set("Retry-After", "5")
	h.refuse(w, http.StatusServiceUnavailable, "server is shutting down")
	return true
}

// overLimit refuses a request over one of the front's bounds: 503 with
// Retry-After, and a JSON-RPC error naming the limit and the setting that
// raises it. Every bound (sessions, stateless requests, subscriptions)
// answers through here, so clients see one shape.
func (h *Handler) overLimit(w http.ResponseWriter, what, key string, limit int) {
	w.Header().Set("Retry-After", "10")
	h.refuse(w, http.StatusServiceUnavailable, "too many "+what+" (limit "+strconv.Itoa(limit)+", "+key+")")
}

// rateLimited refuses a request over one of its identity's limits before
// any session sees it: 429 with Retry-After and the -31429 JSON-RPC error
// a session answers with (protocol.RateLimited), naming the request.
func (h *Handler) rateLimited(w http.ResponseWriter, id jsonrpc2.ID, over *limits.Exceeded) {
	cid := actors.NewCorrelationID()
	h.log.Info("request rate limited", "identity", over.Identity, "limit", over.Key, "correlation_id", cid)
	h.refused(http.StatusTooManyRequests)
	refusal := actors.RateLimited(over, cid)
	body, err := json.Marshal(&jsonrpc2.Response{ID: id, Error: protocol.NewError(refusal.Code, refusal.Message, refusal.Data)})
	if err != nil {
		h.refuse(w, http.StatusInternalServerError, "cannot encode the error")
		return
	}
	w.Header().Set("Retry-After", strconv.Itoa(over.RetryAfterSeconds()))
	writeJSON(w, http.StatusTooManyRequests, body)
}

// newSessionID makes the id of a session a client will name: in a
// cluster, one that names this node as the owner.
func (h *Handler) newSessionID() string {
	if h.opts.Cluster != nil {
		return h.opts.Cluster.NewSessionID()
	}
	return newSessionID()
}

// newSessionID makes an unguessable session id (also for the hidden
// session of a 2026-07-28 request, which names it in logs only).
func newSessionID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func (h *Handler) delete(w http.ResponseWriter, r *http.Request, who *identity.Identity) {
	s, ok := h.session(w, r, who)
	if !ok {
		return
	}
	h.log.Info("http session deleted by the client", "http_session", s.ID()[:8])
	s.Close()
	select {
	case <-s.Done():
	case <-time.After(10 * time.Second):
		h.log.Warn("session did not end in time after DELETE", "session", s.ID()[:8])
	}
	w.WriteHeader(http.StatusNoContent)
}

// deny refuses a request that failed a security check (Host, Origin,
// bearer token) and logs it at info with the reason and the client's
// address, so an operator sees a misconfigured client or a probe without
// debug logging. The lines are rate-limited (a flood of refusals is one
// line, then one line per interval counting what was left out); the token
// itself is never logged, only whether and why it did not fit.
func (h *Handler) deny(w http.ResponseWriter, r *http.Request, status int, message string) {
	if n, ok := h.denials.allow(); ok {
		args := []any{"status", status, "reason", message, "remote", r.RemoteAddr, "method", r.Method}
		if n > 0 {
			args = append(args, "suppressed", n)
		}
		h.log.Info("http request refused", args...)
	}
	h.refuse(w, status, message)
}

// denialInterval is how often refused requests are logged at most, after
// an initial burst of denialBurst lines.
const (
	denialInterval = 10 * time.Second
	denialBurst    = 1
)

// denialLog rate-limits the log lines of refused requests and counts the
// ones it left out, which the next line reports.
type denialLog struct {
	once       sync.Once
	limiter    *rate.Limiter
	suppressed atomic.Int64
}

// allow reports whether a refusal may be logged now and, if so, how many
// were left out since the last line.
func (d *denialLog) allow() (int64, bool) {
	d.once.Do(func() { d.limiter = rate.NewLimiter(rate.Every(denialInterval), denialBurst) })
	if !d.limiter.Allow() {
		d.suppressed.Add(1)
		return 0, false
	}
	return d.suppressed.Swap(0), true
}

// refuse answers with an HTTP error whose body is a JSON-RPC error without
// an id, as the spec allows for transport-level refusals.
func (h *Handler) refuse(w http.ResponseWriter, status int, message string) {
	h.log.Debug("http request refused", "status", status, "reason", message)
	h.refused(status)
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": nil,
		"error": map[string]any{"code": -32000, "message": message}})
	writeJSON(w, status, body)
}

// refused tells Options.OnRefused of a refusal with status.
func (h *Handler) refused(status int) {
	if h.opts.OnRefused != nil {
		h.opts.OnRefused(status)
	}
}

func writeJSON(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// checkOrigin applies the allow-list (default: loopback origins) to an
// Origin header; the error completes "Origin <value> ...".
func (h *Handler) checkOrigin(value string) error {
	o, err := origin.Parse(value)
	if err != nil {
		return fmt.Errorf("is not an origin: %w", err)
	}
	if len(h.opts.AllowedOrigins) > 0 {
		if !h.origins[o.String()] {
			return errors.New("is not in http.allowed_origins")
		}
		return nil
	}
	if !o.Loopback() {
		return errors.New("is not allowed: only loopback origins are, unless http.allowed_origins lists others")
	}
	return nil
}

// loopbackHost reports whether a Host header (host [":" port]) names this
// machine's loopback.
func loopbackHost(hostport string) bool {
	host, _, err := origin.SplitHostPort(hostport)
	return err == nil && origin.LoopbackHost(host)
}

// accepts reads an Accept header: whether JSON and SSE answers are
// acceptable. No header means anything is.
func accepts(r *http.Request) (json, sse bool) {
	values := r.Header.Values("Accept")
	if len(values) == 0 {
		return true, true
	}
	for _, v := range values {
		for part := range strings.SplitSeq(v, ",") {
			mt := mediaType(strings.TrimSpace(part))
			if mt == "" {
				continue
			}
			switch mt {
			case "application/json":
				json = true
			case "text/event-stream":
				sse = true
			case "*/*":
				json, sse = true, true
			case "application/*":
				json = true
			case "text/*":
				sse = true
			}
		}
	}
	return json, sse
}

// mediaType is the media type of a header value (lower case, without
// parameters), "" when it is malformed. The common plain values are
// taken as they are; anything else goes through mime.ParseMediaType.
func mediaType(v string) string {
	switch v {
	case "application/json", "text/event-stream", "*/*":
		return v
	}
	mt, _, err := mime.ParseMediaType(v)
	if err != nil {
		return ""
	}
	return mt
}
