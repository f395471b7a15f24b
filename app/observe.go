package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"troupe/actors"
	"troupe/config"
	"troupe/mcphttp/origin"
	"troupe/observe"
	"troupe/observe/status"
	"troupe/observe/tracing"
	"troupe/pins"
	"troupe/sandbox"
	"troupe/spool"
	"troupe/tools"
	"troupe/tools/codexagent"
)

// observing is what lets operators see inside the App: the Hub (metrics,
// the live view, the spans), the tracer it starts spans with, and the
// handler of /metrics and /status. The Hub's callbacks read the spool
// budget and the downstream servers of the current Run through the atomic
// pointers, which Run sets and clears.
//
// A nil *observing is observing off: troupe serves stdio only, with no
// metrics.listen and no tracing.endpoint, so nobody could read what a Hub
// would record, and the actors get no Observer at all.
type observing struct {
	hub    *observe.Hub
	tracer *tracing.Tracer // nil: tracing off
	admin  *status.Handler

	spool atomic.Pointer[spool.Budget]
	ds    atomic.Pointer[downstreams]
	// exposed counts each server's tools in the registry in force
	// (setTools), for the page's "3 of 14".
	exposed atomic.Pointer[map[string]int]
	// gateway are the gateway's tools (prompts.get, …), labelled by name
	// in the metrics beside the registry's; set before serving.
	gateway atomic.Pointer[tools.Registry]
	// app is the App whose pins the page lists and accepts (setApp);
	// nil: none.
	app atomic.Pointer[App]

	shutdown sync.Once
	log      *slog.Logger
}

// observed reports whether cfg gives anyone a view of what the Hub
// records: the HTTP listener (which serves /metrics and /status), a
// metrics.listen address, or a tracing collector (tracing.endpoint, or
// the standard OTEL_EXPORTER_OTLP_*ENDPOINT variables).
func observed(cfg *config.Config) bool {
	if cfg.HTTP.Listen != "" || cfg.Metrics.Listen != "" {
		return true
	}
	endpoint, _ := tracing.ResolveEndpoint(cfg.Tracing.Endpoint, nil)
	return endpoint != ""
}

// newObserving makes the Hub and the tracer for cfg; nil when cfg gives
// nobody a view (observed).
func newObserving(cfg *config.Config, version string, log *slog.Logger) (*observing, error) {
	if !observed(cfg) {
		return nil, nil
	}
	tracer, err := tracing.New(tracing.Options{Endpoint: cfg.Tracing.Endpoint, ServiceVersion: version, Logger: log})
	if err != nil {
		return nil, err
	}
	o := &observing{tracer: tracer, log: log}
	o.hub = observe.New(observe.Options{
		Version:     version,
		Tracer:      tracer,
		SpoolBytes:  o.spoolBytes,
		Downstreams: o.downstreams,
		Held:        o.held,
	})
	o.admin = status.New(o.hub, status.Options{Logger: log, Accept: o.accept})
	return o, nil
}

// setCluster tells the views that this process is a cluster node: the
// page shows the members and each session's owner (the sessions a node
// lists are its own), and the metrics carry the node's member id.
func (o *observing) setCluster(n ClusterNode) {
	if o == nil || n == nil {
		return
	}
	o.hub.SetCluster(observe.Cluster{Node: n.Self(), Status: n.Info})
}

// spoolBytes is the size of every session's spool files together (0
// while Run does not run: nothing is spooled).
func (o *observing) spoolBytes() int64 {
	if b := o.spool.Load(); b != nil {
		return b.Used()
	}
	return 0
}

// downstreams is the state of each running downstream server, for the
// status page.
func (o *observing) downstreams() []observe.DownstreamStatus {
	ds := o.ds.Load()
	if ds == nil {
		return []observe.DownstreamStatus{}
	}
	servers := ds.snapshot()
	out := make([]observe.DownstreamStatus, 0, len(servers))
	for _, s := range servers {
		st := observe.DownstreamStatus{Name: s.name, State: s.state, Tools: len(s.tools)}
		if exposed := o.exposed.Load(); exposed != nil {
			st.Exposed = (*exposed)[s.name]
		}
		if s.err != nil {
			st.Err = s.err.Error()
		}
		out = append(out, st)
	}
	return out
}

// setApp names the App whose held tools the page lists and accepts.
func (o *observing) setApp(a *App) {
	if o != nil {
		o.app.Store(a)
	}
}

// held lists the held downstream tools and prompts for the status page.
func (o *observing) held() []observe.HeldInfo {
	a := o.app.Load()
	if a == nil {
		return nil
	}
	items, err := a.HeldPins(context.Background())
	if err != nil {
		o.log.Warn("status page: the pins cannot be read", "err", err)
		return nil
	}
	out := make([]observe.HeldInfo, 0, len(items))
	for _, h := range items {
		out = append(out, observe.HeldInfo{Server: h.Server, Kind: string(h.Kind), Name: h.Name, Since: h.Held.Since,
			Summary: h.Change.Summary(), Diff: h.Change.Lines, Hash: h.Held.Hash})
	}
	return out
}

// accept is the status page's Accept: the App pins the version shown.
func (o *observing) accept(ctx context.Context, acc status.Accept) error {
	a := o.app.Load()
	if a == nil {
		return fmt.Errorf("%s %s of server %s: %w", acc.Kind, acc.Name, acc.Server, pins.ErrNothingHeld)
	}
	_, err := a.AcceptHeld(ctx, acc.Server, acc.Kind, acc.Name, acc.Hash, acc.By)
	return err
}

// observer is the actors' Observer: the Hub, or a nil interface (never a
// nil *Hub in an interface) when observing is off, so the actors skip
// every call.
func (o *observing) observer() actors.Observer {
	if o == nil {
		return nil
	}
	return o.hub
}

// sandboxObserver is the sandbox's StartObserver, nil when observing is
// off.
func (o *observing) sandboxObserver() sandbox.StartObserver {
	if o == nil {
		return nil
	}
	return o.hub
}

// httpOptions are what the MCP listener needs of the Hub: its refusal
// counter and, unless metrics.listen serves them elsewhere, the operators'
// paths.
func (o *observing) httpOptions(cfg *config.Config) (onRefused func(int), admin http.Handler) {
	if o == nil {
		return nil, nil
	}
	if cfg.Metrics.Listen != "" {
		return o.hub.HTTPRefused, nil
	}
	return o.hub.HTTPRefused, o.admin
}

// run tells the Hub's callbacks where the current Run keeps its spool
// budget and its downstream servers (nil, nil when Run ends).
func (o *observing) run(budget *spool.Budget, ds *downstreams) {
	if o == nil {
		return
	}
	o.spool.Store(budget)
	o.ds.Store(ds)
}

// setTools tells the Hub the tools of reg, each with its source: the
// downstream server's name for a proxied tool, "[codex]" for Codex's,
// "first-party" for the rest (troupe's own and the [mcp.<name>] command
// tools, which run in troupe's sandbox). Only these names become metric
// labels.
func (o *observing) setTools(reg *tools.Registry) {
	if o == nil || reg == nil {
		return
	}
	page, _ := reg.Page(0, reg.Len())
	sources := make(map[string]string, len(page))
	// A held tool's refused calls are counted under its name too.
	for name, meta := range reg.HeldSources() {
		if server, ok := strings.CutPrefix(meta, "mcp_servers."); ok {
			sources[name] = server
		}
	}
	for _, t := range page {
		source := "first-party"
		if e, ok := reg.Lookup(t.Name); ok {
			meta, _ := e.Spec().Meta[tools.MetaSource].(string)
			switch server, proxied := strings.CutPrefix(meta, "mcp_servers."); {
			case proxied:
				source = server
			case meta == "" && (t.Name == codexagent.NameCodex || t.Name == codexagent.NameReply):
				source = "[codex]"
			}
		}
		sources[t.Name] = source
	}
	if gw := o.gateway.Load(); gw != nil {
		page, _ := gw.Page(0, gw.Len())
		for _, t := range page {
			sources[t.Name] = "first-party"
		}
	}
	o.hub.SetTools(sources)
	exposed := exposedPerServer(reg)
	o.exposed.Store(&exposed)
}

// close flushes the spans not yet sent and stops the exporter, once: Run
// calls it after the host has closed (the last calls' spans have ended),
// Close in case Run never ran.
func (o *observing) close() {
	if o == nil {
		return
	}
	o.shutdown.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := o.tracer.Shutdown(ctx); err != nil {
			o.log.Warn("tracing: spans were lost at exit", "err", err)
		}
	})
}

// metricsServer is the plain HTTP server of metrics.listen: /metrics and
// /status (with its JSON) only, without the bearer token.
type metricsServer struct {
	srv  *http.Server
	done chan struct{}
}

// startMetrics listens on metrics.listen and serves the operators' paths
// there in the background; nil when metrics.listen is "". It warns when
// the address is not loopback: anyone who reaches it sees the status page
// (tool names, calls, downstream errors). On a loopback address it
// refuses Host headers that are not loopback names, as the MCP endpoint
// does, so a web page cannot read it through DNS rebinding.
func startMetrics(cfg *config.Config, o *observing, log *slog.Logger) (*metricsServer, error) {
	addr := cfg.Metrics.Listen
	if addr == "" || o == nil {
		return nil, nil
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("metrics.listen %q: want host:port: %w", addr, err)
	}
	ip := net.ParseIP(host)
	loopback := host == "localhost" || ip != nil && ip.IsLoopback()
	if !loopback {
		log.Warn("serving /metrics and /status WITHOUT authentication on a non-loopback address: "+
			"anyone who can reach it sees the tools, the calls and the sessions", "addr", addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics.listen: listen on %s: %w", addr, err)
	}
	var handler http.Handler = o.admin
	if loopback {
		handler = loopbackOnly(handler)
	}
	m := &metricsServer{
		srv: &http.Server{
			Handler:           handler,
			ReadHeaderTimeout: cfg.HTTP.ReadHeaderTimeout,
			ReadTimeout:       cfg.HTTP.ReadTimeout,
			WriteTimeout:      cfg.HTTP.WriteTimeout,
			IdleTimeout:       2 * time.Minute,
			MaxHeaderBytes:    64 << 10,
			ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
		},
		done: make(chan struct{}),
	}
	go func() {
		defer close(m.done)
		if err := m.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics server failed; /metrics and /status are gone", "addr", addr, "err", err)
		}
	}()
	log.Info("serving /metrics and /status", "url", "http://"+ln.Addr().String()+"/status")
	return m, nil
}

// stop closes the metrics server and waits for its goroutine; a nil
// server is a no-op.
func (m *metricsServer) stop() {
	if m == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := m.srv.Shutdown(ctx); err != nil {
		_ = m.srv.Close()
	}
	<-m.done
}

// loopbackOnly refuses (403) requests whose Host header is not a loopback
// name.
func loopbackOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, _, err := origin.SplitHostPort(r.Host)
		if err != nil || !origin.LoopbackHost(host) {
			http.Error(w, "Host header is not a loopback name (DNS rebinding protection)", http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}
