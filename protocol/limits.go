package protocol

import (
	"encoding/json"
	"fmt"
)

// Limits on what a client says about itself and attaches to its requests.
// The message size limits (a stdio line, an HTTP body: 4 MiB by default)
// bound one message; these bound what a session keeps for its life (the
// client's name in its logs and on the status page, its capabilities) and
// what one call carries along (its _meta), so that a session costs what a
// session should, whatever the client sends. Real clients send a few
// hundred bytes of each.
const (
	// MaxClientInfoBytes bounds clientInfo's name, title and version (in
	// initialize, and in a 2026-07-28 request's
	// _meta."io.modelcontextprotocol/clientInfo").
	MaxClientInfoBytes = 256
	// MaxClientInfoTextBytes bounds clientInfo's description and
	// websiteUrl.
	MaxClientInfoTextBytes = 2048
	// MaxCapabilitiesBytes bounds the client's capabilities object, as
	// sent (initialize's capabilities, a 2026-07-28 request's
	// _meta."io.modelcontextprotocol/clientCapabilities").
	MaxCapabilitiesBytes = 64 << 10
	// MaxMetaBytes bounds a request's _meta object, as sent (initialize's
	// and a call's): room for the largest capabilities and the rest.
	MaxMetaBytes = 128 << 10
)

// LimitError says that a field the client sent is over its limit. Its
// text names the field and the limit, for the -32602 error.
type LimitError struct {
	Field string // as the client wrote it: "clientInfo.name", "_meta"
	Size  int    // bytes sent
	Limit int    // bytes accepted
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("%s is %d bytes; at most %d bytes are accepted", e.Field, e.Size, e.Limit)
}

// CheckSize returns a *LimitError when raw (a field as sent, or a string's
// bytes) is longer than limit.
func CheckSize(field string, raw []byte, limit int) error {
	if len(raw) > limit {
		return &LimitError{Field: field, Size: len(raw), Limit: limit}
	}
	return nil
}

// CheckSizes checks each field of a client's Implementation against its
// limit; field names the object ("clientInfo").
func (i Implementation) CheckSizes(field string) error {
	for _, f := range []struct {
		name, value string
		limit       int
	}{
		{"name", i.Name, MaxClientInfoBytes},
		{"title", i.Title, MaxClientInfoBytes},
		{"version", i.Version, MaxClientInfoBytes},
		{"description", i.Description, MaxClientInfoTextBytes},
		{"websiteUrl", i.WebsiteURL, MaxClientInfoTextBytes},
	} {
		if err := CheckSize(field+"."+f.name, []byte(f.value), f.limit); err != nil {
			return err
		}
	}
	return nil
}

// CheckSizes checks initialize's _meta, capabilities and clientInfo
// against their limits.
func (p InitializeParams) CheckSizes() error {
	if err := CheckSize("_meta", p.Meta, MaxMetaBytes); err != nil {
		return err
	}
	if err := CheckSize("capabilities", p.Capabilities, MaxCapabilitiesBytes); err != nil {
		return err
	}
	if p.ClientInfo != nil {
		return p.ClientInfo.CheckSizes("clientInfo")
	}
	return nil
}

// Essential is what a session keeps of the capabilities a client
// declared: what troupe acts on, in a few bytes, whatever the client sent.
// Every question troupe asks of capabilities (FormElicitation, URL mode,
// sampling, roots) has the same answer for c and c.Essential():
// elicitation keeps only its form and url modes ({} for an empty object,
// which means form; nil when it declares no mode troupe knows, or is not
// an object), sampling and roots only whether they are there, experimental
// nothing.
func (c ClientCapabilities) Essential() ClientCapabilities {
	var e ClientCapabilities
	present := json.RawMessage(`{}`)
	if c.Sampling != nil {
		e.Sampling = &present
	}
	if c.Roots != nil {
		e.Roots = &present
	}
	if c.Elicitation == nil {
		return e
	}
	var modes map[string]json.RawMessage
	if json.Unmarshal(*c.Elicitation, &modes) != nil {
		return e // no mode is usable: as if none were declared
	}
	kept := map[string]struct{}{}
	for _, mode := range []string{"form", "url"} {
		if _, ok := modes[mode]; ok {
			kept[mode] = struct{}{}
		}
	}
	if len(modes) > 0 && len(kept) == 0 {
		return e // only modes troupe does not know
	}
	b, _ := json.Marshal(kept)
	raw := json.RawMessage(b)
	e.Elicitation = &raw
	return e
}
