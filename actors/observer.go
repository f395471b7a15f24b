package actors

import (
	"context"
	"encoding/json"
	"time"

	"troupe/audit"
)

// Observer watches a Host for its operators: metrics, traces and the live
// status page (package observe implements it). Its methods run on the path
// of every call, on the goroutine of a session, an invoker, an approval or
// a tool: they must be quick, safe for concurrent use, and never block.
// Options.Observer nil observes nothing and costs nothing.
type Observer interface {
	// SessionStarted: a session exists, over transport ("stdio", "http"),
	// for identity (identity.Identity.String; "local" over stdio).
	SessionStarted(id, transport, identity string)
	// SessionInitialized: the session negotiated version ("2025-06-18",
	// …) with a client of that name. Hidden sessions that serve
	// 2026-07-28 requests never initialize.
	SessionInitialized(id, version, client string)
	// SessionEnded: the session is gone, with the calls it had.
	SessionEnded(id string)
	// RequestServed: a request other than a call (initialize,
	// tools/list, …) was answered (or refused: the log says which).
	RequestServed(session, method string, began time.Time)
	// CallStarted: an invoker took call c. The context it returns is the
	// parent of the tool's context (a trace span: the tool's own spans,
	// the sandbox start's, a downstream request's _meta hang from it).
	CallStarted(ctx context.Context, c *CallView) context.Context
	// CallStateChanged: c waits for a person's approval, runs, or streams
	// its output.
	CallStateChanged(c *CallView, s CallState)
	// ApprovalDecided: the person's answer (approved, denied, expired,
	// unavailable, trusted), after waiting that long.
	ApprovalDecided(c *CallView, outcome string, waited time.Duration)
	// CallFinished: c ended; r is its audit record (also when the audit
	// log is off), whose Outcome is "ok" or the error kind. c is nil for a
	// call cancelled before an invoker took it (CallStarted never saw it).
	CallFinished(c *CallView, r *audit.Record)
	// AuditFlushed: the audit log wrote a batch of records with one write
	// and one fsync, which took fsync.
	AuditFlushed(records int, fsync time.Duration)
	// DownstreamChanged: a downstream MCP server is now in state
	// (connecting, ready, failed, closed).
	DownstreamChanged(server, state string)
}

// CallState is what a call in flight is doing, for the status page.
type CallState string

// The states of a call in flight.
const (
	CallWaitingApproval CallState = "waiting_approval"
	CallRunning         CallState = "running"
	CallStreaming       CallState = "streaming"
)

// CallView is one call as an Observer sees it. The Host fills the exported
// fields before CallStarted and never changes them after; Observed is the
// Observer's own (its span, say), set in CallStarted.
type CallView struct {
	// ID is the call's correlation id (c-…), as in logs, errors and audit.
	ID string
	// Session is the session's id.
	Session string
	// Identity is who called (identity.Identity.String; "local" over
	// stdio), never a credential.
	Identity string
	// Tool is the tool's name as the client asked for it (it may not
	// exist: an Observer bounds its labels by the registry).
	Tool string
	// Version is the protocol revision the call came in.
	Version string
	// Started is when the invoker took the call.
	Started time.Time
	// Meta is the client's _meta of the call, raw (trace context,
	// SEP-414: traceparent, tracestate, baggage); nil when none.
	Meta json.RawMessage
	// Observed is the Observer's, for state between the calls above.
	Observed any
}
