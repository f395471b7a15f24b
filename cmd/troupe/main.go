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
	"fmt"
	cmap "github.com/orcaman/concurrent-map"
	"io"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"os/signal"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"troupe/actors"
	"troupe/audit"
	"troupe/config"
	"troupe/gate"
	"troupe/logging"
	"troupe/protocol"
	"troupe/redact"
	"troupe/sandbox"
	"troupe/spool"
	"troupe/tools"
	"troupe/tools/benchmark"
	"troupe/tools/codexagent"
	"troupe/tools/command"
	"troupe/tools/docs"
	"troupe/tools/files"
	"troupe/tools/repo"
)

// version is set at link time (-ldflags "-X main.version=v1.2.3"); without
// it the module version from the build info is used.
var version = ""

func main() {
	if len(os.Args) > 1 && os.Args[1] == sandbox.HelperArg {
		// troupe re-executed as its own sandbox helper: set up the
		// isolation, then become the program (see package sandbox).
		os.Exit(sandbox.HelperMain(os.Args[1:]))
	}
	// protoactor's process registry is 1,024 buckets, each a
	// concurrent-map of SHARD_COUNT locked maps: 32,768 maps by default,
	// 8.5 MB and 8-16 ms of every start (most of start to initialize). The
	// buckets already spread the locks, so one shard each loses nothing.
	// It is the library's own setting and must be made before any map
	// exists: here, first thing, and nowhere else.
	cmap.SHARD_COUNT = 1
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

const usage = `troupe: an MCP tool server

Usage:
  troupe serve [flags]          serve MCP over stdin/stdout (or HTTP with --http)
  troupe config check [flags]   run serve's checks on the configuration; print it, secrets masked
  troupe tools [flags]          list the tools a session sees, with the names Codex shows
  troupe codex-config [flags]   print the [mcp_servers.troupe] block for ~/.codex/config.toml
  troupe audit verify [FILE]    check the audit log's hash chain (default: the configured log)
  troupe bench [MODE] ...       load-test any MCP server (stdio or HTTP)
  troupe version                print the version, VCS revision and build date
  troupe help [COMMAND]         show this help, or a command's

Run "troupe COMMAND --help" for a command's flags and an example.
Exit status: 0 done, 1 a runtime failure, 2 a usage or configuration error.
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
	case "bench":
		return benchCommand(args[1:], stdout, stderr)
	case "version", "--version", "-version":
		return versionCommand(args[1:], stdout, stderr)
	case "help", "--help", "-h", "-help":
		if len(args) > 1 && args[0] == "help" {
			// "troupe help serve" is "troupe serve --help".
			sub := append(slices.Clone(args[1:]), "--help")
			if args[1] == "help" {
				fmt.Fprint(stdout, usage)
				return 0
			}
			return run(sub, stdin, stdout, stderr)
		}
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
	help := serveCommandHelp()
	fs := newFlagSet(help)
	workspace := fs.String("workspace", "", "the root `DIR` every file tool is confined to (default: server.workspace, else the current directory)")
	configFile := fs.String("config", "", "the config `FILE` (default: $TROUPE_CONFIG, else ~/.config/troupe/config.toml if it exists)")
	logLevel := fs.String("log-level", "", "log `LEVEL`: debug, info, warn, error (default from config: info)")
	logFormat := fs.String("log-format", "", "log `FORMAT`: text or json (default from config: text)")
	httpAddr := fs.String("http", "", "serve streamable HTTP on `HOST:PORT` (e.g. 127.0.0.1:8080), at http://HOST:PORT/mcp")
	withStdio := fs.Bool("stdio", false, "with --http: serve stdio as well")
	tokenEnv := fs.String("bearer-token-env", "", "require the value of the environment variable `NAME` as the HTTP bearer token")
	allowRemote := fs.Bool("allow-unauthenticated-remote", false, "allow --http on a non-loopback address without a bearer token (unsafe)")
	cpuProfile := fs.String("cpuprofile", "", "write a pprof CPU profile of the whole run to `FILE`")
	memProfile := fs.String("memprofile", "", "write a pprof allocation profile to `FILE` at exit")
	var overrides multiFlag
	fs.Var(&overrides, "c", "override a config key: -c key=value (value parsed as TOML); repeatable")
	if code, ok := parseFlags(fs, help, args, stdout, stderr); !ok {
		return code
	}
	if fs.NArg() > 0 {
		return usageError(stderr, help, "unexpected argument %q", fs.Arg(0))
	}
	stopProfiles, err := startProfiles(*cpuProfile, *memProfile)
	if err != nil {
		fmt.Fprintln(stderr, "troupe:", err)
		return 2
	}
	defer func() {
		if err := stopProfiles(); err != nil {
			fmt.Fprintln(stderr, "troupe:", err)
		}
	}()
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
	// Every log line passes the redactor: resolved ${NAME} secrets never
	// reach the log, whatever code logs them.
	secrets := &redact.Live{}
	secrets.Store(secretValues(cfg))
	log := slog.New(redact.Handler(handler, secrets))
	// Libraries that use the log package or slog's default must not reach
	// stdout either.
	slog.SetDefault(log)
	// Sandboxed programs run as our uid: they must not read our secrets
	// from /proc/<pid>/environ.
	if err := sandbox.ProtectProcess(); err != nil {
		log.Warn("cannot make the server process non-dumpable", "err", err)
	}

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

	// Every check before serving ("troupe config check" runs the same).
	// Registry builds (at start, when a downstream's tools change, at
	// reloads) log their naming warnings through regLog: each once.
	regLog := tools.WarnOnce(log)
	prep, probs, code := prepare(cfg, *workspace, regLog)
	if prep == nil {
		for _, p := range probs {
			log.Error("refusing to start", "err", p)
		}
		return code
	}
	defer prep.ws.Close()
	ws, sb, registry, runWritable := prep.ws, prep.sb, prep.registry, prep.writable

	// The sessions' spools live in the sandbox's hidden temp root unless
	// configured elsewhere.
	spoolDir := cfg.Output.SpoolDir
	if spoolDir == "" {
		if spoolDir, err = sandbox.MakeTempRoot(""); err != nil {
			log.Error("cannot make troupe's temp dir", "err", err)
			return 1
		}
	}
	// The sandbox probes in the background (it starts helper processes);
	// what it found is logged when it is done, while serving starts.
	probeReported := make(chan struct{})
	go func() {
		defer close(probeReported)
		log.Info("process sandbox", "isolation", sb.Isolation().String())
		warnUnenforceable(cfg, registry, ws, sb, log)
	}()
	defer func() { <-probeReported }()
	auditLog, err := openAudit(cfg, log)
	if err != nil {
		log.Error("cannot open the audit log", "err", err)
		return 1
	}
	if auditLog != nil {
		defer auditLog.Close()
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
			Gate:         gate.Policy{Timeout: cfg.Approvals.Timeout, Trust: cfg.Approvals.Trust},
			Approvals:    prep.approvals,
			SpoolDir:     spoolDir,
			Spool: spool.Limits{InlineBytes: cfg.Output.InlineBytes, MaxFileBytes: cfg.Output.MaxSpoolBytes,
				MaxStoreBytes: cfg.Output.MaxSessionSpoolBytes, MaxOutputs: cfg.Output.MaxOutputsPerSession},
			Overrides: actors.OverridePolicy{Allow: cfg.Sessions.AllowOverrides,
				Env: cfg.Sessions.AllowedEnv, Workspace: ws},
		},
		Audit:              auditLog,
		Secrets:            secrets,
		MaxLineBytes:       cfg.Limits.MaxLineBytes,
		Grace:              cfg.Limits.ShutdownGrace,
		MaxTotalSpoolBytes: cfg.Output.MaxTotalSpoolBytes,
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

	// Downstream servers: each connects on its own; when one's tools
	// change, the registry is rebuilt (regMu orders that with reloads).
	var regMu sync.Mutex
	current := cfg
	rebuild := make(chan struct{}, 1)
	ds := &downstreams{host: host, sb: sb, ws: ws, log: log, parkTimeout: cfg.Approvals.Timeout, changed: func() {
		select {
		case rebuild <- struct{}{}:
		default:
		}
	}}
	ds.apply(cfg)
	rebuildCtx, stopRebuild := context.WithCancel(context.Background())
	rebuilt := make(chan struct{})
	go func() {
		defer close(rebuilt)
		for {
			select {
			case <-rebuild:
				regMu.Lock()
				if reg, err := buildRegistry(current, ws, sb, ds.snapshot(), regLog); err != nil {
					log.Error("downstream tools changed but the registry cannot be rebuilt", "err", err)
				} else {
					host.SetRegistry(reg)
					warnUnenforceable(current, reg, ws, sb, log)
				}
				regMu.Unlock()
			case <-rebuildCtx.Done():
				return
			}
		}
	}()
	defer func() {
		stopRebuild()
		<-rebuilt
	}()
	if servers := ds.snapshot(); len(servers) > 0 {
		// Clients that list tools once (Codex) should see the servers'
		// tools, and troupe's own in time: wait until each has connected
		// or failed once, within the longest startup timeout and
		// limits.mcp_servers_startup_wait (see actors.AwaitStartup).
		wait := time.Duration(0)
		for _, s := range servers {
			wait = max(wait, startupTimeout(s.cfg))
		}
		ds.settle(min(wait, cfg.Limits.McpServersStartupWait))
		// Serve what is known now; the rebuild goroutine may not have
		// run yet.
		regMu.Lock()
		if reg, err := buildRegistry(current, ws, sb, ds.snapshot(), regLog); err == nil {
			host.SetRegistry(reg)
		}
		regMu.Unlock()
	}

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
		if f, ok := stdin.(*os.File); ok && isTerminal(f) {
			// Someone typed "troupe serve": say what it is waiting for.
			fmt.Fprintln(stderr, "troupe is waiting for MCP messages (JSON-RPC) on stdin: an MCP client such as Codex "+
				"starts it this way (see \"troupe codex-config\"). Press Ctrl-D to end, or see \"troupe serve --help\".")
		}
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
	watcher := config.NewWatcher(cfg, loadOpts, runWritable, 0, func(next *config.Config) {
		flagsOver(next)
		regMu.Lock()
		defer regMu.Unlock()
		if applyReload(current, next, ws, sb, ds, host, web, &level, secrets, log, regLog) {
			current = next
		}
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

// problems splits an error that joins several (errors.Join), such as
// config.CheckOwnFiles's, so each is reported on a line of its own.
func problems(err error) []error {
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		return joined.Unwrap()
	}
	return []error{err}
}

// buildRegistry registers every tool troupe serves, with where it comes
// from, applies [tools] allow/deny, and warns about names Codex would
// change.
func buildRegistry(cfg *config.Config, ws *sandbox.Workspace, sb *sandbox.Sandbox, servers []serverTools, log *slog.Logger) (*tools.Registry, error) {
	var regs []tools.Registration
	firstParty := map[string]any{
		tools.MetaDefaultTimeoutMs: cfg.Limits.CallTimeout.Milliseconds(),
		tools.MetaVersion:          buildVersion(),
		tools.MetaCwd:              ".",
		tools.MetaEnvKeys:          []string{},
		tools.MetaSource:           "first-party",
	}
	for _, t := range repo.Tools(ws, repo.Options{Sandbox: sb, Logger: log}) {
		regs = append(regs, tools.Registration{Tool: tools.WithMeta(t, firstParty), Source: "first-party"})
	}
	fetch, err := docs.Tool(docs.Options{AllowedDomains: cfg.Docs.AllowedDomains})
	if err != nil {
		return nil, fmt.Errorf("docs.allowed_domains: %w", err)
	}
	regs = append(regs, tools.Registration{Tool: tools.WithMeta(fetch, firstParty), Source: "first-party"})
	if cfg.Tools.BenchmarkEcho {
		regs = append(regs, tools.Registration{Tool: benchmark.Echo(), Source: "tools.benchmark_echo"})
	}
	for _, t := range files.Tools(ws) {
		regs = append(regs, tools.Registration{Tool: tools.WithMeta(t, firstParty), Source: "first-party"})
	}
	limits := sandboxLimits(cfg)
	if cfg.Shell.Enabled {
		shell, err := command.Shell(command.ShellOptions{Workspace: ws.Dir(), SandboxProfile: cfg.Shell.SandboxProfile,
			AllowNetwork: cfg.Shell.AllowNetwork, Sandbox: sb, Limits: limits, Timeout: cfg.Shell.Timeout,
			KillGrace: cfg.Sandbox.KillGrace})
		if err != nil {
			log.Warn("shell.exec is not served", "err", err)
		} else {
			shellMeta := maps.Clone(firstParty)
			delete(shellMeta, tools.MetaDefaultTimeoutMs) // its own ceiling, from [shell]
			regs = append(regs, tools.Registration{Tool: tools.WithMeta(shell, shellMeta), Source: "first-party"})
		}
	}
	if cfg.Features.EnableMcpServerSurface {
		cmds, err := commandTools(cfg, ws, sb, limits)
		if err != nil {
			return nil, err
		}
		regs = append(regs, cmds...)
		regs = append(regs, codexTools(cfg, ws, log)...)
		regs = dropCollisions(append(regs, proxiedTools(servers, log)...), log)
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
		spec := r.Tool.Spec()
		if spec.Safety.HighRisk && (gate.Policy{Trust: cfg.Approvals.Trust}).Trusts(tools.Spec{Name: spec.Name}) {
			log.Warn("approvals.trust names a high-risk tool; it will still ask a person every time", "tool", spec.Name)
		}
		// First-party names are documented with their Codex form; a name
		// someone configured deserves a word when Codex will show another.
		if name := r.Tool.Spec().Name; r.Source != "first-party" && tools.CodexName(name) != name {
			log.Warn("tool name: Codex will show it under another name", "tool", name, "codex_name", tools.CodexName(name), "defined_by", r.Source)
		}
	}
	return reg, nil
}

// warnUnenforceable logs the tools of reg whose sandbox profile cannot be
// enforced here: their calls will be refused. It waits for the sandbox's
// probe, so serve runs it off the start-up path.
func warnUnenforceable(cfg *config.Config, reg *tools.Registry, ws *sandbox.Workspace, sb *sandbox.Sandbox, log *slog.Logger) {
	limits := sandboxLimits(cfg)
	page, _ := reg.Page(0, reg.Len())
	for _, t := range page {
		e, ok := reg.Lookup(t.Name)
		if !ok {
			continue
		}
		spec := e.Spec()
		if p := spec.Safety.SandboxProfile; p != "" && p != string(sandbox.ProfileNone) {
			if err := sb.Check(sandbox.Policy{Profile: sandbox.Profile(p), Workspace: ws.Dir(),
				AllowNetwork: spec.Safety.AllowNetwork, Limits: limits}); err != nil {
				log.Warn("tool cannot run here: its sandbox profile cannot be enforced; calls will be refused",
					"tool", spec.Name, "reason", err)
			}
		}
	}
}

// applyReload puts a reloaded configuration into force: the tool registry
// (sessions get list_changed when their list changes; calls in flight keep
// theirs), the log level and the HTTP bearer token. Keys that only take
// effect at start are reported, not applied.
func applyReload(cur, next *config.Config, ws *sandbox.Workspace, sb *sandbox.Sandbox, ds *downstreams, host *actors.Host, web *httpFront,
	level *slog.LevelVar, secrets *redact.Live, log, regLog *slog.Logger) bool {
	reg, err := buildRegistry(next, ws, sb, ds.snapshot(), regLog)
	if err != nil {
		log.Error("config reload: the new tool set is invalid; keeping the last good configuration", "err", err)
		return false
	}
	// Servers removed or changed go now, new ones start connecting (their
	// tools arrive with a rebuild once they are up).
	ds.apply(next)
	if again, err := buildRegistry(next, ws, sb, ds.snapshot(), regLog); err == nil {
		reg = again
	}
	secrets.Store(secretValues(next))
	host.SetRegistry(reg)
	warnUnenforceable(next, reg, ws, sb, log)
	if l, err := logging.ParseLevel(next.Logging.Level); err == nil {
		level.Set(l)
	}
	if web != nil {
		web.handler.SetBearerToken(next.HTTP.Auth.BearerToken)
	}
	if next.Limits != cur.Limits || next.HTTP.Listen != cur.HTTP.Listen || next.HTTP.Path != cur.HTTP.Path ||
		next.Server.Workspace != cur.Server.Workspace || next.Logging.Format != cur.Logging.Format ||
		next.Sandbox.Driver != cur.Sandbox.Driver || next.Audit != cur.Audit || next.Output != cur.Output ||
		!slices.Equal(next.Approvals.Trust, cur.Approvals.Trust) || next.Approvals.Timeout != cur.Approvals.Timeout ||
		next.Approvals.StateKey != cur.Approvals.StateKey || !slices.Equal(next.Approvals.PreviousStateKeys, cur.Approvals.PreviousStateKeys) {
		log.Warn("config reload: [limits], [approvals], [audit], [output], sandbox.driver, http.listen, http.path, " +
			"server.workspace and logging.format take effect at the next start")
	}
	log.Info("configuration reloaded", "tools", reg.Len())
	return true
}

// commandTools builds the [mcp.<name>] tools, in name order.
func commandTools(cfg *config.Config, ws *sandbox.Workspace, sb *sandbox.Sandbox, limits sandbox.Limits) ([]tools.Registration, error) {
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
			Sandbox: sb, Limits: limits, KillGrace: cfg.Sandbox.KillGrace,
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

// sandboxLimits are the [sandbox] resource limits of every run.
func sandboxLimits(cfg *config.Config) sandbox.Limits {
	return sandbox.Limits{MaxProcesses: cfg.Sandbox.MaxProcesses, MaxFileBytes: cfg.Sandbox.MaxFileBytes,
		MaxOpenFiles: cfg.Sandbox.MaxOpenFiles, CPUSeconds: cfg.Sandbox.CPUSeconds, MaxMemoryBytes: cfg.Sandbox.MaxMemoryBytes}
}

// openAudit opens the audit log [audit] asks for; nil when it is off.
func openAudit(cfg *config.Config, log *slog.Logger) (*audit.Log, error) {
	if !cfg.Audit.Enabled {
		log.Warn("the audit log is off ([audit] enabled = false)")
		return nil, nil
	}
	path, err := cfg.AuditFile()
	if err != nil {
		return nil, err
	}
	l, err := audit.Open(path, audit.Options{})
	if err != nil {
		return nil, err
	}
	log.Info("audit log", "path", path)
	return l, nil
}

// secretValues is every value of cfg that must never be shown: resolved
// ${NAME} references, the bearer token, and literal values of
// secret-named env variables and headers of tools and servers.
func secretValues(cfg *config.Config) *redact.Redactor {
	values := append([]string{cfg.HTTP.Auth.BearerToken}, cfg.Secrets...)
	for _, t := range cfg.Mcp {
		values = append(values, redact.EnvValues(t.Env)...)
	}
	for _, s := range cfg.McpServers {
		values = append(values, redact.EnvValues(s.Env)...)
		values = append(values, redact.EnvValues(s.HTTPHeaders)...)
	}
	return redact.New(values...)
}

// codexTools are codex and codex-reply, when [codex] is enabled and a
// Codex binary is found; nothing (and a debug line) otherwise.
func codexTools(cfg *config.Config, ws *sandbox.Workspace, log *slog.Logger) []tools.Registration {
	if !cfg.Codex.Enabled {
		return nil
	}
	bin := cfg.Codex.Binary
	if bin == "" {
		found, err := exec.LookPath("codex")
		if err != nil {
			log.Debug("no codex binary on PATH: the codex tools are not offered")
			return nil
		}
		bin = found
	}
	// Codex needs its home (auth, config) and what a CLI needs; nothing
	// else of troupe's environment.
	env := map[string]string{}
	for _, k := range []string{"PATH", "HOME", "CODEX_HOME", "LANG", "LC_ALL", "TMPDIR", "OPENAI_API_KEY", "OPENAI_BASE_URL",
		"SSL_CERT_FILE", "SSL_CERT_DIR", "HTTPS_PROXY", "HTTP_PROXY", "NO_PROXY"} {
		if v, ok := os.LookupEnv(k); ok {
			env[k] = v
		}
	}
	ts, err := codexagent.Tools(codexagent.Options{Binary: bin, Workspace: ws.Dir(), Env: env, Timeout: cfg.Codex.Timeout})
	if err != nil {
		log.Warn("the codex tools are not offered", "binary", bin, "err", err)
		return nil
	}
	var regs []tools.Registration
	for _, t := range ts {
		regs = append(regs, tools.Registration{Tool: t, Source: "[codex]"})
	}
	return regs
}
