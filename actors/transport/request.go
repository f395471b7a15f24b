package transport

import (
	"encoding/json"

	"github.com/sourcegraph/jsonrpc2"

	"troupe/identity"
	"troupe/protocol"
)

// Request is one request or notification from a client, read once at the
// transport's edge (the stdio read loop, the HTTP front's POST handler) and
// never parsed again below it: the method, its params as the method's typed
// value, the era it belongs to and, for the stateless era, what its _meta
// says of the client. The session completes it with what the handshake
// negotiated (Version, Caps) before a handler sees it, so a handler reads
// one value whatever era or transport the request came by.
//
// The edge makes it with NewRequest and fills it by decoding the params
// once (DecodeParams); nothing else holds the params' bytes, so nothing
// below the edge can decode them a second time without being counted
// (Decodes).
type Request struct {
	ID     jsonrpc2.ID
	Method string
	Notif  bool

	// Era is the era the request belongs to: the stateless era when its
	// _meta names a protocol version or it is server/discover (or, over
	// HTTP, its MCP-Protocol-Version header names a stateless revision),
	// the handshake era otherwise.
	Era protocol.Era
	// Version is the revision the request speaks: its own in the
	// stateless era, the session's negotiated one in the handshake era
	// ("" before initialize).
	Version protocol.Version
	// Caps are the client's capabilities: the request's own in the
	// stateless era, those declared at initialize in the handshake era.
	Caps protocol.ClientCapabilities
	// Client and Level are what a stateless-era request's _meta says of
	// its client and its log threshold (nil: send it no log messages).
	Client protocol.Implementation
	Level  *protocol.LoggingLevel
	// Refused is the stateless era's refusal of the request's _meta
	// (-32602, -32022): the request is answered with it and nothing else.
	Refused *protocol.MetaError

	// Params is the method's typed params (what the method table names),
	// nil for a method without a row (methods beside MCP take their raw
	// params: RawParams). Invalid is set when they did not decode: the
	// handler's stage answers it (-32602), after the checks that come
	// first (the method exists, the session is initialized).
	Params  any
	Invalid error
	// Meta is the params' _meta as sent (a proxied call passes it on),
	// nil when they have none.
	Meta json.RawMessage

	// Credential is the owner key of the identity the HTTP request came
	// from (identity.Identity.Owner: zero without authentication, never
	// the credential's bytes), nil when it came over a connection of its
	// own (stdio): whose approval states and spooled output the request
	// may use.
	Credential *[32]byte
	// Identity is who sent the request over HTTP (nil over stdio, whose
	// connection has one caller, the local user): what it may see and
	// use, what limits it counts against, what the audit log names.
	Identity *identity.Identity
	// Name is the request's Mcp-Name header (stateless era over HTTP),
	// when Named: the handler compares it with the name it reads from
	// Params, so the name checked is the name used.
	Name  string
	Named bool

	params  *json.RawMessage
	decodes int
}

// NewRequest starts the Request for msg, a request or notification as
// framing decoded it (params still raw).
func NewRequest(msg *jsonrpc2.Request) *Request {
	return &Request{ID: msg.ID, Method: msg.Method, Notif: msg.Notif, params: msg.Params}
}

// HasParams reports whether the request came with params other than null.
func (r *Request) HasParams() bool { return r.params != nil && string(*r.params) != "null" }

// DecodeParams unmarshals the params into v; absent or null params leave
// v as it is. Every call counts (Decodes): the edge calls it once.
func (r *Request) DecodeParams(v any) error {
	if !r.HasParams() {
		return nil
	}
	r.decodes++
	return json.Unmarshal(*r.params, v)
}

// RawParams are the params as sent, for methods whose params are not
// MCP's to type (the methods beside MCP hand them to a tool, whose schema
// check reads them as its arguments).
func (r *Request) RawParams() json.RawMessage {
	if r.params == nil {
		return nil
	}
	return *r.params
}

// Decodes is how many times the params were decoded (DecodeParams): one
// for a request the edge read, whatever happens to it afterwards.
func (r *Request) Decodes() int { return r.decodes }
