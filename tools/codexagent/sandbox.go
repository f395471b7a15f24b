package codexagent

import (
	"encoding/json"
	"path/filepath"
	"strings"
)

// Codex's sandbox under troupe's MCP server surface (Options.Surface).
//
// With the surface on, troupe's promise is that Codex's own sandbox is
// never wider than workspace-write for anything troupe starts: a person
// approved a call to a tool documented as confined to the workspace, so a
// client (or a user's Codex configuration) cannot quietly turn that into
// full access. The sandbox can be set in three places, all of which
// confine sees:
//
//   - thread/start and thread/resume take a SandboxMode ("sandbox"):
//     danger-full-access becomes workspace-write;
//   - turn/start takes a SandboxPolicy ("sandboxPolicy", from sendUserTurn):
//     dangerFullAccess or externalSandbox becomes workspaceWrite without
//     network, writable roots outside troupe's workspace are dropped;
//   - nothing asked: the thread's effective sandbox, which Codex states in
//     its thread/start and thread/resume answers (it may come from the
//     user's config.toml, a profile or a config override), is checked the
//     same way before every turn/start, and when it is wider troupe sends
//     turn/start the narrowed policy (turn/start's policy holds for that
//     turn and the following ones).
//
// With the surface off (legacy) the sandbox is exactly what the client
// asked for and Codex's configuration gives.

// Codex's SandboxPolicy types (app-server v2) and SandboxMode values.
const (
	policyDangerFullAccess = "dangerFullAccess"
	policyExternalSandbox  = "externalSandbox"
	policyWorkspaceWrite   = "workspaceWrite"
	policyReadOnly         = "readOnly"

	modeDangerFullAccess = "danger-full-access"
	modeWorkspaceWrite   = "workspace-write"
)

// workspaceWrite is the policy troupe narrows wider sandboxes to:
// Codex's workspace-write with its defaults (the turn's cwd and the
// temporary directories writable) and no network.
func workspaceWrite() map[string]any {
	return map[string]any{"type": policyWorkspaceWrite, "writableRoots": []any{}, "networkAccess": false,
		"excludeTmpdirEnvVar": false, "excludeSlashTmp": false}
}

// confine applies troupe's ceiling on Codex's sandbox to the params of a
// thread/start, thread/resume or turn/start that tool is about to send,
// in place. It is the one place the ceiling is decided, and every request
// troupe sends that sets or relies on the sandbox goes through it (the
// codex and codex-reply tools, newConversation, resumeConversation,
// sendUserTurn, sendUserMessage). effective is the thread's sandbox as
// Codex last stated it (nil when unknown); for a turn/start that asks for
// no sandbox it decides whether troupe asks for workspace-write. It
// returns the SandboxPolicy the request sets, nil when it sets none, so
// callers can keep the thread's effective sandbox. Every narrowing is
// logged at info; nothing else about the request changes. With the
// surface off it does nothing.
func (s *toolSet) confine(tool, method string, params map[string]any, effective map[string]any) map[string]any {
	if !s.opts.Surface {
		if p, ok := params["sandboxPolicy"].(map[string]any); ok {
			return p
		}
		return nil
	}
	switch method {
	case "thread/start", "thread/resume":
		if params["sandbox"] == modeDangerFullAccess {
			params["sandbox"] = modeWorkspaceWrite
			s.log.Info("codex: sandbox narrowed", "tool", tool, "method", method,
				"asked", modeDangerFullAccess, "sent", modeWorkspaceWrite)
		}
		return nil
	case "turn/start":
		asked, explicit := params["sandboxPolicy"].(map[string]any)
		if !explicit {
			asked = effective
		}
		if asked == nil {
			return nil
		}
		narrowed, changed := s.narrow(asked)
		if !changed {
			if explicit {
				return asked
			}
			return nil
		}
		params["sandboxPolicy"] = narrowed
		what := "the thread's sandbox"
		if explicit {
			what = "sandboxPolicy"
		}
		s.log.Info("codex: sandbox narrowed", "tool", tool, "method", method, "from", what,
			"asked", asked["type"], "sent", policyWorkspaceWrite)
		return narrowed
	}
	return nil
}

// narrow returns p within workspace-write, and whether that changed it.
// dangerFullAccess and externalSandbox (Codex runs commands unconfined,
// trusting a sandbox around it that troupe does not provide) become
// workspaceWrite without network; a workspaceWrite keeps only the
// writable roots inside troupe's workspace; readOnly is left alone. A
// type this package does not know is narrowed too: the ceiling holds
// whatever a later Codex adds.
func (s *toolSet) narrow(p map[string]any) (map[string]any, bool) {
	switch p["type"] {
	case policyReadOnly:
		return p, false
	case policyWorkspaceWrite:
		var roots []any
		switch r := p["writableRoots"].(type) {
		case []any: // as decoded from Codex's answer
			roots = r
		case []string: // as sendUserTurn builds it
			for _, x := range r {
				roots = append(roots, x)
			}
		}
		kept := []any{}
		for _, r := range roots {
			if dir, ok := r.(string); ok && s.inWorkspace(dir) {
				kept = append(kept, dir)
			}
		}
		if len(kept) == len(roots) {
			return p, false
		}
		out := map[string]any{}
		for k, v := range p {
			out[k] = v
		}
		out["writableRoots"] = kept
		return out, true
	}
	return workspaceWrite(), true
}

// inWorkspace reports whether dir (absolute) lies inside the workspace
// once its symlinks are resolved as far as they exist.
func (s *toolSet) inWorkspace(dir string) bool {
	if !filepath.IsAbs(dir) {
		return false
	}
	p := filepath.Clean(dir)
	if real, err := filepath.EvalSymlinks(p); err == nil {
		p = real
	}
	rel, err := filepath.Rel(s.wsReal, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}

// effectiveSandbox reads the thread's sandbox from a thread/start or
// thread/resume answer; nil when it states none.
func effectiveSandbox(raw json.RawMessage) map[string]any {
	var r struct {
		Sandbox map[string]any `json:"sandbox"`
	}
	if json.Unmarshal(raw, &r) != nil || r.Sandbox["type"] == nil {
		return nil
	}
	return r.Sandbox
}
