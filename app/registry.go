package app

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"slices"
	"time"

	"troupe/config"
	"troupe/gate"
	"troupe/sandbox"
	"troupe/tools"
	"troupe/tools/benchmark"
	"troupe/tools/codexagent"
	"troupe/tools/command"
	"troupe/tools/docs"
	"troupe/tools/files"
	"troupe/tools/repo"
)

// buildRegistry registers every tool troupe serves with cfg, with where
// it comes from (the downstream servers' tools from servers), applies
// [tools] allow/deny, and warns, through a.regLog, about names Codex would
// cut or rename with a hash; the exposed tools it shows with "_" make one
// line per server (renameNotes).
func (a *App) buildRegistry(cfg *config.Config, servers []serverTools) (*tools.Registry, error) {
	log := a.regLog
	regs, err := a.registrations(cfg, servers)
	if err != nil {
		return nil, err
	}
	warnShadowing(log, cfg, regs)
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
	}
	a.renames.note(log, regs, reg)
	return reg, nil
}

// registrations are every tool cfg defines, with where it comes from (the
// downstream servers' tools from servers), before [tools] allow/deny.
// The downstream servers' listings are reviewed against their pins with
// a.pins, and what that changed is reported (notePins): the caller holds
// a.mu, or nothing runs (New, Tools).
func (a *App) registrations(cfg *config.Config, servers []serverTools) ([]tools.Registration, error) {
	ws, sb, log := a.ws, a.sb, a.regLog
	var regs []tools.Registration
	firstParty := map[string]any{
		tools.MetaDefaultTimeoutMs: cfg.Limits.CallTimeout.Milliseconds(),
		tools.MetaVersion:          a.opts.Version,
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
	// codex and codex-reply are served whatever the feature gate says: it
	// decides their approval and sandbox defaults (codexOptions), not
	// whether legacy clients find them.
	regs = append(regs, codexTools(cfg, ws.Dir(), sb, log)...)
	if cfg.Features.EnableMcpServerSurface {
		cmds, err := commandTools(cfg, ws.Dir(), sb, limits)
		if err != nil {
			return nil, err
		}
		regs = append(regs, cmds...)
		proxied, events := proxiedTools(context.Background(), servers, a.pins, log)
		a.notePins(events)
		regs = dropCollisions(append(regs, proxied...), log)
	}
	return regs, nil
}

// warnUnenforceable logs the tools of reg whose sandbox profile cannot be
// enforced here: their calls will be refused. It waits for the sandbox's
// probe, so Run calls it off the start-up path.
func (a *App) warnUnenforceable(cfg *config.Config, reg *tools.Registry) {
	limits := sandboxLimits(cfg)
	page, _ := reg.Page(0, reg.Len())
	for _, t := range page {
		e, ok := reg.Lookup(t.Name)
		if !ok {
			continue
		}
		spec := e.Spec()
		if p := spec.Safety.SandboxProfile; p != "" && p != string(sandbox.ProfileNone) {
			if err := a.sb.Check(sandbox.Policy{Profile: sandbox.Profile(p), Workspace: a.ws.Dir(),
				AllowNetwork: spec.Safety.AllowNetwork, Limits: limits}); err != nil {
				a.log.Warn("tool cannot run here: its sandbox profile cannot be enforced; calls will be refused",
					"tool", spec.Name, "reason", err)
			}
		}
	}
}

// commandTools builds the [mcp.<name>] tools, in name order; wsDir is the
// workspace's directory, where their cwd is taken from.
func commandTools(cfg *config.Config, wsDir string, sb *sandbox.Sandbox, limits sandbox.Limits) ([]tools.Registration, error) {
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
			Command: t.Command, Args: t.Args, Cwd: t.Cwd, Env: t.Env, MissingVars: t.MissingVars,
			InputSchema: t.InputSchemaJSON(), OutputSchema: t.OutputSchemaJSON(),
			Timeout: time.Duration(t.TimeoutMs) * time.Millisecond, Streaming: t.Streaming,
			SideEffects: t.SideEffects, Version: t.Version, RequiresApproval: approval,
			SandboxProfile: t.SandboxProfile, AllowNetwork: t.AllowNetwork,
			Sandbox: sb, Limits: limits, KillGrace: cfg.Sandbox.KillGrace,
		}, wsDir)
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

// codexOptions are the options Codex runs with, from [codex], the feature
// gate and troupe's environment; false when Codex is not to be offered
// (disabled, or no binary found). features.enable_mcp_server_surface is
// Surface: on, troupe's gate asks before every codex/codex-reply call and
// Codex's sandbox is kept within workspace-write; off, the legacy
// behaviour (Codex's own approval questions only, the sandbox the client
// asks for). The tools and the management methods get the same options.
func codexOptions(cfg *config.Config, wsDir string, sb *sandbox.Sandbox, log *slog.Logger) (codexagent.Options, bool) {
	if !cfg.Codex.Enabled {
		return codexagent.Options{}, false
	}
	bin := cfg.Codex.Binary
	if bin == "" {
		found, err := exec.LookPath("codex")
		if err != nil {
			log.Debug("no codex binary on PATH: the codex tools are not offered")
			return codexagent.Options{}, false
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
	stateDir, err := cfg.CodexStateDir()
	if err != nil {
		log.Warn("the codex tools are not offered", "err", err)
		return codexagent.Options{}, false
	}
	return codexagent.Options{Binary: bin, Workspace: wsDir, Env: env, Timeout: cfg.Codex.Timeout,
		Surface: cfg.Features.EnableMcpServerSurface, Logger: log, Sandbox: sb, Limits: sandboxLimits(cfg),
		StateDir: stateDir}, true
}

// codexTools are codex and codex-reply when Codex is offered.
func codexTools(cfg *config.Config, wsDir string, sb *sandbox.Sandbox, log *slog.Logger) []tools.Registration {
	opts, ok := codexOptions(cfg, wsDir, sb, log)
	if !ok {
		return nil
	}
	ts, err := codexagent.Tools(opts)
	if err != nil {
		log.Warn("the codex tools are not offered", "binary", opts.Binary, "err", err)
		return nil
	}
	var regs []tools.Registration
	for _, t := range ts {
		regs = append(regs, tools.Registration{Tool: t, Source: "[codex]"})
	}
	return regs
}
