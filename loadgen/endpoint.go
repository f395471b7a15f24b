package loadgen

import (
	"context"
	"time"
)

// Kinds of failed calls, the keys of Report.Errors. A JSON-RPC error is
// counted under KindJSONRPC followed by its code ("jsonrpc:-32602").
const (
	KindIsError   = "isError"   // the tool answered with "isError": true
	KindJSONRPC   = "jsonrpc:"  // the server answered with a JSON-RPC error
	KindTimeout   = "timeout"   // no answer within Options.CallTimeout
	KindTransport = "transport" // the request could not be sent or the answer read
	// KindRateLimited: the server refused the call over one of its
	// limits (troupe's JSON-RPC -31429, or HTTP 429). Not a failure of the
	// server: counted in Report.RateLimited, not in Report.Errors.
	KindRateLimited = "rate_limited"
)

// codeRateLimited is troupe's JSON-RPC code for a call over a limit.
const codeRateLimited = -31429

// endpoint is one MCP session the callers share: a stdio server's only
// session, or one HTTP session.
type endpoint interface {
	// roundTrip sends req (whose id is id) and waits for its answer. kind
	// is "" for a successful result, else one of the kinds above; text then
	// says what failed (the server's error message or the tool's text)
	// when the endpoint knows, for the report's error texts.
	roundTrip(ctx context.Context, c *caller, id int64, req []byte) (kind, text string)
}

// caller is one goroutine's reusable state: its answer channel, its
// timer and its request buffer.
type caller struct {
	ch      chan message
	timer   *time.Timer
	timeout time.Duration
	buf     []byte
}

func newCaller(timeout time.Duration) *caller {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return &caller{ch: make(chan message, 1), timer: t, timeout: timeout, buf: make([]byte, 0, 512)}
}
