package codexagent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"troupe/protocol"
	"troupe/redact"
	"troupe/tools"
)

// interruptWait is how long a stopped turn has to acknowledge
// turn/interrupt (so Codex records the abort in its rollout) before the
// process group is terminated anyway.
const interruptWait = time.Second

// turnSpec is one turn to run: a new thread (start) or an existing one
// (resume), and the user's prompt.
type turnSpec struct {
	tool     string         // the tool's name, for messages
	dir      string         // the process's working directory
	start    map[string]any // thread/start params; nil to resume
	resumeID string         // the thread to resume
	sandbox  string         // with resumeID: the SandboxMode to resume with ("": Codex's choice)
	prompt   string
	// started is called with the thread id once Codex knows it (before
	// the turn runs), so the conversation is recorded even if the turn
	// fails.
	started func(threadID string)
}

// turnResult is what a finished turn leaves.
type turnResult struct {
	threadID string
	message  string // the last agent message
}

// turn runs one turn in its own app-server process and relays what
// happens to the call's client.
type turn struct {
	t    *toolSet
	ctx  context.Context // the turn's: the call's, bounded by the ceiling
	req  *tools.Request
	spec turnSpec
	c    *conn

	threadID, turnID string
	lastMessage      string
	lastError        string
	progress         float64
	events           int    // codex/event notifications sent
	lastEventError   string // the last error event sent, not to send it twice
	// From thread/start's answer, for session_configured.
	approvalPolicy, approvalsReviewer any
}

// run starts Codex, runs the turn to its end and stops Codex: no process
// outlives it. ctx is the call's context; the turn ceiling is applied
// here.
func (s *toolSet) run(ctx context.Context, req *tools.Request, spec turnSpec) (*turnResult, error) {
	turnCtx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	home, err := s.homes.tools()
	if err != nil {
		return nil, tools.Errorf(tools.KindUnavailable, "%s: could not prepare Codex's home: %v", spec.tool, err)
	}
	proc, err := s.startCodex(home, spec.dir)
	if err != nil {
		return nil, tools.Errorf(tools.KindUnavailable, "%s: could not start Codex: %v", spec.tool, err)
	}
	tr := &turn{t: s, ctx: turnCtx, req: req, spec: spec, c: newConn(proc)}
	res, err := tr.drive(turnCtx)
	if err == nil {
		tr.c.close(true)
		return res, nil
	}
	if turnCtx.Err() != nil {
		tr.interrupt()
	}
	tr.c.close(false)
	switch {
	case ctx.Err() != nil:
		return nil, ctx.Err() // the invocation reports the cancellation
	case turnCtx.Err() != nil:
		return nil, tools.Errorf(tools.KindDeadlineExceeded, "%s: the Codex turn did not finish within %s%s",
			spec.tool, s.timeout, tr.conversationNote())
	case errors.Is(err, errExited):
		msg := fmt.Sprintf("%s: Codex exited before the turn ended", spec.tool)
		if tail := proc.stderr.String(); tail != "" {
			msg += ": " + lastLines(tail, 10)
		}
		return nil, &tools.Error{Kind: tools.KindCommandFailed, Message: req.Secrets.Replace(msg + tr.conversationNote())}
	}
	if te, ok := tools.AsError(err); ok {
		te.Message = req.Secrets.Replace(te.Message + tr.conversationNote())
		return nil, te
	}
	return nil, err
}

// conversationNote names the conversation in error messages, so a client
// can continue it after a failed turn.
func (tr *turn) conversationNote() string {
	if tr.threadID == "" {
		return ""
	}
	return fmt.Sprintf(" (conversationId %s)", tr.threadID)
}

// interrupt asks Codex to stop the running turn and waits a moment for it
// to say so; the process is terminated afterwards whatever happens.
func (tr *turn) interrupt() {
	if tr.turnID == "" {
		return
	}
	if _, err := tr.c.send("turn/interrupt", map[string]any{"threadId": tr.threadID, "turnId": tr.turnID}); err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), interruptWait)
	defer cancel()
	for {
		m, err := tr.c.next(ctx)
		if err != nil || m.Method == "turn/completed" {
			return
		}
		if m.isRequest() { // nobody is left to ask
			_ = tr.c.refuse(m.ID, -32000, "the turn is being interrupted")
		}
	}
}

// drive speaks the app-server protocol for one turn: initialize, thread
// start or resume, turn/start, then events until turn/completed.
func (tr *turn) drive(ctx context.Context) (*turnResult, error) {
	c := tr.c
	name := tr.spec.tool
	if _, err := c.call(ctx, "initialize", map[string]any{
		"clientInfo": map[string]any{"name": "troupe", "title": "troupe", "version": "0"},
	}, tr.handle); err != nil {
		return nil, tr.rpcFailure("initialize", err)
	}
	if err := c.notify("initialized", nil); err != nil {
		return nil, c.exitError()
	}
	method, params := "thread/start", tr.spec.start
	if params == nil {
		method, params = "thread/resume", map[string]any{"threadId": tr.spec.resumeID}
		if tr.spec.sandbox != "" {
			params["sandbox"] = tr.spec.sandbox
		}
	}
	tr.t.confine(name, method, params, nil)
	raw, err := c.call(ctx, method, params, tr.handle)
	if err != nil {
		return nil, tr.rpcFailure(method, err)
	}
	var th struct {
		Thread struct {
			ID string `json:"id"`
		} `json:"thread"`
		ApprovalPolicy    any `json:"approvalPolicy"`
		ApprovalsReviewer any `json:"approvalsReviewer"`
	}
	if json.Unmarshal(raw, &th) != nil || th.Thread.ID == "" {
		return nil, tools.Errorf(tools.KindInternal, "%s: Codex answered %s without a thread id", name, method)
	}
	tr.threadID = th.Thread.ID
	tr.approvalPolicy, tr.approvalsReviewer = th.ApprovalPolicy, th.ApprovalsReviewer
	if tr.spec.started != nil {
		tr.spec.started(tr.threadID)
	}
	turnParams := map[string]any{
		"threadId": tr.threadID,
		"input":    []any{map[string]any{"type": "text", "text": tr.spec.prompt}},
	}
	tr.t.confine(name, "turn/start", turnParams, effectiveSandbox(raw))
	raw, err = c.call(ctx, "turn/start", turnParams, tr.handle)
	if err != nil {
		return nil, tr.rpcFailure("turn/start", err)
	}
	var ts struct {
		Turn struct {
			ID string `json:"id"`
		} `json:"turn"`
	}
	_ = json.Unmarshal(raw, &ts)
	tr.turnID = ts.Turn.ID
	for {
		m, err := c.next(ctx)
		if err != nil {
			return nil, err
		}
		if m.Method == "turn/completed" {
			return tr.completed(m.Params)
		}
		if err := tr.handle(m); err != nil {
			return nil, err
		}
	}
}

// rpcFailure turns a failed request into the tool's error.
func (tr *turn) rpcFailure(method string, err error) error {
	var re *rpcError
	if errors.As(err, &re) {
		return tools.Errorf(tools.KindCommandFailed, "%s: Codex refused %s: %s", tr.spec.tool, method, re.Message)
	}
	return err
}

// completed reads turn/completed: the final message, or the turn's error.
func (tr *turn) completed(params json.RawMessage) (*turnResult, error) {
	tr.report("turn completed", "turn/completed", params)
	var p struct {
		Turn struct {
			ID     string `json:"id"`
			Status string `json:"status"`
			Error  *struct {
				Message string `json:"message"`
			} `json:"error"`
			Items []struct {
				Type string `json:"type"`
				Text string `json:"text"`
			} `json:"items"`
		} `json:"turn"`
	}
	if err := json.Unmarshal(params, &p); err != nil {
		return nil, tools.Errorf(tools.KindInternal, "%s: unreadable turn/completed from Codex: %v", tr.spec.tool, err)
	}
	for _, it := range p.Turn.Items {
		if it.Type == "agentMessage" {
			tr.lastMessage = it.Text
		}
	}
	switch p.Turn.Status {
	case "completed":
		return &turnResult{threadID: tr.threadID, message: tr.lastMessage}, nil
	case "interrupted":
		return nil, tools.Errorf(tools.KindCancelled, "%s: the Codex turn was interrupted", tr.spec.tool)
	}
	msg := tr.lastError
	if p.Turn.Error != nil && p.Turn.Error.Message != "" {
		msg = p.Turn.Error.Message
	}
	if msg == "" {
		msg = "the turn ended with status " + p.Turn.Status
	}
	return nil, tools.Errorf(tools.KindCommandFailed, "%s: Codex failed: %s", tr.spec.tool, msg)
}

// handle deals with a message that is not the awaited response: requests
// from Codex (approvals) and notifications (relayed).
func (tr *turn) handle(m message) error {
	if m.isRequest() {
		return tr.answer(m)
	}
	if m.Method == "" {
		return nil // a stray response (to turn/interrupt)
	}
	var p map[string]any
	_ = json.Unmarshal(m.Params, &p)
	switch m.Method {
	case "error":
		if e, ok := p["error"].(map[string]any); ok {
			if s, ok := e["message"].(string); ok {
				tr.lastError = s
			}
		}
	case "item/completed":
		if item, ok := p["item"].(map[string]any); ok && item["type"] == "agentMessage" {
			if s, ok := item["text"].(string); ok {
				tr.lastMessage = s
			}
		}
	}
	tr.report(progressLine(m.Method, p), m.Method, m.Params)
	return nil
}

// report relays one Codex notification: as the old servers' codex/event
// (emit), and as a progress line (when there is one) and a log message
// with the whole event. Token-level deltas are not relayed: one
// notification per token would flood the client, and the completed item
// carries the same text.
func (tr *turn) report(line, method string, params json.RawMessage) {
	if !relayed(method) {
		return
	}
	tr.emit(method, params)
	if tr.req.Reporter == nil {
		return
	}
	if line != "" && tr.req.WantsProgress {
		tr.progress++
		tr.req.Progress(tr.progress, 0, line)
	}
	data := map[string]any{}
	_ = json.Unmarshal(params, &data)
	data["type"] = method
	tr.req.Log(protocol.LevelInfo, data)
}

// MethodEvent is the notification method the old Codex MCP servers sent
// their events with, and so does this package.
const MethodEvent = "codex/event"

// emit sends a notification as Codex 0.153's codex mcp-server did:
// codex/event with params {"_meta": {"requestId", "threadId"}, "id": the
// turn's id ("" for session_configured), "msg": the old EventMsg
// (legacyEvent)}. It goes through the call's Reporter when that is a
// tools.Notifier (which adds _meta.requestId), else through the call's
// Session. Strings in the
// event are masked with the call's secrets.
func (tr *turn) emit(method string, params json.RawMessage) {
	n, isNotifier := tr.req.Reporter.(tools.Notifier)
	if tr.req.Session == nil && !isNotifier {
		return
	}
	if method == "thread/started" && tr.spec.start == nil {
		return // a resumed thread: 0.153's codex-reply sent no session_configured
	}
	typ, msg, ok := legacyEvent(method, params)
	if !ok {
		return
	}
	switch typ {
	case "session_configured":
		if tr.approvalPolicy != nil {
			msg["approval_policy"] = tr.approvalPolicy
		}
		if tr.approvalsReviewer != nil {
			msg["approvals_reviewer"] = tr.approvalsReviewer
		}
	case "task_complete":
		if msg["last_agent_message"] == nil && tr.lastMessage != "" {
			msg["last_agent_message"] = tr.lastMessage
		}
	case "error":
		// A failed turn reports its error twice (error, then
		// turn/completed with it); the old servers sent it once.
		text, _ := msg["message"].(string)
		if text == tr.lastEventError {
			return
		}
		tr.lastEventError = text
	}
	id := ""
	if typ != "session_configured" {
		id = eventTurnID(params)
		if id == "" {
			id = tr.turnID
		}
	}
	ev := map[string]any{"id": id, "msg": redactValue(tr.req.Secrets, msg)}
	tr.events++
	meta := map[string]any{}
	if tr.threadID != "" {
		meta["threadId"] = tr.threadID
	}
	ev["_meta"] = meta
	if isNotifier {
		// The call's own path: it adds _meta.requestId, paces the
		// tool by what the client has taken, keeps the events ahead of
		// the result, and on HTTP sends them on the call's stream.
		n.Notify(MethodEvent, ev)
		return
	}
	if len(tr.req.RequestID) > 0 {
		meta["requestId"] = tr.req.RequestID
	}
	tr.req.Session.Notify(MethodEvent, ev)
}

// eventTurnID is the turn a notification belongs to: params.turnId, or
// params.turn.id; "" when it names none.
func eventTurnID(params json.RawMessage) string {
	var p struct {
		TurnID string `json:"turnId"`
		Turn   struct {
			ID string `json:"id"`
		} `json:"turn"`
	}
	if json.Unmarshal(params, &p) != nil {
		return ""
	}
	if p.TurnID != "" {
		return p.TurnID
	}
	return p.Turn.ID
}

// redactValue masks r's values in every string of v (maps and slices as
// decoded from JSON), in place.
func redactValue(r *redact.Redactor, v any) any {
	if r.Len() == 0 {
		return v
	}
	switch x := v.(type) {
	case string:
		return r.Replace(x)
	case map[string]any:
		for k, e := range x {
			x[k] = redactValue(r, e)
		}
	case []any:
		for i, e := range x {
			x[i] = redactValue(r, e)
		}
	case []string:
		for i, e := range x {
			x[i] = r.Replace(e)
		}
	}
	return v
}

// relayed reports whether a notification is worth passing on.
func relayed(method string) bool {
	if strings.Contains(strings.ToLower(method), "delta") {
		return false
	}
	for _, p := range []string{"thread/", "turn/", "item/", "serverRequest/"} {
		if strings.HasPrefix(method, p) {
			return true
		}
	}
	return method == "error" || method == "warning"
}

// progressLine is the short progress message for a notification, "" for
// none.
func progressLine(method string, p map[string]any) string {
	switch method {
	case "turn/started":
		return "Codex turn started"
	case "error":
		if e, ok := p["error"].(map[string]any); ok {
			return "error: " + short(fmt.Sprint(e["message"]))
		}
	case "item/started", "item/completed":
		item, _ := p["item"].(map[string]any)
		done := method == "item/completed"
		switch item["type"] {
		case "commandExecution":
			if done {
				return fmt.Sprintf("command finished (exit %v): %s", item["exitCode"], short(fmt.Sprint(item["command"])))
			}
			return "running: " + short(fmt.Sprint(item["command"]))
		case "fileChange":
			if done {
				return "files changed"
			}
			return "changing files"
		case "mcpToolCall":
			if !done {
				return fmt.Sprintf("calling tool %v/%v", item["server"], item["tool"])
			}
		case "webSearch":
			if !done {
				return "searching the web"
			}
		case "reasoning":
			if !done {
				return "thinking"
			}
		case "agentMessage":
			if done {
				return "message: " + short(fmt.Sprint(item["text"]))
			}
		}
	}
	return ""
}

// short cuts s to its first line and 120 characters.
func short(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i] + " …"
	}
	if r := []rune(s); len(r) > 120 {
		s = string(r[:120]) + "…"
	}
	return s
}

// lastLines returns the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
