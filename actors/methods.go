package actors

import (
	"encoding/json"
	"strings"

	"github.com/sourcegraph/jsonrpc2"

	"troupe/protocol"
	"troupe/tools"
)

// methodAnswer is the JSON-RPC response to a method of
// SessionOptions.Methods, from its tool's result: the structured content
// is the result ({} when the tool gave none); an error result becomes a
// JSON-RPC error whose code follows the tool error's kind (methodCode)
// and whose data carries the kind and the correlation id, as a tool
// error's _meta does.
func methodAnswer(id jsonrpc2.ID, r *protocol.CallToolResult) *jsonrpc2.Response {
	if !r.IsError {
		result := r.StructuredContent
		if result == nil {
			result = map[string]any{}
		}
		b, err := json.Marshal(result)
		if err == nil {
			raw := json.RawMessage(b)
			return &jsonrpc2.Response{ID: id, Result: &raw}
		}
		r = (&tools.Error{Kind: tools.KindInternal, Message: "the method's result could not be encoded"}).Result("")
	}
	var kind tools.Kind
	var data map[string]string
	if m, ok := r.Meta[protocol.MetaPrefix+"error"].(map[string]string); ok {
		kind, data = tools.Kind(m["kind"]), m
	}
	msg := ""
	if len(r.Content) > 0 {
		msg = r.Content[0].Text
		// The text ends with "(kind: …, correlation id: …)" for the
		// model; the error's data says that to programs.
		if i := strings.LastIndex(msg, "\n(kind: "); i >= 0 {
			msg = msg[:i]
		}
	}
	e := &jsonrpc2.Error{Code: methodCode(kind), Message: msg}
	if code, ok := gatewayCode(data); ok {
		// A downstream server's own error, passed through: its code, its
		// message and its data as it sent them.
		e.Code = code
		if d, ok := data[GatewayErrorData]; ok {
			raw := json.RawMessage(d)
			e.Data = &raw
		}
		data = nil
	}
	if data != nil {
		e.SetError(data)
	}
	return &jsonrpc2.Response{ID: id, Error: e}
}

// methodCode is the JSON-RPC error code of a method's failure: invalid
// params for bad arguments, internal error for troupe's own failures
// (and the call's deadline or cancellation), and invalid request for the
// rest (what Codex's former server answered requests it could not serve
// with: an unknown conversation, a failed git diff).
func methodCode(k tools.Kind) int64 {
	switch k {
	case tools.KindInvalidArgument:
		return protocol.CodeInvalidParams
	case tools.KindInternal, tools.KindDeadlineExceeded, tools.KindCancelled, "":
		return protocol.CodeInternalError
	}
	return protocol.CodeInvalidRequest
}
