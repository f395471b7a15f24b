package actors

import (
	"context"
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
// (the only writer of the output), the jsonrpc2 read loop feeding it, and
// the session child. It lives until its session has ended and every
// message the session sent has been written.
type connection struct {
	in          io.Reader
	out         io.WriteCloser
	opts        *hostOptions
	sessionOpts *SessionOptions // the server's current options, shared
	log         *slog.Logger
	done        chan struct{} // closed when the actor has stopped
	stream      *framing.Stream
	rpc         *jsonrpc2.Conn
	session     *actor.PID
	drained     bool
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
		if err := c.stream.WriteObject(msg.Message); err != nil {
			c.log.Debug("write failed", "err", err)
		}
		if msg.Written != nil {
			msg.Written()
		}
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
		c.rpc.Close()
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
	c.session, err = ctx.SpawnNamed(actor.PropsFromProducer(newSession(c.sessionOpts, c.log, c.opts.exec),
		actor.WithReceiverMiddleware(capturePanics)), sessionName)
	if err != nil {
		panic(fmt.Errorf("spawn session: %w", err)) // a fresh connection has no children: cannot happen
	}
	root, session, self := ctx.ActorSystem().Root, c.session, ctx.Self()
	c.rpc = jsonrpc2.NewConn(context.Background(), c.stream,
		inboundHandler{root: root, session: session},
		jsonrpc2.SetLogger(slogPrinter{c.log}),
		// Responses to our requests reach the session, which matches them
		// (jsonrpc2 only matches its own Calls, and troupe makes none).
		jsonrpc2.OnRecv(func(_ *jsonrpc2.Request, resp *jsonrpc2.Response) {
			if resp != nil {
				root.Send(session, &InboundResponse{Response: resp})
			}
		}))
	// The watcher ends when the read loop does: at end of input, or when
	// Stopping closes the jsonrpc2 connection.
	go func() {
		<-c.rpc.DisconnectNotify()
		root.Send(self, &inputClosed{})
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

// inboundHandler is the jsonrpc2 handler: it only forwards, so the read loop
// never waits and wire order is kept (a cancellation arrives after its call).
type inboundHandler struct {
	root    *actor.RootContext
	session *actor.PID
}

// Handle implements jsonrpc2.Handler.
func (h inboundHandler) Handle(_ context.Context, _ *jsonrpc2.Conn, req *jsonrpc2.Request) {
	h.root.Send(h.session, &Inbound{Request: req})
}

// slogPrinter routes jsonrpc2's log.Printf-style logger to slog (debug), so
// nothing of it reaches stdout and it follows the configured format.
type slogPrinter struct{ log *slog.Logger }

// Printf implements jsonrpc2.Logger.
func (p slogPrinter) Printf(format string, v ...any) {
	p.log.Debug("jsonrpc2: " + fmt.Sprintf(format, v...))
}

// hostOptions are the resolved options every connection of a Host uses.
type hostOptions struct {
	session      SessionOptions
	maxLineBytes int
	grace        time.Duration
	exec         *executorDeps
	http         HTTPOptions
	server       *actor.PID // set by the server as it starts; connections report their end to it
}
