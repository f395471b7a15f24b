// Package transport is the seam between troupe's session actor and the
// ways its clients reach it: a Transport is a value the session owns, not
// an actor, and its methods run in the session's Receive, so nothing
// crosses an actor boundary between a session and its client. What a
// client sends reaches the session as a Request, read once at the
// transport's edge (on the transport's goroutine, not the session's). Package
// stdio is the stream transport (stdio: one framed byte stream, a read
// loop); package httptransport is streamable HTTP's (a stream per POST,
// the standalone GET stream, resumption). A new transport implements
// Transport and sends the session Inbound and InboundResponse messages.
package transport

import (
	"github.com/asynkron/protoactor-go/actor"
	"github.com/sourcegraph/jsonrpc2"

	"troupe/protocol"
)

// Transport is a session's way to its client. Every method is called from
// the session actor's Receive (or its Started/Stopping), one at a time.
type Transport interface {
	// Start begins serving (stdio: the read loop).
	Start(ctx actor.Context, s Session)
	// Send hands one outgoing message to the client.
	Send(out *Outbound)
	// Unanswered says request id will get no response (it was cancelled).
	Unanswered(id jsonrpc2.ID)
	// Negotiated says which revision the session speaks now.
	Negotiated(v protocol.Version)
	// Receive handles the transport's own messages (those it sends the
	// session, and IdleCheck); false when msg is not one of them.
	Receive(ctx actor.Context, s Session, msg any) bool
	// Stopping ends the transport's side as the session stops (stdio:
	// write what is queued and close the output; HTTP: end the streams).
	Stopping()
	// Stopped reports the session's end to whoever waits on the transport.
	Stopped()
	// Touch notes that the client used the session (HTTP idle expiry).
	Touch()
}

// Session is what a transport asks of its session.
type Session interface {
	// Handle serves one request or notification from the client, as an
	// Inbound would, within the transport's own message.
	Handle(ctx actor.Context, req *Request)
	// InputEnded says the client can send nothing more: requests waiting
	// for its answers fail, and the session drains.
	InputEnded(ctx actor.Context)
	// MaxInFlight is the session's limit of calls in flight.
	MaxInFlight() int
}

// Inbound carries one request or notification from a transport to the
// session, in wire order, read at the transport's edge.
type Inbound struct{ Request *Request }

// InboundResponse carries a client's response to a server-to-client
// request.
type InboundResponse struct{ Response *jsonrpc2.Response }

// Outbound is one message the session hands its transport for the
// client: Message (a *jsonrpc2.Response, or a *jsonrpc2.Request for a
// notification or a server-to-client request).
type Outbound struct {
	Message any
	// Related is the id of the client request a notification belongs to
	// (a call's progress), nil when it belongs to none; transports with
	// several streams use it to pick the stream.
	Related *jsonrpc2.ID
	// Written, when set, is called once the message has been handed to
	// the client (or dropped): it is how a streaming tool learns that the
	// client keeps up. Transports must call it exactly once.
	Written func()
}

// IdleCheck is the server's periodic question to every session whether
// it has been idle for long enough (HTTP sessions expire; others ignore
// it).
type IdleCheck struct{ Quiet }

// Quiet marks messages whose loss to a stopped actor is expected (late
// timers), so dead letters are not logged for them.
type Quiet struct{}

// IgnoreDeadLetterLogging implements actor.IgnoreDeadLetterLogging.
func (Quiet) IgnoreDeadLetterLogging() {}
