package actors

import (
	"io"
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"troupe/actors/httptransport"
	"troupe/actors/stdio"
	"troupe/actors/transport"
	"troupe/tools"
)

// server is the top of troupe's actor tree: it starts every connection and
// HTTP session, keeps the set of those alive, and drains and stops them.
//
// They are spawned from the root with a guardian (sessionGuardian) instead
// of as the server's children, because protoactor's child set never lets
// go of a stopped child's slot: a parent pins up to its peak number of
// children, actors and all. For a server that sees thousands of HTTP
// sessions come and go, that would keep every one of them in memory. The
// server's own map forgets a session the moment it ends.
type server struct {
	opts     *hostOptions
	session  *SessionOptions // for new sessions, shared, never changed: registryChanged makes a new one
	log      *slog.Logger
	guardian *sessionGuardian
	live     map[string]*actor.PID // connections and HTTP sessions, by PID id
	httpLive int                   // how many of live are HTTP sessions
	sweep    *time.Timer           // the next idleSweep, while HTTP sessions live
	waiters  []*actor.PID          // stopAll requests to answer once live is empty
	props    *actor.Props          // every session's (spawn)
	next     *session              // the session props' producer hands over
}

// idleSweep makes the server ask every HTTP session whether it has been
// idle for http.IdleTimeout. One timer per server, instead of one per
// session, which an idle session would otherwise carry: a session expires
// between IdleTimeout and 1¼ IdleTimeout after its last use.
type idleSweep struct{ quiet }

// serveStream asks the server to serve one client over a byte stream.
type serveStream struct {
	in   io.Reader
	out  io.WriteCloser
	done chan struct{}
}

// serveHTTP asks the server to start an HTTP session's actor.
type serveHTTP struct{ handle *httptransport.Handle }

// stopAll asks the server to stop every connection and session, and to
// answer (with *allStopped) once all have ended.
type stopAll struct{}

// allStopped answers stopAll.
type allStopped struct{}

// registryChanged carries a new tool registry from Host.SetRegistry through
// the server and connections to every session.
type registryChanged struct{ registry *tools.Registry }

// gatewaySet carries the Gateway for new sessions from Host.SetGateway to
// the server. Sessions already running keep theirs: they declared its
// capabilities when they began.
type gatewaySet struct{ gateway *tools.Registry }

// ended is sent to the server by a connection or HTTP session as it stops.
type ended struct {
	id   string
	http bool // an HTTP session (the sweep counts them)
}

// Receive implements actor.Actor.
func (s *server) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *actor.Started:
		s.live = map[string]*actor.PID{}
		s.opts.exec.server = ctx.Self()
		opts := s.opts.session.withDefaults()
		s.session = &opts
	case *registryChanged:
		next := *s.session // copy on write: sessions share the old one
		next.Registry = msg.registry
		s.session = &next
		for _, pid := range s.live {
			ctx.Send(pid, msg)
		}
	case *gatewaySet:
		next := *s.session // copy on write, as for registryChanged
		next.Gateway = msg.gateway
		s.session = &next
	case *gatewayChanged:
		for _, pid := range s.live {
			ctx.Send(pid, msg)
		}
	case *serveStream:
		out := stdio.New(msg.in, msg.out, msg.done, stdio.Options{MaxLineBytes: s.opts.maxLineBytes, Logger: s.log,
			Read: s.opts.exec.table.read})
		ctx.Respond(s.spawn(ctx, "conn", newSession(s.session, s.log, s.opts, out)))
	case *serveHTTP:
		id := msg.handle.ID()
		log := s.log.With("http_session", id[:min(8, len(id))])
		sess := newSession(s.session, log, s.opts, httptransport.New(msg.handle, log))
		sess.overHTTP = true
		ctx.Respond(s.spawn(ctx, "http", sess))
		s.httpLive++
		s.armSweep(ctx)
	case *idleSweep:
		s.sweep = nil
		for _, pid := range s.live {
			ctx.Send(pid, &transport.IdleCheck{})
		}
		s.armSweep(ctx)
	case *actor.Stopping:
		if s.sweep != nil {
			s.sweep.Stop()
		}
	case *Drain:
		for _, pid := range s.live {
			ctx.Send(pid, msg)
		}
	case *stopAll:
		for _, pid := range s.live {
			ctx.Stop(pid)
		}
		s.waiters = append(s.waiters, ctx.Sender())
		s.answerWaiters(ctx)
	case *ended:
		if _, ok := s.live[msg.id]; ok && msg.http {
			s.httpLive--
		}
		delete(s.live, msg.id)
		s.answerWaiters(ctx)
	}
}

// spawn starts a session actor under the guardian. The actor reports its
// end with *ended (cheaper per idle session than Watch, whose watcher set
// every watched actor would carry).
//
// Every session is spawned with the same Props, made once: Props are a few
// hundred bytes that protoactor keeps with each actor, so one per session
// would be a third of an idle session's cost. Its producer hands over the
// session the server made just before; protoactor calls it inside
// SpawnPrefix, on this goroutine (and never again: sessions are resumed
// after a failure, not restarted).
func (s *server) spawn(ctx actor.Context, prefix string, a *session) *actor.PID {
	if s.props == nil {
		s.props = s.opts.exec.sessionProps(func() actor.Actor {
			next := s.next
			s.next = nil
			return next
		}, actor.WithGuardian(s.guardian))
	}
	s.next = a
	pid := ctx.ActorSystem().Root.SpawnPrefix(s.props, prefix)
	s.live[pid.Id] = pid
	return pid
}

// armSweep starts the sweep timer when HTTP sessions live and none runs.
func (s *server) armSweep(ctx actor.Context) {
	if s.sweep != nil || s.httpLive == 0 {
		return
	}
	self, root := ctx.Self(), ctx.ActorSystem().Root
	s.sweep = time.AfterFunc(s.opts.http.IdleTimeout/4, func() { root.Send(self, &idleSweep{}) })
}

func (s *server) answerWaiters(ctx actor.Context) {
	if len(s.live) > 0 {
		return
	}
	for _, w := range s.waiters {
		ctx.Send(w, &allStopped{})
	}
	s.waiters = nil
}

// sessionGuardian supervises sessions: a panic while one handled a message
// is logged with a correlation id, the session resumes with its state
// intact and answers that request with an internal error carrying the id
// (panicked), so the client's session survives a bug in one request and
// the other sessions never notice. One value per Host: protoactor keys
// guardians by strategy.
type sessionGuardian struct{ log *slog.Logger }

// HandleFailure implements actor.SupervisorStrategy.
func (g *sessionGuardian) HandleFailure(system *actor.ActorSystem, sup actor.Supervisor, child *actor.PID,
	_ *actor.RestartStatistics, reason any, message any) {
	value, stack := panicDetails(reason)
	cid := NewCorrelationID()
	g.log.Error("session failed handling a message; resuming", "session", child.Id, "correlation_id", cid,
		"panic", value, "stack", stack)
	sup.ResumeChildren(child)
	system.Root.Send(child, &panicked{message: message, cid: cid})
}
