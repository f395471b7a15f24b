package actors

import (
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"troupe/actors/httptransport"
	"troupe/audit"
	"troupe/downstream"
	"troupe/protocol/framing"
	"troupe/redact"
	"troupe/spool"
	"troupe/tools"
)

// Options configure a Host. The zero value serves an empty tool registry
// with default limits.
type Options struct {
	Session SessionOptions
	// MaxLineBytes bounds one message on stream transports (default 4 MiB).
	MaxLineBytes int
	// Grace is how long calls in flight may run on after the input ends or
	// a shutdown starts (default 10 s).
	Grace time.Duration
	// Logger receives troupe's logs; nil discards them.
	Logger *slog.Logger
	// HTTP bounds the state of HTTP sessions.
	HTTP HTTPOptions
	// RuntimeLogger receives protoactor's own logs (dead letters, internal
	// anomalies); nil uses Logger. Give it a higher level than Logger:
	// late replies to cancelled calls land in dead letters by design.
	RuntimeLogger *slog.Logger
	// Audit receives one record per finished or cancelled tool call; nil
	// keeps no audit log. The Host does not close it.
	Audit *audit.Log
	// Secrets are the server's secret values, masked in approval prompts;
	// nil masks nothing but secret-named arguments.
	Secrets *redact.Live
	// MaxTotalSpoolBytes bounds the spool files of all the Host's sessions
	// together (default spool.DefaultMaxTotalBytes); Session.Spool bounds
	// each stream and each session. It makes the budget the sessions'
	// stores share, unless Session.Spool.Shared already names one.
	MaxTotalSpoolBytes int64
	// Observer watches sessions, calls, the audit log and downstream
	// servers (metrics, traces, the status page); nil: nobody.
	Observer Observer

	// deliveries, when set, counts every message any actor of the Host
	// receives (the hop budget's test).
	deliveries *atomic.Int64
}

// Host runs troupe's actor system and serves clients on it.
type Host struct {
	system      *actor.ActorSystem
	server      *actor.PID
	opts        *hostOptions
	log         *slog.Logger
	downstreams sync.Map // *downstream.Server → struct{}: started here, stopped at Close
	closeOnce   sync.Once
	closedOK    bool
	callers     *callerStores // 2026-07-28 HTTP requests' output, per caller; removed at Close
}

// NewHost starts an actor system with the server actor at its top.
func NewHost(o Options) *Host {
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	rlog := o.RuntimeLogger
	if rlog == nil {
		rlog = log
	}
	if o.Grace <= 0 {
		o.Grace = 10 * time.Second
	}
	if o.MaxLineBytes <= 0 {
		o.MaxLineBytes = framing.DefaultMaxLineBytes
	}
	secrets := o.Secrets
	if secrets == nil {
		secrets = &redact.Live{}
	}
	if o.Session.Spool.Shared == nil {
		o.Session.Spool.Shared = spool.NewBudget(o.MaxTotalSpoolBytes)
	}
	httpOpts := o.HTTP.withDefaults()
	callers := newCallerStores(o.Session.SpoolDir, o.Session.Spool, httpOpts.IdleTimeout, log)
	o.Session.callers = callers
	opts := &hostOptions{session: o.Session, maxLineBytes: o.MaxLineBytes,
		exec: newHostDeps(secrets, o.deliveries), http: httpOpts,
		httpLimits: httptransport.Limits{IdleTimeout: httpOpts.IdleTimeout, StreamEvents: httpOpts.StreamEvents, StreamBytes: httpOpts.StreamBytes}}
	opts.exec.grace = o.Grace
	opts.exec.observer = o.Observer
	opts.exec.table = newMethodTable(o.Session.Middleware)
	opts.exec.methodCall = opts.exec.table.besideMCP(o.Session.Middleware)
	system := actor.NewActorSystem(
		actor.WithLoggerFactory(func(s *actor.ActorSystem) *slog.Logger {
			return rlog.With("lib", "protoactor")
		}),
		actor.WithDeadLetterRequestLogging(false),
	)
	if o.Audit != nil {
		var flushed func(int, time.Duration)
		if o.Observer != nil {
			flushed = o.Observer.AuditFlushed
		}
		opts.exec.auditor = audit.NewWriter(o.Audit, log, flushed)
	}
	pid := system.Root.Spawn(opts.exec.props(func() actor.Actor {
		return &server{opts: opts, log: log, guardian: &sessionGuardian{log: log}}
	}))
	return &Host{system: system, server: pid, opts: opts, log: log, callers: callers}
}

// StartDownstream starts the actor that connects to one downstream server
// and keeps it connected (downstream.Start), on the Host's actor system
// and worker pool, reporting its states to the Host's Observer. The Host
// stops it at Close, unless it was stopped before.
func (h *Host) StartDownstream(spec downstream.Spec) *downstream.Server {
	rt := downstream.Runtime{System: h.system, Logger: h.log,
		Props: func(p actor.Producer) *actor.Props { return h.opts.exec.props(p) },
		// Stop forgets it, so a reload that replaces servers leaves none behind.
		Stopped: func(s *downstream.Server) { h.downstreams.Delete(s) }}
	if o := h.opts.exec.observer; o != nil {
		rt.StateChanged = o.DownstreamChanged
	}
	s := downstream.Start(rt, spec)
	h.downstreams.Store(s, struct{}{})
	return s
}

// Conn is one client connection served by a Host.
type Conn struct {
	pid  *actor.PID
	done chan struct{}
}

// Done is closed once the client's session has ended and the output has
// been closed: after the input ends or Drain is called, and calls in flight
// have finished or the grace period has passed.
func (c *Conn) Done() <-chan struct{} { return c.done }

// ServeStream serves one client reading requests from in and writing
// responses to out (for stdio, the process's standard input and output).
func (h *Host) ServeStream(in io.Reader, out io.WriteCloser) (*Conn, error) {
	c := &Conn{done: make(chan struct{})}
	res, err := h.system.Root.RequestFuture(h.server, &serveStream{in: in, out: out, done: c.done}, 10*time.Second).Result()
	if err != nil {
		return nil, fmt.Errorf("start connection: %w", err)
	}
	c.pid = res.(*actor.PID)
	return c, nil
}

// SetRegistry makes reg the tool set of every session, current and new.
// Calls already running finish with the tools they started with; sessions
// whose visible tool list changed get notifications/tools/list_changed.
func (h *Host) SetRegistry(reg *tools.Registry) {
	h.system.Root.Send(h.server, &registryChanged{registry: reg})
}

// Drain starts a graceful shutdown of every connection.
func (h *Host) Drain() {
	h.system.Root.Send(h.server, &Drain{Grace: h.opts.exec.grace})
}

// Close stops the actor tree and waits up to timeout for tool goroutines to
// return (they were cancelled when their invokers stopped). It reports
// whether everything ended in time. Later calls return the first's answer.
func (h *Host) Close(timeout time.Duration) bool {
	h.closeOnce.Do(func() { h.closedOK = h.close(timeout) })
	return h.closedOK
}

// Audit writes a record that is not a call's (a downstream tool's pin
// changed, say) to the audit log, in the same chain and batches as the
// calls'; without an audit log it does nothing.
func (h *Host) Audit(r *audit.Record) {
	if a := h.opts.exec.auditor; a != nil {
		a.Record(r)
	}
}

func (h *Host) close(timeout time.Duration) bool {
	_, _ = h.system.Root.RequestFuture(h.server, &stopAll{}, timeout).Result()
	_ = h.system.Root.StopFuture(h.server).Wait()
	h.callers.close() // no session holds a caller's output any more
	// Sessions are gone, so no call uses a downstream server any more.
	h.downstreams.Range(func(k, _ any) bool {
		k.(*downstream.Server).Stop()
		return true
	})
	if a := h.opts.exec.auditor; a != nil {
		// The records of the calls just stopped are pending: written now.
		a.Close()
	}
	ended := make(chan struct{})
	go func() {
		h.opts.exec.running.Wait()
		close(ended)
	}()
	select {
	case <-ended:
		h.system.Shutdown()
		h.opts.exec.pool.close()
		return true
	case <-time.After(timeout):
		return false
	}
}
