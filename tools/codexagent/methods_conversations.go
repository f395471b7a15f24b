package codexagent

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"time"

	"troupe/tools"
)

// defaultPageSize is listConversations' page size when none is given.
const defaultPageSize = 25

// filteredPageSize is the smallest thread/list page read when other
// sessions' conversations are filtered out.
const filteredPageSize = 100

// maxListPages bounds the thread/list pages one listConversations reads
// while it filters out other sessions' conversations; it answers with a
// cursor where it stopped.
const maxListPages = 10

// newConversationSchema is the old NewConversationParams; also the
// overrides of resumeConversation.
const newConversationSchema = `{
  "type": "object",
  "properties": {
    "model": {"type": ["string", "null"], "description": "The model (default: Codex's configuration)."},
    "profile": {"type": ["string", "null"], "description": "A profile: CODEX_HOME/<profile>.config.toml applied on top of the configuration."},
    "cwd": {"type": ["string", "null"], "description": "Working directory, relative to the workspace root or absolute inside it."},
    "approvalPolicy": {"enum": ["untrusted", "on-failure", "on-request", "never", null]},
    "sandbox": {"enum": ["read-only", "workspace-write", "danger-full-access", null]},
    "config": {"type": ["object", "null"], "description": "Configuration overrides, dotted keys as with codex -c."},
    "baseInstructions": {"type": ["string", "null"]},
    "includePlanTool": {"type": ["boolean", "null"]},
    "includeApplyPatchTool": {"type": ["boolean", "null"]}
  }
}`

func conversationDefs() []methodDef {
	return []methodDef{
		{name: "newConversation", schema: newConversationSchema, run: newConversation,
			desc: "Starts a Codex conversation without a first message; returns conversationId, model and rolloutPath."},
		{name: "listConversations", run: listConversations,
			desc: "Lists recorded Codex conversations, newest first, a page at a time (pageSize, cursor; nextCursor when more follow).",
			schema: `{"type": "object", "properties": {
  "pageSize": {"type": ["integer", "null"], "minimum": 1, "maximum": 1000},
  "cursor": {"type": ["string", "null"]}}}`},
		{name: "resumeConversation", run: resumeConversation,
			desc: "Loads a recorded conversation (by its rollout path or conversationId) so it can go on; returns conversationId, model and initialMessages.",
			schema: `{"type": "object", "properties": {
  "path": {"type": ["string", "null"], "description": "The rollout file (under CODEX_HOME) listConversations named."},
  "conversationId": {"type": ["string", "null"]},
  "overrides": {"anyOf": [` + newConversationSchema + `, {"type": "null"}]}}}`},
		{name: "archiveConversation", run: archiveConversation,
			desc: "Moves a conversation's rollout to the archive, after checking that rolloutPath is that conversation's.",
			schema: `{"type": "object", "required": ["conversationId", "rolloutPath"], "properties": {
  "conversationId": {"type": "string"}, "rolloutPath": {"type": "string"}}}`},
	}
}

// newConversationParams is the old NewConversationParams.
type newConversationParams struct {
	Model            string         `json:"model"`
	Profile          string         `json:"profile"`
	Cwd              string         `json:"cwd"`
	ApprovalPolicy   string         `json:"approvalPolicy"`
	Sandbox          string         `json:"sandbox"`
	Config           map[string]any `json:"config"`
	BaseInstructions string         `json:"baseInstructions"`
}

// threadParams turns NewConversationParams into thread/start (or
// thread/resume) parameters. The cwd must lie in the workspace; it
// defaults to the session's, then the workspace root, when withCwd.
func (c *mcall) threadParams(p newConversationParams, withCwd bool) (map[string]any, error) {
	out := map[string]any{}
	cwd := p.Cwd
	if cwd == "" && c.req.Overrides != nil {
		cwd = c.req.Overrides.Cwd
	}
	if cwd != "" || withCwd {
		dir, err := c.ms.s.dir(cwd)
		if err != nil {
			return nil, err
		}
		out["cwd"] = dir
	}
	if err := checkClientConfig(c.name+": config", p.Config); err != nil {
		return nil, err
	}
	config := map[string]any{}
	if p.Profile != "" {
		var err error
		if config, err = c.ms.s.profile(p.Profile); err != nil {
			return nil, err
		}
	}
	for k, v := range p.Config {
		config[k] = v
	}
	if len(config) > 0 {
		out["config"] = config
	}
	if p.ApprovalPolicy == "on-failure" {
		// app-server has no on-failure; on-request is the closest: the
		// model asks when the sandbox is in its way.
		p.ApprovalPolicy = "on-request"
	}
	for k, v := range map[string]string{"model": p.Model, "approvalPolicy": p.ApprovalPolicy,
		"sandbox": p.Sandbox, "baseInstructions": p.BaseInstructions} {
		if v != "" {
			out[k] = v
		}
	}
	return out, nil
}

func newConversation(ctx context.Context, c *mcall) (any, error) {
	var p newConversationParams
	if err := c.decode(&p); err != nil {
		return nil, err
	}
	params, err := c.threadParams(p, true)
	if err != nil {
		return nil, err
	}
	cl, err := c.codex(ctx)
	if err != nil {
		return nil, err
	}
	c.ms.s.confine(c.name, "thread/start", params, nil)
	raw, err := cl.call(ctx, "thread/start", params)
	if err != nil {
		return nil, err
	}
	var r threadResponse
	if err := json.Unmarshal(raw, &r); err != nil || r.Thread.ID == "" {
		return nil, tools.Errorf(tools.KindInternal, "newConversation: Codex answered thread/start without a thread")
	}
	c.ms.mu.Lock()
	c.ms.convs[r.Thread.ID] = &mconv{id: r.Thread.ID, owner: c.sess.id, host: c.sess, hostC: cl,
		path: r.Thread.Path, model: r.Model, sandbox: effectiveSandbox(raw)}
	c.ms.mu.Unlock()
	return map[string]any{"conversationId": r.Thread.ID, "model": r.Model, "rolloutPath": r.Thread.Path}, nil
}

// listCursor is listConversations' cursor: where in thread/list's pages
// the next page starts (its cursor, the items of that page already
// gone through, and the page size used).
type listCursor struct {
	Cursor string `json:"c,omitempty"`
	Skip   int    `json:"s,omitempty"`
	Limit  int    `json:"l"`
}

func listConversations(ctx context.Context, c *mcall) (any, error) {
	var p struct {
		PageSize int    `json:"pageSize"`
		Cursor   string `json:"cursor"`
	}
	if err := c.decode(&p); err != nil {
		return nil, err
	}
	if p.PageSize <= 0 {
		p.PageSize = defaultPageSize
	}
	pos := listCursor{Limit: p.PageSize}
	if !c.ms.share && pos.Limit < filteredPageSize {
		// Most threads may be other sessions': read larger pages.
		pos.Limit = filteredPageSize
	}
	if p.Cursor != "" {
		b, err := base64.RawURLEncoding.DecodeString(p.Cursor)
		if err != nil || json.Unmarshal(b, &pos) != nil || pos.Limit <= 0 || pos.Skip < 0 || pos.Skip > pos.Limit {
			return nil, tools.Errorf(tools.KindInvalidArgument, "invalid cursor: %s", p.Cursor)
		}
	}
	// Which conversations this session may see (nil: all).
	var mine map[string]bool
	if !c.ms.share {
		mine = map[string]bool{}
		c.ms.mu.Lock()
		for id, cv := range c.ms.convs {
			if cv.owner == c.sess.id {
				mine[id] = true
			}
		}
		c.ms.mu.Unlock()
		if len(mine) == 0 {
			return map[string]any{"items": []any{}}, nil // nothing to list: no Codex needed
		}
	}
	items := []map[string]any{}
	for page := 0; page < maxListPages; page++ {
		params := map[string]any{"limit": pos.Limit}
		if pos.Cursor != "" {
			params["cursor"] = pos.Cursor
		}
		raw, err := c.rpc(ctx, "thread/list", params)
		if err != nil {
			return nil, err
		}
		var r struct {
			Data       []threadInfo `json:"data"`
			NextCursor *string      `json:"nextCursor"`
		}
		if err := json.Unmarshal(raw, &r); err != nil {
			return nil, tools.Errorf(tools.KindInternal, "listConversations: unreadable thread/list answer: %v", err)
		}
		for i := pos.Skip; i < len(r.Data); i++ {
			th := r.Data[i]
			if mine != nil && !mine[th.ID] {
				continue
			}
			items = append(items, summary(th))
			if len(items) == p.PageSize {
				next := listCursor{Cursor: pos.Cursor, Skip: i + 1, Limit: pos.Limit}
				if i+1 >= len(r.Data) {
					if r.NextCursor == nil || *r.NextCursor == "" {
						return lastPage(items, pos, len(r.Data)), nil
					}
					next = listCursor{Cursor: *r.NextCursor, Limit: pos.Limit}
				}
				return map[string]any{"items": items, "nextCursor": encodeCursor(next)}, nil
			}
		}
		if r.NextCursor == nil || *r.NextCursor == "" {
			return lastPage(items, pos, len(r.Data)), nil
		}
		pos = listCursor{Cursor: *r.NextCursor, Limit: pos.Limit}
	}
	return map[string]any{"items": items, "nextCursor": encodeCursor(pos)}, nil
}

// lastPage is the answer that ends the listing. Like Codex 0.42, a page
// that lists anything carries a nextCursor (past its last item: the call
// it leads to answers no items and no cursor); an empty one has none.
func lastPage(items []map[string]any, pos listCursor, read int) map[string]any {
	if len(items) == 0 {
		return map[string]any{"items": items}
	}
	return map[string]any{"items": items, "nextCursor": encodeCursor(listCursor{Cursor: pos.Cursor, Skip: read, Limit: pos.Limit})}
}

func encodeCursor(c listCursor) string {
	b, _ := json.Marshal(c)
	return base64.RawURLEncoding.EncodeToString(b)
}

// summary is the old ConversationSummary of a thread.
func summary(th threadInfo) map[string]any {
	s := map[string]any{"conversationId": th.ID, "path": th.Path, "preview": th.Preview}
	if th.CreatedAt > 0 {
		s["timestamp"] = time.Unix(th.CreatedAt, 0).UTC().Format("2006-01-02T15:04:05.000Z")
	}
	return s
}

func resumeConversation(ctx context.Context, c *mcall) (any, error) {
	var p struct {
		Path           string                 `json:"path"`
		ConversationID string                 `json:"conversationId"`
		Overrides      *newConversationParams `json:"overrides"`
	}
	if err := c.decode(&p); err != nil {
		return nil, err
	}
	id := p.ConversationID
	var path string
	if p.Path != "" {
		var err error
		if path, id, err = c.ms.rolloutPath(p.Path); err != nil {
			return nil, err
		}
		if p.ConversationID != "" && p.ConversationID != id {
			return nil, tools.Errorf(tools.KindInvalidArgument, "resumeConversation: path is not conversation %s's rollout", p.ConversationID)
		}
	}
	if id == "" {
		return nil, tools.Errorf(tools.KindInvalidArgument, "resumeConversation: give path or conversationId")
	}
	if !validThreadID(id) {
		return nil, notFound(id)
	}
	params := map[string]any{}
	if p.Overrides != nil {
		var err error
		if params, err = c.threadParams(*p.Overrides, false); err != nil {
			return nil, err
		}
	}
	// By id: thread/resume's path needs app-server's experimental API,
	// and the path was checked to be this id's rollout under CODEX_HOME.
	params["threadId"] = id
	// Another live session's conversation is not this one's to take
	// (unless shared); where it is loaded, it is resumed there.
	ms := c.ms
	ms.mu.Lock()
	cv := ms.convs[id]
	var cl *appClient
	if cv != nil {
		if !ms.share && cv.owner != c.sess.id && ms.sessions[cv.owner] != nil {
			ms.mu.Unlock()
			return nil, notFound(id)
		}
		if cv.hostC != nil && cv.hostC.alive() {
			cl = cv.hostC
		}
	}
	ms.mu.Unlock()
	if cl == nil {
		var err error
		if cl, err = c.codex(ctx); err != nil {
			return nil, err
		}
		if err := c.adopt(id, path); err != nil {
			return nil, err
		}
	}
	ms.s.confine(c.name, "thread/resume", params, nil)
	raw, err := cl.call(ctx, "thread/resume", params)
	if err != nil {
		return nil, err
	}
	var r threadResponse
	if err := json.Unmarshal(raw, &r); err != nil || r.Thread.ID == "" {
		return nil, tools.Errorf(tools.KindInternal, "resumeConversation: Codex answered thread/resume without a thread")
	}
	ms.mu.Lock()
	cv = ms.convs[id]
	if cv == nil {
		cv = &mconv{id: id}
		ms.convs[id] = cv
	}
	cv.owner = c.sess.id
	if cv.hostC != cl {
		if cv.hostC != nil {
			ms.unload(cv)
		}
		cv.host, cv.hostC = c.sess, cl
		if cl != c.sess.client {
			cv.host = ms.hostOf(cl)
		}
	}
	cv.path, cv.model = r.Thread.Path, r.Model
	if sb := effectiveSandbox(raw); sb != nil {
		cv.sandbox = sb
	}
	ms.mu.Unlock()

	var initial []any
	for _, t := range r.Thread.Turns {
		var turn struct {
			Items []json.RawMessage `json:"items"`
		}
		_ = json.Unmarshal(t, &turn)
		for _, it := range turn.Items {
			params, _ := json.Marshal(map[string]json.RawMessage{"item": it})
			if _, msg, ok := legacyEvent("item/completed", params); ok {
				initial = append(initial, msg)
			}
		}
	}
	// As the old server did: session_configured as a codex/event first.
	thp, _ := json.Marshal(map[string]any{"thread": r.Thread, "model": r.Model})
	if _, msg, ok := legacyEvent("thread/started", thp); ok {
		if initial != nil {
			msg["initial_messages"] = initial
		}
		c.req.Session.Notify("codex/event", map[string]any{"id": "", "msg": msg})
	}
	out := map[string]any{"conversationId": id, "model": r.Model}
	if len(initial) > 0 {
		out["initialMessages"] = initial
	}
	return out, nil
}

// hostOf is the session whose Codex cl is. Callers hold ms.mu.
func (ms *methodSet) hostOf(cl *appClient) *msession {
	for _, st := range ms.sessions {
		if st.client == cl {
			return st
		}
	}
	return nil
}

// rolloutPath checks that p is a rollout file in one of troupe's Codex
// homes (home.go) and returns it (absolute, symlinks resolved) with the
// conversation id its name ends with.
func (ms *methodSet) rolloutPath(p string) (string, string, error) {
	bad := tools.Errorf(tools.KindPermissionDenied, "rollout path `%s` must be in sessions directory", p)
	if !filepath.IsAbs(p) {
		return "", "", bad
	}
	// Plainly elsewhere: refused before the file system is asked (so the
	// answer says nothing about files outside troupe's homes).
	if _, ok := ms.s.homes.rolloutHome(filepath.Clean(p)); !ok {
		return "", "", bad
	}
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		if os.IsNotExist(err) {
			return "", "", tools.Errorf(tools.KindNotFound, "no rollout file %s", p)
		}
		return "", "", bad
	}
	if _, ok := ms.s.homes.rolloutHome(real); !ok {
		return "", "", bad
	}
	name := filepath.Base(real)
	if !strings.HasPrefix(name, "rollout-") || !strings.HasSuffix(name, ".jsonl") || len(name) < len("rollout-.jsonl")+36 {
		return "", "", bad
	}
	id := strings.TrimSuffix(name, ".jsonl")
	id = id[len(id)-36:]
	if !validThreadID(id) {
		return "", "", bad
	}
	return real, id, nil
}

// adopt makes conversation id's rollout (at path, or found by id when
// path is "") part of the session's own home, so that its Codex can
// resume it: a rollout in the home of a session that has ended (in this
// troupe or an earlier one) moves into this session's. A rollout in a
// live session's home is that session's: not found, unless conversations
// are shared. A rollout that is nowhere is left to Codex to report.
func (c *mcall) adopt(id, path string) error {
	ms := c.ms
	if path == "" {
		if path = ms.s.homes.findRollout(id); path == "" {
			return nil
		}
	}
	from, ok := ms.s.homes.rolloutHome(path)
	if !ok {
		return notFound(id)
	}
	ms.mu.Lock()
	own := c.sess.home
	live := false
	for _, st := range ms.sessions {
		if st != c.sess && st.home == from {
			live = true
		}
	}
	ms.mu.Unlock()
	if from == own || ms.share && !strings.HasPrefix(from, filepath.Join(ms.s.homes.root, "sessions")) {
		return nil
	}
	if live && !ms.share {
		return notFound(id)
	}
	if own == "" {
		return tools.Errorf(tools.KindInternal, "resumeConversation: the session has no Codex home")
	}
	if _, err := ms.s.homes.adopt(own, path); err != nil {
		return tools.Errorf(tools.KindInternal, "resumeConversation: could not take over the rollout: %v", err)
	}
	return nil
}

func archiveConversation(ctx context.Context, c *mcall) (any, error) {
	var p struct {
		ConversationID string `json:"conversationId"`
		RolloutPath    string `json:"rolloutPath"`
	}
	if err := c.decode(&p); err != nil {
		return nil, err
	}
	ms := c.ms
	ms.mu.Lock()
	cv, err := ms.visible(c.sess, p.ConversationID)
	var host *appClient
	if cv != nil {
		host = cv.hostC
	}
	ms.mu.Unlock()
	if err != nil {
		return nil, err
	}
	_, id, err := ms.rolloutPath(p.RolloutPath)
	if err != nil {
		return nil, err
	}
	if id != p.ConversationID {
		return nil, tools.Errorf(tools.KindInvalidArgument, "rollout path `%s` does not belong to conversation %s", p.RolloutPath, p.ConversationID)
	}
	if host == nil || !host.alive() {
		if host, err = c.codex(ctx); err != nil {
			return nil, err
		}
	}
	if _, err := host.call(ctx, "thread/archive", map[string]any{"threadId": id}); err != nil {
		return nil, err
	}
	ms.mu.Lock()
	if cv := ms.convs[id]; cv != nil {
		ms.unload(cv)
		delete(ms.convs, id)
	}
	ms.mu.Unlock()
	return map[string]any{}, nil
}
