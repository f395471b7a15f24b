package actors

import (
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/sourcegraph/jsonrpc2"

	"troupe/protocol"
	"troupe/protocol/framing"
)

// connection is one stream-based client (stdio): it owns the framing stream
// (the only writer of the output), the read loop feeding the session, and
// the session child. It lives until its session has ended and every
// message the session sent has been written.
//
// The read loop is troupe's own, not a jsonrpc2.Conn: the stream checks
// and decodes each line in one pass into jsonrpc2's types, and the loop
// forwards the result. jsonrpc2.Conn would decode every message twice more
// (its request type goes through a map and re-encodes the params), which
// was a fifth of the CPU of a busy session, and a server that matches its
// own responses (the session does) needs nothing else from it.
//
// Back-pressure: the stream counts the requests the read loop has taken
// whose responses are not written yet, and the read loop reads no further
// line while max_in_flight+pendingMargin are owed
// (framing.Options.MaxPending); once paused it waits until at most
// max_in_flight+pendingMargin/2 are owed (ResumeAt), so reads and writes
// resume in runs, not one per answer. A client that stops reading stdout
// fills the pipe, writes block, answers stop being written, and soon
// troupe stops reading stdin: the pipe to troupe fills and the client's
// own writes block. Every request read is still answered once the client
// reads. Memory stays bounded: at most that many requests (plus the
// members of one batch line) and their answers wait in the session's and
// this actor's mailboxes; a call's notifications are bounded by its
// reporter's flow (maxUnwrittenBytes); and the stream's write buffer is
// written out whenever it holds flushBytes.
//
// The margin keeps a client that does read from waiting on it: only calls
// in flight (at most max_in_flight) hold their slot for long, every other
// request is answered at once, so the margin is free for what the client
// sends while calls run (notifications/cancelled and answers to
// elicitations take no slot; pings take one briefly). Nothing can
// deadlock on the pause: it needs that many answers unwritten, which
// happens only while the client does not read; once it reads, writes
// finish, slots free and reading resumes, at the latest when only the
// calls in flight are owed (ResumeAt lies above max_in_flight), so a call
// waiting for the client's answer never holds the reader back. (A
// 2025-03-26 batch holds its answers until all are in, but that revision
// has no elicitation.) Cancelled calls free their slot through
// *Unanswered; when the output closes (the connection stops) a paused
// read loop ends.
type connection struct {
	in          io.Reader
	out         io.WriteCloser
	opts        *hostOptions
	sessionOpts *SessionOptions // the server's current options, shared
	log         *slog.Logger
	done        chan struct{} // closed when the actor has stopped
	stream      *framing.Stream
	session     *actor.PID
	drained     bool
	flushing    bool     // a flushOutput is on its way
	written     []func() // Outbound.Written callbacks of the queued messages
}

// flushOutput makes the connection write the messages it queued.
type flushOutput struct{ quiet }

// pendingMargin is how many requests beyond limits.max_in_flight a client
// may have sent whose answers are not written yet before troupe stops
// reading its input (see connection).
const pendingMargin = 256

// flushBytes is how much the stream may hold for the next write before the
// connection writes it without waiting for its flushOutput: a long run of
// queued answers goes out in pieces instead of one buffer the size of all.
const flushBytes = 256 << 10

// flush answers flushOutput: it writes the queued messages.
func (c *connection) flush() {
	c.flushing = false
	c.writeQueued()
}

// writeQueued writes the queued messages and then tells their senders.
func (c *connection) writeQueued() {
	if err := c.stream.Flush(); err != nil {
		c.log.Debug("write failed", "err", err)
	}
	for i, f := range c.written {
		f()
		c.written[i] = nil
	}
	c.written = c.written[:0]
}

// sessionName is the session child's name: its PID is the connection's
// followed by "/session".
const sessionName = "session"

// inputClosed is sent by the read-loop watcher when the input ends.
type inputClosed struct{ quiet }

// closeOutput is sent by the connection to itself once its session has
// ended. Being a user message it queues behind every Outbound the session
// sent before stopping, so nothing is lost when the output closes.
type closeOutput struct{ quiet }

// Receive implements actor.Actor.
func (c *connection) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *actor.Started:
		c.start(ctx)
	case *Outbound:
		// Queued, then written with the others the mailbox holds: the
		// flushOutput sent behind the first comes out after them, so a busy
		// session writes many messages per syscall and an idle one at once.
		if err := c.stream.Queue(msg.Message); err != nil {
			c.log.Debug("write failed", "err", err)
		}
		if msg.Written != nil {
			c.written = append(c.written, msg.Written)
		}
		if c.stream.Buffered() >= flushBytes {
			c.writeQueued() // a flushOutput on its way finds less, or nothing
			return
		}
		if !c.flushing {
			c.flushing = true
			ctx.Send(ctx.Self(), flushOutput{})
		}
	case flushOutput:
		c.flush()
	case *Unanswered:
		c.stream.Skip(msg.ID)
	case *Negotiated:
		c.stream.SetBatches(msg.Version.AllowsBatches())
	case *inputClosed:
		c.log.Debug("input closed")
		c.drain(ctx)
		// No response can come in any more: requests waiting for one
		// (approvals) fail now instead of at the end of the grace period.
		ctx.Send(c.session, &clientGone{})
	case *Drain:
		c.drain(ctx)
	case *registryChanged:
		ctx.Send(c.session, msg)
	case *actor.Terminated:
		if msg.Who.Equal(c.session) {
			ctx.Send(ctx.Self(), &closeOutput{})
		}
	case *closeOutput:
		ctx.Stop(ctx.Self())
	case *actor.Stopping:
		c.flush()
		if err := c.stream.CloseWrite(); err != nil {
			c.log.Debug("closing output", "err", err)
		}
	case *actor.Stopped:
		close(c.done)
		ctx.Send(c.opts.server, &ended{id: ctx.Self().Id})
	}
}

func (c *connection) start(ctx actor.Context) {
	c.stream = framing.New(c.in, c.out, framing.Options{MaxLineBytes: c.opts.maxLineBytes, Logger: c.log,
		MaxPending: c.sessionOpts.MaxInFlight + pendingMargin, ResumeAt: c.sessionOpts.MaxInFlight + pendingMargin/2})
	var err error
	c.session, err = ctx.SpawnNamed(c.opts.exec.longLivedProps(newSession(c.sessionOpts, c.log, c.opts.exec)), sessionName)
	if err != nil {
		panic(fmt.Errorf("spawn session: %w", err)) // a fresh connection has no children: cannot happen
	}
	root, session, self, stream := ctx.ActorSystem().Root, c.session, ctx.Self(), c.stream
	// The read loop only forwards, so it never waits on the session and
	// wire order is kept (a cancellation arrives after its call). It waits
	// only in ReadMessage, while the client is owed too much (see
	// connection). It ends when the input does, or when the output has
	// closed while it waited.
	go func() {
		for {
			m, err := stream.ReadMessage()
			if err != nil {
				root.Send(self, &inputClosed{})
				return
			}
			if m.Request != nil {
				root.Send(session, &Inbound{Request: m.Request})
			} else {
				root.Send(session, &InboundResponse{Response: m.Response})
			}
		}
	}()
}

// drain starts the graceful end: the session finishes its calls within the
// grace period, then ends, and the connection follows.
func (c *connection) drain(ctx actor.Context) {
	if c.drained {
		return
	}
	c.drained = true
	ctx.Send(c.session, &Drain{Grace: c.opts.grace})
}

// HandleFailure supervises the session: a panic while it handled one
// message is answered (when the message was a request) with an internal
// error carrying a correlation id, and the session resumes with its state
// intact, so the client's session survives a bug in one request.
func (c *connection) HandleFailure(_ *actor.ActorSystem, sup actor.Supervisor, child *actor.PID,
	_ *actor.RestartStatistics, reason any, message any) {
	value, stack := panicDetails(reason)
	cid := newCorrelationID()
	c.log.Error("session failed handling a message; resuming", "correlation_id", cid, "panic", value, "stack", stack)
	if in, ok := message.(*Inbound); ok && in.Request != nil && !in.Request.Notif {
		_ = c.stream.WriteObject(&jsonrpc2.Response{ID: in.Request.ID,
			Error: protocol.NewError(protocol.CodeInternalError, "internal error", map[string]string{"correlationId": cid})})
	}
	sup.ResumeChildren(child)
}

// hostOptions are the resolved options every connection of a Host uses.
type hostOptions struct {
	session      SessionOptions
	maxLineBytes int
	grace        time.Duration
	exec         *hostDeps
	http         HTTPOptions
	server       *actor.PID // set by the server as it starts; connections report their end to it
}
