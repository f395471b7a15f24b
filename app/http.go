package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"troupe/actors"
	"troupe/config"
	"troupe/mcphttp"
)

// httpFront is the running HTTP transport.
type httpFront struct {
	srv     *http.Server
	handler *mcphttp.Handler
	errs    chan error
	// forwarded counts the requests other nodes forwarded to this one:
	// they reach the handler through the cluster's tunnel, not through
	// srv, so srv.Shutdown does not wait for them.
	forwarded inFlight
}

// inFlight counts requests being served and lets shutdown wait until none
// is.
type inFlight struct {
	mu   sync.Mutex
	n    int
	zero chan struct{} // closed when n drops to 0 (nil: nobody waits)
}

func (f *inFlight) enter() {
	f.mu.Lock()
	f.n++
	f.mu.Unlock()
}

func (f *inFlight) leave() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n--
	if f.n == 0 && f.zero != nil {
		close(f.zero)
		f.zero = nil
	}
}

// wait returns true once no request is in flight, false when ctx ends
// first.
func (f *inFlight) wait(ctx context.Context) bool {
	f.mu.Lock()
	if f.n == 0 {
		f.mu.Unlock()
		return true
	}
	if f.zero == nil {
		f.zero = make(chan struct{})
	}
	zero := f.zero
	f.mu.Unlock()
	select {
	case <-zero:
		return true
	case <-ctx.Done():
		return false
	}
}

// checkHTTPAddress is the check of http.listen before anything listens
// (New runs it, so "config check" refuses what serve refuses):
// HOST:PORT, and not beyond loopback without a bearer token unless the
// config allows it. It reports whether the address is loopback.
func checkHTTPAddress(cfg *config.Config) (bool, error) {
	h := cfg.HTTP
	loopback, err := loopbackAddress(h.Listen)
	if err != nil {
		return false, err
	}
	if _, err := oauthValidator(cfg, nil); err != nil {
		return false, err
	}
	if !loopback && !authRequired(cfg) && !h.AllowUnauthenticatedRemote {
		return false, fmt.Errorf("refusing to serve %s without authentication: it is not a loopback address, so anyone "+
			"who can reach it could run tools; set a token (--bearer-token-env NAME or http.auth.bearer_token = \"${NAME}\") "+
			"or pass --allow-unauthenticated-remote", h.Listen)
	}
	return loopback, nil
}

// startHTTP listens and serves in the background. It refuses a
// non-loopback address without a bearer token unless the config allows it.
// /metrics and /status are served beside MCP, behind its checks and token,
// when obs is not nil and metrics.listen does not serve them.
// A cluster node's front (node not nil) forwards requests for sessions
// other nodes own, and serves those they forward to it.
func startHTTP(cfg *config.Config, host *actors.Host, obs *observing, log *slog.Logger, node ClusterNode) (*httpFront, error) {
	h := cfg.HTTP
	// Decide before binding: a refused address is never listened on.
	loopback, err := checkHTTPAddress(cfg)
	if err != nil {
		return nil, err
	}
	if !loopback && !authRequired(cfg) {
		log.Warn("serving HTTP on a non-loopback address WITHOUT authentication: anyone who can reach it can run tools",
			"addr", h.Listen)
	}
	ln, err := net.Listen("tcp", h.Listen)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", h.Listen, err)
	}
	onRefused, admin := obs.httpOptions(cfg)
	var front mcphttp.Cluster
	if node != nil {
		front = node
	}
	handler := mcphttp.New(host, mcphttp.Options{
		Cluster:              front,
		Path:                 h.Path,
		Auth:                 authChain(cfg, log),
		AllowedOrigins:       h.AllowedOrigins,
		CheckHost:            loopback,
		MaxSessions:          h.MaxSessions,
		MaxStatelessRequests: h.MaxStatelessRequests,
		MaxSubscriptions:     h.MaxSubscriptions,
		MaxBodyBytes:         int64(h.MaxBodyBytes),
		KeepAlive:            h.KeepaliveInterval,
		WriteTimeout:         h.WriteTimeout,
		Logger:               log,
		OnRefused:            onRefused,
		Admin:                admin,
	})
	f := &httpFront{
		srv: &http.Server{
			Handler:           handler,
			ReadHeaderTimeout: h.ReadHeaderTimeout,
			ReadTimeout:       h.ReadTimeout,
			IdleTimeout:       2 * time.Minute,
			MaxHeaderBytes:    64 << 10,
			ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
		},
		handler: handler,
		errs:    make(chan error, 1),
	}
	if node != nil {
		node.Serve(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			f.forwarded.enter()
			defer f.forwarded.leave()
			handler.ServeForwarded(w, r)
		}))
	}
	go func() {
		if err := f.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			f.errs <- err
		}
	}()
	log.Info("serving MCP over HTTP", "url", "http://"+ln.Addr().String()+h.Path,
		"auth", map[bool]string{true: "bearer token", false: "none"}[authRequired(cfg)])
	return f, nil
}

// failed reports a server that stopped on its own; nil when not serving.
func (f *httpFront) failed() <-chan error {
	if f == nil {
		return nil
	}
	return f.errs
}

// shutdown waits for open requests and streams to finish (the sessions are
// draining, so they end), up to timeout.
func (f *httpFront) shutdown(timeout time.Duration, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := f.srv.Shutdown(ctx); err != nil {
		log.Warn("HTTP shutdown incomplete; closing", "err", err)
		_ = f.srv.Close()
	}
	// Calls other nodes' fronts forwarded here are answered before the
	// sessions are closed under them (the node leaves the cluster after).
	if !f.forwarded.wait(ctx) {
		log.Warn("forwarded requests still running at the end of the grace; closing")
	}
}

// loopbackAddress reports whether host:port names only this machine's
// loopback interface. An empty host, 0.0.0.0 or [::] (every interface) and
// any name other than localhost count as not loopback.
func loopbackAddress(hostport string) (bool, error) {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		return false, fmt.Errorf("http.listen %q: want host:port: %w", hostport, err)
	}
	if host == "localhost" {
		return true, nil
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback(), nil
}
