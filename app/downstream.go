package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"troupe/actors"
	"troupe/config"
	"troupe/downstream"
	"troupe/pins"
	"troupe/protocol"
	"troupe/redact"
	"troupe/sandbox"
	"troupe/tools"
	"troupe/tools/proxy"
)

// serverTools is one downstream server's part of the registry: the tools
// it listed and how to expose them.
type serverTools struct {
	name  string
	srv   proxy.Server
	opts  proxy.Options
	cfg   config.McpServer
	state string
	err   error
	tools []json.RawMessage
}

// proxiedTools makes the registrations of the servers' tools, in server
// order. A tool that cannot be served (a malformed entry, a schema that
// does not compile, filtered by enabled_tools/disabled_tools) is left out
// with a warning; it never fails the registry.
//
// Each server's listing is reviewed once against its pins (keeper, the
// server's on_change): a tool that changed since it was pinned is held
// (registered with Held: not listed, its calls refused naming the change)
// or, with on_change = "ask", served with the change in its Safety (every
// call asks a person, who is shown the diff). The events of the reviews
// (first use, changes, versions restored or accepted) are returned for
// the caller to report, each once: a review that finds nothing new has
// none, so building the registry again reports nothing twice. A nil
// keeper trusts every listing.
func proxiedTools(ctx context.Context, servers []serverTools, keeper *pins.Keeper, log *slog.Logger) ([]tools.Registration, []pins.Event) {
	var regs []tools.Registration
	var events []pins.Event
	for _, s := range servers {
		type candidate struct {
			tool tools.Tool
			def  pins.Def
		}
		var served []candidate
		for _, raw := range s.tools {
			t, err := proxy.Tool(s.srv, raw, s.opts)
			if err != nil {
				log.Warn("downstream tool left out", "server", s.name, "err", err)
				continue
			}
			remote, _ := t.Spec().Meta[protocol.MetaPrefix+"upstream_name"].(string)
			if len(s.cfg.EnabledTools) > 0 && !slices.Contains(s.cfg.EnabledTools, remote) ||
				slices.Contains(s.cfg.DisabledTools, remote) {
				continue
			}
			if _, err := tools.NewRegistry(t); err != nil {
				log.Warn("downstream tool left out: its definition is not valid here", "server", s.name, "tool", remote, "err", err)
				continue
			}
			def, err := pins.ToolDef(raw)
			if err != nil { // proxy.Tool read it: cannot happen
				log.Warn("downstream tool left out", "server", s.name, "err", err)
				continue
			}
			served = append(served, candidate{t, def})
		}
		if len(served) == 0 {
			continue
		}
		defs := make([]pins.Def, len(served))
		for i, c := range served {
			defs[i] = c.def
		}
		review, err := keeper.Review(ctx, s.name, pins.Tool, pinMode(s.cfg), defs)
		if err != nil {
			// The verdicts still hold what changed since the pins troupe
			// had; an unreadable pins file holds every tool.
			log.Error("downstream tools: the pins cannot be kept", "server", s.name, "err", err)
		}
		events = append(events, review.Events...)
		source := fmt.Sprintf("[mcp_servers.%q]", s.name)
		for _, c := range served {
			r := tools.Registration{Tool: c.tool, Source: source}
			switch v := review.Verdicts[c.def.Name]; v.State {
			case pins.Held:
				r.Held = heldMessage("tool", c.tool.Spec().Name, s.name, c.def.Name, v.Change)
			case pins.Asking:
				r.Tool = &changedTool{Tool: c.tool, change: v.Change, version: c.def.Hash()}
			}
			regs = append(regs, r)
		}
	}
	return regs, events
}

// heldMessage is the refusal of a held tool's call or prompt's get: what
// changed, and how an operator accepts it. exposed is the name troupe's
// clients see, remote the server's own (what --accept names).
func heldMessage(kind, exposed, server, remote string, c pins.Change) string {
	what := c.Summary()
	if what == "" {
		what = "changed"
	}
	return fmt.Sprintf("%s %s of server %s changed since it was trusted (%s) and is held until an operator accepts it "+
		"(troupe tools --accept %s.%s, or Accept on the status page)", kind, exposed, server, what, server, remote)
}

// changedTool is a downstream tool that changed since it was pinned, on a
// server whose on_change is "ask": served, but every call asks a person,
// and the approval shows the change (tools.Safety.Changed).
type changedTool struct {
	tools.Tool
	change  pins.Change
	version string // the listed version's pins hash: an approval binds it
}

// Spec is the tool's, with the change in its Safety.
func (c *changedTool) Spec() tools.Spec {
	s := c.Tool.Spec()
	s.Safety.Changed = c.change.Lines
	s.Safety.ChangeSummary = c.change.Summary()
	s.Safety.ChangeVersion = c.version
	return s
}

// Unwrap returns the wrapped tool (tools.Implements finds its optional
// interfaces through it).
func (c *changedTool) Unwrap() tools.Tool { return c.Tool }

// dropCollisions removes, deterministically, registrations whose name an
// earlier one has: first-party and command tools come first and win,
// then servers in name order. Each drop is logged naming both sources.
func dropCollisions(regs []tools.Registration, log *slog.Logger) []tools.Registration {
	seen := map[string]string{}
	out := regs[:0:0]
	for _, r := range regs {
		name := r.Tool.Spec().Name
		if first, dup := seen[name]; dup && r.Source != first && isDownstream(r.Source) {
			log.Warn("tool name collision: the downstream tool is left out", "tool", name, "kept", first, "dropped", r.Source)
			continue
		}
		seen[name] = r.Source
		out = append(out, r)
	}
	return out
}

func isDownstream(source string) bool { return strings.HasPrefix(source, "[mcp_servers.") }

// downstreams keeps troupe's connections to the [mcp_servers] and has the
// registry rebuilt when their tools change.
type downstreams struct {
	host    *actors.Host
	sb      *sandbox.Sandbox
	wsDir   string // the workspace: stdio servers' default cwd and writable directory
	version string // troupe's, in the clientInfo servers see
	log     *slog.Logger
	changed func()
	// parkTimeout is approvals.timeout: how long a legacy server's call
	// waits for a 2026-07-28 client's answer (the life of its state).
	parkTimeout time.Duration
	// secrets are the configuration's secrets (Secrets), masked in the
	// stderr lines a server's exit error keeps; apply renews them.
	secrets *redact.Redactor

	// subs are the gateway's resource subscriptions, told of servers'
	// updates and reconnects; nil without a gateway.
	subs *subscriptions
	// notices folds floods of the servers' prompts and resources
	// list_changed into at most one per noticeInterval each (nil: none
	// folded).
	notices *coalescer

	mu      sync.Mutex
	running map[string]*runningServer
}

// newDownstreams makes the keeper of the App's downstream servers; host
// is nil for checks and probes, which start nothing.
func (a *App) newDownstreams(host *actors.Host) *downstreams {
	return &downstreams{host: host, sb: a.sb, wsDir: a.ws.Dir(), version: a.opts.Version, log: a.log,
		secrets: Secrets(a.config())}
}

// runningServer is one started downstream server, with the configuration
// it was started from.
type runningServer struct {
	cfg  config.McpServer
	opts proxy.Options
	d    *downstream.Server
}

// apply makes the running set match cfg: servers added or changed are
// (re)started, removed, disabled or changed ones stopped.
func (ds *downstreams) apply(cfg *config.Config) {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	ds.secrets = Secrets(cfg)
	want := map[string]config.McpServer{}
	if cfg.Features.EnableMcpServerSurface {
		for name, s := range cfg.McpServers {
			if s.Enabled == nil || *s.Enabled {
				want[name] = s
			}
		}
	}
	if ds.running == nil {
		ds.running = map[string]*runningServer{}
	}
	for name, r := range ds.running {
		s, ok := want[name]
		if ok && sameButOnChange(s, r.cfg) {
			r.cfg = s // on_change is troupe's review of the listing: no restart
			continue
		}
		if !ok || !reflect.DeepEqual(s, r.cfg) {
			r.d.Stop()
			delete(ds.running, name)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(want)) {
		s := want[name]
		if r, ok := ds.running[name]; ok {
			r.opts = exposure(cfg, name, s) // the separator may have changed
			continue
		}
		ccfg, err := ds.clientConfig(name, s)
		if err != nil {
			ds.log.Error("downstream server not started", "server", name, "err", err)
			continue
		}
		notices, host := ds.notices, ds.host
		spec := downstream.Spec{Config: ccfg, StartupTimeout: startupTimeout(s), Changed: ds.changed,
			PromptsChanged:   func() { notices.send("prompts", host.PromptsChanged) },
			ResourcesChanged: func() { notices.send("resources", host.ResourcesChanged) }}
		if subs := ds.subs; subs != nil {
			spec.Connected = func() { subs.connected(name) }
			spec.ResourceUpdated = func(params json.RawMessage) { subs.updated(name, params) }
		}
		ds.running[name] = &runningServer{cfg: s, opts: exposure(cfg, name, s), d: ds.host.StartDownstream(spec)}
	}
}

// sameButOnChange says a and b differ in on_change at most.
func sameButOnChange(a, b config.McpServer) bool {
	a.OnChange = b.OnChange
	return reflect.DeepEqual(a, b)
}

// snapshot is every running server's state and tools, in name order.
func (ds *downstreams) snapshot() []serverTools {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	var out []serverTools
	for _, name := range slices.Sorted(maps.Keys(ds.running)) {
		r := ds.running[name]
		state, list, err := r.d.State()
		out = append(out, serverTools{name: name, srv: r.d, opts: r.opts, cfg: r.cfg, state: state, err: err, tools: list})
	}
	return out
}

// exposure is how a server's tools are named and gated.
func exposure(cfg *config.Config, name string, s config.McpServer) proxy.Options {
	prefix := name
	if s.ToolPrefix != nil {
		prefix = *s.ToolPrefix
	}
	opts := proxy.Options{Prefix: prefix, Separator: cfg.Tools.Separator, RequiresApproval: s.RequiresApproval,
		Timeout: time.Duration(s.ToolTimeoutSec * float64(time.Second))}
	if s.Command != "" {
		// The tools run in the server's process: its profile is theirs.
		if profile, err := sandbox.ParseProfile(s.SandboxProfile); err == nil {
			opts.SandboxProfile, opts.AllowNetwork = string(profile), s.AllowNetwork
		}
	}
	return opts
}

func startupTimeout(s config.McpServer) time.Duration {
	switch {
	case s.StartupTimeoutMs > 0:
		return time.Duration(s.StartupTimeoutMs) * time.Millisecond
	case s.StartupTimeoutSec > 0:
		return time.Duration(s.StartupTimeoutSec * float64(time.Second))
	}
	return 30 * time.Second
}

// clientConfig turns a [mcp_servers] table into how to reach it. A
// stdio server gets only its env and the variables env_vars names, and
// runs under its sandbox profile, writable only in the workspace.
func (ds *downstreams) clientConfig(name string, s config.McpServer) (downstream.Config, error) {
	c := downstream.Config{Name: name, ClientInfo: protocol.Implementation{Name: "troupe", Version: ds.version},
		Era: eraChoice(s.Era), ParkTimeout: ds.parkTimeout, Sampling: s.Sampling}
	c.CredentialVars, c.MissingVars = credentialVars(s)
	if s.URL != "" {
		c.URL, c.Headers = s.URL, s.HTTPHeaders
		if s.BearerTokenEnvVar != "" {
			// Unset or empty, the server is started all the same: Dial
			// fails with the *downstream.AuthError that names the
			// variable (MissingVars), shown as unauthenticated.
			c.BearerToken = os.Getenv(s.BearerTokenEnvVar)
		}
		return c, nil
	}
	env := map[string]string{}
	for _, k := range s.EnvVars {
		if v, ok := os.LookupEnv(k); ok {
			env[k] = v
		}
	}
	maps.Copy(env, s.Env)
	command := s.Command
	if !filepath.IsAbs(command) {
		// The child's PATH when it has one, else troupe's: a command on
		// troupe's PATH works without passing PATH on.
		path := env["PATH"]
		if path == "" {
			path = os.Getenv("PATH")
		}
		found, err := lookPathIn(command, path)
		if err != nil {
			return c, fmt.Errorf("command %q: %w", command, err)
		}
		command = found
	}
	c.Command, c.Args, c.Env = command, s.Args, env
	c.Redact = ds.secrets.With(redact.EnvValues(env)...)
	c.Cwd = ds.wsDir
	if s.Cwd != "" {
		c.Cwd = s.Cwd
		if !filepath.IsAbs(s.Cwd) {
			c.Cwd = filepath.Join(ds.wsDir, s.Cwd)
		}
	}
	profile, err := sandbox.ParseProfile(s.SandboxProfile)
	if err != nil {
		return c, err
	}
	policy := sandbox.Policy{Profile: profile, Workspace: ds.wsDir, AllowNetwork: s.AllowNetwork}
	if profile != sandbox.ProfileNone {
		if err := ds.sb.Check(policy); err != nil {
			return c, err
		}
		home, err := ds.serverHome(name)
		if err != nil {
			return c, err
		}
		policy.Writable = []string{home}
		for k, v := range homeEnv(home) {
			if _, set := s.Env[k]; !set {
				env[k] = v
			}
		}
	}
	sb := ds.sb
	c.Start = func(cmd *exec.Cmd) (func(), error) {
		if profile == sandbox.ProfileNone {
			sandbox.NewSession(cmd)
			if err := cmd.Start(); err != nil {
				return nil, err
			}
			pid := cmd.Process.Pid
			return func() { _ = syscall.Kill(-pid, syscall.SIGKILL) }, nil
		}
		proc, err := sb.Start(policy, cmd)
		if err != nil {
			return nil, err
		}
		var once sync.Once
		return func() {
			once.Do(func() {
				proc.Kill()
				_ = proc.Release()
			})
		}, nil
	}
	return c, nil
}

// credentialVars names the environment variables troupe's credential for
// a server comes from (bearer_token_env_var first, then the ${NAME}
// references of its env and http_headers), and those of them that are
// unset or empty: what an unauthenticated server's hint tells the
// operator to set. Names only: values never leave the environment here.
func credentialVars(s config.McpServer) (vars, missing []string) {
	if v := s.BearerTokenEnvVar; v != "" {
		vars = append(vars, v)
		if os.Getenv(v) == "" {
			missing = append(missing, v)
		}
	}
	for _, v := range s.SecretVars {
		if !slices.Contains(vars, v) {
			vars = append(vars, v)
		}
	}
	for _, v := range s.MissingVars {
		if !slices.Contains(missing, v) {
			missing = append(missing, v)
		}
	}
	return vars, missing
}

// serverHome makes (unless it exists) and returns a sandboxed stdio
// server's own writable directory, <temp root>/mcp-server-<name> (mode
// 0700, symlinks resolved), its HOME.
//
// Under a confining profile the operator's home is read-only, and servers
// write theirs at start: npx its cache (~/.npm, else EROFS and the server
// never starts), uvx and pip theirs in ~/.cache. The directory lies in
// troupe's temp root, which no other run sees, so one server's cache and
// state cannot be read or planted by another server or tool; it outlives
// the server's restarts (npx does not fetch again after a crash) and
// troupe's, and goes with the temp dir.
func (ds *downstreams) serverHome(name string) (string, error) {
	root, err := ds.sb.TempRoot()
	if err != nil {
		return "", err
	}
	// The prefix keeps names such as ".." one component of their own.
	dir := filepath.Join(root, "mcp-server-"+name)
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return "", fmt.Errorf("making the server's home: %w", err)
	}
	fi, err := os.Lstat(dir)
	if err != nil || !fi.IsDir() {
		return "", fmt.Errorf("the server's home %s is not a directory", dir)
	}
	return filepath.EvalSymlinks(dir)
}

// homeEnv points a sandboxed server's home and caches into home (see
// serverHome). The server's env table wins over each: an operator who
// sets HOME there chooses where it writes.
func homeEnv(home string) map[string]string {
	return map[string]string{
		"HOME":             home,
		"XDG_CACHE_HOME":   filepath.Join(home, ".cache"),
		"npm_config_cache": filepath.Join(home, ".npm"),
	}
}

// eraChoice maps mcp_servers.<name>.era to the client's choice.
func eraChoice(era string) downstream.EraChoice {
	switch era {
	case "legacy":
		return downstream.ForceLegacy
	case "modern":
		return downstream.ForceModern
	}
	return downstream.EraAuto
}

// lookPathIn finds an executable named name in the directories of path.
func lookPathIn(name, path string) (string, error) {
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			continue
		}
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", exec.ErrNotFound
}

// probeServers connects to each server of cfg once (for `troupe tools`),
// lists its tools and closes: the state of each, without a Host.
func (a *App) probeServers(ctx context.Context, cfg *config.Config) []serverTools {
	ds := a.newDownstreams(nil)
	var out []serverTools
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, name := range slices.Sorted(maps.Keys(cfg.McpServers)) {
		s := cfg.McpServers[name]
		if !cfg.Features.EnableMcpServerSurface || (s.Enabled != nil && !*s.Enabled) {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			st := serverTools{name: name, srv: offline(name), opts: exposure(cfg, name, s), cfg: s, state: downstream.StateDown}
			defer func() {
				mu.Lock()
				out = append(out, st)
				mu.Unlock()
			}()
			ccfg, err := ds.clientConfig(name, s)
			if err != nil {
				st.err = err
				return
			}
			ccfg.Logger = a.log
			dctx, cancel := context.WithTimeout(ctx, startupTimeout(s))
			defer cancel()
			c, err := downstream.Dial(dctx, ccfg, downstream.Handlers{})
			if auth, ok := downstream.AsAuthError(err); ok {
				st.state, st.err = downstream.StateUnauthenticated, auth
				return
			}
			if err != nil {
				st.err = err
				return
			}
			defer c.Close()
			st.tools, st.err = c.ListTools(dctx)
			if auth, ok := downstream.AsAuthError(st.err); ok {
				st.state, st.err = downstream.StateUnauthenticated, auth
			} else if st.err == nil {
				st.state = downstream.StateReady
			}
		}()
	}
	wg.Wait()
	slices.SortFunc(out, func(a, b serverTools) int { return strings.Compare(a.name, b.name) })
	return out
}

// offline is a proxy.Server for listing only: calls fail.
type offline string

func (o offline) Name() string { return string(o) }

func (o offline) CallTool(context.Context, string, json.RawMessage, downstream.Observer) (json.RawMessage, error) {
	return nil, downstream.ErrClosed
}

// settle waits, at most d, until no server is still connecting for the
// first time (downstream.AwaitStartup), and says which ones troupe serves
// without.
func (ds *downstreams) settle(d time.Duration) {
	ds.mu.Lock()
	var servers []*downstream.Server
	for _, name := range slices.Sorted(maps.Keys(ds.running)) {
		servers = append(servers, ds.running[name].d)
	}
	ds.mu.Unlock()
	if late := downstream.AwaitStartup(context.Background(), servers, d); len(late) > 0 {
		ds.log.Info("serving before these downstream servers are ready; their tools follow with notifications/tools/list_changed, "+
			"which Codex does not act on (raise limits.mcp_servers_startup_wait to wait longer)", "servers", late, "waited", d)
	}
}
