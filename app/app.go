package app

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"troupe/config"
	"troupe/gate/approvalstate"
	"troupe/pins"
	"troupe/redact"
	"troupe/sandbox"
	"troupe/tools"
	"troupe/tools/codexagent"
	"troupe/workspace"
)

// Options are what New needs besides the configuration.
type Options struct {
	// Workspace is the directory every file tool is confined to, as the
	// command line gave it; "" means server.workspace, else the current
	// directory.
	Workspace string
	// Version is the binary's version: the server's serverInfo, the
	// first-party tools' _meta and the clientInfo troupe gives downstream
	// servers.
	Version string
	// Logger is troupe's log; nil discards it. RuntimeLogger is the actor
	// runtime's (protoactor's), nil meaning Logger.
	Logger, RuntimeLogger *slog.Logger
	// JoinCluster joins a cluster when [cluster] configures one; nil in
	// the default build (see JoinCluster).
	JoinCluster JoinCluster
	// Level and Secrets, when set, are the log handler's level and
	// redactor: Reload sets the level from logging.level and keeps the
	// redactor masking the configuration's secrets.
	Level   *slog.LevelVar
	Secrets *redact.Live
}

// App is a troupe server set up from one configuration: its workspace,
// process sandbox and tool registry, and, while Run runs, the actor
// runtime and the transports. Close it when done.
type App struct {
	opts Options
	log  *slog.Logger
	// regLog logs the registry builds' naming warnings, each once across
	// builds (at start, when a downstream's tools change, at reloads).
	regLog   *slog.Logger
	renames  renameNotes // the tools Codex shows with "_", last noted
	ws       *workspace.Root
	sb       *sandbox.Sandbox
	registry *tools.Registry // New's, without downstream tools
	methods  *tools.Registry // Codex's former management methods, served beside MCP (methods.go); built once
	// methodTools are the tools each method stands for: it is served
	// while they are (methods.go).
	methodTools map[string][]string
	writable    config.RunWritable
	approvals   *approvalstate.Sealer
	obs         *observing // nil: nobody could see it (observe.go)
	// pins compares the downstream servers' listings with the versions
	// troupe trusts (pins.go): New's reads only; Run's records.
	pins *pins.Keeper

	// mu orders registry builds: reloads, and rebuilds when a downstream
	// server's tools change. It guards cfg and run.
	mu  sync.Mutex
	cfg *config.Config // in force: New's, then each reload applied
	run *running       // nil unless Run is running
}

// A SetupError is New's refusal: every problem found, and whose fault it
// is.
type SetupError struct {
	Problems []error
	// Config is true when the command line or the configuration is wrong
	// (a workspace that cannot be opened, troupe's own files where runs
	// may write, an invalid tool set), false when the machine fails troupe
	// (the sandbox cannot be set up). troupe exits 2 for the first, 1 for
	// the second.
	Config bool
}

func (e *SetupError) Error() string   { return errors.Join(e.Problems...).Error() }
func (e *SetupError) Unwrap() []error { return e.Problems }

// New runs every check troupe makes before serving, in this order, and
// sets up what serving needs: the HTTP address (when http.listen is set),
// the workspace, troupe's own files, the process sandbox, the tool
// registry (without downstream tools: those arrive as the servers
// connect) and the sealer of approval states. It refuses with a
// *SetupError. cfg is the effective configuration, flags applied; New
// keeps it as the one in force.
func New(cfg *config.Config, opts Options) (*App, error) {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	refuse := func(config bool, errs ...error) (*App, error) {
		return nil, &SetupError{Problems: errs, Config: config}
	}
	if cfg.HTTP.Listen != "" {
		if _, err := checkHTTPAddress(cfg); err != nil {
			return refuse(true, err)
		}
	}
	dir := opts.Workspace
	if dir == "" {
		dir = cfg.Server.Workspace
	}
	if dir == "" {
		var err error
		if dir, err = os.Getwd(); err != nil {
			return refuse(false, fmt.Errorf("cannot determine the current directory: %w", err))
		}
	}
	ws, err := workspace.Open(dir)
	if err != nil {
		return refuse(true, fmt.Errorf("cannot open the workspace: %w", err))
	}
	// troupe's own files must lie where no tool run may write.
	writable := config.RunWritable{Workspace: ws.Dir()}
	if err := config.CheckOwnFiles(cfg, writable); err != nil {
		ws.Close()
		return refuse(true, problems(err)...)
	}
	// Metrics, the status page and traces, when anyone can see them.
	obs, err := newObserving(cfg, opts.Version, log)
	if err != nil {
		ws.Close()
		return refuse(true, err)
	}
	// Runs must not read troupe's own files, nor the operator's Codex
	// credentials and conversations: the sandbox hides them.
	sb, err := sandbox.New(sandbox.Options{Driver: cfg.Sandbox.Driver, Logger: log, Hidden: hiddenPaths(cfg, ws.Dir(), log),
		Observer: obs.sandboxObserver()})
	if err != nil {
		obs.close()
		ws.Close()
		return refuse(false, fmt.Errorf("cannot set up the process sandbox: %w", err))
	}
	a := &App{opts: opts, log: log, regLog: tools.WarnOnce(log), ws: ws, sb: sb, writable: writable, cfg: cfg, obs: obs}
	fail := func(config bool, err error) (*App, error) {
		obs.close()
		ws.Close()
		return refuse(config, err)
	}
	if a.pins, err = newPinKeeper(cfg, true); err != nil {
		return fail(true, err)
	}
	obs.setApp(a) // the status page's held tools and Accept
	if a.registry, err = a.buildRegistry(cfg, nil); err != nil {
		return fail(true, fmt.Errorf("cannot build the tool registry: %w", err))
	}
	obs.setTools(a.registry)
	if a.methods, a.methodTools, err = a.buildMethods(cfg); err != nil {
		return fail(true, fmt.Errorf("cannot build the management methods: %w", err))
	}
	if a.approvals, err = newApprovalStates(cfg, log); err != nil {
		return fail(true, err)
	}
	warnMissingCredentials(cfg, log)
	return a, nil
}

// Close releases the workspace and stops tracing (Run has flushed the
// spans already). The App must not be running.
func (a *App) Close() error {
	a.obs.close()
	return a.ws.Close()
}

// config is the configuration in force.
func (a *App) config() *config.Config {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.cfg
}

// problems splits an error that joins several (errors.Join), such as
// config.CheckOwnFiles's, so each is reported on a line of its own.
func problems(err error) []error {
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		return joined.Unwrap()
	}
	return []error{err}
}

// Secrets is every value of cfg that must never be shown: resolved
// ${NAME} references, the bearer token, and literal values of
// secret-named env variables and headers of tools and servers. The
// command's log redactor starts with it; Reload keeps Options.Secrets in
// step with it.
func Secrets(cfg *config.Config) *redact.Redactor {
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

// hiddenPaths are what no sandboxed run may see: troupe's own files
// (config.OwnPaths: the config file, the audit log, the spool, Codex's
// homes) and the operator's CODEX_HOME (auth.json, config.toml, every
// conversation), which troupe reads to make Codex's homes. A CODEX_HOME
// inside the workspace cannot be hidden from runs that write there; it is
// left out with a warning.
func hiddenPaths(cfg *config.Config, wsDir string, log *slog.Logger) []string {
	paths := cfg.OwnPaths()
	home := codexagent.OperatorHome(map[string]string{"CODEX_HOME": os.Getenv("CODEX_HOME"), "HOME": os.Getenv("HOME")})
	if home == "" {
		return paths
	}
	if real, err := filepath.EvalSymlinks(home); err == nil {
		home = real
	}
	if rel, err := filepath.Rel(wsDir, home); err == nil && rel != ".." && !strings.HasPrefix(rel, "../") {
		log.Warn("CODEX_HOME lies in the workspace: sandboxed runs can read and write it", "codex_home", home)
		return paths
	}
	return append(paths, home)
}
