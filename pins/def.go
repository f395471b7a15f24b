package pins

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"troupe/internal/jsonvalue"
)

// Def is what a pin covers of a tool or a prompt: what a model or a person
// reads of it. Its JSON members hold canonical JSON (sorted keys, no
// spaces), so two listings that differ only in spacing or member order
// are the same Def. troupe's own exposure of a tool (its prefix, the
// approval default, _meta) is not part of it: changing the config is not
// a change of the server's tool.
type Def struct {
	Name        string `json:"name"`
	Title       string `json:"title,omitempty"`
	Description string `json:"description,omitempty"`
	// InputSchema, OutputSchema and Annotations are a tool's.
	InputSchema  json.RawMessage `json:"inputSchema,omitempty"`
	OutputSchema json.RawMessage `json:"outputSchema,omitempty"`
	Annotations  json.RawMessage `json:"annotations,omitempty"`
	// Arguments are a prompt's.
	Arguments json.RawMessage `json:"arguments,omitempty"`
}

// ToolDef is the Def of a tool object as a server listed it.
func ToolDef(raw json.RawMessage) (Def, error) {
	var t struct {
		Name         string          `json:"name"`
		Title        string          `json:"title"`
		Description  string          `json:"description"`
		InputSchema  json.RawMessage `json:"inputSchema"`
		OutputSchema json.RawMessage `json:"outputSchema"`
		Annotations  json.RawMessage `json:"annotations"`
	}
	if err := json.Unmarshal(raw, &t); err != nil {
		return Def{}, fmt.Errorf("a listed tool is not a tool object: %w", err)
	}
	if t.Name == "" {
		return Def{}, errors.New("a listed tool has no name")
	}
	d := Def{Name: t.Name, Title: t.Title, Description: t.Description}
	var err error
	if d.InputSchema, err = canonical(t.InputSchema); err != nil {
		return Def{}, fmt.Errorf("tool %s: inputSchema: %w", t.Name, err)
	}
	if d.OutputSchema, err = canonical(t.OutputSchema); err != nil {
		return Def{}, fmt.Errorf("tool %s: outputSchema: %w", t.Name, err)
	}
	if d.Annotations, err = canonical(t.Annotations); err != nil {
		return Def{}, fmt.Errorf("tool %s: annotations: %w", t.Name, err)
	}
	return d, nil
}

// PromptDef is the Def of a prompt object as a server listed it.
func PromptDef(raw json.RawMessage) (Def, error) {
	var p struct {
		Name        string          `json:"name"`
		Title       string          `json:"title"`
		Description string          `json:"description"`
		Arguments   json.RawMessage `json:"arguments"`
	}
	if err := json.Unmarshal(raw, &p); err != nil {
		return Def{}, fmt.Errorf("a listed prompt is not a prompt object: %w", err)
	}
	if p.Name == "" {
		return Def{}, errors.New("a listed prompt has no name")
	}
	args, err := canonical(p.Arguments)
	if err != nil {
		return Def{}, fmt.Errorf("prompt %s: arguments: %w", p.Name, err)
	}
	return Def{Name: p.Name, Title: p.Title, Description: p.Description, Arguments: args}, nil
}

// canonical is raw with sorted keys and no spaces; nil for an absent or
// null member, so that leaving a member out and sending null are the same.
func canonical(raw json.RawMessage) (json.RawMessage, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	v, err := jsonvalue.Decode(raw)
	if err != nil {
		return nil, err
	}
	if v == nil {
		return nil, nil
	}
	return jsonvalue.AppendCanonical(nil, v), nil
}

// Hash is the hex SHA-256 of d's JSON: its members are canonical, so
// equal definitions hash alike.
func (d Def) Hash() string {
	b, _ := json.Marshal(d) // strings and canonical JSON: cannot fail
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
