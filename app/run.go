package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"sync"
	"time"

	"troupe/actors"
	"troupe/audit"
	"troupe/config"
	"troupe/gate"
	"troupe/limits"
	"troupe/overrides"
	"troupe/pins"
	"troupe/protocol"
	"troupe/sandbox"
	"troupe/spool"
	"troupe/tools"
)

// RunOptions are what Run serves on and listens to.
type RunOptions struct {
	// Stdin and Stdout carry MCP over stdio; Run closes Stdout when the
	// session ends. A nil Stdout serves no stdio: then http.listen must be
	// set.
	Stdin  io.Reader
	Stdout io.WriteCloser
	// Ready, when set, is called once the transports are up (troupe prints
	// its "waiting for MCP messages" hint on a terminal).
	Ready func()
	// Reload asks for a reload of the configuration with each value
	// received (troupe sends SIGHUP here). Run also reloads when the
	// configuration file changes, loading it as Source says; Overlay, when
	// set, is applied to each reloaded configuration before Reload, so that
	// the command line's flags keep winning.
	Reload  <-chan os.Signal
	Source  config.Options
	Overlay func(*config.Config)
}

// running is what exists while Run runs: the actor runtime, the
// downstream servers and the HTTP front (nil when not serving HTTP).
type running struct {
	host *actors.Host
	// limits bounds each identity's requests and sessions (the sessions'
	// and the HTTP front's one Limiter); a reload sets its rules.
	limits *limits.Limiter
	ds     *downstreams
	gw     *gateway // what a reload offers new sessions (App.offerGateway)
	web    *httpFront
	// rebuild asks the run's rebuilder for a registry build with the
	// servers' tools as they are now (never blocks; requests fold).
	rebuild func()
	// node is this process as a cluster node, nil when it is none: its
	// pins are the cluster's (runPinStores).
	node ClusterNode
	// pinStores carries to the pins' watcher (App.watchPins) each store
	// it is to watch from now on (App.usePins); nil: none.
	pinStores chan pins.Store
}

// shutdownSlack is how long, beyond limits.shutdown_grace, Run waits for
// the transports to finish, and how long Host.Close waits for tool
// goroutines.
const shutdownSlack = 5 * time.Second

// Run serves until the clients are done or ctx ends: on stdio until stdin
// ends (then, when HTTP is served too, until ctx ends), on HTTP until ctx
// ends or the HTTP server fails. It then drains: new requests are refused,
// calls in flight get limits.shutdown_grace to finish, and the rest are
// stopped. While serving, the configuration is reloaded when its file
// changes and on each value of opts.Reload (see Reload). Run returns an
// error when it cannot start serving (the spool, the audit log, stdio, the
// HTTP listener); once serving, failures are logged and Run returns nil.
// Run may be called once per App.
func (a *App) Run(ctx context.Context, opts RunOptions) error {
	cfg, log := a.config(), a.log
	if opts.Stdout == nil && cfg.HTTP.Listen == "" {
		return errors.New("nothing to serve: no stdio and no http.listen")
	}
	// The sessions' spools live in the sandbox's hidden temp root unless
	// configured elsewhere.
	spoolDir := cfg.Output.SpoolDir
	if spoolDir == "" {
		var err error
		if spoolDir, err = sandbox.MakeTempRoot(""); err != nil {
			return fmt.Errorf("cannot make troupe's temp dir: %w", err)
		}
	}
	// The sandbox probes in the background (it starts helper processes);
	// what it found is logged when it is done, while serving starts.
	probeReported := make(chan struct{})
	go func() {
		defer close(probeReported)
		log.Info("process sandbox", "isolation", a.sb.Isolation().String())
		a.warnUnenforceable(cfg, a.registry)
	}()
	defer func() { <-probeReported }()
	auditLog, err := openAudit(cfg, log)
	if err != nil {
		return fmt.Errorf("cannot open the audit log: %w", err)
	}
	if auditLog != nil {
		defer auditLog.Close() // after host.Close: the auditor writes its last batch when it stops
	}

	hostOpts := a.hostOptions(cfg, spoolDir, auditLog)
	lim := newLimiter(cfg)
	if a.obs != nil {
		lim.OnExceeded(a.obs.hub.RateLimited) // troupe_rate_limited_total
	}
	hostOpts.Session.Limits = lim
	gw := a.newGateway()
	if gatewayOffered(cfg) {
		hostOpts.Session.Gateway = gw.reg
		if a.obs != nil {
			a.obs.gateway.Store(gw.reg)
			a.obs.setTools(a.registry)
		}
	}
	host := actors.NewHost(hostOpts)
	closeHost := func() {
		// Folded notifications are dropped, none sent to a closing host.
		gw.notices.stop()
		if !host.Close(shutdownSlack) {
			log.Warn("some tool calls did not stop in time")
		}
		a.methods.WaitSessionsEnded() // the sessions' Codex processes
		gw.wait()                     // unsubscribes after the sessions' ends
		a.obs.close()                 // after the last call's span ended: flush the spans
	}
	_, rgErr := exec.LookPath("rg")
	log.Info("troupe starting", "version", a.opts.Version, "tools", a.registry.Len(),
		"workspace", a.ws.Dir(), "search", map[bool]string{true: "rg", false: "built-in"}[rgErr == nil])

	// The goroutines Run owns (registry rebuilds, the config watcher, the
	// reload requests) stop before Run returns.
	workCtx, stopWork := context.WithCancel(context.Background())
	var work sync.WaitGroup
	stopWorkers := func() {
		stopWork()
		work.Wait()
	}
	defer stopWorkers()

	// A cluster node joins before it serves HTTP: its front must know the
	// cluster from its first request (cluster.go). It joins before the
	// downstream servers connect, too: their tools are compared with the
	// pins the nodes share (pinStoreFor), which the node's store reaches.
	lost := make(chan error, 1)
	node, err := a.joinCluster(cfg, func(err error) {
		select {
		case lost <- err:
		default:
		}
	})
	if err != nil {
		stopWorkers()
		closeHost()
		return err
	}
	if node != nil {
		a.obs.setCluster(node)
		// Approval states and the links to the output of 2026-07-28 calls
		// name the node from now on: the front sends a retry or a read to
		// the node that can serve it (mcphttp/cluster.go).
		host.SetNode(node.Self())
		// Limits count on the cluster's store from now on (before HTTP
		// serves): one owner per identity's bucket, so a limit holds for
		// the cluster, not per node.
		lim.UseStore(node.Limits())
		defer node.Close() // after the front has drained: the node's sessions have ended
	}

	// Downstream servers: each connects on its own; when one's tools
	// change, the registry is rebuilt (a.mu orders that with reloads).
	rebuild := make(chan struct{}, 1)
	ds := a.newDownstreams(host)
	ds.parkTimeout = cfg.Approvals.Timeout
	ds.subs, ds.notices = gw.subs, gw.notices
	ds.changed = func() {
		select {
		case rebuild <- struct{}{}:
		default:
		}
	}
	// The pins are recorded from now on (New's Keeper only read them),
	// and watched: an operator's accept from another process is seen.
	keepPins, watchedPins, err := runPinStores(cfg, node)
	if err != nil {
		closeHost()
		return err
	}
	run := &running{host: host, ds: ds, gw: gw, limits: lim, node: node, rebuild: ds.changed, pinStores: make(chan pins.Store, 1)}
	a.mu.Lock()
	a.run = run
	a.usePins(run, keepPins, watchedPins)
	a.mu.Unlock()
	work.Go(func() { a.watchPins(workCtx, run.pinStores) })
	a.obs.run(hostOpts.Session.Spool.Shared, ds)
	defer func() {
		a.obs.run(nil, nil)
		a.mu.Lock()
		a.run = nil
		a.mu.Unlock()
	}()
	ds.apply(cfg)
	work.Go(func() {
		for {
			select {
			case <-rebuild:
				a.rebuild()
			case <-workCtx.Done():
				return
			}
		}
	})
	if servers := ds.snapshot(); len(servers) > 0 {
		// Clients that list tools once (Codex) should see the servers'
		// tools, and troupe's own in time: wait until each has connected
		// or failed once, within the longest startup timeout and
		// limits.mcp_servers_startup_wait (see downstream.AwaitStartup).
		wait := time.Duration(0)
		for _, s := range servers {
			wait = max(wait, startupTimeout(s.cfg))
		}
		ds.settle(min(wait, cfg.Limits.McpServersStartupWait))
		// Serve what is known now; the rebuild goroutine may not have
		// run yet.
		a.mu.Lock()
		if reg, err := a.buildRegistry(a.cfg, ds.snapshot()); err == nil {
			a.setRegistry(host, reg)
		}
		a.mu.Unlock()
	}

	// The config file is watched from before the first request: an edit
	// made as soon as troupe serves is seen (the watcher runs below).
	watcher := a.newWatcher(opts)
	if err := watcher.Open(); err != nil {
		log.Warn("config file is not watched; SIGHUP still reloads", "err", err)
	}
	defer watcher.Close() // after Run has ended it (or when it never ran)

	var stdioDone <-chan struct{} // nil, never ready, when not serving stdio
	if opts.Stdout != nil {
		conn, err := host.ServeStream(opts.Stdin, opts.Stdout)
		if err != nil {
			stopWorkers()
			closeHost()
			return fmt.Errorf("cannot serve stdio: %w", err)
		}
		stdioDone = conn.Done()
		log.Info("serving MCP on stdio")
	}
	var web *httpFront
	if cfg.HTTP.Listen != "" {
		if web, err = startHTTP(cfg, host, a.obs, log, node, lim); err != nil {
			stopWorkers()
			closeHost()
			return fmt.Errorf("cannot serve HTTP: %w", err)
		}
		a.mu.Lock()
		a.run.web = web
		a.mu.Unlock()
	}
	metrics, err := startMetrics(cfg, a.obs, log)
	if err != nil {
		stopWorkers()
		if web != nil {
			web.handler.StopAccepting()
			web.shutdown(shutdownSlack, log)
		}
		closeHost()
		return fmt.Errorf("cannot serve metrics: %w", err)
	}
	defer metrics.stop() // the status page shows the drain to its end
	if opts.Ready != nil {
		opts.Ready()
	}
	a.watch(workCtx, &work, opts, watcher)

	var runErr error
	select {
	case <-stdioDone:
		log.Info("stdin closed")
		if web != nil {
			log.Info("still serving HTTP until a signal")
			<-ctx.Done()
		}
	case <-ctx.Done():
		log.Info("signal received; finishing calls in flight", "grace", cfg.Limits.ShutdownGrace)
	case err := <-web.failed():
		log.Error("HTTP server failed", "err", err)
	case err := <-lost:
		log.Error("leaving the cluster; finishing calls in flight", "reason", err)
		runErr = fmt.Errorf("left the cluster (%w): start troupe again and it joins as a new node", err)
	}
	stopWorkers() // no reloads while draining
	if web != nil {
		web.handler.StopAccepting()
	}
	host.Drain()
	deadline := time.After(cfg.Limits.ShutdownGrace + shutdownSlack)
	if stdioDone != nil {
		select {
		case <-stdioDone:
		case <-deadline:
			log.Warn("stdio did not finish in time; exiting anyway")
		}
	}
	if web != nil {
		web.shutdown(cfg.Limits.ShutdownGrace+shutdownSlack, log)
	}
	closeHost()
	return runErr
}

// newWatcher is the watcher that reloads the configuration through
// a.Reload.
func (a *App) newWatcher(opts RunOptions) *config.Watcher {
	log := a.log
	return config.NewWatcher(a.config(), opts.Source, a.writable, 0, func(next *config.Config) {
		if opts.Overlay != nil {
			opts.Overlay(next)
			// The flags' bearer token (named "default") beside the new
			// [[auth.tokens]], which Load could not check.
			if err := next.CheckBearerToken(); err != nil {
				logProblems(log, "config reload failed; keeping the last good configuration", err)
				return
			}
		}
		_ = a.Reload(next) // it logs what it did or why not
	}, func(err error) {
		logProblems(log, "config reload failed; keeping the last good configuration", err)
	})
}

// watch runs watcher (reloads on edits of the config file) and reloads on
// each value of opts.Reload, in goroutines counted in work that end with
// ctx.
func (a *App) watch(ctx context.Context, work *sync.WaitGroup, opts RunOptions, watcher *config.Watcher) {
	log := a.log
	work.Go(func() {
		if err := watcher.Run(ctx); err != nil {
			log.Debug("config file is not watched", "err", err) // said at Open, before serving
		}
	})
	if opts.Reload == nil {
		return
	}
	work.Go(func() {
		for {
			select {
			case sig := <-opts.Reload:
				log.Info("reloading the configuration", "signal", sig.String())
				watcher.Reload()
			case <-ctx.Done():
				return
			}
		}
	})
}

// rebuild builds the registry again with the configuration in force and
// the downstream servers' tools as they are now, and puts it into force.
func (a *App) rebuild() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.run == nil {
		return
	}
	reg, err := a.buildRegistry(a.cfg, a.run.ds.snapshot())
	if err != nil {
		a.log.Error("downstream tools changed but the registry cannot be rebuilt", "err", err)
		return
	}
	a.setRegistry(a.run.host, reg)
	a.warnUnenforceable(a.cfg, reg)
}

// setRegistry puts reg into force on host and tells the Hub its tools
// (the only tool names metrics label calls with).
func (a *App) setRegistry(host *actors.Host, reg *tools.Registry) {
	a.obs.setTools(reg)
	host.SetRegistry(reg)
}

// runtimeLog is the actor runtime's log (Options.RuntimeLogger, else
// troupe's).
func (a *App) runtimeLog() *slog.Logger {
	if a.opts.RuntimeLogger != nil {
		return a.opts.RuntimeLogger
	}
	return a.log
}

// hostOptions are the actor runtime's options from cfg.
func (a *App) hostOptions(cfg *config.Config, spoolDir string, auditLog *audit.Log) actors.Options {
	runtimeLog := a.runtimeLog()
	// The spool budget of every session together: the Host enforces it,
	// the Hub reports its use (troupe_spool_bytes).
	limits := spool.Limits{InlineBytes: cfg.Output.InlineBytes, MaxFileBytes: cfg.Output.MaxSpoolBytes,
		MaxStoreBytes: cfg.Output.MaxSessionSpoolBytes, MaxOutputs: cfg.Output.MaxOutputsPerSession,
		Shared: spool.NewBudget(cfg.Output.MaxTotalSpoolBytes)}
	return actors.Options{
		Session: actors.SessionOptions{
			ServerInfo: protocol.Implementation{
				Name: cfg.Server.Name, Title: "troupe", Version: a.opts.Version,
				Description: "An MCP tool server on an actor runtime: workspace tools behind one sandbox.",
			},
			Instructions: cfg.Server.Instructions,
			Registry:     a.registry,
			Methods:      a.methods,
			MethodTools:  a.methodTools,
			PageSize:     cfg.Limits.PageSize,
			MaxInFlight:  cfg.Limits.MaxInFlight,
			CallTimeout:  cfg.Limits.CallTimeout,
			Gate:         gate.Policy{Timeout: cfg.Approvals.Timeout, Trust: cfg.Approvals.Trust},
			Approvals:    a.approvals,
			SpoolDir:     spoolDir,
			Spool:        limits,
			Overrides: overrides.Policy{Allow: cfg.Sessions.AllowOverrides,
				Env: cfg.Sessions.AllowedEnv, Workspace: a.ws},
		},
		Audit:              auditLog,
		Secrets:            a.opts.Secrets,
		MaxLineBytes:       cfg.Limits.MaxLineBytes,
		Grace:              cfg.Limits.ShutdownGrace,
		MaxTotalSpoolBytes: cfg.Output.MaxTotalSpoolBytes,
		HTTP: actors.HTTPOptions{
			IdleTimeout:  cfg.HTTP.SessionIdleTimeout,
			StreamEvents: cfg.HTTP.StreamBufferEvents,
			StreamBytes:  cfg.HTTP.StreamBufferBytes,
		},
		Observer:      a.obs.observer(),
		Logger:        a.log,
		RuntimeLogger: runtimeLog,
	}
}
