package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"troupe/app"
	"troupe/config"
	"troupe/pins"
	"troupe/tools"
)

// commonFlags are the flags the inspection commands share with serve.
type commonFlags struct {
	help       cmdHelp
	fs         *flag.FlagSet
	configFile *string
	workspace  *string
	overrides  multiFlag
}

// newCommonFlags makes the flag set of an inspection command: --config
// and -c as serve has them, and --workspace when withWorkspace.
func newCommonFlags(help cmdHelp, withWorkspace bool) *commonFlags {
	c := &commonFlags{help: help, fs: newFlagSet(help), workspace: new(string)}
	c.configFile = c.fs.String("config", "", "the config `FILE` (default: $TROUPE_CONFIG, else ~/.config/troupe/config.toml if it exists)")
	if withWorkspace {
		c.workspace = c.fs.String("workspace", "", "the workspace `DIR` (default: server.workspace, else the current directory)")
	}
	c.fs.Var(&c.overrides, "c", "override a config key: -c key=value (value parsed as TOML); repeatable")
	return c
}

// parse parses args; false with the exit code when the command ends here.
func (c *commonFlags) parse(args []string, stdout, stderr io.Writer) (int, bool) {
	return parseFlags(c.fs, c.help, args, stdout, stderr)
}

// loadConfig loads the configuration as serve would; a configuration
// troupe refuses is a usage error (exit 2), as for serve.
func (c *commonFlags) loadConfig(stderr io.Writer) (*config.Config, int, bool) {
	cfg, err := config.Load(config.Options{File: *c.configFile, Overrides: c.overrides})
	if err != nil {
		fmt.Fprintln(stderr, "troupe:", err)
		return nil, exitUsage, false
	}
	return cfg, 0, true
}

// load parses args, refuses extra arguments and loads the configuration;
// it returns the workspace directory too.
func (c *commonFlags) load(args []string, stdout, stderr io.Writer) (*config.Config, string, int, bool) {
	if code, ok := c.parse(args, stdout, stderr); !ok {
		return nil, "", code, false
	}
	if c.fs.NArg() > 0 {
		return nil, "", usageError(stderr, c.help, "unexpected argument %q", c.fs.Arg(0)), false
	}
	cfg, code, ok := c.loadConfig(stderr)
	if !ok {
		return nil, "", code, false
	}
	dir := *c.workspace
	if dir == "" {
		dir = cfg.Server.Workspace
	}
	if dir == "" {
		var err error
		if dir, err = os.Getwd(); err != nil {
			fmt.Fprintln(stderr, "troupe:", err)
			return nil, "", exitRuntime, false
		}
	}
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	return cfg, dir, 0, true
}

// configCommand is "troupe config check": it runs every check serve runs
// before serving (app.New, and the [mcp_servers] definitions) and prints
// the effective configuration with secrets masked, or the problems found.
func configCommand(args []string, stdout, stderr *os.File) int {
	help := configCheckHelp()
	c := configCheckFlags()
	switch {
	case len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "-help"):
		printHelp(stdout, c.fs, help)
		return exitOK
	case len(args) == 0 || args[0] != "check":
		printHelp(stderr, c.fs, help)
		return exitUsage
	}
	cfg, dir, code, ok := c.load(args[1:], stdout, stderr)
	if !ok {
		return code
	}
	server, err := app.New(cfg, inspectOptions(cfg, dir, stderr))
	if err != nil {
		return refused(err, func(p error) { fmt.Fprintln(stderr, "troupe:", p) })
	}
	defer server.Close()
	if probs := server.CheckDownstreams(); len(probs) > 0 {
		for _, p := range probs {
			fmt.Fprintln(stderr, "troupe:", p)
		}
		return exitUsage
	}
	out, err := cfg.Effective()
	if err != nil {
		fmt.Fprintln(stderr, "troupe:", err)
		return exitRuntime
	}
	_, _ = stdout.Write(out)
	patterns, err := server.ToolPatterns()
	if err != nil {
		fmt.Fprintln(stderr, "troupe:", err)
		return exitRuntime
	}
	writePatterns(stdout, patterns)
	return exitOK
}

// configCheckFlags declares the flags of "troupe config check": the
// command parses them, and "troupe completion" offers them.
func configCheckFlags() *commonFlags { return newCommonFlags(configCheckHelp(), true) }

// writePatterns says, as TOML comments after the effective configuration,
// which tools each tools.allow and tools.deny pattern matches: a pattern
// such as "fs.*" may hide troupe's own tools and a server's at once.
func writePatterns(w io.Writer, p app.ToolPatterns) {
	fmt.Fprintln(w, "\n# What tools.allow and tools.deny match: troupe's own tools by name, a downstream server's by")
	fmt.Fprintln(w, "# its prefix (its tools are known once it runs: \"troupe tools\" lists them).")
	for _, m := range p.Matches {
		var parts []string
		if len(m.Tools) > 0 {
			parts = append(parts, strings.Join(m.Tools, ", "))
		}
		for _, prefix := range m.Prefixes {
			parts = append(parts, fmt.Sprintf("the tools of [mcp_servers.%s] it fits (%s…)", tomlKey(p.Servers[prefix]), prefix))
		}
		if len(parts) == 0 {
			parts = append(parts, "no tool troupe knows of")
		}
		fmt.Fprintf(w, "#   %s %s: %s\n", m.List, strconv.Quote(m.Pattern), strings.Join(parts, "; "))
	}
}

// toolsCommand is "troupe tools [--json] [--accept SERVER[.TOOL]]": the
// tools a session would see with this configuration, what Codex would call
// them, and the downstream tools held since they changed; or, with
// --accept, an operator's accept of held ones.
func toolsCommand(args []string, stdout, stderr *os.File) int {
	c, asJSON, accept := toolsFlags()
	cfg, dir, code, ok := c.load(args, stdout, stderr)
	if !ok {
		return code
	}
	if *accept != "" && *asJSON {
		return usageError(stderr, c.help, "--accept prints what it accepted as text; it takes no --json")
	}
	// The same checks as serve: a config serve refuses lists nothing.
	server, err := app.New(cfg, inspectOptions(cfg, dir, stderr))
	if err != nil {
		return refused(err, func(p error) { fmt.Fprintln(stderr, "troupe:", p) })
	}
	defer server.Close()
	if *accept != "" {
		return acceptPins(server, *accept, stdout, stderr)
	}
	found, err := server.Tools(context.Background())
	if err != nil {
		fmt.Fprintln(stderr, "troupe:", err)
		return exitUsage
	}
	list, servers := found.Tools, found.Servers
	switch {
	case errors.Is(found.PinsErr, app.ErrClusterPins):
		// A cluster's nodes hold what etcd's pins hold, which this
		// command does not read: say where to look, not that all is held.
		fmt.Fprintln(stderr, "troupe: held tools are not listed:", found.PinsErr)
	case found.PinsErr != nil:
		fmt.Fprintln(stderr, "troupe: the pins cannot be read, so a running troupe holds every downstream tool:", found.PinsErr)
	}
	names := make([]string, len(list))
	for i, t := range list {
		names[i] = t.Name
	}
	// What the Codex model sees: sanitized names, hash-suffixed when
	// they collide or are too long.
	namespace, visible := tools.CodexNamespace(cfg.Server.Name), tools.CodexVisibleNames(cfg.Server.Name, names)
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		var states []map[string]any
		for _, s := range servers {
			st := map[string]any{"name": s.Name, "state": s.State, "tools": s.Tools, "tools_exposed": s.Exposed}
			if s.Err != nil {
				st["error"] = s.Err.Error()
			}
			states = append(states, st)
		}
		out := map[string]any{"tools": list, "codex": map[string]any{"namespace": namespace, "names": visible}}
		if states != nil {
			out["servers"] = states
		}
		if len(found.Held) > 0 {
			var held []map[string]any
			for _, h := range found.Held {
				held = append(held, map[string]any{"server": h.Server, "kind": h.Kind, "name": h.Name, "since": h.Held.Since,
					"hash": h.Held.Hash, "change": h.Change.Summary(), "diff": h.Change.Lines, "accept": acceptCommand(h)})
			}
			out["held"] = held
		}
		if err := enc.Encode(out); err != nil {
			fmt.Fprintln(stderr, "troupe:", err)
			return exitRuntime
		}
		return exitOK
	}
	shown := map[string]bool{}
	for _, s := range servers {
		if s.Err != nil {
			fmt.Fprintf(stdout, "server %s: %s: %v\n", s.Name, s.State, s.Err)
		} else {
			fmt.Fprintf(stdout, "server %s: %s, %s\n", s.Name, s.State, toolCount(s.Exposed, s.Tools))
		}
		writeHeld(stdout, s.Name, found.Held)
		shown[s.Name] = true
	}
	// Held versions of servers that are not running here (disabled).
	for _, h := range found.Held {
		if !shown[h.Server] {
			fmt.Fprintf(stdout, "server %s: not enabled\n", h.Server)
			writeHeld(stdout, h.Server, found.Held)
			shown[h.Server] = true
		}
	}
	if len(shown) > 0 {
		fmt.Fprintln(stdout)
	}
	for _, t := range list {
		ro := t.Annotations != nil && t.Annotations.ReadOnlyHint != nil && *t.Annotations.ReadOnlyHint
		fmt.Fprintf(stdout, "%s\n  codex name:  %s / %s\n  read-only:   %v\n  approval:    %v\n  source:      %v\n  %s\n\n",
			t.Name, namespace, visible[t.Name], ro,
			t.Meta[tools.MetaRequiresApproval], t.Meta[tools.MetaSource], firstLine(t.Description))
	}
	return 0
}

// writeHeld prints server's held tools and prompts under its line: what
// changed (the diff, every invisible character made visible) and the
// command that accepts it.
func writeHeld(w io.Writer, server string, held []pins.HeldItem) {
	for _, h := range held {
		if h.Server != server {
			continue
		}
		fmt.Fprintf(w, "  held %s %s since %s: %s\n", h.Kind, h.Name, h.Held.Since.UTC().Format(time.RFC3339), h.Change.Summary())
		for _, l := range h.Change.Lines {
			fmt.Fprintf(w, "    %s\n", l)
		}
		fmt.Fprintf(w, "    to trust this version: %s\n", acceptCommand(h))
	}
}

// acceptCommand is the command line that accepts h.
func acceptCommand(h pins.HeldItem) string {
	return "troupe tools --accept " + h.Server + "." + h.Name
}

// acceptPins is "troupe tools --accept SERVER[.TOOL]": it pins the held
// versions named, by the local user, and says what it accepted; exit 1
// when the server is unknown or nothing of that name is held.
func acceptPins(server *app.App, target string, stdout, stderr io.Writer) int {
	name, tool, err := server.PinTarget(target)
	if err != nil {
		fmt.Fprintln(stderr, "troupe:", err)
		return exitRuntime
	}
	events, err := server.AcceptPins(context.Background(), name, tool, app.LocalOperator())
	if errors.Is(err, pins.ErrNothingHeld) {
		fmt.Fprintf(stderr, "troupe: nothing to accept: %v (troupe tools lists what is held)\n", err)
		return exitRuntime
	}
	for _, e := range events {
		for _, n := range e.Names {
			fmt.Fprintf(stdout, "accepted %s %s of server %s (%s)\n", e.Kind, n, e.Server, e.Changes[n].Summary())
		}
	}
	if err != nil {
		fmt.Fprintln(stderr, "troupe:", err)
		return exitRuntime
	}
	if len(events) > 0 {
		fmt.Fprintln(stdout, "a running troupe serves the accepted versions as soon as it sees the pins file change")
	}
	return exitOK
}

// toolsFlags declares the flags of "troupe tools": the command parses
// them, and "troupe completion" offers them.
func toolsFlags() (*commonFlags, *bool, *string) {
	c := newCommonFlags(toolsHelp(), true)
	asJSON := c.fs.Bool("json", false, "print JSON: the tools/list entries (_meta included), the servers' states, the held tools and the Codex names")
	accept := c.fs.String("accept", "", "trust the held version of `SERVER[.TOOL]` (a tool or prompt; every held one of SERVER without .TOOL)")
	return c, asJSON, accept
}

// toolCount says how many of a server's tools sessions see: "14 tools",
// or "3 of 14 tools" when some are left out.
func toolCount(exposed, listed int) string {
	if exposed == listed {
		return fmt.Sprintf("%d tools", listed)
	}
	return fmt.Sprintf("%d of %d tools", exposed, listed)
}

// inspectOptions are the app's options for the commands that inspect a
// configuration without serving: warnings and worse on stderr, in the
// format [logging] gives serve's log (the same lines read the same in
// both), secrets masked.
func inspectOptions(cfg *config.Config, dir string, stderr io.Writer) app.Options {
	opts, err := logOptions(stderr, cfg)
	if err != nil { // validated by config.Load; plain text if not
		opts.Logger = slog.New(slog.NewTextHandler(stderr, nil))
	}
	opts.Logger = slog.New(warnOnly{opts.Logger.Handler()})
	opts.Workspace, opts.Version, opts.Level, opts.Secrets = dir, buildVersion(), nil, nil
	return opts
}

// firstLine is s up to its first sentence's end or line break.
func firstLine(s string) string {
	if i := strings.IndexAny(s, ".\n"); i >= 0 {
		return s[:i+1]
	}
	return s
}

// codexConfigCommand is "troupe codex-config [--http URL
// [--bearer-token-env NAME]]": the [mcp_servers] block that makes Codex
// use this troupe.
func codexConfigCommand(args []string, stdout, stderr *os.File) int {
	help := codexConfigHelp()
	c, httpURL, tokenEnv := codexConfigFlags()
	cfg, dir, code, ok := c.load(args, stdout, stderr)
	if !ok {
		return code
	}
	if *tokenEnv != "" && *httpURL == "" {
		return usageError(stderr, help, "--bearer-token-env applies to --http only (over stdio there is no token)")
	}
	if *tokenEnv != "" && !envName.MatchString(*tokenEnv) {
		return usageError(stderr, help, "--bearer-token-env %q is not an environment variable name", *tokenEnv)
	}
	if *httpURL != "" {
		if u, err := url.Parse(*httpURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return usageError(stderr, help, "--http %q is not an http(s) URL such as http://127.0.0.1:8080/mcp", *httpURL)
		}
	}
	name := cfg.Server.Name
	fmt.Fprintf(stdout, "[mcp_servers.%s]\n", tomlKey(name))
	if *httpURL != "" {
		fmt.Fprintf(stdout, "url = %s\n", strconv.Quote(*httpURL))
		env := *tokenEnv
		if env == "" {
			env = tokenEnvVar(cfg)
		}
		switch {
		case env != "":
			fmt.Fprintf(stdout, "bearer_token_env_var = %s\n", strconv.Quote(env))
			if _, set := os.LookupEnv(env); !set {
				fmt.Fprintf(stderr, "troupe: note: %s is not set here; Codex must have it in its environment\n", env)
			}
		case cfg.HTTP.Auth.BearerToken != "":
			fmt.Fprintln(stdout, "# troupe requires a bearer token: put it in an environment variable Codex sees and name it here:")
			fmt.Fprintln(stdout, `# bearer_token_env_var = "TROUPE_TOKEN"`)
		}
		return exitOK
	}
	exe, err := os.Executable()
	if err != nil {
		exe = "troupe"
	}
	if why := temporaryBuild(exe); why != "" {
		fmt.Fprintf(stderr, "troupe: warning: %s is %s, which \"go clean -cache\" (or the end of \"go run\") deletes: "+
			"Codex would then fail to start troupe. Install it first (go install ./cmd/troupe, or go build -o ~/bin/troupe ./cmd/troupe) "+
			"and run codex-config from the installed binary.\n", exe, why)
	}
	serveArgs := []string{"serve", "--workspace", dir}
	if cfg.File != "" {
		serveArgs = append(serveArgs, "--config", cfg.File)
	}
	quoted := make([]string, len(serveArgs))
	for i, a := range serveArgs {
		quoted[i] = strconv.Quote(a)
	}
	fmt.Fprintf(stdout, "command = %s\nargs = [%s]\n", strconv.Quote(exe), strings.Join(quoted, ", "))
	return exitOK
}

// codexConfigFlags declares the flags of "troupe codex-config": the
// command parses them, and "troupe completion" offers them.
func codexConfigFlags() (c *commonFlags, httpURL, tokenEnv *string) {
	c = newCommonFlags(codexConfigHelp(), true)
	httpURL = c.fs.String("http", "", "print the block for troupe served over streamable HTTP at this `URL` (e.g. http://127.0.0.1:8080/mcp)")
	tokenEnv = c.fs.String("bearer-token-env", "", "with --http: the environment variable `NAME` Codex reads the bearer token from (as serve's --bearer-token-env)")
	return c, httpURL, tokenEnv
}

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// temporaryBuild says why exe is a binary the Go tool will delete: one in
// the build cache ($GOCACHE, else the user cache dir's go-build), or in a
// go-build* temp dir, where "go run" links its binaries. "" otherwise.
func temporaryBuild(exe string) string {
	real := exe
	if r, err := filepath.EvalSymlinks(exe); err == nil {
		real = r
	}
	cache := os.Getenv("GOCACHE")
	if cache == "" {
		if dir, err := os.UserCacheDir(); err == nil {
			cache = filepath.Join(dir, "go-build")
		}
	}
	if cache != "" && cache != "off" {
		for _, p := range []string{exe, real} {
			if rel, err := filepath.Rel(cache, p); err == nil && rel != ".." && !strings.HasPrefix(rel, "../") {
				return "in the Go build cache (" + cache + ")"
			}
		}
	}
	for _, part := range strings.Split(filepath.Dir(real), string(filepath.Separator)) {
		if strings.HasPrefix(part, "go-build") {
			return "a temporary build of \"go run\""
		}
	}
	return ""
}

// tokenEnvVar is the variable the bearer token is read from, when the
// configuration names one as "${NAME}".
func tokenEnvVar(cfg *config.Config) string {
	m := regexp.MustCompile(`^\$\{([A-Za-z_][A-Za-z0-9_]*)\}$`).FindStringSubmatch(cfg.RawString("http", "auth", "bearer_token"))
	if m == nil {
		return ""
	}
	return m[1]
}

// tomlKey quotes a table key when TOML needs it.
func tomlKey(k string) string {
	if regexp.MustCompile(`^[A-Za-z0-9_-]+$`).MatchString(k) {
		return k
	}
	return strconv.Quote(k)
}
