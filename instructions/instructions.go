// Package instructions writes the instructions troupe's initialize result
// gives a session: which tools it serves (as this client will name them to
// its model), which are read-only and which wait for a person's approval,
// then the operator's own text. They are generated per session, since a
// session sees only its tools (allow/deny lists, switches, reloads) and
// Codex shows the model names of its own making.
package instructions

import (
	"fmt"
	"strings"

	"troupe/gate"
	"troupe/protocol"
	"troupe/tools"
)

// codexClientName is the clientInfo.name Codex sends in initialize. Codex
// shows the model MCP tool names with every character outside
// [A-Za-z0-9_] replaced (repo.readFile → repo_readFile), so instructions
// for it must use those names.
const codexClientName = "codex-mcp-client"

// codexServerName is the name Codex is assumed to know troupe by (the one
// "troupe codex-config" writes): Codex's hash suffixes for colliding and
// over-long tool names depend on it. Other names differ only there.
const codexServerName = "troupe"

// maxNamedTools bounds the tool names one line of the instructions lists;
// the rest are counted (the model has tools/list for all of them).
const maxNamedTools = 24

// toolHint is a one-line hint for one of troupe's first-party tools, by
// MCP name; "" for other tools. A hint is given only when the session
// sees the tool.
func toolHint(name string) string {
	switch name {
	case "repo.readFile":
		return "reads a text file"
	case "repo.ripgrep":
		return "searches file contents"
	case "docs.fetch":
		return "reads allow-listed documentation sites"
	case "shell.exec":
		return "runs a command (an argv array) in a sandbox"
	case "fs.writeFile":
		return "writes a file in the workspace"
	}
	return ""
}

// For is the initialize result's instructions for one session:
// generated from the tools reg holds (the ones this session sees, after
// the operator's allow/deny lists and switches), named as the client will
// show them to the model (for Codex the names it shows, sanitised and, when
// they collide or are too long, hash-suffixed; MCP names for everyone
// else), followed by the operator's configured text, if any.
// Tools the operator trusts (policy) are not said to wait for approval.
func For(reg *tools.Registry, client protocol.Implementation, configured string, policy gate.Policy) string {
	name := func(n string) string { return n }
	if client.Name == codexClientName && reg != nil {
		all, _ := reg.Page(0, reg.Len())
		names := make([]string, len(all))
		for i, t := range all {
			names[i] = t.Name
		}
		visible := tools.CodexVisibleNames(codexServerName, names)
		name = func(n string) string {
			if v, ok := visible[n]; ok {
				return v
			}
			return tools.CodexName(n)
		}
	}
	var read, approve, other, hints []string
	count := 0
	if reg != nil {
		page, _ := reg.Page(0, reg.Len())
		for _, t := range page {
			e, ok := reg.Lookup(t.Name)
			if !ok {
				continue
			}
			count++
			if h := toolHint(t.Name); h != "" {
				hints = append(hints, name(t.Name)+" "+h)
			}
			spec := e.Spec()
			switch {
			case spec.Safety.NeedsApproval() && !policy.Trusts(spec):
				approve = append(approve, name(t.Name))
			case t.Annotations != nil && t.Annotations.ReadOnlyHint != nil && *t.Annotations.ReadOnlyHint:
				read = append(read, name(t.Name))
			default:
				other = append(other, name(t.Name))
			}
		}
	}
	var b strings.Builder
	if count == 0 {
		b.WriteString("troupe serves no tools to this session.")
	} else {
		b.WriteString("troupe serves tools over one workspace. Paths are relative to the workspace root; " +
			"absolute paths must lie inside it.")
		listLine(&b, "Read-only tools", read)
		listLine(&b, "Other tools", other)
		listLine(&b, "Tools that wait for a person's approval on each call", approve)
		if len(hints) > 0 {
			b.WriteString(" " + strings.Join(hints, "; ") + ".")
		}
		if len(approve) > 0 && len(read) > 0 {
			b.WriteString(" Prefer the read-only tools when they suffice.")
		}
	}
	if c := strings.TrimSpace(configured); c != "" {
		b.WriteString("\n\n" + c)
	}
	return b.String()
}

// listLine appends " Title: a, b, c." naming at most maxNamedTools.
func listLine(b *strings.Builder, title string, names []string) {
	if len(names) == 0 {
		return
	}
	shown := names
	if len(shown) > maxNamedTools {
		shown = shown[:maxNamedTools]
	}
	fmt.Fprintf(b, " %s: %s", title, strings.Join(shown, ", "))
	if rest := len(names) - len(shown); rest > 0 {
		fmt.Fprintf(b, " and %d more (see tools/list)", rest)
	}
	b.WriteString(".")
}
