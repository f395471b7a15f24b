// Package proxy turns the tools of a downstream MCP server into troupe
// tools. A proxied tool keeps the downstream tool's schemas, annotations,
// title and description as they were listed, is named
// "<prefix><separator><tool>", and forwards each call with the caller's
// arguments unchanged, relaying what the downstream sends during the call
// (progress, log messages, elicitation) to the calling client and the
// caller's cancellation downstream. Results pass through as they came:
// every content block, structuredContent and isError.
//
// The call still goes through troupe's gate: a proxied tool asks for
// approval unless its server is configured otherwise or the tool is
// annotated read-only.
package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"time"

	"troupe/protocol"
	"troupe/tools"
	"troupe/upstream"
)

// Server is one downstream server, as its tools reach it.
type Server interface {
	// Name is the server's name in the configuration.
	Name() string
	// CallTool forwards one call (see upstream.Client.CallTool); it fails
	// with upstream.ErrClosed when the server is not connected.
	CallTool(ctx context.Context, tool string, args json.RawMessage, obs upstream.Observer) (json.RawMessage, error)
}

// Options say how a server's tools are exposed.
type Options struct {
	// Prefix and Separator make the exposed name: Prefix+Separator+tool,
	// or just the tool's name when Prefix is "".
	Prefix    string
	Separator string
	// RequiresApproval: nil asks unless the tool is annotated read-only.
	RequiresApproval *bool
	// Timeout is the ceiling of one call (tool_timeout_sec); 0 means the
	// server's default.
	Timeout time.Duration
}

// KindDownstreamError is the kind of a call the downstream server
// answered with a JSON-RPC error.
const KindDownstreamError tools.Kind = "downstream_error"

// listed is a tool as the downstream lists it.
type listed struct {
	Name         string                     `json:"name"`
	Title        string                     `json:"title"`
	Description  string                     `json:"description"`
	InputSchema  json.RawMessage            `json:"inputSchema"`
	OutputSchema json.RawMessage            `json:"outputSchema"`
	Annotations  *protocol.ToolAnnotations  `json:"annotations"`
	Meta         map[string]json.RawMessage `json:"_meta"`
}

// Tool makes the troupe tool for one tool of srv, from the raw JSON the
// server listed.
func Tool(srv Server, raw json.RawMessage, opts Options) (tools.Tool, error) {
	var l listed
	if err := json.Unmarshal(raw, &l); err != nil {
		return nil, fmt.Errorf("server %s: a listed tool is not a tool object: %w", srv.Name(), err)
	}
	if l.Name == "" {
		return nil, fmt.Errorf("server %s: a listed tool has no name", srv.Name())
	}
	if len(l.InputSchema) == 0 || string(l.InputSchema) == "null" {
		l.InputSchema = json.RawMessage(`{"type":"object"}`)
	}
	if string(l.OutputSchema) == "null" {
		l.OutputSchema = nil
	}
	name := l.Name
	if opts.Prefix != "" {
		name = opts.Prefix + opts.Separator + l.Name
	}
	readOnly := l.Annotations != nil && l.Annotations.ReadOnlyHint != nil && *l.Annotations.ReadOnlyHint
	approval := !readOnly
	if opts.RequiresApproval != nil {
		approval = *opts.RequiresApproval
	}
	meta := map[string]any{}
	for k, v := range l.Meta {
		meta[k] = v // the downstream's own members, unchanged
	}
	maps.Copy(meta, map[string]any{
		tools.MetaSource:                      "mcp_servers." + srv.Name(),
		protocol.MetaPrefix + "server":        srv.Name(),
		protocol.MetaPrefix + "upstream_name": l.Name,
	})
	t := &tool{srv: srv, remote: l.Name, spec: tools.Spec{
		Name: name, Title: l.Title, Description: l.Description,
		InputSchema: l.InputSchema, OutputSchema: l.OutputSchema, Annotations: l.Annotations, Meta: meta,
		Safety:          tools.Safety{RequiresApproval: approval, Timeout: opts.Timeout, Streaming: true},
		ServerValidates: true,
	}}
	return t, nil
}

// tool is one proxied tool.
type tool struct {
	srv    Server
	remote string // the tool's name on its server
	spec   tools.Spec
}

// Spec implements tools.Tool.
func (t *tool) Spec() tools.Spec { return t.spec }

// Call implements tools.Tool: it forwards the call and maps the answer.
func (t *tool) Call(ctx context.Context, req *tools.Request) (*protocol.CallToolResult, error) {
	raw, err := t.srv.CallTool(ctx, t.remote, req.Arguments, upstream.Observer{
		Progress: func(progress, total float64, message string) { req.Progress(progress, total, message) },
		Log: func(level protocol.LoggingLevel, _ string, data json.RawMessage) {
			req.Log(level, data)
		},
		Elicit: func(ctx context.Context, params json.RawMessage) (json.RawMessage, error) {
			return elicit(ctx, req, params)
		},
	})
	if err != nil {
		return nil, t.failure(ctx, err)
	}
	return decodeResult(t.srv.Name(), raw)
}

// elicit relays a downstream's question to the calling client; a client
// that cannot be asked declines, as the spec lets a client do.
func elicit(ctx context.Context, req *tools.Request, params json.RawMessage) (json.RawMessage, error) {
	decline := json.RawMessage(`{"action":"decline"}`)
	if req.Client == nil {
		return decline, nil
	}
	res, err := req.Client.Call(ctx, protocol.MethodElicitationCreate, params)
	var ce *tools.ClientError
	if errors.As(err, &ce) && ce.Code == protocol.CodeMethodNotFound {
		return decline, nil
	}
	return res, err
}

// failure maps a forwarding error to what the caller sees.
func (t *tool) failure(ctx context.Context, err error) error {
	name := t.srv.Name()
	var rpc *upstream.RPCError
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case errors.As(err, &rpc):
		return tools.Errorf(KindDownstreamError, "server %s answered %s with error %d: %s", name, t.remote, rpc.Code, rpc.Message)
	case errors.Is(err, upstream.ErrClosed):
		return tools.Errorf(tools.KindUnavailable,
			"server %s is not connected (it stopped or is being reconnected); the call did not complete", name)
	}
	return fmt.Errorf("forwarding %s to server %s: %w", t.remote, name, err)
}

// decodeResult passes a downstream result through: content blocks as
// they were, structuredContent, isError and _meta.
func decodeResult(server string, raw json.RawMessage) (*protocol.CallToolResult, error) {
	var r struct {
		Content           []json.RawMessage `json:"content"`
		StructuredContent json.RawMessage   `json:"structuredContent"`
		IsError           bool              `json:"isError"`
		Meta              map[string]any    `json:"_meta"`
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, tools.Errorf(KindDownstreamError, "server %s sent a result that is not a tool result", server)
	}
	out := &protocol.CallToolResult{Content: make([]protocol.Content, 0, len(r.Content)), IsError: r.IsError, Meta: r.Meta}
	for _, c := range r.Content {
		block, err := protocol.RawContent(c)
		if err != nil {
			return nil, tools.Errorf(KindDownstreamError, "server %s sent a result with a malformed content block", server)
		}
		out.Content = append(out.Content, block)
	}
	if len(r.StructuredContent) > 0 && string(r.StructuredContent) != "null" {
		out.StructuredContent = r.StructuredContent
	}
	return out, nil
}
