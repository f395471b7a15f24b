package actors

import (
	"github.com/asynkron/protoactor-go/actor"
	"github.com/sourcegraph/jsonrpc2"

	"troupe/protocol"
)

// outlet is a session's transport: the one seam between the session actor
// and the way its client is reached. There is one session actor per
// client session on every transport; the transport's state is a plain
// value the session owns (stdioOutlet: the framing stream and its read
// loop; httpOutlet: the HTTP session's streams), and its methods run in
// the session's Receive, so no message crosses an actor boundary between
// the session and its client.
type outlet interface {
	// start begins serving (stdio: the read loop).
	start(ctx actor.Context, s *session)
	// send hands one outgoing message to the client.
	send(out *Outbound)
	// unanswered says request id will get no response (it was cancelled).
	unanswered(id jsonrpc2.ID)
	// negotiated says which revision the session speaks now.
	negotiated(v protocol.Version)
	// receive handles the transport's own messages; false when msg is not
	// one of them.
	receive(ctx actor.Context, s *session, msg any) bool
	// stopping ends the transport's side (stdio: write what is queued and
	// close the output; HTTP: end the streams) as the session stops.
	stopping()
	// stopped reports the session's end (to the server, and to whoever
	// waits on the transport).
	stopped(ctx actor.Context)
	// touch notes that the client used the session (HTTP idle expiry).
	touch()
}
