package app

import (
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"

	"troupe/config"
	"troupe/tools"
	"troupe/tools/codexagent"
	"troupe/tools/command"
)

// renameNotes remembers, per source of tools (a downstream server, a
// command tool), which of its exposed tools Codex shows under another
// name, so that the line saying so is written when that changes rather
// than at every registry build (a server that sends list_changed three
// times at start would repeat it three times). Bounded by the sources of
// the last build.
type renameNotes struct {
	mu   sync.Mutex
	last map[string]string // source -> the renamed names, joined
}

// note logs, at info, one line per source whose exposed tools (those reg
// serves) Codex shows with "_" in place of the characters it does not
// allow: how many, and one example. The names Codex cuts or renames with
// a hash suffix are warnings of their own (tools.CodexNameWarnings).
// First-party names are documented in their Codex form and not noted.
func (n *renameNotes) note(log *slog.Logger, regs []tools.Registration, reg *tools.Registry) {
	renamed := map[string][]string{}
	for _, r := range regs {
		name := r.Tool.Spec().Name
		if r.Source == "first-party" || tools.CodexName(name) == name {
			continue
		}
		if _, served := reg.Lookup(name); served {
			renamed[r.Source] = append(renamed[r.Source], name)
		}
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	next := make(map[string]string, len(renamed))
	for _, source := range slices.Sorted(maps.Keys(renamed)) {
		names := renamed[source]
		slices.Sort(names)
		key := strings.Join(names, "\x00")
		next[source] = key
		if n.last[source] == key {
			continue
		}
		log.Info("tool names: Codex shows these tools with \"_\" for each character outside [A-Za-z0-9_]",
			"defined_by", source, "tools", len(names),
			"example", fmt.Sprintf("%s -> %s", names[0], tools.CodexName(names[0])))
	}
	n.last = next
}

// troupeToolNames are the names of the tools troupe itself defines in
// regs (first-party and command tools), and those of its own it may serve
// under another configuration (shell.exec, Codex's), sorted.
func troupeToolNames(regs []tools.Registration) []string {
	names := []string{command.NameShell, codexagent.NameCodex, codexagent.NameReply}
	for _, r := range regs {
		if !isDownstream(r.Source) {
			names = append(names, r.Tool.Spec().Name)
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// serverPrefixes maps the name prefix of each enabled downstream server's
// tools ("<prefix><separator>") to the server's name; servers whose tools
// keep their own names (tool_prefix = "") have none.
func serverPrefixes(cfg *config.Config) map[string]string {
	out := map[string]string{}
	if !cfg.Features.EnableMcpServerSurface {
		return out
	}
	for name, s := range cfg.McpServers {
		if s.Enabled != nil && !*s.Enabled {
			continue
		}
		if e := exposure(cfg, name, s); e.Prefix != "" {
			out[e.Prefix+e.Separator] = name
		}
	}
	return out
}

// warnShadowing warns about each downstream server whose tools' names
// start as some of troupe's own do ("fs." beside fs.writeFile, "codex."
// beside codex): a tools.allow, tools.deny or approvals.trust pattern such
// as "fs.*" then applies to both, which nobody sees happen.
func warnShadowing(log *slog.Logger, cfg *config.Config, regs []tools.Registration) {
	own := troupeToolNames(regs)
	prefixes := serverPrefixes(cfg)
	for _, prefix := range slices.Sorted(maps.Keys(prefixes)) {
		var shadowed []string
		for _, name := range own {
			if strings.HasPrefix(name, prefix) || name+cfg.Tools.Separator == prefix {
				shadowed = append(shadowed, name)
			}
		}
		if len(shadowed) == 0 {
			continue
		}
		server := prefixes[prefix]
		log.Warn("downstream tools share the namespace of troupe's own: a tools.allow, tools.deny or approvals.trust pattern for one applies to both",
			"server", server, "prefix", prefix, "troupe_tools", strings.Join(shadowed, ", "),
			"fix", fmt.Sprintf("set tool_prefix in [mcp_servers.%s] to another name", server))
	}
}

// ToolPatterns is what each tools.allow and tools.deny pattern matches,
// for `troupe config check`.
type ToolPatterns struct {
	// Matches are the patterns' matches among troupe's own tools (first
	// party and command tools) and the downstream servers' prefixes.
	Matches []tools.PatternMatch
	// Servers maps each prefix of Matches to its server's name.
	Servers map[string]string
}

// ToolPatterns says which tools each pattern of [tools] allow and deny
// matches: troupe's own tools by name, a downstream server's by its
// prefix (they are known once it runs: `troupe tools` lists them).
func (a *App) ToolPatterns() (ToolPatterns, error) {
	cfg := a.config()
	regs, err := a.registrations(cfg, nil)
	if err != nil {
		return ToolPatterns{}, err
	}
	known := make([]string, len(regs))
	for i, r := range regs {
		known[i] = r.Tool.Spec().Name
	}
	servers := serverPrefixes(cfg)
	policy := tools.Policy{Allow: cfg.Tools.Allow, Deny: cfg.Tools.Deny}
	return ToolPatterns{Matches: policy.Explain(known, slices.Sorted(maps.Keys(servers))), Servers: servers}, nil
}
