package codexagent

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"troupe/protocol"
	"troupe/tools"
)

// MethodOptions configure the management methods.
type MethodOptions struct {
	// ShareConversations lets every session see and act on every
	// conversation in CODEX_HOME. When false (the default) a session sees
	// and may act on only the conversations it created or resumed;
	// listConversations lists only those, and the others are "conversation
	// not found", as the old server said of ids it did not know. A
	// conversation a live session holds cannot be resumed by another one;
	// once that session ends, any session may resume it.
	ShareConversations bool
	// MaxProcesses bounds the Codex app-server processes the sessions keep
	// at once (one per session that uses a method needing Codex; 0:
	// DefaultMaxProcesses). A session past it is refused (unavailable)
	// until another one ends.
	MaxProcesses int
}

// DefaultMaxProcesses is MethodOptions.MaxProcesses when it is zero.
const DefaultMaxProcesses = 32

// Methods returns Codex's former management methods (newConversation,
// sendUserTurn, addConversationListener, getAuthStatus, ...) as tools
// whose names are the method names, for troupe to serve as JSON-RPC
// methods next to MCP (SessionOptions.Methods). They keep per-session
// state (the conversations a session created, its listeners) in one table
// keyed by tools.Session.ID(): each session that calls a method that needs
// Codex gets its own long-lived `codex app-server` process, started at its
// first such call and stopped when the session ends (SessionEnded). Every
// call needs req.Session. execOneOffCommand is not among them: troupe runs
// commands through its own gate and sandbox.
func Methods(opts Options, mo MethodOptions) ([]tools.Tool, error) {
	ts, err := Tools(opts)
	if err != nil {
		return nil, err
	}
	if mo.MaxProcesses <= 0 {
		mo.MaxProcesses = DefaultMaxProcesses
	}
	ms := &methodSet{s: ts[0].(*codexTool).s, share: mo.ShareConversations, maxProcs: mo.MaxProcesses,
		sessions: map[string]*msession{}, convs: map[string]*mconv{}}
	ms.s.homes.share = mo.ShareConversations
	var out []tools.Tool
	for _, d := range ms.defs() {
		out = append(out, &methodTool{ms: ms, def: d})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Spec().Name < out[j].Spec().Name })
	return out, nil
}

// methodDef is one method: its name, what it is for, its params schema
// and what it does.
type methodDef struct {
	name, desc, schema string
	run                func(ctx context.Context, c *mcall) (any, error)
}

// mcall is one call of a method: the session's state and the request.
type mcall struct {
	ms   *methodSet
	sess *msession
	req  *tools.Request
	name string
}

// methodTool serves one method as a tools.Tool.
type methodTool struct {
	ms  *methodSet
	def methodDef
}

// Spec implements tools.Tool.
func (t *methodTool) Spec() tools.Spec {
	no := false
	return tools.Spec{
		Name: t.def.name, Title: t.def.name, Description: t.def.desc,
		InputSchema: json.RawMessage(t.def.schema),
		Annotations: &protocol.ToolAnnotations{Title: t.def.name, OpenWorldHint: &no},
		Safety:      tools.Safety{RequiresApproval: false},
	}
}

// Call implements tools.Tool: the result is the method's JSON-RPC result,
// as structuredContent.
func (t *methodTool) Call(ctx context.Context, req *tools.Request) (*protocol.CallToolResult, error) {
	if req.Session == nil {
		return nil, tools.Errorf(tools.KindUnavailable, "%s: Codex's methods need a session", t.def.name)
	}
	sess, err := t.ms.session(req.Session)
	if err != nil {
		return nil, err
	}
	res, err := t.def.run(ctx, &mcall{ms: t.ms, sess: sess, req: req, name: t.def.name})
	if err != nil {
		return nil, t.ms.failure(ctx, t.def.name, req, err)
	}
	if res == nil {
		res = struct{}{}
	}
	return tools.StructuredResult(res)
}

// SessionEnded implements tools.SessionEnder: the session's Codex process
// and listeners stop. troupe calls it on every method of the registry;
// only the first call for a session does anything.
func (t *methodTool) SessionEnded(id string) { t.ms.sessionEnded(id) }

// Wait implements tools.SessionWaiter: it returns once the Codex
// processes of ended sessions have stopped.
func (t *methodTool) Wait() { t.ms.wait() }

// failure turns an error into the method's error: *tools.Error as it is,
// Codex's JSON-RPC errors by their code, Codex's exit as unavailable.
// Messages pass through the secret masker.
func (ms *methodSet) failure(ctx context.Context, name string, req *tools.Request, err error) error {
	var te *tools.Error
	var re *rpcError
	switch {
	case errors.As(err, &te):
		te = &tools.Error{Kind: te.Kind, Message: te.Message}
	case errors.As(err, &re):
		kind := tools.KindCommandFailed // -32600, as Codex itself answered
		switch re.Code {
		case -32602:
			kind = tools.KindInvalidArgument
		case -32603:
			kind = tools.KindInternal
		}
		te = &tools.Error{Kind: kind, Message: re.Message}
	case ctx.Err() != nil:
		return ctx.Err()
	case errors.Is(err, errExited):
		te = tools.Errorf(tools.KindUnavailable, "%s: Codex exited: %v", name, err)
	default:
		te = tools.Errorf(tools.KindInternal, "%s: %v", name, err)
	}
	te.Message = req.Secrets.Replace(te.Message)
	return te
}

// methodSet is the state every method shares: the sessions that used
// them, and the conversations those sessions hold.
type methodSet struct {
	s        *toolSet
	share    bool
	maxProcs int // MethodOptions.MaxProcesses
	// onStart, when set (tests), learns the pid of every Codex started.
	onStart func(pid int)

	mu       sync.Mutex
	sessions map[string]*msession
	convs    map[string]*mconv
	starting int            // Codex processes being started (counted against maxProcs)
	bg       sync.WaitGroup // listeners and the stopping of ended sessions' Codex
}

// msession is one session's state.
type msession struct {
	id   string
	sess tools.Session

	startMu sync.Mutex // held while Codex starts
	client  *appClient // guarded by methodSet.mu; nil until needed
	// home is the session's own CODEX_HOME (home.go), made when its
	// first Codex starts; guarded by startMu. Its Codex's credentials,
	// default model and rollouts are this session's alone.
	home string
	// ownKey says the session set the credentials in its home itself
	// (loginApiKey): only then may getAuthStatus return the token.
	// Guarded by methodSet.mu.
	ownKey bool

	listeners map[string]*listener // by subscription id; guarded by methodSet.mu
	ended     bool
}

// mconv is one conversation (a Codex thread) a session created or
// resumed. Guarded by methodSet.mu.
type mconv struct {
	id    string
	owner string     // the session that created or last resumed it
	host  *msession  // whose Codex has the thread loaded; nil when none
	hostC *appClient // that Codex
	path  string     // the rollout file
	model string
	// sandbox is the thread's sandbox as Codex last stated it (its
	// thread/start or thread/resume answer) or troupe last set it
	// (turn/start): what confine checks before a turn that asks for none.
	sandbox map[string]any

	turnID      string // the running turn; "" when none
	lastDone    string // the last turn that completed
	turnSession string // the session that started the running turn (approvals)
	turns       int    // turns started while loaded (event ids)
	waiters     []chan string
	// changes are the file changes of fileChange items by item id, for
	// applyPatchApproval (app-server's approval request names the item
	// only).
	changes map[string]any
}

// session returns the state of s, creating it.
func (ms *methodSet) session(s tools.Session) (*msession, error) {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	st := ms.sessions[s.ID()]
	if st == nil {
		st = &msession{id: s.ID(), sess: s, listeners: map[string]*listener{}}
		ms.sessions[s.ID()] = st
	}
	if st.ended {
		return nil, tools.Errorf(tools.KindUnavailable, "the session has ended")
	}
	return st, nil
}

// codex returns the session's Codex, starting it at the first need.
func (c *mcall) codex(ctx context.Context) (*appClient, error) {
	return c.ms.codexFor(ctx, c.sess)
}

func (ms *methodSet) codexFor(ctx context.Context, st *msession) (*appClient, error) {
	st.startMu.Lock()
	defer st.startMu.Unlock()
	ms.mu.Lock()
	cl, ended := st.client, st.ended
	ms.mu.Unlock()
	if ended {
		return nil, tools.Errorf(tools.KindUnavailable, "the session has ended")
	}
	if cl != nil && cl.alive() {
		return cl, nil
	}
	if cl != nil { // Codex died: its threads are no longer loaded
		cl.close(false)
		ms.unhost(cl)
		ms.mu.Lock()
		st.client = nil
		ms.mu.Unlock()
	}
	if st.home == "" {
		home, err := ms.s.homes.newSession()
		if err != nil {
			return nil, tools.Errorf(tools.KindUnavailable, "Codex: could not prepare the session's home: %v", err)
		}
		ms.mu.Lock()
		st.home = home
		ended = st.ended
		ms.mu.Unlock()
		if ended { // sessionEnded did not see the home: forget it here
			ms.s.homes.forget(home)
			return nil, tools.Errorf(tools.KindUnavailable, "the session has ended")
		}
	}
	if err := ms.reserve(); err != nil {
		return nil, err
	}
	home := st.home
	var nc *appClient
	nc, err := startAppClient(ctx, func() (*process, error) { return ms.s.startCodex(home, ms.s.wsReal) },
		func(ctx context.Context, method string, params json.RawMessage) (any, error) {
			return ms.approve(ctx, method, params)
		},
		func(method string, params json.RawMessage) { ms.observe(st, method, params) })
	ms.mu.Lock()
	ms.starting--
	ms.mu.Unlock()
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, tools.Errorf(tools.KindUnavailable, "Codex: %v", err)
	}
	ms.mu.Lock()
	if st.ended { // the session ended while Codex started
		ms.mu.Unlock()
		nc.close(false)
		return nil, tools.Errorf(tools.KindUnavailable, "the session has ended")
	}
	st.client = nc
	ms.mu.Unlock()
	if ms.onStart != nil {
		ms.onStart(nc.pid())
	}
	return nc, nil
}

// reserve counts a Codex about to start against maxProcs: the sessions
// that have one, and the starts under way. The caller decrements starting
// once the start is over.
func (ms *methodSet) reserve() error {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	live := ms.starting
	for _, o := range ms.sessions {
		if o.client != nil {
			live++
		}
	}
	if live >= ms.maxProcs {
		return tools.Errorf(tools.KindUnavailable,
			"%d sessions already have a Codex process (the limit, codex.max_processes); try again when one ends", live)
	}
	ms.starting++
	return nil
}

// unhost forgets that the threads of cl are loaded.
func (ms *methodSet) unhost(cl *appClient) {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	for _, cv := range ms.convs {
		if cv.hostC == cl {
			ms.unload(cv)
		}
	}
}

// unload marks cv as not loaded anywhere; an interrupt waiting for its
// turn is answered. Callers hold ms.mu.
func (ms *methodSet) unload(cv *mconv) {
	cv.host, cv.hostC = nil, nil
	cv.turnID, cv.turnSession = "", ""
	for _, w := range cv.waiters {
		w <- "interrupted"
	}
	cv.waiters = nil
	cv.changes = nil
}

// sessionEnded stops what the session started: its listeners, its Codex
// (in the background: SessionEnded must not block), and forgets its
// conversations' hosting. Conversations it owned stay recorded in shared
// mode only.
func (ms *methodSet) sessionEnded(id string) {
	ms.mu.Lock()
	st := ms.sessions[id]
	if st == nil || st.ended {
		ms.mu.Unlock()
		return
	}
	st.ended = true
	delete(ms.sessions, id)
	cl, home := st.client, st.home
	st.client = nil
	for sid, l := range st.listeners {
		l.stop()
		delete(st.listeners, sid)
	}
	for cid, cv := range ms.convs {
		if cv.host == st {
			ms.unload(cv)
		}
		// Unloaded records are kept only for their owner's sake; in
		// shared mode they are a cache, rebuilt when used.
		if cv.host == nil && (ms.share || cv.owner == id) {
			delete(ms.convs, cid)
		}
	}
	ms.mu.Unlock()
	if cl == nil && home == "" {
		return
	}
	ms.bg.Add(1)
	go func() {
		defer ms.bg.Done()
		if cl != nil {
			cl.close(true)
		}
		if home != "" {
			ms.s.homes.forget(home)
		}
	}()
}

// wait waits for the background work of ended sessions.
func (ms *methodSet) wait() { ms.bg.Wait() }

// notFound is the old server's answer for a conversation it did not know.
func notFound(id string) error {
	return tools.Errorf(tools.KindNotFound, "conversation not found: %s", id)
}

// visible returns conversation id if the session may act on it. In
// shared mode a conversation no session holds (made by an earlier troupe
// or another program) is visible too, as nil: callers that need it
// loaded resume it. Callers hold ms.mu.
func (ms *methodSet) visible(st *msession, id string) (*mconv, error) {
	cv := ms.convs[id]
	if cv != nil && (ms.share || cv.owner == st.id) {
		return cv, nil
	}
	if cv == nil && ms.share && validThreadID(id) {
		return nil, nil
	}
	return nil, notFound(id)
}

// loaded returns the Codex the conversation is loaded in, resuming it in
// the session's own Codex when it is loaded nowhere (after a Codex exit,
// or in shared mode for a conversation another session made).
func (c *mcall) loaded(ctx context.Context, id string) (*mconv, *appClient, error) {
	ms := c.ms
	ms.mu.Lock()
	cv, err := ms.visible(c.sess, id)
	if err != nil {
		ms.mu.Unlock()
		return nil, nil, err
	}
	var host *appClient
	if cv != nil {
		host = cv.hostC
	}
	ms.mu.Unlock()
	if host != nil && host.alive() {
		return cv, host, nil
	}
	cl, err := c.codex(ctx)
	if err != nil {
		return nil, nil, err
	}
	if err := c.adopt(id, ""); err != nil {
		return nil, nil, err
	}
	params := map[string]any{"threadId": id, "excludeTurns": true}
	ms.s.confine(c.name, "thread/resume", params, nil)
	raw, err := cl.call(ctx, "thread/resume", params)
	if err != nil {
		var re *rpcError
		if errors.As(err, &re) {
			return nil, nil, notFound(id)
		}
		return nil, nil, err
	}
	var r threadResponse
	_ = json.Unmarshal(raw, &r)
	ms.mu.Lock()
	defer ms.mu.Unlock()
	if cv = ms.convs[id]; cv == nil {
		cv = &mconv{id: id, owner: c.sess.id}
		ms.convs[id] = cv
	}
	if cv.hostC != nil && cv.hostC != cl && cv.hostC.alive() {
		return cv, cv.hostC, nil // another session loaded it meanwhile
	}
	cv.host, cv.hostC = c.sess, cl
	if r.Thread.Path != "" {
		cv.path = r.Thread.Path
	}
	if r.Model != "" {
		cv.model = r.Model
	}
	if sb := effectiveSandbox(raw); sb != nil {
		cv.sandbox = sb
	}
	return cv, cl, nil
}

// threadResponse is what thread/start and thread/resume answer, as far
// as the methods need it.
type threadResponse struct {
	Thread threadInfo `json:"thread"`
	Model  string     `json:"model"`
}

// threadInfo is app-server's Thread, as far as the methods need it.
type threadInfo struct {
	ID        string            `json:"id"`
	Preview   string            `json:"preview"`
	Path      string            `json:"path"`
	CreatedAt int64             `json:"createdAt"`
	Turns     []json.RawMessage `json:"turns"`
}

// observe keeps the conversations' turn state from Codex's notifications
// (on the reader goroutine of host's Codex; it must not block).
func (ms *methodSet) observe(host *msession, method string, params json.RawMessage) {
	switch method {
	case "turn/started", "turn/completed", "item/started", "item/completed":
	case "account/updated", "account/login/completed":
		ms.relayAccount(host, method, params)
		return
	default:
		return
	}
	var p struct {
		ThreadID string `json:"threadId"`
		Turn     struct {
			ID     string `json:"id"`
			Status string `json:"status"`
		} `json:"turn"`
		Item struct {
			ID      string          `json:"id"`
			Type    string          `json:"type"`
			Changes json.RawMessage `json:"changes"`
		} `json:"item"`
	}
	if json.Unmarshal(params, &p) != nil {
		return
	}
	ms.mu.Lock()
	defer ms.mu.Unlock()
	cv := ms.convs[p.ThreadID]
	if cv == nil || cv.host != host {
		return
	}
	switch method {
	case "turn/started":
		if p.Turn.ID != cv.lastDone {
			cv.turnID = p.Turn.ID
		}
		cv.turns++
	case "turn/completed":
		cv.lastDone = p.Turn.ID
		if cv.turnID == p.Turn.ID || cv.turnID == "" {
			cv.turnID, cv.turnSession = "", ""
			for _, w := range cv.waiters {
				w <- "interrupted"
			}
			cv.waiters = nil
		}
	case "item/started":
		if p.Item.Type == "fileChange" {
			if cv.changes == nil {
				cv.changes = map[string]any{}
			}
			if len(cv.changes) < 64 {
				var ch any
				_ = json.Unmarshal(p.Item.Changes, &ch)
				cv.changes[p.Item.ID] = ch
			}
		}
	case "item/completed":
		delete(cv.changes, p.Item.ID)
	}
}

// decode reads a call's params into v.
func (c *mcall) decode(v any) error {
	if err := json.Unmarshal(c.req.Arguments, v); err != nil {
		return tools.Errorf(tools.KindInvalidArgument, "%s: %v", c.name, err)
	}
	return nil
}

// rpc calls method on the session's Codex.
func (c *mcall) rpc(ctx context.Context, method string, params any) (json.RawMessage, error) {
	cl, err := c.codex(ctx)
	if err != nil {
		return nil, err
	}
	return cl.call(ctx, method, params)
}

// dropNulls removes the null members of an object, as the old server
// omitted unset optional fields.
func dropNulls(m map[string]any) map[string]any {
	for k, v := range m {
		if v == nil {
			delete(m, k)
		}
	}
	return m
}

// validThreadID accepts Codex's ids (UUIDs) only, so an id is never a path.
func validThreadID(id string) bool {
	if len(id) != 36 {
		return false
	}
	for i, r := range id {
		switch {
		case i == 8 || i == 13 || i == 18 || i == 23:
			if r != '-' {
				return false
			}
		case r >= '0' && r <= '9', r >= 'a' && r <= 'f', r >= 'A' && r <= 'F':
		default:
			return false
		}
	}
	return true
}

// defs lists every method.
func (ms *methodSet) defs() []methodDef {
	var out []methodDef
	out = append(out, conversationDefs()...)
	out = append(out, turnDefs()...)
	out = append(out, accountDefs()...)
	return out
}

// file resolves a file argument (a local image): relative to the
// workspace or absolute, inside the workspace after symlinks.
func (s *toolSet) file(p string) (string, error) {
	if p == "" {
		return "", tools.Errorf(tools.KindInvalidArgument, "codex: empty path")
	}
	abs := p
	if !filepath.IsAbs(abs) {
		abs = filepath.Join(s.wsReal, abs)
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return "", tools.Errorf(tools.KindNotFound, "codex: %q does not exist in the workspace", p)
	}
	if rel, err := filepath.Rel(s.wsReal, real); err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return "", tools.Errorf(tools.KindPermissionDenied, "codex: %q is outside the workspace", p)
	}
	return real, nil
}
