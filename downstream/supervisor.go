package downstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// Reconnection and liveness.
const (
	firstBackoff        = 500 * time.Millisecond
	maxBackoff          = 30 * time.Second
	defaultStartup      = 30 * time.Second // Codex's startup_timeout_sec default
	defaultPingInterval = 30 * time.Second
	pingTimeout         = 10 * time.Second
)

// Spec configures one supervised downstream server.
type Spec struct {
	Config Config
	// StartupTimeout bounds connecting, initializing and listing tools
	// (default 30 s).
	StartupTimeout time.Duration
	// PingInterval is how often a connected server is pinged (default
	// 30 s); a server that does not answer is reconnected.
	PingInterval time.Duration
	// Changed is called (from the actor; it must not block) when the
	// server's tool list or state changed, so the registry is rebuilt.
	Changed func()
	// PromptsChanged, when set, is called (from a goroutine; it must not
	// block) when the server says its prompt list changed, and when it
	// connects (its prompts may be new); ResourcesChanged the same for its
	// resources.
	PromptsChanged, ResourcesChanged func()
	// Connected, when set, is called (from the actor; it must not block)
	// each time the server has connected: what was asked of the last
	// connection (resource subscriptions) is to be asked again.
	Connected func()
	// ResourceUpdated, when set, receives the params of the server's
	// notifications/resources/updated (from a goroutine; it must not
	// block).
	ResourceUpdated func(params json.RawMessage)
}

// Runtime is what the supervising actors run on. Their owner (troupe's
// actors.Host) gives it, so that they share its actor system, worker pool
// and panic recording without this package knowing the Host.
type Runtime struct {
	// System is the actor system the actors are spawned in.
	System *actor.ActorSystem
	// Props makes the Props of an actor from its producer; nil uses
	// actor.PropsFromProducer.
	Props func(actor.Producer) *actor.Props
	// Logger receives the servers' logs (each with its "downstream"
	// name); nil discards them.
	Logger *slog.Logger
	// StateChanged, when set, is told each change of a server's state
	// (metrics, the status page). It must not block.
	StateChanged func(server, state string)
	// Stopped, when set, is told when Stop has stopped a server, so an
	// owner that keeps the servers it started (to stop them when it
	// closes) can forget it.
	Stopped func(*Server)
}

// The states of a downstream server.
const (
	StateConnecting = "connecting"
	StateReady      = "ready"
	StateDown       = "down" // waiting to reconnect
	// StateUnauthenticated (auth.go): down because troupe's credential
	// is missing or refused.
)

// Server is the handle of one supervised downstream server: the proxied
// tools call through it (it is a proxy.Server), and it tells what the
// server offers and how it is. Its actor owns the connection; the handle
// only reads what the actor published.
type Server struct {
	name    string
	pid     *actor.PID
	runtime *Runtime

	mu     sync.Mutex
	client *Client
	state  string
	err    error
	tools  []json.RawMessage
	// started is closed when the first attempt to connect has ended
	// (ready or down): AwaitStartup waits for it.
	started     chan struct{}
	startedOnce sync.Once
}

// Name is the server's name in the configuration.
func (d *Server) Name() string { return d.name }

// State is the server's state, the tools it listed last (kept while it
// reconnects, so tool names stay stable), and the last error.
func (d *Server) State() (state string, tools []json.RawMessage, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.state, d.tools, d.err
}

// CallTool forwards a call to the server's current connection.
func (d *Server) CallTool(ctx context.Context, tool string, args json.RawMessage, obs Observer) (json.RawMessage, error) {
	d.mu.Lock()
	c, state, err := d.client, d.state, d.err
	d.mu.Unlock()
	if c == nil {
		return nil, &notConnected{server: d.name, state: state, why: err}
	}
	res, err := c.CallTool(ctx, tool, args, obs)
	var auth *AuthError
	if errors.As(err, &auth) && auth.Status == http.StatusUnauthorized {
		// The credential no longer works (revoked, expired): the
		// connection is of no use, and the server is shown
		// unauthenticated at once, not at the next ping. (A 403 may
		// refuse this tool alone; the connection stays.)
		d.runtime.System.Root.Send(d.pid, &connLost{client: c, err: err})
	}
	return res, err
}

// notConnected is the error of a call to a server that has no
// connection: it is ErrClosed, and says why the last connection failed or
// ended (an *ExitError with the server's stderr, a timeout, a refused
// start), so the caller learns more than "closed".
type notConnected struct {
	server, state string
	why           error // nil before the first attempt has ended
}

func (e *notConnected) Error() string {
	if e.why == nil {
		return fmt.Sprintf("server %s is %s", e.server, e.state)
	}
	return fmt.Sprintf("server %s is %s: %v", e.server, e.state, e.why)
}

func (e *notConnected) Unwrap() []error {
	if e.why == nil {
		return []error{ErrClosed}
	}
	return []error{ErrClosed, e.why}
}

// Stop ends the server's connection and waits for it to close.
func (d *Server) Stop() {
	_ = d.runtime.System.Root.StopFuture(d.pid).Wait()
	if f := d.runtime.Stopped; f != nil {
		f(d)
	}
}

func (d *Server) publish(c *Client, state string, err error, tools []json.RawMessage, setTools bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if f := d.runtime.StateChanged; f != nil && state != d.state {
		f(d.name, state)
	}
	d.client, d.state, d.err = c, state, err
	if setTools {
		d.tools = tools
	}
	if state != StateConnecting {
		d.startedOnce.Do(func() { close(d.started) })
	}
}

// Start starts the actor that connects to one downstream server and keeps
// it connected: it dials (within the startup timeout), lists the tools,
// pings, and on a crash or disconnect reconnects with exponential
// backoff. A server that is down never blocks anything else.
func Start(rt Runtime, spec Spec) *Server {
	if spec.StartupTimeout <= 0 {
		spec.StartupTimeout = defaultStartup
	}
	if spec.PingInterval <= 0 {
		spec.PingInterval = defaultPingInterval
	}
	if spec.Changed == nil {
		spec.Changed = func() {}
	}
	if rt.Props == nil {
		rt.Props = func(p actor.Producer) *actor.Props { return actor.PropsFromProducer(p) }
	}
	if rt.Logger == nil {
		rt.Logger = slog.New(slog.DiscardHandler)
	}
	d := &Server{name: spec.Config.Name, runtime: &rt, state: StateConnecting, started: make(chan struct{})}
	log := rt.Logger.With("downstream", spec.Config.Name)
	if spec.Config.Logger == nil {
		spec.Config.Logger = log
	}
	conn := &supervisor{spec: spec, handle: d, log: log, backoff: firstBackoff}
	d.pid = rt.System.Root.Spawn(rt.Props(func() actor.Actor { return conn }))
	return d
}

// quiet marks the actor's messages, whose loss to a stopped actor is
// expected (a goroutine's report after Stop): protoactor does not log
// them as dead letters.
type quiet struct{}

// IgnoreDeadLetterLogging implements protoactor's marker interface.
func (quiet) IgnoreDeadLetterLogging() {}

// supervisor is the actor of one downstream server. It owns the
// Client; the goroutines that dial, list and ping report back to
// it as messages, so its state changes only in Receive.
type supervisor struct {
	spec    Spec
	handle  *Server
	log     *slog.Logger
	client  *Client
	tools   []json.RawMessage
	backoff time.Duration
	ctx     context.Context
	cancel  context.CancelFunc
	work    sync.WaitGroup // the dial, list, ping and watch goroutines
	timer   *time.Timer

	// A server may send notifications/tools/list_changed as fast as it
	// likes; each must not cost a tools/list. listing is set while one
	// runs, again when a notification came meanwhile (or while there was
	// no connection to list on): when the listing ends, one more is made.
	// So a server has at most one listing in flight and one pending.
	listing, again bool
	// notified is set by the client's reading goroutine when it queues a
	// *relist and cleared by the actor as it takes it: a flood of
	// notifications queues one message, not one each.
	notified atomic.Bool
	// lastErr is why the last connection failed or ended; it stays
	// published while troupe connects again, so the status page and the
	// calls say why the server is not there (nil once it is ready).
	lastErr error
}

// Messages the downstream's goroutines send it.
type (
	dialed struct {
		quiet
		client *Client
		tools  []json.RawMessage
		err    error
	}
	// relist: the server sent notifications/tools/list_changed (one
	// message for any number of them, see supervisor.notified).
	relist     struct{ quiet }
	listedDown struct {
		quiet
		client *Client
		tools  []json.RawMessage
		err    error
	}
	connLost struct {
		quiet
		client *Client
		err    error
	}
	redial   struct{ quiet }
	pingTime struct{ quiet }
)

// Receive implements actor.Actor.
func (dc *supervisor) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *actor.Started:
		dc.ctx, dc.cancel = context.WithCancel(context.Background())
		dc.dial(ctx)
	case *dialed:
		dc.onDialed(ctx, msg)
	case *redial:
		dc.dial(ctx)
	case *relist:
		dc.notified.Store(false)
		dc.again = true
		dc.listAgain(ctx)
	case *listedDown:
		dc.listing = false
		if msg.client == dc.client && msg.err == nil {
			dc.setTools(msg.tools)
		} else if msg.err != nil && msg.client == dc.client {
			dc.log.Warn("downstream: re-listing tools failed", "err", msg.err)
		}
		dc.listAgain(ctx)
	case *pingTime:
		dc.ping(ctx)
	case *pingScheduled:
		if dc.client != nil {
			dc.schedule(ctx, dc.spec.PingInterval, &pingTime{})
		}
	case *connLost:
		if msg.client == dc.client {
			dc.lost(ctx, msg.err)
		}
	case *actor.Stopping:
		dc.cancel()
		if dc.timer != nil {
			dc.timer.Stop()
		}
		if dc.client != nil {
			_ = dc.client.Close()
			dc.client = nil
		}
		dc.handle.publish(nil, StateDown, fmt.Errorf("stopped"), nil, false)
		dc.work.Wait()
	}
}

// goWork runs f in a goroutine the actor waits for when it stops.
func (dc *supervisor) goWork(f func()) {
	dc.work.Add(1)
	go func() {
		defer dc.work.Done()
		f()
	}()
}

func (dc *supervisor) dial(ctx actor.Context) {
	self, root := ctx.Self(), ctx.ActorSystem().Root
	cfg, timeout, base, notified, prompts := dc.spec.Config, dc.spec.StartupTimeout, dc.ctx, &dc.notified, dc.spec.PromptsChanged
	updated, resources := dc.spec.ResourceUpdated, dc.spec.ResourcesChanged
	dc.handle.publish(nil, StateConnecting, dc.lastErr, nil, false)
	dc.goWork(func() {
		dctx, cancel := context.WithTimeout(base, timeout)
		defer cancel()
		c, err := Dial(dctx, cfg, Handlers{
			ToolsChanged: func() {
				if notified.CompareAndSwap(false, true) {
					root.Send(self, &relist{})
				}
			},
			PromptsChanged:   prompts,
			ResourcesChanged: resources,
			ResourceUpdated:  updated,
		})
		var list []json.RawMessage
		if err == nil {
			if list, err = c.ListTools(dctx); err != nil {
				_ = c.Close()
				c = nil
			}
		}
		root.Send(self, &dialed{client: c, tools: list, err: err})
	})
}

func (dc *supervisor) onDialed(ctx actor.Context, msg *dialed) {
	if msg.err != nil {
		state, err := downState(msg.err)
		if state == StateUnauthenticated {
			dc.log.Warn("downstream: troupe's credential is missing or refused; retrying", "err", err, "in", dc.backoff)
		} else {
			dc.log.Warn("downstream: cannot connect; retrying", "err", err, "in", dc.backoff)
		}
		dc.lastErr = err
		dc.handle.publish(nil, state, err, nil, false)
		dc.retryLater(ctx)
		return
	}
	dc.client, dc.backoff, dc.lastErr = msg.client, firstBackoff, nil
	info := msg.client.ServerInfo()
	dc.log.Info("downstream: connected", "server", info.Name, "server_version", info.Version,
		"protocol", msg.client.ProtocolVersion(), "tools", len(msg.tools))
	dc.setTools(msg.tools)
	if f := dc.spec.PromptsChanged; f != nil {
		f()
	}
	if f := dc.spec.ResourcesChanged; f != nil {
		f()
	}
	if f := dc.spec.Connected; f != nil {
		f()
	}
	// A list_changed that came while the dial listed may not be in
	// msg.tools.
	dc.listAgain(ctx)
	c, self, root := msg.client, ctx.Self(), ctx.ActorSystem().Root
	dc.goWork(func() {
		select {
		case <-c.Done():
			root.Send(self, &connLost{client: c, err: c.Err()})
		case <-dc.ctx.Done():
		}
	})
	dc.schedule(ctx, dc.spec.PingInterval, &pingTime{})
}

// setTools publishes the tool list, and tells whoever rebuilds the
// registry when it changed.
func (dc *supervisor) setTools(list []json.RawMessage) {
	changed := !slices.EqualFunc(dc.tools, list, func(a, b json.RawMessage) bool { return string(a) == string(b) })
	dc.tools = list
	dc.handle.publish(dc.client, StateReady, nil, list, true)
	if changed {
		dc.spec.Changed()
	}
}

// listAgain lists the tools when a notification asked for it and no
// listing runs; otherwise the request waits (again stays set) for the
// listing in flight to end or for the next connection.
func (dc *supervisor) listAgain(ctx actor.Context) {
	if !dc.again || dc.listing || dc.client == nil {
		return
	}
	dc.again = false
	dc.list(ctx)
}

// list starts the one listing of the tools in flight.
func (dc *supervisor) list(ctx actor.Context) {
	c := dc.client
	dc.listing = true
	self, root, timeout, base := ctx.Self(), ctx.ActorSystem().Root, dc.spec.StartupTimeout, dc.ctx
	dc.goWork(func() {
		lctx, cancel := context.WithTimeout(base, timeout)
		defer cancel()
		list, err := c.ListTools(lctx)
		root.Send(self, &listedDown{client: c, tools: list, err: err})
	})
}

func (dc *supervisor) ping(ctx actor.Context) {
	c := dc.client
	if c == nil {
		return
	}
	self, root, base := ctx.Self(), ctx.ActorSystem().Root, dc.ctx
	dc.goWork(func() {
		pctx, cancel := context.WithTimeout(base, pingTimeout)
		defer cancel()
		if err := c.Ping(pctx); err != nil && base.Err() == nil {
			root.Send(self, &connLost{client: c, err: fmt.Errorf("no answer to ping: %w", err)})
			return
		}
		root.Send(self, &pingScheduled{})
	})
}

// pingScheduled asks for the next ping after one succeeded.
type pingScheduled struct{ quiet }

// lost handles a connection that ended: calls in flight have already
// failed (the client fails them when it closes); the tools stay listed so
// names stay stable, and the server is dialled again after the backoff.
func (dc *supervisor) lost(ctx actor.Context, err error) {
	state, err := downState(err)
	dc.log.Warn("downstream: connection lost; reconnecting", "err", err, "in", dc.backoff)
	c := dc.client
	dc.client, dc.lastErr = nil, err
	dc.handle.publish(nil, state, err, nil, false)
	dc.goWork(func() { _ = c.Close() })
	dc.retryLater(ctx)
}

// downState is the state of a server whose connection failed with err,
// and the error to show: unauthenticated with the *AuthError alone (its
// hint, without the wrapping that says which request met it) when the
// server wants a credential troupe cannot give, else down with err.
func downState(err error) (string, error) {
	if auth, ok := AsAuthError(err); ok {
		return StateUnauthenticated, auth
	}
	return StateDown, err
}

func (dc *supervisor) retryLater(ctx actor.Context) {
	dc.schedule(ctx, dc.backoff, &redial{})
	dc.backoff = min(2*dc.backoff, maxBackoff)
}

func (dc *supervisor) schedule(ctx actor.Context, d time.Duration, msg any) {
	if dc.timer != nil {
		dc.timer.Stop()
	}
	self, root := ctx.Self(), ctx.ActorSystem().Root
	dc.timer = time.AfterFunc(d, func() { root.Send(self, msg) })
}
