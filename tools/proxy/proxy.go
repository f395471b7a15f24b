// Package proxy turns the tools of a downstream MCP server into troupe
// tools. A proxied tool keeps the downstream tool's schemas, annotations,
// title and description as they were listed, is named
// "<prefix><separator><tool>", and forwards each call with the caller's
// arguments unchanged, relaying what the downstream sends during the call
// (progress, log messages, elicitation in form and URL mode) to the
// calling client and the caller's cancellation downstream. The calling
// client's _meta goes downstream beside troupe's own progress token; with
// tracing on, the forwarded call is a span, "downstream <server>", whose
// trace context replaces the client's in that _meta (SEP-414's
// traceparent, tracestate, baggage), so the downstream server's spans
// join the client's trace below troupe's.
// Results pass through as they came: every content block,
// structuredContent and isError.
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
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"troupe/downstream"
	"troupe/observe/tracing"
	"troupe/protocol"
	"troupe/tools"
)

// Server is one downstream server, as its tools reach it.
type Server interface {
	// Name is the server's name in the configuration.
	Name() string
	// CallTool forwards one call (see downstream.Client.CallTool); it fails
	// with downstream.ErrClosed when the server is not connected.
	CallTool(ctx context.Context, tool string, args json.RawMessage, obs downstream.Observer) (json.RawMessage, error)
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
	// SandboxProfile is the profile the server's process runs under (a
	// stdio server's sandbox_profile), shown as the tools'
	// dev.troupe/sandbox_profile and in approval prompts; "" for a server
	// troupe does not run (streamable HTTP).
	SandboxProfile string
	// AllowNetwork says the sandboxed server may use the network.
	AllowNetwork bool
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
		Safety: tools.Safety{RequiresApproval: approval, Timeout: opts.Timeout, Streaming: true,
			SandboxProfile: opts.SandboxProfile, AllowNetwork: opts.AllowNetwork},
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
	var asked urlAsks
	var resume *downstream.Resume
	if req.Resume != nil {
		resume = &downstream.Resume{Responses: req.Resume.Responses, State: string(req.Resume.State)}
	}
	ctx, span, meta := t.startSpan(ctx, req.ClientMeta)
	defer span.End()
	raw, err := t.srv.CallTool(downstream.WithCallMeta(ctx, meta), t.remote, req.Arguments, downstream.Observer{
		Rounds:   req.Rounds,
		Resume:   resume,
		Progress: func(progress, total float64, message string) { req.Progress(progress, total, message) },
		Log: func(level protocol.LoggingLevel, _ string, data json.RawMessage) {
			req.Log(level, data)
		},
		Elicit: func(ctx context.Context, params json.RawMessage) (json.RawMessage, error) {
			return elicit(ctx, req, params, &asked)
		},
		Sample: func(ctx context.Context, params json.RawMessage) (json.RawMessage, error) {
			return sample(ctx, req, params)
		},
		ElicitationComplete: func(params json.RawMessage) { asked.complete(req, params) },
	})
	if err != nil {
		err = t.failure(ctx, req, err)
		if te := (*tools.Error)(nil); errors.As(err, &te) {
			tracing.Fail(span, err, "the downstream call failed", string(te.Kind))
		} else if ir := (*tools.InputRequired)(nil); !errors.As(err, &ir) {
			tracing.Fail(span, err, "the downstream call failed", "")
		}
		return nil, err
	}
	return decodeResult(t.srv.Name(), raw)
}

// startSpan starts the span of the downstream request, "downstream
// <server>", a child of the call's span in ctx, and returns the _meta to
// send: the client's, with the span's trace context (traceparent,
// tracestate, baggage: SEP-414) in place of the client's own, so the
// downstream server's spans hang from troupe's. With tracing off (no span
// in ctx) it costs a context lookup and returns ctx and meta as they were.
// A meta that is not a JSON object goes unchanged (the request reports
// it).
func (t *tool) startSpan(ctx context.Context, meta json.RawMessage) (context.Context, trace.Span, json.RawMessage) {
	ctx, span := tracing.Child(ctx, "downstream "+t.srv.Name(), trace.SpanKindClient,
		tracing.DownstreamServerKey.String(t.srv.Name()),
		tracing.MethodNameKey.String("tools/call"),
		tracing.ToolNameKey.String(t.remote))
	if !span.SpanContext().IsValid() {
		return ctx, span, meta // tracing off
	}
	members := map[string]json.RawMessage{}
	if len(meta) > 0 && string(meta) != "null" {
		if json.Unmarshal(meta, &members) != nil {
			return ctx, span, meta
		}
	}
	out := make(map[string]any, len(members)+3)
	for k, v := range members {
		out[k] = v
	}
	tracing.InjectMeta(ctx, out)
	b, err := json.Marshal(out)
	if err != nil {
		return ctx, span, meta
	}
	return ctx, span, b
}

// elicit relays a downstream's question (form or URL mode) to the
// calling client; a client that cannot be asked, or did not declare the
// question's mode, declines, as the spec lets a client do. The answer goes
// back as the client gave it. URL-mode questions the client was really
// asked are noted in asked.
func elicit(ctx context.Context, req *tools.Request, params json.RawMessage, asked *urlAsks) (json.RawMessage, error) {
	decline := json.RawMessage(`{"action":"decline"}`)
	if req.Client == nil {
		return decline, nil
	}
	id := asked.note(params)
	res, err := req.Client.Call(ctx, protocol.MethodElicitationCreate, params)
	var ce *tools.ClientError
	if errors.As(err, &ce) && ce.Code == protocol.CodeMethodNotFound {
		asked.forget(id)
		return decline, nil // troupe's session: the client lacks the capability or the mode
	}
	return res, err
}

// methodSampling is the request by which a server asks the client's model
// for a completion.
const methodSampling = "sampling/createMessage"

// sample relays a downstream's sampling/createMessage (which reaches a
// proxied tool only when its server is configured with sampling = true)
// to the calling client and counts it for the call's audit record. The
// client's answer, or its JSON-RPC error, goes back to the server as it
// came; a client that did not declare sampling is a -32601 the server
// can understand.
func sample(ctx context.Context, req *tools.Request, params json.RawMessage) (json.RawMessage, error) {
	if req.Client == nil {
		return nil, &downstream.RPCError{Code: protocol.CodeInvalidRequest, Message: "sampling refused: the calling client cannot be asked"}
	}
	req.Relayed.Sampled()
	res, err := req.Client.Call(ctx, methodSampling, params)
	var ce *tools.ClientError
	if errors.As(err, &ce) {
		if ce.Code == protocol.CodeMethodNotFound {
			return nil, &downstream.RPCError{Code: protocol.CodeMethodNotFound, Message: "sampling is not available: the calling client did not declare the sampling capability"}
		}
		return nil, &downstream.RPCError{Code: ce.Code, Message: ce.Message}
	}
	return res, err
}

// urlAsks are the elicitationIds of the URL-mode elicitations a call sent
// its client, so that the downstream's notifications/elicitation/complete
// reaches the client only for questions it was asked. The zero value is
// ready; elicit and complete run on different goroutines.
type urlAsks struct {
	mu  sync.Mutex
	ids map[string]bool
}

// maxURLAsks bounds the elicitationIds one call remembers.
const maxURLAsks = 64

// note records the elicitationId of URL-mode params; "" when none.
func (a *urlAsks) note(params json.RawMessage) string {
	var p struct {
		Mode string `json:"mode"`
		ID   string `json:"elicitationId"`
	}
	if json.Unmarshal(params, &p) != nil || p.Mode != "url" || p.ID == "" {
		return ""
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.ids == nil {
		a.ids = map[string]bool{}
	}
	if len(a.ids) >= maxURLAsks {
		return "" // its completion, if it comes, is not relayed
	}
	a.ids[p.ID] = true
	return p.ID
}

func (a *urlAsks) forget(id string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.ids, id)
}

// complete relays the downstream's notice that a URL-mode elicitation's
// out-of-band interaction is over to the calling client, when the client
// was asked that question (the session adds the call's request id to
// _meta).
func (a *urlAsks) complete(req *tools.Request, params json.RawMessage) {
	var p map[string]any
	if json.Unmarshal(params, &p) != nil {
		return
	}
	id, _ := p["elicitationId"].(string)
	a.mu.Lock()
	known := a.ids[id]
	delete(a.ids, id)
	a.mu.Unlock()
	if n, ok := req.Reporter.(tools.Notifier); ok && known {
		n.Notify(notificationElicitationComplete, p)
	}
}

// notificationElicitationComplete is the 2025-11-25 notification that ends
// a URL-mode elicitation.
const notificationElicitationComplete = "notifications/elicitation/complete"

// failure maps a forwarding error to what the caller sees.
func (t *tool) failure(ctx context.Context, req *tools.Request, err error) error {
	name := t.srv.Name()
	var rpc *downstream.RPCError
	var input *downstream.InputRequired
	var auth *downstream.AuthError
	switch {
	case errors.As(err, &input):
		for _, raw := range input.Requests {
			var q struct {
				Method string `json:"method"`
			}
			if json.Unmarshal(raw, &q) == nil && q.Method == methodSampling {
				req.Relayed.Sampled() // the client is asked in this round
			}
		}
		return &tools.InputRequired{Requests: input.Requests, State: []byte(input.State)}
	case ctx.Err() != nil:
		return ctx.Err()
	case errors.As(err, &auth):
		// A credential troupe holds for the server is missing or was
		// refused: the hint names the variable to set, never its value
		// nor the server's answer.
		return tools.Errorf(tools.KindUnauthenticated, "%s: %v", t.spec.Name, auth)
	case errors.Is(err, downstream.ErrParkedGone):
		return tools.Errorf(tools.KindUnavailable, "%s: %v", t.spec.Name, err)
	case errors.As(err, &rpc):
		return tools.Errorf(KindDownstreamError, "server %s answered %s with error %d: %s", name, t.remote, rpc.Code, rpc.Message)
	case errors.Is(err, downstream.ErrClosed):
		// How the server's process ended (its status and the last lines
		// of its stderr, secrets masked) is the server's own account of
		// why; troupe's other reasons (timeouts, start failures naming
		// host paths) stay in troupe's log.
		var exit *downstream.ExitError
		if errors.As(err, &exit) {
			return tools.Errorf(tools.KindUnavailable,
				"server %s is not connected (it stopped or is being reconnected); the call did not complete: %v", name, exit)
		}
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
	// A modern server names itself in _meta; that is the downstream hop's,
	// and troupe's own result names troupe.
	delete(r.Meta, protocol.MetaServerInfo)
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
