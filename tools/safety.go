package tools

import (
	"time"

	"troupe/protocol"
)

// Safety is what troupe's gate and runtime must know about a tool before
// running it: whether a person must approve each call, how its processes
// are isolated, how long a call may run and whether its output streams.
// The zero value describes a read-only, in-process tool that needs no
// approval, which is what the first-party read tools are.
type Safety struct {
	// RequiresApproval makes every call ask the client (a person) first,
	// unless the session trusts the tool.
	RequiresApproval bool
	// HighRisk marks tools that write files or reach the network on the
	// caller's say-so (shell.exec, fs.writeFile, command tools with such
	// side effects). Their calls always need approval, whatever the
	// configuration says; only a person can trust them, and only for one
	// session.
	HighRisk bool
	// SandboxProfile is the process sandbox profile the tool's programs
	// run under ("none", "default", "seatbelt"); "" for tools that run no
	// process.
	SandboxProfile string
	// AllowNetwork lets the tool's sandboxed programs use the network.
	AllowNetwork bool
	// SideEffects are declared hints shown in approval prompts and
	// discovery: "filesystem", "network", ...
	SideEffects []string
	// Timeout is the tool's ceiling for one call; 0 means the server's
	// default call timeout. A client may ask for less, never for more.
	Timeout time.Duration
	// Streaming means the tool can send its output as progress and log
	// notifications while it runs.
	Streaming bool
	// Changed (or ChangeSummary), when not empty, marks a downstream tool that changed since
	// it was trusted and that an operator has not accepted (its server's
	// on_change = "ask"): the diff a person reads, a line each, already
	// made printable (pins.Change.Lines). Every call of it asks a person,
	// who sees the diff; neither [approvals] trust nor a session's "allow
	// for the session" skips the question, since what was trusted is not
	// what runs now.
	Changed []string
	// ChangeSummary says in a few words what changed ("description and
	// input schema changed", pins.Change.Summary), for the prompt.
	ChangeSummary string
	// ChangeVersion identifies the changed version (its pins hash,
	// pins.Def.Hash): the approval's hash binds it, so an approval given
	// for one version never runs another. "" binds the diff alone.
	ChangeVersion string
}

// NeedsApproval reports whether a call must be approved by a person
// (before any session trust is considered).
func (s Safety) NeedsApproval() bool { return s.RequiresApproval || s.HighRisk || s.Unaccepted() }

// Unaccepted reports whether the tool changed since it was trusted and
// nobody accepted the change (Changed or ChangeSummary set): only a
// person's answer to each call lets it run.
func (s Safety) Unaccepted() bool { return len(s.Changed) > 0 || s.ChangeSummary != "" }

// Meta renders the discovery _meta members for s.
func (s Safety) Meta() map[string]any {
	m := map[string]any{
		MetaRequiresApproval: s.NeedsApproval(),
		MetaHighRisk:         s.HighRisk,
		MetaAllowsStreaming:  s.Streaming,
		MetaSideEffects:      append([]string{}, s.SideEffects...),
	}
	if s.SandboxProfile != "" {
		m[MetaSandboxProfile] = s.SandboxProfile
		m[MetaAllowNetwork] = s.AllowNetwork
	} else {
		// In-process tools run no program: os.Root confines them to the
		// workspace, and there is no process to sandbox.
		m[MetaSandboxProfile] = "none"
	}
	if s.Timeout > 0 {
		m[MetaDefaultTimeoutMs] = s.Timeout.Milliseconds()
	}
	return m
}

// More discovery metadata keys (see meta.go).
const (
	MetaHighRisk     = protocol.MetaPrefix + "high_risk"
	MetaAllowNetwork = protocol.MetaPrefix + "allow_network"
)
