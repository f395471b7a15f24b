package protocol

import "encoding/json"

// ElicitRequestParams is elicitation/create in form mode: a message and a
// flat object schema of primitive fields the client renders as a form.
type ElicitRequestParams struct {
	Mode            string         `json:"mode,omitempty"` // "form" (2025-11-25 on; absent before)
	Message         string         `json:"message"`
	RequestedSchema ElicitSchema   `json:"requestedSchema"`
	Meta            map[string]any `json:"_meta,omitempty"`
}

// ElicitSchema is the restricted JSON Schema of a form: an object whose
// properties are primitives (string, number, boolean, enum).
type ElicitSchema struct {
	Type       string         `json:"type"` // "object"
	Properties map[string]any `json:"properties"`
	Required   []string       `json:"required,omitempty"`
}

// ElicitResult is the client's answer: accept (with content), decline or
// cancel.
type ElicitResult struct {
	Action  string                     `json:"action"`
	Content map[string]json.RawMessage `json:"content,omitempty"`
	Meta    map[string]json.RawMessage `json:"_meta,omitempty"`
	// Decision is the answer in the form Codex's former MCP server took
	// (a top-level ReviewDecision, {"decision": "approved"}, and no
	// action), which clients written for it still send. Normalize turns
	// it into Action and Content.
	Decision string `json:"decision,omitempty"`
}

// The ReviewDecision values of Codex's former MCP server (ElicitResult.Decision).
const (
	CodexApproved           = "approved"
	CodexApprovedForSession = "approved_for_session"
	CodexDenied             = "denied"
	CodexAbort              = "abort"
)

// Normalize gives an answer in Codex's former form (Decision and no
// Action) its standard meaning: approved is accept with decision "once",
// approved_for_session accept with "session", denied decline and abort
// cancel; any other decision stays without an action, which readers
// refuse as unknown. A standard answer is left as it is.
func (r *ElicitResult) Normalize() {
	if r.Action != "" || r.Decision == "" {
		return
	}
	choice := ""
	switch r.Decision {
	case CodexApproved:
		r.Action, choice = ElicitAccept, "once"
	case CodexApprovedForSession:
		r.Action, choice = ElicitAccept, "session"
	case CodexDenied:
		r.Action = ElicitDecline
	case CodexAbort:
		r.Action = ElicitCancel
	default:
		return
	}
	if choice != "" {
		if r.Content == nil {
			r.Content = map[string]json.RawMessage{}
		}
		if _, set := r.Content["decision"]; !set {
			r.Content["decision"] = json.RawMessage(`"` + choice + `"`)
		}
	}
}

// The actions of an ElicitResult.
const (
	ElicitAccept  = "accept"
	ElicitDecline = "decline"
	ElicitCancel  = "cancel"
)

// FormElicitation reports whether the client declared elicitation in form
// mode: an empty elicitation object means form only (the 2025-06-18
// shape); 2025-11-25 clients list the modes they render.
func (c ClientCapabilities) FormElicitation() bool {
	if c.Elicitation == nil {
		return false
	}
	var modes map[string]json.RawMessage
	if err := json.Unmarshal(*c.Elicitation, &modes); err != nil {
		return false
	}
	if len(modes) == 0 {
		return true
	}
	_, form := modes["form"]
	return form
}
