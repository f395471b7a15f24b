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
}

// NeedsApproval reports whether a call must be approved by a person
// (before any session trust is considered).
func (s Safety) NeedsApproval() bool { return s.RequiresApproval || s.HighRisk }

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
