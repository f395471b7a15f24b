package tools

import (
	"context"
	"maps"

	"troupe/protocol"
)

// Discovery metadata keys, under protocol.MetaPrefix, that troupe adds to
// every tool in tools/list so clients and people can see how a call will
// run before making it.
const (
	MetaRequiresApproval = protocol.MetaPrefix + "requires_approval"
	MetaSandboxProfile   = protocol.MetaPrefix + "sandbox_profile"
	MetaDefaultTimeoutMs = protocol.MetaPrefix + "default_timeout_ms"
	MetaAllowsStreaming  = protocol.MetaPrefix + "allows_streaming"
	MetaSideEffects      = protocol.MetaPrefix + "side_effects"
	MetaVersion          = protocol.MetaPrefix + "version"
	MetaCwd              = protocol.MetaPrefix + "cwd"
	MetaEnvKeys          = protocol.MetaPrefix + "env_keys"
	MetaSource           = protocol.MetaPrefix + "source"
	MetaCommand          = protocol.MetaPrefix + "command" // a command tool's argv template
	// MetaSandboxHint, in a result's _meta, explains a failure that looks
	// like the sandbox refusing something.
	MetaSandboxHint = protocol.MetaPrefix + "sandbox_hint"
)

// WithMeta returns t with extra _meta members; the tool's own members win
// over meta, so a tool that knows better (a command tool's
// requires_approval) keeps its value.
func WithMeta(t Tool, meta map[string]any) Tool {
	return &metaTool{Tool: t, meta: meta}
}

type metaTool struct {
	Tool
	meta map[string]any
}

func (m *metaTool) Spec() Spec {
	s := m.Tool.Spec()
	merged := maps.Clone(m.meta)
	if merged == nil {
		merged = map[string]any{}
	}
	maps.Copy(merged, s.Meta)
	s.Meta = merged
	return s
}

func (m *metaTool) Call(ctx context.Context, req *Request) (*protocol.CallToolResult, error) {
	return m.Tool.Call(ctx, req)
}

// Unwrap returns the wrapped tool.
func (m *metaTool) Unwrap() Tool { return m.Tool }

// Implements finds, in t or the tools it wraps (see WithMeta), one that
// implements I: the optional interfaces (Previewer, Stopper) of a tool
// survive wrapping.
func Implements[I any](t Tool) (I, bool) {
	for t != nil {
		if i, ok := t.(I); ok {
			return i, true
		}
		u, ok := t.(interface{ Unwrap() Tool })
		if !ok {
			break
		}
		t = u.Unwrap()
	}
	var zero I
	return zero, false
}
