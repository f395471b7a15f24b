package downstream

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os/exec"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"troupe/protocol"
	"troupe/redact"
)

// ErrClosed is wrapped by every error that means the connection to the
// downstream server is gone: the process exited or closed its stdout, the
// HTTP session expired (404) or the server became unreachable, or Close was
// called. The owner of the Client reacts by dialling again.
var ErrClosed = errors.New("upstream: connection closed")

// RPCError is a JSON-RPC error response from the downstream server (a
// protocol error, as opposed to a tool result with isError set).
type RPCError struct {
	Code    int64
	Message string
	Data    json.RawMessage // nil when the error had no data member
}

// Error implements error.
func (e *RPCError) Error() string {
	return fmt.Sprintf("upstream: JSON-RPC error %d: %s", e.Code, e.Message)
}

// Config says how to reach one downstream server: set Command for stdio or
// URL for streamable HTTP, not both.
type Config struct {
	// Name is the server's name in troupe's config (for logs and errors).
	Name string

	// Command is the program of a stdio server: an absolute path, a path
	// relative to Cwd, or a bare name looked up on Env["PATH"] (not on
	// troupe's own PATH, since the child's environment is Env).
	Command string
	// Args are the program's arguments (without argv[0]).
	Args []string
	// Env is the complete environment of the child; the caller builds it
	// from the config's env and env_vars. Nothing is inherited.
	Env map[string]string
	// Cwd is the child's working directory; "" means troupe's own.
	Cwd string
	// Start starts the prepared command (Path, Args, Dir, Env, Stdin,
	// Stdout and Stderr set, SysProcAttr nil) and returns a function that
	// kills its whole process group (and cgroup). troupe passes one that
	// runs the program under its sandbox profile (sandbox.Sandbox.Start).
	// nil means cmd.Start as the leader of a new process group, killed
	// with SIGKILL to -pgid. The started process must lead its own process
	// group: SIGTERM on Close goes to -pid.
	Start func(cmd *exec.Cmd) (kill func(), err error)

	// URL is the MCP endpoint of a streamable HTTP server.
	URL string
	// Headers are sent on every HTTP request.
	Headers map[string]string
	// BearerToken, when set, is sent as "Authorization: Bearer <token>". It
	// never appears in errors or logs.
	BearerToken string
	// CredentialVars name the environment variables troupe's credential
	// for the server comes from (bearer_token_env_var, ${NAME} in
	// http_headers or env): an *AuthError names them, so a refusal says
	// what to set. Names only, never values.
	CredentialVars []string
	// MissingVars are those of CredentialVars that are unset or empty:
	// Dial fails at once with an *AuthError naming them, sending nothing.
	MissingVars []string

	// ClientInfo is how troupe introduces itself (initialize, or every
	// request's _meta to a modern server).
	ClientInfo protocol.Implementation
	// Era says which revisions to use: EraAuto (the zero value) probes
	// with server/discover and falls back to initialize; ForceLegacy skips
	// the probe (a server that misbehaves on it); ForceModern refuses a
	// server that does not speak 2026-07-28.
	Era EraChoice
	// Sampling declares the sampling capability to the server, so that its
	// sampling/createMessage requests during a call are relayed to the
	// calling client (Observer.Sample). Off, troupe declares no sampling
	// and answers such a request with a JSON-RPC error, relaying nothing: a
	// server that may drive the client's model must be trusted
	// ([mcp_servers.<name>] sampling = true).
	Sampling bool
	// ParkTimeout is how long a legacy server's call that asked a question
	// waits for the answer of a client that answers in rounds (see
	// Observer.Rounds); DefaultParkTimeout when zero. troupe passes
	// approvals.timeout, the life of the state that names the call.
	ParkTimeout time.Duration
	// Logger receives the client's logs (the child's stderr lines at debug,
	// with the server's name); nil discards them.
	Logger *slog.Logger
	// Redact masks secrets in the stderr lines a stdio server's exit error
	// keeps (ExitError.Stderr), which reach logs, the status page and
	// callers' tool errors; nil masks nothing.
	Redact *redact.Redactor
}

// Handlers receive what the server sends outside of any call.
type Handlers struct {
	// ToolsChanged is called on notifications/tools/list_changed, from a
	// goroutine of the client that reads the server's messages: it must
	// not block (send yourself a message and re-list later).
	ToolsChanged func()
	// PromptsChanged is called on notifications/prompts/list_changed,
	// like ToolsChanged.
	PromptsChanged func()
	// ResourceUpdated is called on notifications/resources/updated with
	// its params as sent, like ToolsChanged.
	ResourceUpdated func(params json.RawMessage)
	// ResourcesChanged is called on notifications/resources/list_changed,
	// like ToolsChanged.
	ResourcesChanged func()
}

// Observer receives what the downstream server sends during one CallTool.
// Every field may be nil. Progress and Log are called from the goroutine
// that reads the server's messages, one at a time and in wire order, and
// never after CallTool has returned; they must not block for long, since
// nothing else is read meanwhile.
type Observer struct {
	// Progress receives notifications/progress for this call's token.
	// total is 0 when the server sent none.
	Progress func(progress, total float64, message string)
	// Log receives notifications/message attributable to this call (see
	// the package documentation for when a message is attributable).
	Log func(level protocol.LoggingLevel, logger string, data json.RawMessage)
	// Elicit answers an elicitation/create attributable to this call with
	// an ElicitResult object. It runs in its own goroutine; its ctx ends
	// when the call ends, when the server cancels the request or when the
	// client closes. An *RPCError it returns is sent to the server as is,
	// any other error as an internal error. nil declines every request
	// ({"action":"decline"}).
	Elicit func(ctx context.Context, params json.RawMessage) (json.RawMessage, error)
	// Sample answers a sampling/createMessage attributable to this call
	// (only with Config.Sampling) with a CreateMessageResult object. It
	// runs like Elicit; nil refuses every such request with a JSON-RPC
	// error.
	Sample func(ctx context.Context, params json.RawMessage) (json.RawMessage, error)
	// ElicitationComplete receives notifications/elicitation/complete
	// (2025-11-25) for a URL-mode elicitation of this call: the server says
	// the out-of-band interaction with that elicitationId has finished. It
	// is matched by the elicitationId of an elicitation Elicit answered
	// during the call, and called like Progress.
	ElicitationComplete func(params json.RawMessage)

	// Rounds says the caller's client answers questions in later requests
	// (the 2026-07-28 revision's multi round-trip requests) instead of
	// while the call runs: questions end CallTool with *InputRequired
	// instead of reaching Elicit. A modern server's input_required result
	// is returned as it is; a legacy server's elicitation parks the call.
	Rounds bool
	// Resume continues a call that returned *InputRequired, with the
	// client's answers; nil for a new call.
	Resume *Resume
}

// transport is one way of exchanging JSON-RPC messages with the server.
// The Client owns the protocol (ids, attribution, cancellation); a
// transport only moves messages and reports what the server sent through
// the Client's handlers.
type transport interface {
	// call sends request id and waits for its response. It returns the
	// raw result, an *RPCError, an error wrapping ErrClosed when the
	// connection is lost, or (once ctx ends) ctx.Err(). f is the CallTool
	// the request belongs to, nil for other requests.
	call(ctx context.Context, id int64, method string, params json.RawMessage, f *flight) (json.RawMessage, error)
	// notify sends a notification.
	notify(ctx context.Context, method string, params json.RawMessage) error
	// abandoned says request id was given up (its ctx ended) and its
	// response, if one still comes, is to be ignored.
	abandoned(id int64)
	// ready is called once the handshake is complete.
	ready()
	// shutdown ends the connection (after the Client's life context is
	// cancelled) and waits for every goroutine the transport started.
	// abort skips the graceful steps (Dial failed).
	shutdown(abort bool)
}

// Client is a connection to one downstream MCP server. Its methods may be
// called from any goroutine.
type Client struct {
	name string
	log  *slog.Logger
	// credentialVars name where troupe's credential comes from, for the
	// hint of an *AuthError.
	credentialVars []string
	h              Handlers
	t              transport

	info    protocol.Implementation
	version protocol.Version
	// era is the server's kind, found by Dial; modern servers get troupe's
	// _meta in every request and no session.
	era         protocol.Era
	clientInfo  protocol.Implementation
	sampling    bool // Config.Sampling: the sampling capability is declared
	toolsChange bool // a modern server announced tools list changes
	// promptsChange: a modern server announced prompts list changes.
	promptsChange bool
	// resourcesChange: a modern server announced resources list changes.
	resourcesChange bool
	// resourcesSubscribe: a modern server announced resource
	// subscriptions (resourceSubscriptions on subscriptions/listen).
	resourcesSubscribe bool
	// watchMu guards watched: the URIs a modern server is asked for on
	// the listen request (Subscribe adds, Unsubscribe removes); relisten
	// tells the listen loop the set changed, to open the request anew;
	// watchGen counts the changes, so a poke the loop has already seen
	// the set of (it read the set after the change) opens nothing anew.
	watchMu     sync.Mutex
	watched     map[string]bool
	watchGen    uint64
	relisten    chan struct{}
	parkTimeout time.Duration

	nextID atomic.Int64

	// life ends when the connection is lost or closed: every wait on the
	// server (calls, elicitations, HTTP requests) is tied to it.
	life    context.Context
	endLife context.CancelFunc

	mu       sync.Mutex
	tokens   uint64                        // progress tokens handed out
	stopping bool                          // Close has begun: spawn starts nothing more
	flights  map[string]*flight            // CallTools in flight, by progress token
	requests map[string]context.CancelFunc // server→client requests being answered, by id
	parked   map[string]*parkedEntry       // calls waiting for their clients' answers, by id
	err      error                         // why the connection ended
	done     chan struct{}                 // closed with err set

	wg        sync.WaitGroup // the client's own goroutines (answers, cancellations)
	closeOnce sync.Once
}

func newClient(cfg Config, h Handlers) *Client {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	life, end := context.WithCancel(context.Background())
	return &Client{
		name:           cfg.Name,
		credentialVars: cfg.CredentialVars,
		log:            log.With("server", cfg.Name),
		h:              h,
		life:           life,
		endLife:        end,
		flights:        map[string]*flight{},
		requests:       map[string]context.CancelFunc{},
		parked:         map[string]*parkedEntry{},
		watched:        map[string]bool{},
		relisten:       make(chan struct{}, 1),
		done:           make(chan struct{}),
		clientInfo:     cfg.ClientInfo,
		sampling:       cfg.Sampling,
		parkTimeout:    cmp.Or(cfg.ParkTimeout, DefaultParkTimeout),
	}
}

// Dial connects to the server (spawns the process, or POSTs), finds its
// era and returns the ready Client. It probes with server/discover (see
// Client.discover): a server that speaks 2026-07-28 is used statelessly,
// with troupe's version, identity and capabilities in every request's
// _meta; any other gets the initialize handshake, which offers
// protocol.Latest and accepts any handshake revision troupe supports. It declares
// the elicitation capability in form and URL mode, since troupe relays
// elicitation to its own client (which declines what its client cannot
// show). Servers register some tools only for clients that can be asked
// (server-everything's trigger-url-elicitation). ctx bounds the whole handshake (the
// server's startup timeout). On failure everything Dial started is torn
// down: the process group is killed and no goroutine is left.
func Dial(ctx context.Context, cfg Config, h Handlers) (*Client, error) {
	if len(cfg.MissingVars) > 0 {
		// Without its credential the server would only refuse troupe (or,
		// worse, run without the secret it needs): nothing is started.
		return nil, &AuthError{Server: cfg.Name, Vars: cfg.MissingVars}
	}
	c := newClient(cfg, h)
	var err error
	switch {
	case cfg.Command != "" && cfg.URL != "":
		err = errors.New("both command and url are set")
	case cfg.Command != "":
		c.t, err = startStdio(c, cfg)
	case cfg.URL != "":
		c.t, err = newHTTP(c, cfg)
	default:
		err = errors.New("neither command nor url is set")
	}
	if err != nil {
		c.endLife()
		return nil, fmt.Errorf("upstream %q: %w", c.name, err)
	}
	err = errLegacy
	if cfg.Era != ForceLegacy {
		err = c.discover(ctx)
	}
	switch {
	case errors.Is(err, errLegacy) && cfg.Era == ForceModern:
		err = errors.New("the server does not speak protocol 2026-07-28 (era = \"modern\" is configured)")
	case errors.Is(err, errLegacy):
		err = c.initialize(ctx, cfg.ClientInfo)
	}
	if err != nil {
		c.lost(err)
		c.stop(true)
		if ctx.Err() != nil && !errors.Is(err, ctx.Err()) {
			err = fmt.Errorf("%w (%w)", err, context.Cause(ctx))
		}
		// A lost connection is told by its reason, the server's name once.
		var ce *closedError
		if errors.As(c.Err(), &ce) && errors.Is(err, ErrClosed) && !errors.Is(ce.why, ErrClosed) {
			err = &closedError{why: ce.why}
		}
		return nil, fmt.Errorf("upstream %q: connecting: %w", c.name, err)
	}
	if c.era == protocol.EraStateless {
		if c.toolsChange && h.ToolsChanged != nil || c.promptsChange && h.PromptsChanged != nil ||
			c.resourcesChange && h.ResourcesChanged != nil || c.resourcesSubscribe && h.ResourceUpdated != nil {
			c.spawn(c.listen)
		}
	} else {
		c.t.ready()
	}
	return c, nil
}

// declaredCapabilities are the client capabilities troupe declares to a
// downstream server: elicitation in both modes (2025-11-25; earlier
// revisions read any elicitation object as form mode), and sampling when
// the server's configuration allows it (Config.Sampling).
func (c *Client) declaredCapabilities() json.RawMessage {
	if c.sampling {
		return json.RawMessage(`{"elicitation":{"form":{},"url":{}},"sampling":{}}`)
	}
	return json.RawMessage(`{"elicitation":{"form":{},"url":{}}}`)
}

// initialize runs the handshake: initialize, check the answer,
// notifications/initialized.
func (c *Client) initialize(ctx context.Context, info protocol.Implementation) error {
	params, _ := json.Marshal(struct {
		ProtocolVersion protocol.Version        `json:"protocolVersion"`
		Capabilities    json.RawMessage         `json:"capabilities"`
		ClientInfo      protocol.Implementation `json:"clientInfo"`
	}{protocol.Latest, c.declaredCapabilities(), info})
	raw, err := c.request(ctx, protocol.MethodInitialize, params, nil)
	if err != nil {
		return fmt.Errorf("initialize: %w", err)
	}
	var res struct {
		ProtocolVersion string                  `json:"protocolVersion"`
		ServerInfo      protocol.Implementation `json:"serverInfo"`
	}
	if err := json.Unmarshal(raw, &res); err != nil {
		return fmt.Errorf("the server's answer is not an InitializeResult: %w", err)
	}
	v := protocol.Version(res.ProtocolVersion)
	// Only a handshake revision can answer initialize: 2026-07-28 has none.
	if !v.HasHandshake() {
		// The spec lets a server counter-offer; we cannot use a revision we
		// do not speak, so we disconnect, as the spec advises.
		return fmt.Errorf("the server answered with protocol version %q, which troupe does not support (it supports %v)",
			res.ProtocolVersion, protocol.SupportedVersions())
	}
	c.version, c.info = v, res.ServerInfo
	if h, ok := c.t.(*httpTransport); ok {
		h.setVersion(v)
	}
	return c.t.notify(ctx, protocol.NotificationInitialized, nil)
}

// ServerInfo is the serverInfo the server sent in its initialize result.
func (c *Client) ServerInfo() protocol.Implementation { return c.info }

// ProtocolVersion is the negotiated protocol revision.
func (c *Client) ProtocolVersion() protocol.Version { return c.version }

// maxPages bounds ListTools against a server whose cursors never end.
const maxPages = 1000

// ListTools returns every tool the server lists (following nextCursor),
// each as its raw JSON object exactly as the server sent it, so schemas,
// annotations, title, icons and _meta pass through unchanged.
func (c *Client) ListTools(ctx context.Context) ([]json.RawMessage, error) {
	var all []json.RawMessage
	seen := map[string]bool{}
	var cursor *string
	for range maxPages {
		params, _ := json.Marshal(protocol.ListToolsParams{Cursor: cursor})
		raw, err := c.request(ctx, protocol.MethodToolsList, params, nil)
		if err != nil {
			return nil, c.wrap(ctx, "tools/list", err)
		}
		var page struct {
			Tools      []json.RawMessage `json:"tools"`
			NextCursor *string           `json:"nextCursor"`
		}
		if err := json.Unmarshal(raw, &page); err != nil {
			return nil, fmt.Errorf("upstream %q: tools/list: the answer is not a ListToolsResult: %w", c.name, err)
		}
		all = append(all, page.Tools...)
		if page.NextCursor == nil || *page.NextCursor == "" {
			return all, nil
		}
		if seen[*page.NextCursor] {
			return nil, fmt.Errorf("upstream %q: tools/list: the server repeated cursor %q", c.name, *page.NextCursor)
		}
		seen[*page.NextCursor] = true
		cursor = page.NextCursor
	}
	return nil, fmt.Errorf("upstream %q: tools/list: more than %d pages", c.name, maxPages)
}

// CallTool calls tool name with args (a JSON object, or nil for none) and
// returns the raw CallToolResult: a tool execution error (isError) is a
// result, not an error. args are not decoded: over HTTP they are sent byte
// for byte; over stdio, where a message must be one line, they are
// compacted (encoding/json also writes <, > and & in strings as \u003c
// and so on), so the server receives the same JSON value with the same
// member order and number spellings.
//
// The request always carries a progress token unique to this call, and obs
// receives what the server sends about it. The members of the _meta that
// WithCallMeta attached to ctx go with it, except a progressToken: the
// token is always troupe's own. A JSON-RPC error response is
// returned as *RPCError. When ctx ends first, the server gets
// notifications/cancelled and CallTool returns context.Cause(ctx). When the
// connection is lost, CallTool returns at once with an error wrapping
// ErrClosed.
func (c *Client) CallTool(ctx context.Context, name string, args json.RawMessage, obs Observer) (json.RawMessage, error) {
	var server *roundState
	if r := obs.Resume; r != nil {
		var st roundState
		if err := json.Unmarshal([]byte(r.State), &st); err != nil {
			return nil, fmt.Errorf("upstream %q: tools/call %s: the round's state is malformed", c.name, name)
		}
		if st.Park != "" {
			return c.resumeParked(ctx, st.Park, r, obs)
		}
		server = &st
	}
	if obs.Rounds && c.era == protocol.EraHandshake {
		return c.callParkable(ctx, name, args, obs)
	}
	return c.callRounds(ctx, name, args, obs, obs.Resume, server)
}

// callOnce sends one tools/call (with a round's answers and the server's
// state, when it continues one) and waits for its answer.
func (c *Client) callOnce(ctx context.Context, name string, args json.RawMessage, obs Observer, round *Resume, server *roundState) (json.RawMessage, error) {
	f := c.startFlight(obs)
	defer c.endFlight(f)
	extra := map[string]json.RawMessage{}
	if c.era == protocol.EraStateless {
		maps.Copy(extra, c.modernMeta())
	}
	params, err := callParams(name, args, f.token, callMeta(ctx), extra)
	if err == nil && round != nil {
		params, err = withRound(params, round, server)
	}
	if err != nil {
		return nil, fmt.Errorf("upstream %q: tools/call %s: %w", c.name, name, err)
	}
	res, err := c.request(ctx, protocol.MethodToolsCall, params, f)
	if err != nil {
		return nil, c.wrap(ctx, "tools/call "+name, err)
	}
	return res, nil
}

// withRound appends a retry's inputResponses and requestState to tools/call
// params (the server's state only when it sent one).
func withRound(params json.RawMessage, round *Resume, server *roundState) (json.RawMessage, error) {
	responses, err := json.Marshal(round.Responses)
	if err != nil {
		return nil, err
	}
	b := append(bytes.TrimSuffix(params, []byte("}")), `,"inputResponses":`...)
	b = append(b, responses...)
	if server != nil && server.HasServer {
		st, _ := json.Marshal(server.Server)
		b = append(append(b, `,"requestState":`...), st...)
	}
	return append(b, '}'), nil
}

// callParams renders tools/call params by hand, so args are not decoded
// and re-encoded. meta (a JSON object, or nil) is the caller's own _meta:
// its members follow troupe's progress token, compacted and in name order,
// and its own progressToken is left out, as are the members that describe
// the caller's own hop (hopMeta). extra are troupe's own members (a modern
// server's protocol version, client info and capabilities), over the
// caller's.
func callParams(name string, args json.RawMessage, token string, meta json.RawMessage, extra map[string]json.RawMessage) (json.RawMessage, error) {
	nameJSON, _ := json.Marshal(name)
	b := append([]byte(`{"name":`), nameJSON...)
	if len(args) > 0 {
		if !json.Valid(args) {
			return nil, errors.New("arguments are not valid JSON")
		}
		if first := firstByte(args); first != '{' && first != 'n' {
			return nil, errors.New("arguments must be a JSON object")
		}
		b = append(b, `,"arguments":`...)
		b = append(b, args...)
	}
	tok, _ := json.Marshal(token)
	b = append(b, `,"_meta":{"progressToken":`...)
	b = append(b, tok...)
	members := map[string]json.RawMessage{}
	if len(meta) > 0 && string(meta) != "null" {
		if err := json.Unmarshal(meta, &members); err != nil {
			return nil, fmt.Errorf("_meta is not a JSON object: %w", err)
		}
		for _, k := range hopMeta {
			delete(members, k)
		}
	}
	maps.Copy(members, extra)
	for _, k := range slices.Sorted(maps.Keys(members)) {
		if k == "progressToken" {
			continue // troupe's own token identifies the call downstream
		}
		var v bytes.Buffer
		if err := json.Compact(&v, members[k]); err != nil {
			return nil, fmt.Errorf("_meta member %q: %w", k, err)
		}
		key, _ := json.Marshal(k)
		b = append(b, ',')
		b = append(b, key...)
		b = append(b, ':')
		b = append(b, v.Bytes()...)
	}
	return append(b, "}}"...), nil
}

// callMetaKey is the context key of WithCallMeta.
type callMetaKey struct{}

// WithCallMeta returns a context whose CallTool requests carry meta (the
// calling client's _meta object of its own tools/call) beside troupe's
// progress token, so a downstream server sees what the client sent
// (Codex's callId, threadId, turn metadata). nil or empty meta adds
// nothing.
func WithCallMeta(ctx context.Context, meta json.RawMessage) context.Context {
	if len(meta) == 0 {
		return ctx
	}
	return context.WithValue(ctx, callMetaKey{}, meta)
}

func callMeta(ctx context.Context) json.RawMessage {
	m, _ := ctx.Value(callMetaKey{}).(json.RawMessage)
	return m
}

func firstByte(b []byte) byte {
	for _, x := range b {
		switch x {
		case ' ', '\t', '\r', '\n':
		default:
			return x
		}
	}
	return 0
}

// Ping checks the server answers: ping, or server/discover for a modern
// server (the stateless revision has no ping).
func (c *Client) Ping(ctx context.Context) error {
	method := protocol.MethodPing
	if c.era == protocol.EraStateless {
		method = protocol.MethodServerDiscover
	}
	_, err := c.request(ctx, method, nil, nil)
	return c.wrap(ctx, method, err)
}

// Done is closed when the connection is lost: the process exited or closed
// its stdout, the HTTP session is gone (404) or the server unreachable
// (the standalone GET stream failed), or Close was called. Err says why.
func (c *Client) Done() <-chan struct{} { return c.done }

// Err is why the connection ended (wrapping ErrClosed), or nil while it is
// up.
func (c *Client) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Close ends the session (HTTP: DELETE with the session id; stdio: close
// the child's stdin, SIGTERM its process group, SIGKILL after 2 s), waits
// for every goroutine the client started, and returns nil. It is
// idempotent; calls still in flight fail with ErrClosed.
func (c *Client) Close() error {
	c.lost(errors.New("closed by troupe"))
	c.stop(false)
	return nil
}

// stop tears the transport down and waits for everything; once.
func (c *Client) stop(abort bool) {
	c.closeOnce.Do(func() {
		c.mu.Lock()
		c.stopping = true
		c.mu.Unlock()
		c.cancelParked()
		// The client's goroutines wait on the life context, which has
		// ended, so they finish promptly; then the transport goes.
		c.wg.Wait()
		c.t.shutdown(abort)
	})
}

// lost records why the connection ended (first reason wins), closes Done
// and ends the client's life context, which fails every wait on the server.
func (c *Client) lost(why error) {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return
	}
	if errors.Is(why, ErrClosed) {
		c.err = why
	} else {
		c.err = &closedError{server: c.name, why: why}
	}
	close(c.done)
	c.mu.Unlock()
	c.endLife()
	c.log.Debug("upstream: connection ended", "reason", why)
}

// closedError is why a connection ended: it is ErrClosed (errors.Is) and
// reads as its reason ("upstream "x": the server exited with status 1;
// …"), not as "connection closed".
type closedError struct {
	server string // "" leaves the name out (Dial names the server itself)
	why    error
}

func (e *closedError) Error() string {
	if e.server == "" {
		return e.why.Error()
	}
	return fmt.Sprintf("upstream %q: %v", e.server, e.why)
}

func (e *closedError) Unwrap() []error { return []error{ErrClosed, e.why} }

// closedErr is the error calls return once the connection is lost.
func (c *Client) closedErr() error {
	if err := c.Err(); err != nil {
		return err
	}
	return fmt.Errorf("upstream %q: %w", c.name, ErrClosed)
}

// wrap adds the server's name and the method to errors that lack them:
// *RPCError, ErrClosed and ctx's own end (its cause) are returned
// unchanged so callers can test them with errors.As / errors.Is or ==.
func (c *Client) wrap(ctx context.Context, what string, err error) error {
	var rpc *RPCError
	if err == nil || errors.As(err, &rpc) || errors.Is(err, ErrClosed) ||
		(ctx.Err() != nil && err == context.Cause(ctx)) {
		return err
	}
	return fmt.Errorf("upstream %q: %s: %w", c.name, what, err)
}

// request sends one request with a fresh id and waits for its answer. When
// ctx ends first it tells the server (notifications/cancelled) and returns
// the context's cause.
func (c *Client) request(ctx context.Context, method string, params json.RawMessage, f *flight) (json.RawMessage, error) {
	select {
	case <-c.done:
		return nil, c.closedErr()
	default:
	}
	if c.era == protocol.EraStateless && method != protocol.MethodToolsCall { // tools/call has its _meta from callParams
		params = c.modernParams(params)
	}
	id := c.nextID.Add(1) // from 1: jsonrpc2 treats a picked id 0 as "unset"
	res, err := c.t.call(ctx, id, method, params, f)
	switch {
	case err == nil:
		return res, nil
	case ctx.Err() != nil && c.life.Err() == nil:
		c.t.abandoned(id)
		_, overHTTP := c.t.(*httpTransport)
		switch {
		case method == protocol.MethodInitialize: // initialize must not be cancelled
		case c.era == protocol.EraStateless && overHTTP: // the stateless revision: the closed stream is the cancellation
		default:
			c.cancelRemote(id, context.Cause(ctx))
		}
		return nil, context.Cause(ctx)
	case c.life.Err() != nil:
		return nil, c.closedErr()
	}
	return nil, err
}

// cancelRemote sends notifications/cancelled for request id, in the
// background so that CallTool returns at once.
func (c *Client) cancelRemote(id int64, cause error) {
	reason := "cancelled by the client"
	if errors.Is(cause, context.DeadlineExceeded) {
		reason = "the client's deadline passed"
	}
	params, _ := json.Marshal(protocol.CancelledParams{RequestID: json.RawMessage(strconv.FormatInt(id, 10)), Reason: reason})
	c.spawn(func() {
		ctx, cancel := context.WithTimeout(c.life, notifyTimeout)
		defer cancel()
		if err := c.t.notify(ctx, protocol.NotificationCancelled, params); err != nil {
			c.log.Debug("upstream: notifications/cancelled not delivered", "id", id, "err", err)
		}
	})
}
