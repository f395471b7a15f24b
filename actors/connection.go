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

// flush writes the queued messages and then tells their senders.
func (c *connection) flush() {
	c.flushing = false
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
	c.stream = framing.New(c.in, c.out, framing.Options{MaxLineBytes: c.opts.maxLineBytes, Logger: c.log})
	var err error
	c.session, err = ctx.SpawnNamed(c.opts.exec.longLivedProps(newSession(c.sessionOpts, c.log, c.opts.exec)), sessionName)
	if err != nil {
		panic(fmt.Errorf("spawn session: %w", err)) // a fresh connection has no children: cannot happen
	}
	root, session, self, stream := ctx.ActorSystem().Root, c.session, ctx.Self(), c.stream
	// The read loop only forwards, so it never waits on the session and
	// wire order is kept (a cancellation arrives after its call). It ends
	// when the input does.
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
