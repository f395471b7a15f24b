// Package benchmark holds the tool troupe serves for side-by-side
// benchmarks (bench/): `echo`, the same tool every peer server exposes,
// so a measurement compares servers, not tools. It is served only when
// the configuration asks for it (tools.benchmark_echo = true).
package benchmark

import (
	"context"
	"encoding/json"

	"troupe/protocol"
	"troupe/tools"
)

// NameEcho is the benchmark tool's name.
const NameEcho = "echo"

// Echo returns the echo tool: {"text": string} → one text block with the
// text.
func Echo() tools.Tool { return echo{} }

type echo struct{}

// Spec implements tools.Tool.
func (echo) Spec() tools.Spec {
	yes, no := true, false
	return tools.Spec{
		Name:         NameEcho,
		Description:  "Returns its text (for benchmarks).",
		InputSchema:  json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`),
		SchemasFixed: true, // constants; CheckSchemas in the tests
		Annotations:  &protocol.ToolAnnotations{ReadOnlyHint: &yes, DestructiveHint: &no, OpenWorldHint: &no},
	}
}

// Call implements tools.Tool.
func (echo) Call(_ context.Context, req *tools.Request) (*protocol.CallToolResult, error) {
	var a struct {
		Text string `json:"text"`
	}
	if err := json.Unmarshal(req.Arguments, &a); err != nil {
		return nil, tools.Errorf(tools.KindInvalidArgument, "echo: %v", err)
	}
	return &protocol.CallToolResult{Content: []protocol.Content{protocol.TextContent(a.Text)}}, nil
}
