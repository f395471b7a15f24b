package codexagent

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"strconv"

	"troupe/tools"
)

// inputItemsSchema is the old InputItem list: {type, data}.
const inputItemsSchema = `{"type": "array", "items": {"type": "object", "required": ["type"], "properties": {
  "type": {"enum": ["text", "image", "localImage"]},
  "data": {"type": "object"}}}}`

func turnDefs() []methodDef {
	return []methodDef{
		{name: "sendUserMessage", run: sendUserMessage,
			desc: "Sends a message to a conversation: Codex starts a turn (or takes it into the running one). Answered at once; follow the turn with addConversationListener.",
			schema: `{"type": "object", "required": ["conversationId", "items"], "properties": {
  "conversationId": {"type": "string"}, "items": ` + inputItemsSchema + `}}`},
		{name: "sendUserTurn", run: sendUserTurn,
			desc: "Starts a turn with its own cwd, approval policy, sandbox policy, model, effort and summary. Answered at once; Codex's approval questions come as execCommandApproval and applyPatchApproval requests.",
			schema: `{"type": "object", "required": ["conversationId", "items", "cwd", "approvalPolicy", "sandboxPolicy", "model", "summary"], "properties": {
  "conversationId": {"type": "string"}, "items": ` + inputItemsSchema + `,
  "cwd": {"type": "string"},
  "approvalPolicy": {"enum": ["untrusted", "on-failure", "on-request", "never"]},
  "sandboxPolicy": {"type": "object", "required": ["mode"], "properties": {"mode": {"enum": ["read-only", "workspace-write", "danger-full-access"]}}},
  "model": {"type": "string"},
  "effort": {"type": ["string", "null"]},
  "summary": {"enum": ["auto", "concise", "detailed", "none"]},
  "enableWebSearch": {"type": ["boolean", "null"]}}}`},
		{name: "interruptConversation", run: interruptConversation,
			desc:   "Stops the running turn of a conversation; answers {abortReason} once the turn has stopped (at once when none runs).",
			schema: `{"type": "object", "required": ["conversationId"], "properties": {"conversationId": {"type": "string"}}}`},
		{name: "addConversationListener", run: addConversationListener,
			desc:   "Streams a conversation's events to this session as codex/event/<type> notifications until removeConversationListener; returns subscriptionId.",
			schema: `{"type": "object", "required": ["conversationId"], "properties": {"conversationId": {"type": "string"}}}`},
		{name: "removeConversationListener", run: removeConversationListener,
			desc:   "Stops the events of a listener addConversationListener started.",
			schema: `{"type": "object", "required": ["subscriptionId"], "properties": {"subscriptionId": {"type": "string"}}}`},
	}
}

// inputItem is the old InputItem.
type inputItem struct {
	Type string `json:"type"`
	Data struct {
		Text     string `json:"text"`
		ImageURL string `json:"image_url"`
		Path     string `json:"path"`
	} `json:"data"`
}

// userInput turns the old items into app-server's UserInput list. Local
// images must lie in the workspace.
func (c *mcall) userInput(items []inputItem) ([]any, error) {
	var out []any
	for _, it := range items {
		switch it.Type {
		case "text":
			out = append(out, map[string]any{"type": "text", "text": it.Data.Text, "text_elements": []any{}})
		case "image":
			out = append(out, map[string]any{"type": "image", "url": it.Data.ImageURL})
		case "localImage":
			p, err := c.ms.s.file(it.Data.Path)
			if err != nil {
				return nil, err
			}
			out = append(out, map[string]any{"type": "localImage", "path": p})
		default:
			return nil, tools.Errorf(tools.KindInvalidArgument, "%s: unknown item type %q", c.name, it.Type)
		}
	}
	if len(out) == 0 {
		return nil, tools.Errorf(tools.KindInvalidArgument, "%s: items is empty", c.name)
	}
	return out, nil
}

func sendUserMessage(ctx context.Context, c *mcall) (any, error) {
	var p struct {
		ConversationID string      `json:"conversationId"`
		Items          []inputItem `json:"items"`
	}
	if err := c.decode(&p); err != nil {
		return nil, err
	}
	input, err := c.userInput(p.Items)
	if err != nil {
		return nil, err
	}
	return c.startTurn(ctx, p.ConversationID, map[string]any{"input": input})
}

func sendUserTurn(ctx context.Context, c *mcall) (any, error) {
	var p struct {
		ConversationID string      `json:"conversationId"`
		Items          []inputItem `json:"items"`
		Cwd            string      `json:"cwd"`
		ApprovalPolicy string      `json:"approvalPolicy"`
		SandboxPolicy  struct {
			Mode                string   `json:"mode"`
			WritableRoots       []string `json:"writable_roots"`
			NetworkAccess       bool     `json:"network_access"`
			ExcludeTmpdirEnvVar bool     `json:"exclude_tmpdir_env_var"`
			ExcludeSlashTmp     bool     `json:"exclude_slash_tmp"`
		} `json:"sandboxPolicy"`
		Model   string `json:"model"`
		Effort  string `json:"effort"`
		Summary string `json:"summary"`
	}
	if err := c.decode(&p); err != nil {
		return nil, err
	}
	input, err := c.userInput(p.Items)
	if err != nil {
		return nil, err
	}
	dir, err := c.ms.s.dir(p.Cwd)
	if err != nil {
		return nil, err
	}
	var sandbox map[string]any
	switch p.SandboxPolicy.Mode {
	case "read-only":
		sandbox = map[string]any{"type": "readOnly", "networkAccess": false}
	case "workspace-write":
		roots := p.SandboxPolicy.WritableRoots
		if roots == nil {
			roots = []string{}
		}
		sandbox = map[string]any{"type": "workspaceWrite", "writableRoots": roots,
			"networkAccess": p.SandboxPolicy.NetworkAccess, "excludeTmpdirEnvVar": p.SandboxPolicy.ExcludeTmpdirEnvVar,
			"excludeSlashTmp": p.SandboxPolicy.ExcludeSlashTmp}
	default:
		sandbox = map[string]any{"type": "dangerFullAccess"}
	}
	approval := p.ApprovalPolicy
	if approval == "on-failure" {
		approval = "on-request" // app-server's nearest
	}
	params := map[string]any{"input": input, "cwd": dir, "approvalPolicy": approval, "sandboxPolicy": sandbox,
		"model": p.Model, "summary": p.Summary}
	if p.Effort != "" {
		params["effort"] = p.Effort
	}
	return c.startTurn(ctx, p.ConversationID, params)
}

// startTurn sends turn/start for conversation id and records the
// session that started it (Codex's approval questions go to it).
func (c *mcall) startTurn(ctx context.Context, id string, params map[string]any) (any, error) {
	cv, cl, err := c.loaded(ctx, id)
	if err != nil {
		return nil, err
	}
	params["threadId"] = id
	c.ms.mu.Lock()
	effective := cv.sandbox
	c.ms.mu.Unlock()
	set := c.ms.s.confine(c.name, "turn/start", params, effective)
	raw, err := cl.call(ctx, "turn/start", params)
	if err != nil {
		return nil, err
	}
	var r struct {
		Turn struct {
			ID string `json:"id"`
		} `json:"turn"`
	}
	_ = json.Unmarshal(raw, &r)
	c.ms.mu.Lock()
	if r.Turn.ID != "" && r.Turn.ID != cv.lastDone && cv.hostC == cl {
		cv.turnID = r.Turn.ID
	}
	cv.turnSession = c.sess.id
	if set != nil && cv.hostC == cl {
		cv.sandbox = set // turn/start's policy holds for the following turns
	}
	c.ms.mu.Unlock()
	return map[string]any{}, nil
}

func interruptConversation(ctx context.Context, c *mcall) (any, error) {
	var p struct {
		ConversationID string `json:"conversationId"`
	}
	if err := c.decode(&p); err != nil {
		return nil, err
	}
	ms := c.ms
	ms.mu.Lock()
	cv, err := ms.visible(c.sess, p.ConversationID)
	if err == nil && cv == nil {
		err = notFound(p.ConversationID) // loaded nowhere: nothing of ours runs
	}
	if err != nil {
		ms.mu.Unlock()
		return nil, err
	}
	cl, turn := cv.hostC, cv.turnID
	if cl == nil || turn == "" {
		ms.mu.Unlock()
		return map[string]any{"abortReason": "interrupted"}, nil // nothing runs
	}
	done := make(chan string, 1)
	cv.waiters = append(cv.waiters, done)
	ms.mu.Unlock()
	forget := func() {
		ms.mu.Lock()
		defer ms.mu.Unlock()
		for i, w := range cv.waiters {
			if w == done {
				cv.waiters = append(cv.waiters[:i], cv.waiters[i+1:]...)
				break
			}
		}
	}
	if _, err := cl.call(ctx, "turn/interrupt", map[string]any{"threadId": p.ConversationID, "turnId": turn}); err != nil {
		forget()
		return nil, err
	}
	select {
	case reason := <-done:
		return map[string]any{"abortReason": reason}, nil
	case <-ctx.Done():
		forget()
		return nil, ctx.Err()
	}
}

// listener relays one conversation's events to its session.
type listener struct {
	id     string
	conv   string
	cl     *appClient
	sub    *subscription
	cancel context.CancelFunc
}

// stop ends the listener's goroutine (it drains nothing more).
func (l *listener) stop() {
	l.cancel()
	l.cl.unsubscribe(l.sub)
}

func addConversationListener(ctx context.Context, c *mcall) (any, error) {
	var p struct {
		ConversationID string `json:"conversationId"`
	}
	if err := c.decode(&p); err != nil {
		return nil, err
	}
	cv, cl, err := c.loaded(ctx, p.ConversationID)
	if err != nil {
		return nil, err
	}
	ms := c.ms
	lctx, cancel := context.WithCancel(context.Background())
	l := &listener{id: newUUID(), conv: p.ConversationID, cl: cl, sub: cl.subscribe(p.ConversationID), cancel: cancel}
	ms.mu.Lock()
	if c.sess.ended {
		ms.mu.Unlock()
		l.stop()
		return nil, tools.Errorf(tools.KindUnavailable, "the session has ended")
	}
	c.sess.listeners[l.id] = l
	turn := cv.turns - 1 // the running (or last) turn's index, -1 before the first
	ms.mu.Unlock()
	sess := c.req.Session
	ms.bg.Add(1)
	go func() {
		defer ms.bg.Done()
		for {
			m, ok := l.sub.next(lctx)
			if !ok {
				return
			}
			if m.Method == "turn/started" {
				turn++
			}
			typ, msg, ok := legacyEvent(m.Method, m.Params)
			if !ok {
				continue
			}
			id := turn
			if id < 0 {
				id = 0
			}
			sess.Notify("codex/event/"+typ, map[string]any{"id": strconv.Itoa(id), "msg": msg, "conversationId": l.conv})
		}
	}()
	return map[string]any{"subscriptionId": l.id}, nil
}

func removeConversationListener(ctx context.Context, c *mcall) (any, error) {
	var p struct {
		SubscriptionID string `json:"subscriptionId"`
	}
	if err := c.decode(&p); err != nil {
		return nil, err
	}
	c.ms.mu.Lock()
	l := c.sess.listeners[p.SubscriptionID]
	delete(c.sess.listeners, p.SubscriptionID)
	c.ms.mu.Unlock()
	if l == nil {
		return nil, tools.Errorf(tools.KindNotFound, "subscription not found: %s", p.SubscriptionID)
	}
	l.stop()
	return map[string]any{}, nil
}

// newUUID is a random (version 4) UUID, as the old subscription ids were.
func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

// approve answers Codex's approval requests during turns: the session
// that started the turn (else the conversation's owner) is asked with the
// old server's execCommandApproval or applyPatchApproval request; no
// answer, an error or an unknown decision declines. Other requests are
// refused: nobody is at a terminal to answer them.
func (ms *methodSet) approve(ctx context.Context, method string, params json.RawMessage) (any, error) {
	var p struct {
		ThreadID  string `json:"threadId"`
		ItemID    string `json:"itemId"`
		Command   string `json:"command"`
		Cwd       string `json:"cwd"`
		Reason    string `json:"reason"`
		GrantRoot string `json:"grantRoot"`
	}
	_ = json.Unmarshal(params, &p)
	var ask string
	var q map[string]any
	ms.mu.Lock()
	cv := ms.convs[p.ThreadID]
	var st *msession
	if cv != nil {
		if st = ms.sessions[cv.turnSession]; st == nil {
			st = ms.sessions[cv.owner]
		}
	}
	switch method {
	case "item/commandExecution/requestApproval":
		ask = "execCommandApproval"
		q = map[string]any{"conversation_id": p.ThreadID, "call_id": p.ItemID,
			"command": evSplitCommand(p.Command), "cwd": p.Cwd}
	case "item/fileChange/requestApproval":
		ask = "applyPatchApproval"
		var changes any
		if cv != nil {
			changes = cv.changes[p.ItemID]
		}
		q = map[string]any{"conversation_id": p.ThreadID, "call_id": p.ItemID, "file_changes": evFileChanges(changes)}
		if p.GrantRoot != "" {
			q["grant_root"] = p.GrantRoot
		}
	default:
		ms.mu.Unlock()
		return nil, &rpcError{Code: -32601, Message: "troupe does not relay " + method + " to its client"}
	}
	ms.mu.Unlock()
	if p.Reason != "" {
		q["reason"] = p.Reason
	}
	if st == nil {
		return map[string]any{"decision": "decline"}, nil
	}
	return map[string]any{"decision": askDecision(ctx, st.sess, ask, q)}, nil
}

// askDecision asks the session's client and maps its ReviewDecision (or a
// standard elicitation answer) to app-server's decision.
func askDecision(ctx context.Context, s tools.Session, method string, params any) string {
	cl := s.Client()
	if cl == nil {
		return "decline"
	}
	raw, err := cl.Call(ctx, method, params)
	if err != nil {
		return "decline"
	}
	return answeredDecision(raw)
}
