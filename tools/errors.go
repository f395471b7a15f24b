package tools

import (
	"errors"
	"fmt"

	"troupe/protocol"
)

// Kind classifies a tool failure. Kinds are stable strings clients and logs
// can match on; they appear in the result's _meta and text.
type Kind string

// The failure kinds.
const (
	KindInvalidArgument  Kind = "invalid_argument"  // arguments do not fit the schema or make no sense
	KindNotFound         Kind = "not_found"         // the named file, directory or tool does not exist
	KindPermissionDenied Kind = "permission_denied" // refused by the workspace or sandbox rules
	KindDeadlineExceeded Kind = "deadline_exceeded" // the call ran out of time
	KindCancelled        Kind = "cancelled"         // the call was stopped before it finished
	KindUnavailable      Kind = "unavailable"       // troupe is shutting down or a dependency is down
	KindInternal         Kind = "internal"          // troupe failed; the details are in the server log
	KindCommandFailed    Kind = "command_failed"    // a tool's program exited non-zero or died of a signal troupe did not send
	KindUnauthenticated  Kind = "unauthenticated"   // a credential the call needs is missing, expired or refused
	KindHeld             Kind = "held"              // a downstream tool changed since it was trusted and waits for an operator to accept it
)

// Error is a tool failure the model may see. Message must be safe to show:
// no host paths outside the workspace, no secrets, no stack traces.
type Error struct {
	Kind    Kind
	Message string
}

func (e *Error) Error() string { return string(e.Kind) + ": " + e.Message }

// Errorf builds an *Error with a formatted message.
func Errorf(kind Kind, format string, args ...any) *Error {
	return &Error{Kind: kind, Message: fmt.Sprintf(format, args...)}
}

// AsError returns err's *Error, if it wraps one.
func AsError(err error) (*Error, bool) {
	var e *Error
	ok := errors.As(err, &e)
	return e, ok
}

// Result renders e as the isError tool result a client sees: the message,
// the kind and the correlation id in text (what the model reads), and the
// same in _meta under protocol.MetaPrefix+"error" for programs.
func (e *Error) Result(correlationID string) *protocol.CallToolResult {
	return &protocol.CallToolResult{
		IsError: true,
		Content: []protocol.Content{protocol.TextContent(
			fmt.Sprintf("%s\n(kind: %s, correlation id: %s)", e.Message, e.Kind, correlationID))},
		Meta: map[string]any{protocol.MetaPrefix + "error": map[string]string{
			"kind": string(e.Kind), "correlationId": correlationID,
		}},
	}
}
