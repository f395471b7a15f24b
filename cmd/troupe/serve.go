package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"troupe/app"
	"troupe/config"
	"troupe/logging"
	"troupe/redact"
	"troupe/sandbox"
)

// serve is "troupe serve": it loads the configuration, sets up the log and
// stdout, and runs the server (package app) until the client is done or a
// signal ends it.
func serve(args []string, stdin io.Reader, stdout, stderr *os.File) int {
	help := serveCommandHelp()
	fs, f := serveFlags()
	// The body's names for the flags.
	workspace, configFile, logLevel, logFormat, httpAddr := f.workspace, f.configFile, f.logLevel, f.logFormat, f.httpAddr
	withStdio, tokenEnv, allowRemote, cpuProfile, memProfile, overrides := f.withStdio, f.tokenEnv, f.allowRemote, f.cpuProfile, f.memProfile, f.overrides
	if code, ok := parseFlags(fs, help, args, stdout, stderr); !ok {
		return code
	}
	if fs.NArg() > 0 {
		return usageError(stderr, help, "unexpected argument %q", fs.Arg(0))
	}
	stopProfiles, err := startProfiles(*cpuProfile, *memProfile)
	if err != nil {
		fmt.Fprintln(stderr, "troupe:", err)
		return exitUsage
	}
	defer func() {
		if err := stopProfiles(); err != nil {
			fmt.Fprintln(stderr, "troupe:", err)
		}
	}()
	source := config.Options{File: *configFile, Overrides: *overrides}
	cfg, err := config.Load(source)
	if err != nil {
		fmt.Fprintln(stderr, "troupe:", err)
		return exitUsage
	}
	var token string
	if *tokenEnv != "" {
		tok, ok := os.LookupEnv(*tokenEnv)
		if !ok || tok == "" {
			fmt.Fprintf(stderr, "troupe: --bearer-token-env %s: the variable is not set\n", *tokenEnv)
			return exitUsage
		}
		token = tok
	}
	// The flags win over the configuration, at start and at every reload.
	flagsOver := func(c *config.Config) {
		if *logLevel != "" {
			c.Logging.Level = *logLevel
		}
		if *logFormat != "" {
			c.Logging.Format = *logFormat
		}
		if *httpAddr != "" {
			c.HTTP.Listen = *httpAddr
		}
		if *allowRemote {
			c.HTTP.AllowUnauthenticatedRemote = true
		}
		if token != "" {
			c.HTTP.Auth.BearerToken = token
		}
	}
	flagsOver(cfg)
	if err := cfg.CheckBearerToken(); err != nil { // the flag's token beside [[auth.tokens]]
		fmt.Fprintln(stderr, "troupe:", err)
		return exitUsage
	}
	serveStdio := cfg.HTTP.Listen == "" || *withStdio
	join := clusterJoin()
	if cfg.Cluster.Provider != "" && join == nil {
		fmt.Fprintln(stderr, "troupe:", execClusterBuild())
		return exitUsage
	}

	opts, err := logOptions(stderr, cfg)
	if err != nil {
		fmt.Fprintln(stderr, "troupe:", err)
		return exitUsage
	}
	log := opts.Logger
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
			return exitRuntime
		}
	}

	opts.Workspace, opts.Version, opts.JoinCluster = *workspace, buildVersion(), join
	server, err := app.New(cfg, opts)
	if err != nil {
		return refused(err, func(p error) { log.Error("refusing to start", "err", p) })
	}
	defer server.Close()

	sigs, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	run := app.RunOptions{Reload: hup, Source: source, Overlay: flagsOver}
	if serveStdio {
		run.Stdin, run.Stdout = stdin, protoOut
		if f, ok := stdin.(*os.File); ok && isTerminal(f) {
			// Someone typed "troupe serve": say what it is waiting for.
			run.Ready = func() {
				fmt.Fprintln(stderr, "troupe is waiting for MCP messages (JSON-RPC) on stdin: an MCP client such as Codex "+
					"starts it this way (see \"troupe codex-config\"). Press Ctrl-D to end, or see \"troupe serve --help\".")
			}
		}
	}
	if err := server.Run(sigs, run); err != nil {
		// Run refuses too (a cluster node whose config differs from the
		// cluster's): that is the configuration's fault, exit 2.
		msg := "cannot serve"
		var setup *app.SetupError
		if errors.As(err, &setup) {
			msg = "refusing to start"
		}
		return refused(err, func(p error) { log.Error(msg, "err", p) })
	}
	return exitOK
}

// serveFlagValues are serve's flags once parsed.
type serveFlagValues struct {
	workspace, configFile, logLevel, logFormat, httpAddr, tokenEnv, cpuProfile, memProfile *string
	withStdio, allowRemote                                                                 *bool
	overrides                                                                              *multiFlag
}

// serveFlags declares serve's flags: serve parses them, and "troupe
// completion" offers them.
func serveFlags() (*flag.FlagSet, serveFlagValues) {
	fs := newFlagSet(serveCommandHelp())
	var f serveFlagValues
	f.workspace = fs.String("workspace", "", "the root `DIR` every file tool is confined to (default: server.workspace, else the current directory)")
	f.configFile = fs.String("config", "", "the config `FILE` (default: $TROUPE_CONFIG, else ~/.config/troupe/config.toml if it exists)")
	f.logLevel = fs.String("log-level", "", "log `LEVEL`: debug, info, warn, error (default from config: info)")
	f.logFormat = fs.String("log-format", "", "log `FORMAT`: text or json (default from config: text)")
	f.httpAddr = fs.String("http", "", "serve streamable HTTP on `HOST:PORT` (e.g. 127.0.0.1:8080), at http://HOST:PORT/mcp")
	f.withStdio = fs.Bool("stdio", false, "with --http: serve stdio as well")
	f.tokenEnv = fs.String("bearer-token-env", "", "require the value of the environment variable `NAME` as the HTTP bearer token")
	f.allowRemote = fs.Bool("allow-unauthenticated-remote", false, "allow --http on a non-loopback address without a bearer token (unsafe)")
	f.cpuProfile = fs.String("cpuprofile", "", "write a pprof CPU profile of the whole run to `FILE`")
	f.memProfile = fs.String("memprofile", "", "write a pprof allocation profile to `FILE` at exit")
	f.overrides = new(multiFlag)
	fs.Var(f.overrides, "c", "override a config key: -c key=value (value parsed as TOML); repeatable")
	return fs, f
}

// logOptions sets up troupe's log on stderr as cfg's [logging] says, every
// line through a redactor of cfg's secrets, and returns it as the app's
// options, whose Level and Secrets later reloads update.
func logOptions(stderr io.Writer, cfg *config.Config) (app.Options, error) {
	var level slog.LevelVar
	handler, err := logging.New(stderr, logging.Options{Level: cfg.Logging.Level, Format: cfg.Logging.Format, Var: &level})
	if err != nil {
		return app.Options{}, err
	}
	// Every log line passes the redactor: resolved ${NAME} secrets never
	// reach the log, whatever code logs them.
	secrets := &redact.Live{}
	secrets.Store(app.Secrets(cfg))
	return app.Options{
		Logger:        slog.New(redact.Handler(handler, secrets)),
		RuntimeLogger: slog.New(warnOnly{handler}),
		Level:         &level,
		Secrets:       secrets,
	}, nil
}

// refused reports each problem of app.New's refusal through report and
// returns the exit code: exitUsage when the command line or the
// configuration is wrong, exitRuntime when the machine fails troupe.
func refused(err error, report func(error)) int {
	var setup *app.SetupError
	if !errors.As(err, &setup) {
		report(err)
		return exitRuntime
	}
	for _, p := range setup.Problems {
		report(p)
	}
	if setup.Config {
		return exitUsage
	}
	return exitRuntime
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
