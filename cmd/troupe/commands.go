package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"troupe/config"
	"troupe/sandbox"
	"troupe/tools"
)

// commonFlags are the flags the inspection commands share with serve.
type commonFlags struct {
	fs         *flag.FlagSet
	configFile *string
	workspace  *string
	overrides  multiFlag
}

func newCommonFlags(name string, stderr io.Writer) *commonFlags {
	c := &commonFlags{fs: flag.NewFlagSet(name, flag.ContinueOnError)}
	c.fs.SetOutput(stderr)
	c.configFile = c.fs.String("config", "", "config file (default: $TROUPE_CONFIG, else ~/.config/troupe/config.toml if it exists)")
	c.workspace = c.fs.String("workspace", "", "workspace (default: server.workspace, else the current directory)")
	c.fs.Var(&c.overrides, "c", "override a config key: -c key=value; repeatable")
	return c
}

// load parses args and loads the configuration as serve would.
func (c *commonFlags) load(args []string, stderr io.Writer) (*config.Config, string, int) {
	if err := c.fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, "", 0
		}
		return nil, "", 2
	}
	cfg, err := config.Load(config.Options{File: *c.configFile, Overrides: c.overrides})
	if err != nil {
		fmt.Fprintln(stderr, "troupe:", err)
		return nil, "", 1
	}
	dir := *c.workspace
	if dir == "" {
		dir = cfg.Server.Workspace
	}
	if dir == "" {
		if dir, err = os.Getwd(); err != nil {
			fmt.Fprintln(stderr, "troupe:", err)
			return nil, "", 1
		}
	}
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	return cfg, dir, -1
}

// toolsCommand is "troupe tools [--json]": the tools a session would see
// with this configuration, and what Codex would call them.
func toolsCommand(args []string, stdout, stderr *os.File) int {
	c := newCommonFlags("tools", stderr)
	asJSON := c.fs.Bool("json", false, "print JSON (the tools/list entries, _meta included)")
	cfg, dir, code := c.load(args, stderr)
	if code >= 0 {
		return code
	}
	ws, err := sandbox.OpenWorkspace(dir)
	if err != nil {
		fmt.Fprintln(stderr, "troupe:", err)
		return 1
	}
	defer ws.Close()
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	sb, err := sandbox.New(sandbox.Options{Driver: cfg.Sandbox.Driver, Logger: log})
	if err != nil {
		fmt.Fprintln(stderr, "troupe:", err)
		return 2
	}
	servers := probeServers(context.Background(), cfg, ws, sb, log)
	reg, err := buildRegistry(cfg, ws, sb, servers, log)
	if err != nil {
		fmt.Fprintln(stderr, "troupe:", err)
		return 1
	}
	warnUnenforceable(cfg, reg, ws, sb, log)
	list, _ := reg.Page(0, reg.Len())
	if !*asJSON {
		for _, s := range servers {
			if s.err != nil {
				fmt.Fprintf(stdout, "server %s: %s: %v\n", s.name, s.state, s.err)
			} else {
				fmt.Fprintf(stdout, "server %s: %s, %d tools\n", s.name, s.state, len(s.tools))
			}
		}
		if len(servers) > 0 {
			fmt.Fprintln(stdout)
		}
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		var states []map[string]any
		for _, s := range servers {
			st := map[string]any{"name": s.name, "state": s.state, "tools": len(s.tools)}
			if s.err != nil {
				st["error"] = s.err.Error()
			}
			states = append(states, st)
		}
		out := map[string]any{"tools": list}
		if states != nil {
			out["servers"] = states
		}
		if err := enc.Encode(out); err != nil {
			fmt.Fprintln(stderr, "troupe:", err)
			return 1
		}
		return 0
	}
	for _, t := range list {
		ro := t.Annotations != nil && t.Annotations.ReadOnlyHint != nil && *t.Annotations.ReadOnlyHint
		fmt.Fprintf(stdout, "%s\n  codex name:  mcp__%s / %s\n  read-only:   %v\n  approval:    %v\n  source:      %v\n  %s\n\n",
			t.Name, tools.CodexName(cfg.Server.Name), tools.CodexName(t.Name), ro,
			t.Meta[tools.MetaRequiresApproval], t.Meta[tools.MetaSource], firstLine(t.Description))
	}
	return 0
}

func firstLine(s string) string {
	if i := strings.IndexAny(s, ".\n"); i >= 0 {
		return s[:i+1]
	}
	return s
}

// codexConfigCommand is "troupe codex-config [--http URL]": the
// [mcp_servers] block that makes Codex use this troupe.
func codexConfigCommand(args []string, stdout, stderr *os.File) int {
	c := newCommonFlags("codex-config", stderr)
	httpURL := c.fs.String("http", "", "print the block for troupe served over HTTP at this URL (e.g. http://127.0.0.1:8080/mcp)")
	cfg, dir, code := c.load(args, stderr)
	if code >= 0 {
		return code
	}
	name := cfg.Server.Name
	fmt.Fprintf(stdout, "[mcp_servers.%s]\n", tomlKey(name))
	if *httpURL != "" {
		fmt.Fprintf(stdout, "url = %s\n", strconv.Quote(*httpURL))
		if env := tokenEnvVar(cfg); env != "" {
			fmt.Fprintf(stdout, "bearer_token_env_var = %s\n", strconv.Quote(env))
		} else if cfg.HTTP.Auth.BearerToken != "" {
			fmt.Fprintln(stdout, "# troupe requires a bearer token: put it in an environment variable Codex sees and name it here:")
			fmt.Fprintln(stdout, `# bearer_token_env_var = "TROUPE_TOKEN"`)
		}
		return 0
	}
	exe, err := os.Executable()
	if err != nil {
		exe = "troupe"
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
	return 0
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
