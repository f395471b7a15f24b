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
