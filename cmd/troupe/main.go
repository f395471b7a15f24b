// Command troupe is an MCP tool server: it serves tools to Codex and other
// MCP clients over stdio, from an actor runtime with supervisor trees.
//
//	troupe serve [--workspace DIR] [--http HOST:PORT [--stdio]] [--log-level LEVEL] [--log-format text|json] [-c key=value]...
//	troupe version
//
// Without --http, troupe serves MCP on stdin/stdout; with it, over
// streamable HTTP (and on stdio too when --stdio is given). On stdio,
// stdout carries protocol messages only: everything else, logs included,
// goes to stderr.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"os/signal"
	"runtime/debug"
	"slices"
	"strings"
	"syscall"
	"time"

	"troupe/actors"
	"troupe/config"
	"troupe/logging"
	"troupe/protocol"
	"troupe/sandbox"
	"troupe/tools"
	"troupe/tools/command"
	"troupe/tools/docs"
	"troupe/tools/repo"
)

// version is set at link time (-ldflags "-X main.version=v1.2.3"); without
// it the module version from the build info is used.
var version = ""

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

const usage = `troupe: an MCP tool server

Usage:
  troupe serve [flags]    serve MCP over stdin/stdout (or HTTP with --http)
  troupe config check     validate the configuration and print it, secrets masked
  troupe tools [--json]   list the tools troupe serves, with their metadata
  troupe codex-config     print the [mcp_servers.troupe] block for ~/.codex/config.toml
  troupe version          print the version
  troupe help             show this help

Run "troupe serve --help" for the serve flags.
`

func run(args []string, stdin io.Reader, stdout, stderr *os.File) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "serve":
		return serve(args[1:], stdin, stdout, stderr)
	case "config":
		return configCommand(args[1:], stdout, stderr)
	case "tools":
		return toolsCommand(args[1:], stdout, stderr)
	case "codex-config":
		return codexConfigCommand(args[1:], stdout, stderr)
	case "audit":
		return auditCommand(args[1:], stdout, stderr)
	case "version", "--version", "-version":
		fmt.Fprintln(stdout, "troupe", buildVersion())
		return 0
	case "help", "--help", "-h", "-help":
		fmt.Fprint(stdout, usage)
		return 0
	}
	fmt.Fprintf(stderr, "troupe: unknown command %q\n\n%s", args[0], usage)
	return 2
}

func buildVersion() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
}

// multiFlag collects a repeatable flag.
type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(s string) error { *m = append(*m, s); return nil }

func serve(args []string, stdin io.Reader, stdout, stderr *os.File) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	workspace := fs.String("workspace", "", "root directory every file tool is confined to (default: server.workspace, else the current directory)")
	configFile := fs.String("config", "", "config file (default: $TROUPE_CONFIG, else ~/.config/troupe/config.toml if it exists)")
	logLevel := fs.String("log-level", "", "log level: debug, info, warn, error (default from config: info)")
	logFormat := fs.String("log-format", "", "log format: text or json (default from config: text)")
	httpAddr := fs.String("http", "", "serve streamable HTTP on HOST:PORT (e.g. 127.0.0.1:8080)")
	withStdio := fs.Bool("stdio", false, "with --http: serve stdio as well")
	tokenEnv := fs.String("bearer-token-env", "", "require this environment variable's value as the HTTP bearer token")
	allowRemote := fs.Bool("allow-unauthenticated-remote", false, "allow --http on a non-loopback address without a bearer token (unsafe)")
	var overrides multiFlag
	fs.Var(&overrides, "c", "override a config key: -c key=value (value parsed as TOML); repeatable")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "troupe serve: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	loadOpts := config.Options{File: *configFile, Overrides: overrides}
	cfg, err := config.Load(loadOpts)
	if err != nil {
		fmt.Fprintln(stderr, "troupe:", err)
		return 2
	}
	if *logLevel != "" {
		cfg.Logging.Level = *logLevel
	}
	if *logFormat != "" {
		cfg.Logging.Format = *logFormat
	}
	if *httpAddr != "" {
		cfg.HTTP.Listen = *httpAddr
	}
	if *allowRemote {
		cfg.HTTP.AllowUnauthenticatedRemote = true
	}
	if *tokenEnv != "" {
		tok, ok := os.LookupEnv(*tokenEnv)
		if !ok || tok == "" {
			fmt.Fprintf(stderr, "troupe: --bearer-token-env %s: the variable is not set\n", *tokenEnv)
			return 2
		}
		cfg.HTTP.Auth.BearerToken = tok
	}
	serveStdio := cfg.HTTP.Listen == "" || *withStdio
	var level slog.LevelVar
	handler, err := logging.New(stderr, logging.Options{Level: cfg.Logging.Level, Format: cfg.Logging.Format, Var: &level})
	if err != nil {
		fmt.Fprintln(stderr, "troupe:", err)
		return 2
	}
	log := slog.New(handler)
	// Libraries that use the log package or slog's default must not reach
	// stdout either.
	slog.SetDefault(log)

	// The protocol gets a private copy of stdout, and fd 1 is pointed at
	// stderr: whatever else writes to stdout (a stray print in a library)
	// lands in the log instead of corrupting the stream.
	var protoOut *os.File
	if serveStdio {
		if protoOut, err = reserveStdout(stdout, stderr); err != nil {
			log.Error("cannot reserve stdout for the protocol", "err", err)
			return 1
		}
	}

	dir := *workspace
	if dir == "" {
		dir = cfg.Server.Workspace
	}
	if dir == "" {
		if dir, err = os.Getwd(); err != nil {
			log.Error("cannot determine the current directory", "err", err)
			return 1
		}
	}
	ws, err := sandbox.OpenWorkspace(dir)
	if err != nil {
		log.Error("cannot open the workspace", "err", err)
		return 1
	}
	defer ws.Close()

	registry, err := buildRegistry(cfg, ws, log)
	if err != nil {
		log.Error("cannot build the tool registry", "err", err)
		return 1
	}

	host := actors.NewHost(actors.Options{
		Session: actors.SessionOptions{
			ServerInfo: protocol.Implementation{
				Name: cfg.Server.Name, Title: "troupe", Version: buildVersion(),
				Description: "An MCP tool server on an actor runtime: workspace tools behind one sandbox.",
			},
			Instructions: cfg.Server.Instructions,
			Registry:     registry,
			PageSize:     cfg.Limits.PageSize,
			MaxInFlight:  cfg.Limits.MaxInFlight,
			CallTimeout:  cfg.Limits.CallTimeout,
		},
		MaxLineBytes: cfg.Limits.MaxLineBytes,
		Grace:        cfg.Limits.ShutdownGrace,
		HTTP: actors.HTTPOptions{
			IdleTimeout:  cfg.HTTP.SessionIdleTimeout,
			StreamEvents: cfg.HTTP.StreamBufferEvents,
			StreamBytes:  cfg.HTTP.StreamBufferBytes,
		},
		Logger:        log,
		RuntimeLogger: slog.New(warnOnly{handler}),
	})
	_, rgErr := exec.LookPath("rg")
	log.Info("troupe starting", "version", buildVersion(), "tools", registry.Len(),
		"workspace", ws.Dir(), "search", map[bool]string{true: "rg", false: "built-in"}[rgErr == nil])

	sigs, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	var stdioDone <-chan struct{}
	if serveStdio {
		conn, err := host.ServeStream(stdin, protoOut)
		if err != nil {
			log.Error("cannot serve stdio", "err", err)
			return 1
		}
		stdioDone = conn.Done()
		log.Info("serving MCP on stdio")
	}
	var web *httpFront
	if cfg.HTTP.Listen != "" {
		if web, err = startHTTP(cfg, host, log); err != nil {
			log.Error("cannot serve HTTP", "err", err)
			host.Close(5 * time.Second)
			return 1
		}
	}

	// Reload on edits of the config file and on SIGHUP. Flags given on the
	// command line keep winning: they are re-applied to each reload.
	flagsOver := func(c *config.Config) {
		if *logLevel != "" {
			c.Logging.Level = *logLevel
		}
		if *tokenEnv != "" {
			c.HTTP.Auth.BearerToken = cfg.HTTP.Auth.BearerToken
		}
	}
	watchCtx, stopWatch := context.WithCancel(context.Background())
	defer stopWatch()
	watcher := config.NewWatcher(cfg, loadOpts, 0, func(next *config.Config) {
		flagsOver(next)
		applyReload(cfg, next, ws, host, web, &level, log)
	}, func(err error) {
		log.Error("config reload failed; keeping the last good configuration", "err", err)
	})
	go func() {
		if err := watcher.Run(watchCtx); err != nil {
			log.Warn("config file is not watched; SIGHUP still reloads", "err", err)
		}
	}()
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	go func() {
		for {
			select {
			case <-hup:
				log.Info("SIGHUP: reloading the configuration")
				watcher.Reload()
			case <-watchCtx.Done():
				return
			}
		}
	}()

	select {
	case <-stdioDone: // nil, never ready, when not serving stdio
		log.Info("stdin closed")
		if web != nil {
			log.Info("still serving HTTP until a signal")
			<-sigs.Done()
		}
	case <-sigs.Done():
		log.Info("signal received; finishing calls in flight", "grace", cfg.Limits.ShutdownGrace)
	case err := <-web.failed():
		log.Error("HTTP server failed", "err", err)
	}
	if web != nil {
		web.handler.StopAccepting()
	}
	host.Drain()
	deadline := time.After(cfg.Limits.ShutdownGrace + 5*time.Second)
	if stdioDone != nil {
		select {
		case <-stdioDone:
		case <-deadline:
			log.Warn("stdio did not finish in time; exiting anyway")
		}
	}
	if web != nil {
		web.shutdown(cfg.Limits.ShutdownGrace+5*time.Second, log)
	}
	if !host.Close(5 * time.Second) {
		log.Warn("some tool calls did not stop in time")
	}
	return 0
}

// warnOnly raises a handler's threshold to warn; protoactor logs dead
// letters at info, and late replies to cancelled calls produce them by design.
type warnOnly struct{ slog.Handler }

func (w warnOnly) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelWarn && w.Handler.Enabled(ctx, l)
}

func (w warnOnly) WithAttrs(attrs []slog.Attr) slog.Handler {
	return warnOnly{w.Handler.WithAttrs(attrs)}
}

func (w warnOnly) WithGroup(name string) slog.Handler { return warnOnly{w.Handler.WithGroup(name)} }

// configCommand is "troupe config check [--config PATH] [-c key=value]...":
// it loads the configuration as serve would, and prints the effective
// result with secrets masked, or the first problem found.
func configCommand(args []string, stdout, stderr *os.File) int {
	if len(args) == 0 || args[0] != "check" {
		fmt.Fprintln(stderr, "usage: troupe config check [--config PATH] [-c key=value]...")
		return 2
	}
	fs := flag.NewFlagSet("config check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	configFile := fs.String("config", "", "config file (default: $TROUPE_CONFIG, else ~/.config/troupe/config.toml if it exists)")
	var overrides multiFlag
	fs.Var(&overrides, "c", "override a config key: -c key=value; repeatable")
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	cfg, err := config.Load(config.Options{File: *configFile, Overrides: overrides})
	if err != nil {
		fmt.Fprintln(stderr, "troupe:", err)
		return 1
	}
	out, err := cfg.Effective()
	if err != nil {
		fmt.Fprintln(stderr, "troupe:", err)
		return 1
	}
	_, _ = stdout.Write(out)
	return 0
}

// buildRegistry registers every tool troupe serves, with where it comes
// from, applies [tools] allow/deny, and warns about names Codex would
// change.
func buildRegistry(cfg *config.Config, ws *sandbox.Workspace, log *slog.Logger) (*tools.Registry, error) {
	var regs []tools.Registration
	firstParty := map[string]any{
		tools.MetaRequiresApproval: false,
		tools.MetaSandboxProfile:   "none", // in-process, confined to the workspace by os.Root
		tools.MetaDefaultTimeoutMs: cfg.Limits.CallTimeout.Milliseconds(),
		tools.MetaAllowsStreaming:  false,
		tools.MetaSideEffects:      []string{},
		tools.MetaVersion:          buildVersion(),
		tools.MetaCwd:              ".",
		tools.MetaEnvKeys:          []string{},
		tools.MetaSource:           "first-party",
	}
	for _, t := range repo.Tools(ws, repo.Options{}) {
		regs = append(regs, tools.Registration{Tool: tools.WithMeta(t, firstParty), Source: "first-party"})
	}
	fetch, err := docs.Tool(docs.Options{AllowedDomains: cfg.Docs.AllowedDomains})
	if err != nil {
		return nil, fmt.Errorf("docs.allowed_domains: %w", err)
	}
	fetchMeta := maps.Clone(firstParty)
	fetchMeta[tools.MetaSideEffects] = []string{"network"}
	regs = append(regs, tools.Registration{Tool: tools.WithMeta(fetch, fetchMeta), Source: "first-party"})
	if cfg.Features.EnableMcpServerSurface {
		cmds, err := commandTools(cfg, ws)
		if err != nil {
			return nil, err
		}
		regs = append(regs, cmds...)
	}
	reg, err := tools.Build(regs, tools.Policy{Allow: cfg.Tools.Allow, Deny: cfg.Tools.Deny})
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, reg.Len())
	page, _ := reg.Page(0, reg.Len())
	for _, t := range page {
		names = append(names, t.Name)
	}
	for _, w := range tools.CodexNameWarnings(cfg.Server.Name, names) {
		log.Warn("tool name: " + w)
	}
	for _, r := range regs {
		// First-party names are documented with their Codex form; a name
		// someone configured deserves a word when Codex will show another.
		if name := r.Tool.Spec().Name; r.Source != "first-party" && tools.CodexName(name) != name {
			log.Warn("tool name: Codex will show it under another name", "tool", name, "codex_name", tools.CodexName(name), "defined_by", r.Source)
		}
	}
	return reg, nil
}

// applyReload puts a reloaded configuration into force: the tool registry
// (sessions get list_changed when their list changes; calls in flight keep
// theirs), the log level and the HTTP bearer token. Keys that only take
// effect at start are reported, not applied.
func applyReload(cur, next *config.Config, ws *sandbox.Workspace, host *actors.Host, web *httpFront,
	level *slog.LevelVar, log *slog.Logger) {
	reg, err := buildRegistry(next, ws, log)
	if err != nil {
		log.Error("config reload: the new tool set is invalid; keeping the last good configuration", "err", err)
		return
	}
	host.SetRegistry(reg)
	if l, err := logging.ParseLevel(next.Logging.Level); err == nil {
		level.Set(l)
	}
	if web != nil {
		web.handler.SetBearerToken(next.HTTP.Auth.BearerToken)
	}
	if next.Limits != cur.Limits || next.HTTP.Listen != cur.HTTP.Listen || next.HTTP.Path != cur.HTTP.Path ||
		next.Server.Workspace != cur.Server.Workspace || next.Logging.Format != cur.Logging.Format {
		log.Warn("config reload: [limits], http.listen, http.path, server.workspace and logging.format take effect at the next start")
	}
	log.Info("configuration reloaded", "tools", reg.Len())
}

// commandTools builds the [mcp.<name>] tools, in name order.
func commandTools(cfg *config.Config, ws *sandbox.Workspace) ([]tools.Registration, error) {
	where := "the config"
	if cfg.File != "" {
		where = cfg.File
	}
	var regs []tools.Registration
	for _, name := range slices.Sorted(maps.Keys(cfg.Mcp)) {
		t := cfg.Mcp[name]
		approval := true // command tools ask unless configured otherwise
		if t.RequiresApproval != nil {
			approval = *t.RequiresApproval
		}
		tool, err := command.New(command.Definition{
			Name: name, DisplayName: t.DisplayName, Description: t.Description,
			Command: t.Command, Args: t.Args, Cwd: t.Cwd, Env: t.Env,
			InputSchema: t.InputSchemaJSON(), OutputSchema: t.OutputSchemaJSON(),
			Timeout: time.Duration(t.TimeoutMs) * time.Millisecond, Streaming: t.Streaming,
			SideEffects: t.SideEffects, Version: t.Version, RequiresApproval: approval,
			SandboxProfile: t.SandboxProfile, AllowNetwork: t.AllowNetwork,
		}, ws.Dir())
		if err != nil {
			return nil, fmt.Errorf("[mcp.%q] in %s: %w", name, where, err)
		}
		envKeys := slices.Sorted(maps.Keys(t.Env))
		cwd := t.Cwd
		if cwd == "" {
			cwd = "."
		}
		regs = append(regs, tools.Registration{
			Tool: tools.WithMeta(tool, map[string]any{
				tools.MetaCwd: cwd, tools.MetaEnvKeys: envKeys, tools.MetaSource: "config",
			}),
			Source: fmt.Sprintf("[mcp.%q] in %s", name, where),
		})
	}
	return regs, nil
}
