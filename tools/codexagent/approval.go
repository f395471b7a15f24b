package codexagent

import (
	"encoding/json"
	"fmt"
	"strings"

	"troupe/gate"
	"troupe/protocol"
)

// The decisions a person can give Codex, as app-server's
// CommandExecutionApprovalDecision and FileChangeApprovalDecision spell
// them.
var decisions = []struct{ value, title string }{
	{"accept", "Allow"},
	{"acceptForSession", "Allow, and do not ask again for the same in this conversation"},
	{"decline", "Deny (Codex goes on without it)"},
	{"cancel", "Deny and stop the turn"},
}

// answer handles a request from Codex. Approvals go to a person through
// elicitation/create; anything else is refused, since nobody is at a
// terminal to answer it.
func (tr *turn) answer(m message) error {
	var p map[string]any
	_ = json.Unmarshal(m.Params, &p)
	var err error
	switch m.Method {
	case "item/commandExecution/requestApproval", "item/fileChange/requestApproval":
		tr.report("Codex asks for approval", m.Method, m.Params)
		err = tr.c.respond(m.ID, map[string]any{"decision": tr.ask(approvalMessage(m.Method, p))})
	default:
		err = tr.c.refuse(m.ID, -32601, "troupe does not relay "+m.Method+" to its client")
	}
	if err != nil {
		return tr.c.exitError()
	}
	return nil
}

// ask asks the client's person and returns the decision; "decline" when
// there is nobody to ask or no usable answer.
func (tr *turn) ask(text string) string {
	if tr.req.Client == nil {
		return "decline"
	}
	var values, names []string
	for _, d := range decisions {
		values, names = append(values, d.value), append(names, d.title)
	}
	form := protocol.ElicitRequestParams{
		Message: text,
		RequestedSchema: protocol.ElicitSchema{Type: "object", Required: []string{"decision"},
			Properties: map[string]any{"decision": map[string]any{
				"type": "string", "title": "Decision", "enum": values, "enumNames": names, "default": "decline",
			}}},
	}
	// Bounded by the turn: a cancelled call or the turn ceiling withdraws
	// the question.
	raw, err := tr.req.Client.Call(tr.ctx, protocol.MethodElicitationCreate, form)
	if err != nil {
		return "decline"
	}
	return answeredDecision(raw)
}

// answeredDecision reads a client's answer to a question Codex asked as
// app-server's decision (accept, acceptForSession, decline, cancel): an
// elicitation result, or the top-level {"decision": …} of clients written
// for Codex's former MCP server (Normalize). An accept without a decision
// is accept, as troupe's own gate reads it; anything unreadable or
// unknown declines.
func answeredDecision(raw json.RawMessage) string {
	var res protocol.ElicitResult
	if json.Unmarshal(raw, &res) != nil {
		return "decline"
	}
	res.Normalize()
	switch res.Action {
	case protocol.ElicitAccept:
		d := "accept"
		if c, ok := res.Content["decision"]; ok && json.Unmarshal(c, &d) != nil {
			return "decline"
		}
		d = decisionAlias(d)
		for _, known := range decisions {
			if d == known.value {
				return d
			}
		}
		return "decline"
	case protocol.ElicitCancel:
		return "cancel"
	}
	return "decline"
}

// decisionAlias maps the other spellings of a decision a client may put
// in the form's field to the decision: Normalize's choices for the former
// top-level answer ("once", "session") and the former ReviewDecision
// values. Anything else is returned as it is.
func decisionAlias(d string) string {
	switch d {
	case "once", protocol.CodexApproved:
		return "accept"
	case "session", protocol.CodexApprovedForSession:
		return "acceptForSession"
	case protocol.CodexDenied:
		return "decline"
	case protocol.CodexAbort:
		return "cancel"
	}
	return d
}

// approvalMessage is what the person reads: what Codex wants to do, where
// and why.
func approvalMessage(method string, p map[string]any) string {
	var b strings.Builder
	str := func(k string) string {
		s, _ := p[k].(string)
		return s
	}
	if method == "item/fileChange/requestApproval" {
		b.WriteString("Codex asks to change files")
		if root := str("grantRoot"); root != "" {
			fmt.Fprintf(&b, " (and to write under %s for the rest of the conversation)", gate.Printable(root))
		}
		b.WriteString(".\n")
	} else {
		// Each field escaped as troupe's own prompts are: a bidi or
		// zero-width character cannot disguise the command.
		fmt.Fprintf(&b, "Codex asks to run a command:\n%s\n", gate.Printable(str("command")))
		if cwd := str("cwd"); cwd != "" {
			fmt.Fprintf(&b, "Working directory: %s\n", gate.Printable(cwd))
		}
	}
	if r := str("reason"); r != "" {
		fmt.Fprintf(&b, "Reason: %s\n", gate.Printable(r))
	}
	return strings.TrimSpace(b.String())
}
