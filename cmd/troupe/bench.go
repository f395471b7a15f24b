package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"troupe/loadgen"
)

// benchHelp is "troupe bench --help".
func benchHelp() cmdHelp {
	return cmdHelp{name: "bench", usage: `troupe bench [throughput|sessions|soak] [flags] (--stdio "CMD ARGS" | --http URL [--http URL...] | -- CMD ARGS...)`,
		summary: "load-test any MCP server (stdio or HTTP)",
		desc: `Drives any MCP server with raw JSON-RPC and reports calls/s, latency
percentiles, errors by kind, and, for a local server (a stdio child, or
--pid), its CPU time per call and RSS. A stdio server's startup_ms is the
time from its start to its initialize answer; it is started in its own
process group, killed at the end. On a terminal, a live progress line is
shown on stderr.

Modes:
  throughput  --calls N calls, --concurrency C in flight (over HTTP spread
              over --sessions S sessions)
  sessions    open --sessions K idle HTTP sessions; with --pid, the server's
              RSS growth per session (VmRSS from /proc: the only figure a
              server exposes without help)
  soak        --rate R calls/s for --duration D; latency, errors and RSS per
              --interval

--stateless, with --http, makes the calls without a session, as the
2026-07-28 revision does: server/discover once, then each tools/call on
its own with its version and capabilities in _meta and the MCP-Protocol-
Version, Mcp-Method and Mcp-Name headers. A server that answers
server/discover with "method not found" or an HTTP 4xx (a 2025 server in
its stateless mode) gets plain tools/calls with no session and no
initialize instead; the report's "concurrency" row (JSON: "stateless")
names the version the calls spoke. --protocol-version 2025-06-18 asks
for those 2025 calls without server/discover.

--http may be given more than once, one URL each time, to load-test
several nodes (a troupe cluster) as a whole: sessions, and --stateless
callers, are spread over the URLs round-robin (by default one session
and one caller per URL; fewer than one per URL is a usage error), and
the report adds a row per URL with its sessions, calls, errors and
latency percentiles beside the totals. Calls follow their callers, so a
slower node serves fewer of them.

--route-via URL sends every call to URL while the sessions are still
initialized at --http: with a troupe cluster, a node that does not own
them, which forwards each call to its owner. Compare a run with it to
one without (same --http) to see what the hop between nodes costs.

--stdio splits its value on spaces (no quoting): use "-- CMD ARGS..." for
arguments with spaces. Exits 0 when the run completed, 1 when it could not
start, 2 on usage errors. Failed calls are reported, not fatal.`,
		example: `troupe bench --calls 20000 --concurrency 8 -- troupe serve -c tools.benchmark_echo=true
troupe bench --stateless --concurrency 64 --http http://127.0.0.1:8080/mcp
troupe bench --sessions 32 --concurrency 64 --http http://10.0.0.1:8080/mcp --http http://10.0.0.2:8080/mcp
troupe bench --calls 5000 --http http://10.0.0.1:8080/mcp --route-via http://10.0.0.2:8080/mcp
troupe bench soak --rate 200 --duration 5m --http http://127.0.0.1:8080/mcp --bearer-token-env TROUPE_TOKEN`}
}

// benchCommand is "troupe bench": a load generator for any MCP server
// (package loadgen). It is not serve, so stdout carries its report.
func benchCommand(args []string, stdout, stderr *os.File) int {
	mode := loadgen.ModeThroughput
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		mode, args = loadgen.Mode(args[0]), args[1:]
	}
	help := benchHelp()
	fs, f := benchFlags()
	// The body's names for the flags.
	stdio, url, tokenEnv, calls, concurrency, sessions, tool, argsJSON := f.stdio, f.url, f.tokenEnv, f.calls, f.concurrency, f.sessions, f.tool, f.argsJSON
	rate, duration, interval, pid, timeout, callTimeout, version, asJSON, serverStderr := f.rate, f.duration, f.interval, f.pid, f.timeout, f.callTimeout, f.version, f.asJSON, f.serverStderr
	stateless, routeVia := f.stateless, f.routeVia
	if code, ok := parseFlags(fs, help, args, stdout, stderr); !ok {
		return code
	}
	usageErr := func(format string, a ...any) int {
		return usageError(stderr, help, format, a...)
	}
	opts := loadgen.Options{Mode: mode, Calls: *calls, Concurrency: *concurrency, Sessions: *sessions,
		Tool: *tool, Args: json.RawMessage(*argsJSON), Rate: *rate, Duration: *duration, Interval: *interval,
		PID: *pid, Timeout: *timeout, CallTimeout: *callTimeout, ProtocolVersion: *version, Stateless: *stateless,
		RouteVia: *routeVia}
	switch {
	case *stdio != "" && fs.NArg() > 0:
		return usageErr("give --stdio or a command after --, not both")
	case *stdio != "":
		opts.Target.Command = strings.Fields(*stdio)
	case fs.NArg() > 0:
		opts.Target.Command = fs.Args()
	}
	// One URL is Target.URL, as it always was; several spread the run.
	if len(*url) == 1 {
		opts.Target.URL = (*url)[0]
	} else {
		opts.Target.URLs = *url
	}
	if *calls <= 0 || *sessions < 0 || *concurrency < 0 || *rate < 0 || *duration < 0 || *timeout <= 0 || *callTimeout <= 0 {
		return usageErr("--calls, --timeout and --call-timeout must be positive; --sessions, --concurrency, --rate and --duration not negative")
	}
	if !json.Valid([]byte(*argsJSON)) || !strings.HasPrefix(strings.TrimSpace(*argsJSON), "{") {
		return usageErr("--args must be a JSON object")
	}
	if *tokenEnv != "" {
		tok, ok := os.LookupEnv(*tokenEnv)
		if !ok || tok == "" {
			return usageErr("--bearer-token-env %s: the variable is not set", *tokenEnv)
		}
		opts.Target.BearerToken = tok
	}
	if err := opts.Check(); err != nil {
		return usageErr("%v", err)
	}
	if *serverStderr {
		opts.ServerStderr = stderr
	}
	if isTerminal(stderr) {
		opts.Progress = stderr
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	rep, err := loadgen.Run(ctx, opts)
	if err != nil {
		fmt.Fprintln(stderr, "troupe bench:", err)
		if hint := unauthorizedHint(err, *tokenEnv); hint != "" {
			fmt.Fprintln(stderr, "troupe bench:", hint)
		}
		return 1
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			fmt.Fprintln(stderr, "troupe bench:", err)
			return 1
		}
		return 0
	}
	if err := rep.WriteTable(stdout); err != nil {
		fmt.Fprintln(stderr, "troupe bench:", err)
		return 1
	}
	return 0
}

// unauthorizedHint says what to do when the server refused the run with
// 401: send a token, or send the one the server expects; "" for other
// errors.
func unauthorizedHint(err error, tokenEnv string) string {
	var status *loadgen.StatusError
	if !errors.As(err, &status) || status.Code != http.StatusUnauthorized {
		return ""
	}
	if tokenEnv == "" {
		return "the server requires a bearer token: put it in an environment variable and name that variable " +
			"with --bearer-token-env NAME (as troupe serve --bearer-token-env takes it, e.g. TROUPE_TOKEN)"
	}
	return fmt.Sprintf("the server refused the token in $%s (--bearer-token-env %s): it is not the token the server was started with",
		tokenEnv, tokenEnv)
}

// benchFlagValues are bench's flags once parsed.
type benchFlagValues struct {
	url                                      *urlsFlag
	stdio, tokenEnv, tool, argsJSON, version *string
	routeVia                                 *string
	calls, concurrency, sessions, pid        *int
	rate                                     *float64
	duration, interval, timeout, callTimeout *time.Duration
	asJSON, serverStderr, stateless          *bool
}

// benchFlags declares bench's flags: bench parses them, and "troupe
// completion" offers them.
func benchFlags() (*flag.FlagSet, benchFlagValues) {
	fs := newFlagSet(benchHelp())
	var f benchFlagValues
	f.stdio = fs.String("stdio", "", "start `\"CMD ARGS\"` as a stdio MCP server (split on spaces)")
	f.url = new(urlsFlag)
	fs.Var(f.url, "http", "the streamable-HTTP endpoint `URL`, e.g. http://127.0.0.1:8080/mcp; repeat it for several nodes")
	f.tokenEnv = fs.String("bearer-token-env", "", "send the value of the environment variable `NAME` as the HTTP bearer token")
	f.calls = fs.Int("calls", 20000, "throughput: `N` calls to make")
	f.concurrency = fs.Int("concurrency", 0, "`C` calls in flight (default 1, or 1 per --http URL; 16 for soak and for opening sessions)")
	f.sessions = fs.Int("sessions", 0, "`S` HTTP sessions the callers share, or to open in sessions mode (default 1 per --http URL)")
	f.tool = fs.String("tool", "echo", "the `TOOL` to call")
	f.argsJSON = fs.String("args", `{"text":"hello"}`, "the tool's arguments, a `JSON` object")
	f.rate = fs.Float64("rate", 0, "soak: `R` calls per second")
	f.duration = fs.Duration("duration", 0, "soak: how long, a `DURATION` such as 30s or 5m")
	f.interval = fs.Duration("interval", 0, "soak: the drift report's step, a `DURATION` (default duration/10, at least 1s)")
	f.pid = fs.Int("pid", 0, "a local HTTP server's process id `PID`, to report its CPU and RSS")
	f.timeout = fs.Duration("timeout", loadgen.DefaultTimeout, "a bound on the whole run, a `DURATION`")
	f.callTimeout = fs.Duration("call-timeout", loadgen.DefaultCallTimeout, "a bound on one call, a `DURATION`")
	f.stateless = fs.Bool("stateless", false, "over --http, call without a session: server/discover, then 2026-07-28 tools/calls (see above)")
	f.routeVia = fs.String("route-via", "", "send the calls to `URL` (another node of a cluster), the sessions still opened at --http")
	f.version = fs.String("protocol-version", "", "the protocol `VERSION` offered in initialize (default 2025-06-18; with --stateless, the version the calls speak, default 2026-07-28)")
	f.asJSON = fs.Bool("json", false, "print the report as JSON")
	f.serverStderr = fs.Bool("server-stderr", false, "pass a stdio server's stderr through (default: discarded)")
	return fs, f
}

// urlsFlag is --http: each use adds one URL, in the order given.
type urlsFlag []string

func (u *urlsFlag) String() string { return strings.Join(*u, " ") }

// Set adds one URL; loadgen checks it (and that none is given twice).
func (u *urlsFlag) Set(v string) error {
	*u = append(*u, v)
	return nil
}
