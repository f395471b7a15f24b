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
