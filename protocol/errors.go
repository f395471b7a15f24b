package protocol

import (
	"encoding/json"

	"github.com/sourcegraph/jsonrpc2"
)

// JSON-RPC 2.0 error codes used by MCP.
const (
	CodeParseError     = jsonrpc2.CodeParseError     // -32700: the line is not JSON
	CodeInvalidRequest = jsonrpc2.CodeInvalidRequest // -32600: JSON, but not a valid request
	CodeMethodNotFound = jsonrpc2.CodeMethodNotFound // -32601: no such method
	CodeInvalidParams  = jsonrpc2.CodeInvalidParams  // -32602: params do not fit the method
	CodeInternalError  = jsonrpc2.CodeInternalError  // -32603: troupe failed (see the correlation id in the log)
	// CodeServerBusy is returned when a session already has as many requests
	// in flight as it may; the client should retry later.
	CodeServerBusy = -32000
	// CodeResourceNotFound answers resources/read for a URI the session
	// does not (or no longer) hold, as the spec recommends.
	CodeResourceNotFound = -32002
	// CodeHeaderMismatch (2026-07-28): an HTTP request's Mcp-Method,
	// Mcp-Name or MCP-Protocol-Version header is missing or disagrees with
	// the body.
	CodeHeaderMismatch = -32020
	// CodeMissingCapability (2026-07-28): the request needs a client
	// capability its _meta did not declare (data.requiredCapabilities).
	CodeMissingCapability = -32021
	// CodeUnsupportedVersion (2026-07-28): the request's protocol version
	// is not one troupe serves per request (data.supported, data.requested).
	CodeUnsupportedVersion = -32022
	// CodeRateLimited: the caller's identity is over one of its limits
	// ([limits.rate], [limits.identity], or its token's own); data is
	// {kind: "rate_limited", retryAfterSeconds, correlationId}. troupe's
	// own code, outside the range JSON-RPC reserves (-32768..-32000), so
	// no revision's codes can collide with it; over HTTP a request refused
	// before it reaches a session is answered 429 with Retry-After.
	CodeRateLimited = -31429
)

// NewError builds a JSON-RPC error; data, when not nil, is attached as the
// error's data member.
func NewError(code int64, message string, data any) *jsonrpc2.Error {
	e := &jsonrpc2.Error{Code: code, Message: message}
	if data != nil {
		if b, err := json.Marshal(data); err == nil {
			raw := json.RawMessage(b)
			e.Data = &raw
		}
	}
	return e
}

// KindRateLimited is the kind in the data of a CodeRateLimited error.
const KindRateLimited = "rate_limited"

// RateLimited is the data of a CodeRateLimited error.
type RateLimited struct {
	Kind string `json:"kind"` // KindRateLimited
	// RetryAfterSeconds is when a retry can succeed (for a rate), or a
	// hint (a slot frees when a call or a session ends).
	RetryAfterSeconds int `json:"retryAfterSeconds"`
	// CorrelationID names the server's log line of the refusal.
	CorrelationID string `json:"correlationId"`
}

// RetryAfter reads the retryAfterSeconds of a CodeRateLimited error; ok
// is false for any other error.
func RetryAfter(e *jsonrpc2.Error) (seconds int, ok bool) {
	if e == nil || e.Code != CodeRateLimited || e.Data == nil {
		return 0, false
	}
	var d RateLimited
	if json.Unmarshal(*e.Data, &d) != nil || d.Kind != KindRateLimited {
		return 0, false
	}
	return d.RetryAfterSeconds, true
}
