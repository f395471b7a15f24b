package actors

import (
	"io"
	"log/slog"

	"github.com/asynkron/protoactor-go/actor"
)

// server is the top of troupe's actor tree: the parent of every connection.
type server struct {
	opts *hostOptions
	log  *slog.Logger
}

// serveStream asks the server to serve one client over a byte stream.
type serveStream struct {
	in   io.Reader
	out  io.WriteCloser
	done chan struct{}
}

// serveHTTP asks the server to start an HTTP session's actor.
type serveHTTP struct{ handle *HTTPSession }

// Receive implements actor.Actor.
func (s *server) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *serveStream:
		pid := ctx.SpawnPrefix(actor.PropsFromProducer(func() actor.Actor {
			return &connection{in: msg.in, out: msg.out, opts: s.opts, log: s.log, done: msg.done}
		}, actor.WithReceiverMiddleware(capturePanics)), "conn")
		ctx.Respond(pid)
	case *serveHTTP:
		pid := ctx.SpawnPrefix(actor.PropsFromProducer(func() actor.Actor {
			return &httpConn{handle: msg.handle, opts: s.opts, log: s.log}
		}, actor.WithReceiverMiddleware(capturePanics)), "http")
		ctx.Respond(pid)
	case *Drain:
		for _, c := range ctx.Children() {
			ctx.Send(c, msg)
		}
	}
}

// HandleFailure supervises connections: a panicking connection is logged
// and resumed; other connections never notice.
func (s *server) HandleFailure(_ *actor.ActorSystem, sup actor.Supervisor, child *actor.PID,
	_ *actor.RestartStatistics, reason any, _ any) {
	value, stack := panicDetails(reason)
	s.log.Error("connection failed; resuming", "connection", child.Id, "panic", value, "stack", stack)
	sup.ResumeChildren(child)
}
