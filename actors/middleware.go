package actors

import (
	"encoding/json"
	"errors"
	"strconv"
	"time"

	"troupe/actors/transport"
	"troupe/limits"
	"troupe/protocol"
)

// What wraps every handler of the method table (table.go), innermost
// first: the params check, the timing an observer sees, the identity's
// limits (counted methods only), and the session's state. The session itself answers a stateless-era request whose _meta
// it refused and a method that has no row, before any of these.

// wrap builds the handler the session runs for m: h inside troupe's
// middleware, inside extra.
func wrap(m *method, h Handler, extra []Middleware) Handler {
	if m.strict {
		h = checkParams(h)
	}
	if !m.isCall {
		h = timed(m.name, h)
	}
	if m.counted {
		h = limited(m, h)
	}
	h = checkState(m, h)
	for _, mw := range extra {
		h = mw(m.name, h)
	}
	return h
}

// checkParams answers -32602 for params that did not decode into the
// method's type, naming the member when it can.
func checkParams(next Handler) Handler {
	return func(v SessionView, req *transport.Request) (any, error) {
		if req.Invalid != nil {
			return nil, invalidParams(describeJSONError(req.Invalid))
		}
		return next(v, req)
	}
}

// timed tells the observer how long a handshake-era request took (calls
// are observed by their invocation, from start to end).
func timed(name string, next Handler) Handler {
	return func(v SessionView, req *transport.Request) (any, error) {
		o := v.Observer()
		if o == nil || req.Era == protocol.EraStateless {
			return next(v, req)
		}
		began := time.Now()
		res, err := next(v, req)
		o.RequestServed(v.ID(), name, began)
		return res, err
	}
}

// limited counts a request against its identity's limits
// (SessionOptions.Limits; nil: none) before it is served: past one it is
// refused with CodeRateLimited. The tool globs match a tools/call's tool,
// and a method beside MCP's own name (the tool it is). A request that becomes a call holds its
// concurrency slot until the call's end (startingCall.release); any other
// gives it back once answered. The identity is the request's, not the
// session's: a session of another identity, or a new one, counts on the
// same keys.
func limited(m *method, next Handler) Handler {
	return func(v SessionView, req *transport.Request) (any, error) {
		lim := v.Options().Limits
		if lim == nil {
			return next(v, req)
		}
		tool := ""
		if p, ok := req.Params.(*callToolParams); ok {
			tool = p.Name
		} else if m.name == "" { // besideMCP
			tool = req.Method
		}
		release, over := lim.Call(req.Identity, tool)
		if over != nil {
			return nil, RateLimited(over, NewCorrelationID())
		}
		res, err := next(v, req)
		if c, ok := res.(*startingCall); ok && err == nil {
			c.release = release
			return res, nil
		}
		release()
		return res, err
	}
}

// RateLimited is the refusal of a request over a limit: CodeRateLimited,
// the limit and the setting that raises it, when to retry, and cid (which
// the refusal's log line names). The HTTP front answers its 429s with it.
func RateLimited(over *limits.Exceeded, cid string) *Refusal {
	return &Refusal{Code: protocol.CodeRateLimited, Message: over.Error(), Data: protocol.RateLimited{
		Kind: protocol.KindRateLimited, RetryAfterSeconds: over.RetryAfterSeconds(), CorrelationID: cid}}
}

// checkState refuses what the session's state does not allow: nothing new
// while it drains, and in the handshake era nothing but the handshake
// before initialize.
func checkState(m *method, next Handler) Handler {
	return func(v SessionView, req *transport.Request) (any, error) {
		switch {
		case v.State() == Draining:
			return nil, &Refusal{Code: protocol.CodeServerBusy, Message: "server is shutting down"}
		case m.needsInit && req.Era == protocol.EraHandshake && v.State() != Serving:
			return nil, &Refusal{Code: protocol.CodeInvalidRequest, Message: "session not initialized: send initialize first"}
		}
		return next(v, req)
	}
}

// Refusal is a JSON-RPC error a handler answers with. Without Data the
// answer carries a correlation id (in data) that the server's log line of
// the refusal has too; with Data (the spec's own, such as -32022's
// supported versions) it carries Data alone.
type Refusal struct {
	Code    int64
	Message string
	Data    any
}

// Error implements error.
func (r *Refusal) Error() string { return strconv.FormatInt(r.Code, 10) + ": " + r.Message }

// invalidParams is -32602 with detail.
func invalidParams(detail string) *Refusal {
	return &Refusal{Code: protocol.CodeInvalidParams, Message: "invalid params: " + detail}
}

// describeJSONError turns a decoding error into client-safe text.
func describeJSONError(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field != "" {
		return te.Field + " must be " + jsonKind(te.Type.Kind().String())
	}
	return "params do not match the method's schema"
}

func jsonKind(goKind string) string {
	switch goKind {
	case "string":
		return "a string"
	case "struct", "map":
		return "an object"
	case "slice":
		return "an array"
	case "bool":
		return "a boolean"
	}
	return "a number"
}
