// Package tools defines what a tool is to troupe and keeps the registry of
// the tools a session can see.
//
// A Tool is a Spec (what tools/list shows: name, schemas, annotations) and a
// Call method. troupe validates arguments against the Spec's input schema
// before Call runs, runs Call in a goroutine its invocation owns, and cancels Call's
// context when the client cancels or the deadline passes. A tool reports
// failures it wants the model to see as *Error values with a Kind; any other
// error is an internal failure whose details stay in the server log.
//
//	type echo struct{}
//
//	func (echo) Spec() tools.Spec {
//		return tools.Spec{Name: "echo", InputSchema: json.RawMessage(`{"type":"object"}`)}
//	}
//
//	func (echo) Call(ctx context.Context, req *tools.Request) (*protocol.CallToolResult, error) {
//		return tools.StructuredResult(map[string]any{"args": req.Arguments})
//	}
package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"troupe/identity"
	"troupe/protocol"
	"troupe/redact"
	"troupe/spool"
)

// Tool is one callable tool.
type Tool interface {
	// Spec describes the tool; it must not change for the tool's lifetime.
	Spec() Spec
	// Call runs the tool. It must return promptly once ctx is done.
	Call(ctx context.Context, req *Request) (*protocol.CallToolResult, error)
}

// Spec is a tool's description as the registry and tools/list use it.
type Spec struct {
	Name         string
	Title        string
	Description  string
	InputSchema  json.RawMessage // JSON Schema (2020-12 by default), root type "object"
	OutputSchema json.RawMessage // optional; when set, results carry structuredContent
	Annotations  *protocol.ToolAnnotations
	Meta         map[string]any // extra _meta members; keys use protocol.MetaPrefix
	// Safety says how calls are gated and isolated; its discovery members
	// are added to Meta by the registry.
	Safety Safety
	// ServerValidates leaves the arguments to the tool's own server (a
	// downstream MCP server): troupe checks only that they are a JSON
	// object, so the server's own answer to bad arguments reaches the
	// client unchanged, and schemas troupe cannot compile do not hide
	// the tool.
	ServerValidates bool
	// SchemasFixed marks schemas that are constants of troupe's own source
	// (the first-party tools), which CheckSchemas proves valid in their
	// tests: the registry then compiles the input schema at the tool's
	// first call rather than at every build, so start-up and reloads do
	// not pay for tools that are never called. Schemas from configuration
	// or from another program leave it false and are compiled at once, so
	// a bad one is reported when the registry is built.
	SchemasFixed bool
}

// Request is one call of a tool.
type Request struct {
	// Arguments are the call's arguments, already valid against the input
	// schema; "{}" when the client sent none.
	Arguments json.RawMessage
	// Reporter receives progress and log events; nil means nobody listens.
	Reporter Reporter
	// WantsProgress is set when the client asked for progress (its call
	// carries a progress token): only then do tools stream their output.
	WantsProgress bool
	// Client asks the MCP client something on behalf of this call (ping,
	// elicitation); nil when the call has no client to ask.
	Client Client
	// ClientMeta is the _meta object of the client's tools/call as it was
	// sent (nil when there was none): a proxied tool passes its members
	// on to the downstream server (Codex's callId, threadId, turn
	// metadata).
	ClientMeta json.RawMessage
	// Overrides are the session's own working directory and environment;
	// nil when the session has none. Tools that run processes apply them
	// before their configured ones.
	Overrides *Overrides
	// Output receives the stdout and stderr of the programs the call
	// runs, spooled to disk and offered to the client as resources. troupe
	// sets it for tools that run programs (Previewers); it is nil for the
	// others.
	Output *spool.Output
	// Secrets are the server's secret values (resolved ${NAME}s); tools
	// mask them, and their own secret-named env values, in output. nil
	// masks nothing.
	Secrets *redact.Redactor
	// Rounds is set when the client cannot be asked while the call runs
	// (protocol 2026-07-28 has no server-to-client requests): a tool that
	// needs the client's input returns *InputRequired, and the client
	// answers in a retry of the call, which brings Resume.
	Rounds bool
	// Resume is the client's answer to the *InputRequired this call
	// returned in an earlier round; nil for a first call.
	Resume *Resume
	// Identity is who called (nil: stdio's local user): what a tool that
	// serves several callers' things (the gateway's prompts and resources)
	// shows this one.
	Identity *identity.Identity
	// RequestID is the JSON id of the client's request (tools/call, or the
	// method a methods registry serves), for notifications that name the
	// request they belong to (Codex's codex/event _meta.requestId).
	RequestID json.RawMessage
	// Session is the session the call runs in (per-session state,
	// notifications after the call); nil when it has none.
	Session Session
	// Relayed counts what the call relayed to its client for a downstream
	// server (sampling requests), for the call's audit record; nil counts
	// nothing.
	Relayed *Relayed
}

// InputRequired is a tool's error when it needs answers from a client that
// answers in rounds (Request.Rounds): troupe answers the call with
// resultType "input_required" carrying Requests, seals State (with the
// call's binding, so nobody else can present it) into the requestState,
// and gives both back to the tool in Request.Resume when the client
// retries.
type InputRequired struct {
	// Requests are the questions by key, each {"method": …, "params": …}
	// (elicitation/create, roots/list or sampling/createMessage).
	Requests map[string]json.RawMessage
	// State is the tool's own, at most a few KiB: what it needs to go on.
	State []byte
}

// Error implements error.
func (e *InputRequired) Error() string { return "the call needs answers from the client" }

// Resume is a client's answer to an InputRequired: its inputResponses, by
// the keys of the requests, and the tool's State.
type Resume struct {
	Responses map[string]json.RawMessage
	State     []byte
}

// Preview is what a call will do, as far as an approval prompt, the
// approval's binding hash and the audit log need to know before it runs.
type Preview struct {
	Cwd     string            // workspace-relative working directory ("." is the root)
	Env     map[string]string // variables the call sets on top of the baseline (values may be secrets)
	Command []string          // the argv a program-running call will execute
	// Timeout is the call's own time limit (shell.exec's timeout_ms); 0
	// means none. troupe enforces the smallest of it, the client's and
	// the tool's ceiling.
	Timeout time.Duration
}

// Stopper is implemented by tools that describe a call stopped at its
// deadline in their own structured shape (from the output so far); the
// invocation adds it as structuredContent of the deadline error.
type Stopper interface {
	Stopped(out *spool.Output, ran time.Duration) any
}

// Previewer is implemented by tools whose calls run in a working directory
// with an environment (command tools, shell.exec). Preview fails with an
// *Error when the call could not run at all (a cwd outside the workspace),
// so the client is told before anyone is asked to approve it.
type Previewer interface {
	Preview(req *Request) (*Preview, error)
}

// Overrides are a session's working directory and environment variables,
// which take precedence over a tool's configured cwd and env.
type Overrides struct {
	Cwd string            // "" means none
	Env map[string]string // nil means none
}

// Client sends requests to the MCP client while a call runs. The request
// travels with the call (over HTTP, on the call's own stream) and its
// response comes back to the caller.
type Client interface {
	// Call sends method with params and waits for the client's result, a
	// *ClientError, or the end of ctx (then the request is cancelled
	// towards the client).
	Call(ctx context.Context, method string, params any) (json.RawMessage, error)
}

// ClientError is an error response from the MCP client, or a refusal to
// send a request the client did not declare a capability for.
type ClientError struct {
	Code    int64
	Message string
}

func (e *ClientError) Error() string { return fmt.Sprintf("client error %d: %s", e.Code, e.Message) }

// Reporter is how a running tool talks to the client while it works.
// Implementations must be safe for concurrent use and must not block.
type Reporter interface {
	// Progress reports work done so far; done must grow from call to call.
	// total is 0 when unknown.
	Progress(done, total float64, message string)
	// Log sends a log message to the client, subject to the session's level.
	Log(level protocol.LoggingLevel, data any)
	// Ready blocks while the notifications this call sent and the client
	// has not taken yet exceed the call's bound, or until ctx is done. A
	// tool that streams output calls it before each send, so a slow client
	// slows the tool down instead of growing the server's memory.
	Ready(ctx context.Context) error
}

// Notifier is implemented by Reporters that can send a notification of
// the tool's own method (such as Codex's "codex/event"). The session adds
// params._meta.requestId (the call's request id) so the client can tie it
// to the call, and sends it only while the call runs.
type Notifier interface {
	Notify(method string, params map[string]any)
}

// Progress reports progress if anybody listens.
func (r *Request) Progress(done, total float64, message string) {
	if r.Reporter != nil {
		r.Reporter.Progress(done, total, message)
	}
}

// Log sends a log message if anybody listens.
func (r *Request) Log(level protocol.LoggingLevel, data any) {
	if r.Reporter != nil {
		r.Reporter.Log(level, data)
	}
}

// StructuredResult renders v as a successful result: structuredContent, and
// the same JSON in a text block for clients that only read text (the spec
// asks for both when a tool has an output schema).
func StructuredResult(v any) (*protocol.CallToolResult, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return &protocol.CallToolResult{
		Content:           []protocol.Content{protocol.TextContent(string(b))},
		StructuredContent: json.RawMessage(b),
	}, nil
}
