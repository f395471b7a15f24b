package framing

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"unicode/utf8"

	"github.com/sourcegraph/jsonrpc2"

	"troupe/internal/jsonmembers"
)

// lineError is why a message was rejected, and what to answer.
type lineError struct {
	id      json.RawMessage // raw id token to echo, nil for null
	code    int64
	message string
	// response: the message looks like a response (result or error, no
	// method). JSON-RPC never answers a response, so a bad one is dropped
	// without a reply: two peers must not bounce errors at each other.
	response bool
	// notification: a well-formed notification whose params are refused.
	// A notification is never answered, so it is dropped too.
	notification bool
}

// answered reports whether the rejection is answered on the stream.
func (e *lineError) answered() bool { return !e.response && !e.notification }

// Rejection is why a message is not valid JSON-RPC as MCP uses it, and the
// error response that answers it.
type Rejection struct{ e *lineError }

// Error implements error.
func (r *Rejection) Error() string { return r.e.message }

// Code is the JSON-RPC error code of the answer (-32700, -32600, or -32602
// for a member named twice in params).
func (r *Rejection) Code() int64 { return r.e.code }

// Reply is the error response to send, one JSON object ("id" is null when
// no id could be read).
func (r *Rejection) Reply() []byte { return errorLine(r.e.id, r.e.code, r.e.message) }

// Check applies the rules Stream applies to one line to a single message
// (not a batch) that arrived some other way, such as an HTTP POST body, so
// every transport judges messages alike. It returns nil when msg is a valid
// request, notification or response.
func Check(msg []byte) *Rejection {
	if !utf8.Valid(msg) {
		return &Rejection{&lineError{code: jsonrpc2.CodeParseError, message: "parse error: message is not valid UTF-8"}}
	}
	if _, e := classify(msg, true); e != nil {
		return &Rejection{e}
	}
	return nil
}

// Message is one checked JSON-RPC message, decoded: exactly one of Request
// (a request or a notification) and Response is set. Its raw parts (params,
// result) are copies, independent of the buffer it was read from.
type Message struct {
	Request  *jsonrpc2.Request
	Response *jsonrpc2.Response
}

// Decode checks one message (not a batch) as Check does and returns it
// decoded. The check and the decoding are one pass over the message: the
// params and result stay raw for whoever knows their type.
func Decode(msg []byte) (Message, *Rejection) {
	if !utf8.Valid(msg) {
		return Message{}, &Rejection{&lineError{code: jsonrpc2.CodeParseError, message: "parse error: message is not valid UTF-8"}}
	}
	m, e := classify(msg, true)
	if e != nil {
		return Message{}, &Rejection{e}
	}
	return m, nil
}

// envelope is a message's top level, read without interpreting the params.
type envelope struct {
	JSONRPC *string         `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  json.RawMessage `json:"method"`
	Params  json.RawMessage `json:"params"`
	Result  json.RawMessage `json:"result"`
	Error   json.RawMessage `json:"error"`
}

// classify checks one JSON value against JSON-RPC 2.0 as MCP uses it and
// returns it decoded when it is a valid request, notification or response.
// With members it also refuses a message that names a member twice
// (checkMembers).
func classify(msg []byte, members bool) (Message, *lineError) {
	var env envelope
	if err := json.Unmarshal(msg, &env); err != nil {
		var syn *json.SyntaxError
		if errors.As(err, &syn) { // truncated input is a SyntaxError too
			return Message{}, &lineError{code: jsonrpc2.CodeParseError, message: "parse error: " + err.Error()}
		}
		return Message{}, &lineError{code: jsonrpc2.CodeInvalidRequest, message: "invalid request: the message must be a JSON-RPC 2.0 object"}
	}
	id, idErr := checkID(env.ID)
	isResponse := env.Method == nil && (env.Result != nil || env.Error != nil)
	invalid := func(why string) *lineError {
		return &lineError{id: id, code: jsonrpc2.CodeInvalidRequest, message: "invalid request: " + why, response: isResponse}
	}
	if env.JSONRPC == nil || *env.JSONRPC != "2.0" {
		return Message{}, invalid(`"jsonrpc" must be "2.0"`)
	}
	if idErr != "" {
		return Message{}, invalid(idErr)
	}
	switch {
	case env.Method != nil:
		if env.Method[0] != '"' {
			return Message{}, invalid(`"method" must be a string`)
		}
		if env.Result != nil || env.Error != nil {
			return Message{}, invalid("a request cannot carry result or error")
		}
		if env.Params != nil && env.Params[0] != '{' && env.Params[0] != '[' {
			return Message{}, invalid(`"params" must be an object`)
		}
	case env.Result != nil || env.Error != nil:
		if env.ID == nil {
			return Message{}, invalid("a response needs an id")
		}
		if env.Result != nil && env.Error != nil {
			return Message{}, invalid("a response carries either result or error, not both")
		}
	default:
		return Message{}, invalid("neither a request nor a response")
	}
	if members {
		if e := checkMembers(msg, id, isResponse, env.Method != nil && env.ID == nil); e != nil {
			return Message{}, e
		}
	}
	return env.decode(id, invalid)
}

// messageFold lists the objects of a message that troupe decodes into its
// own types, whose member names must differ by more than case: the
// envelope, params (or a response's result and error) and their _meta.
// Below them only exact repeats are refused: a tool's arguments, say, may
// have both "id" and "ID" when its schema says so.
var messageFold = jsonmembers.Fold{{}, {"params"}, {"params", "_meta"}, {"result"}, {"result", "_meta"}, {"error"}}

// checkMembers refuses a message in which an object names a member twice,
// or one of messageFold's names a member in two spellings that differ only
// in case. Different readers would see different values in it —
// encoding/json takes the last of equal names and matches struct fields
// case-insensitively, a map lookup sees one exact key — so a check made by
// one reading would not hold for the use made by another (a 2026-07-28
// Mcp-Name header once matched params' "name" while the session ran the
// tool in "NAME"). Every message a client sends passes here, over stdio
// and HTTP, so nothing after it can meet such a message. The envelope's
// repeats are invalid requests (-32600), those in params invalid params
// (-32602); id is the message's checked id.
func checkMembers(msg []byte, id json.RawMessage, response, notification bool) *lineError {
	err := jsonmembers.Check(msg, messageFold)
	if err == nil {
		return nil
	}
	var dup *jsonmembers.Duplicate
	if !errors.As(err, &dup) {
		// json.Unmarshal accepted msg; Check cannot fail it otherwise.
		return &lineError{code: jsonrpc2.CodeParseError, message: "parse error: " + err.Error(), response: response}
	}
	top, _, _ := strings.Cut(dup.Path, ".")
	top, _, _ = strings.Cut(top, "[")
	if dup.Path != "" && strings.EqualFold(top, "params") {
		return &lineError{id: id, code: jsonrpc2.CodeInvalidParams, message: "invalid params: " + dup.Error(),
			response: response, notification: notification}
	}
	if dup.Path == "" && strings.EqualFold(dup.Name, "id") {
		id = nil // which of the two would be echoed is the question
	}
	return &lineError{id: id, code: jsonrpc2.CodeInvalidRequest, message: "invalid request: " + dup.Error(),
		response: response}
}

// decode builds the message of a checked envelope. id is the checked id
// token (nil for a notification).
func (env *envelope) decode(id json.RawMessage, invalid func(string) *lineError) (Message, *lineError) {
	var rid jsonrpc2.ID
	if id != nil {
		if err := rid.UnmarshalJSON(id); err != nil {
			return Message{}, invalid(`"id" must be a string or an integer`)
		}
	}
	if env.Method == nil {
		resp := &jsonrpc2.Response{ID: rid}
		if env.Error != nil {
			resp.Error = new(jsonrpc2.Error)
			if err := json.Unmarshal(env.Error, resp.Error); err != nil {
				return Message{}, invalid(`"error" must be an object with a code and a message`)
			}
		} else {
			resp.Result = &env.Result
		}
		return Message{Response: resp}, nil
	}
	req := &jsonrpc2.Request{ID: rid, Notif: id == nil}
	if raw := env.Method; bytes.IndexByte(raw, '\\') < 0 {
		req.Method = string(raw[1 : len(raw)-1])
	} else if err := json.Unmarshal(raw, &req.Method); err != nil {
		return Message{}, invalid(`"method" must be a string`)
	}
	if env.Params != nil {
		req.Params = &env.Params
	}
	return Message{Request: req}, nil
}

// checkID validates an id token and returns the token worth echoing (nil
// when there is none or it is null) and why it is invalid, if it is. MCP ids
// are strings or integers and never null; troupe also refuses negative and
// fractional numbers, and numbers beyond int64 (which no JSON-RPC peer can
// be trusted to echo exactly).
func checkID(raw json.RawMessage) (json.RawMessage, string) {
	if raw == nil {
		return nil, ""
	}
	switch raw[0] {
	case 'n':
		return nil, `"id" must not be null`
	case '"':
		return raw, ""
	case '-':
		return raw, `"id" must not be negative`
	}
	if raw[0] < '0' || raw[0] > '9' {
		return nil, `"id" must be a string or an integer`
	}
	if bytes.ContainsAny(raw, ".eE") {
		return raw, `"id" must be an integer`
	}
	var n int64
	if json.Unmarshal(raw, &n) != nil {
		return raw, `"id" is out of range`
	}
	return raw, ""
}
