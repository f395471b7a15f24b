package app

import (
	"troupe/config"
	"troupe/tools"
	"troupe/tools/codexagent"
	"troupe/tools/command"
)

// buildMethods builds the registry of the management methods of Codex's
// former MCP server that sessions serve beside MCP ([codex]
// management_methods): the conversation, auth and config methods bridged
// to Codex when its binary is found, and execOneOffCommand, which runs
// through shell.exec's sandbox and approval. nil when there are none.
// The Codex methods run with the same options as the codex tools
// (codexOptions), so features.enable_mcp_server_surface keeps Codex's
// sandbox within workspace-write for their threads and turns too.
//
// Beside the registry it returns the tools each method stands for
// (actors.SessionOptions.MethodTools): execOneOffCommand shell.exec, the
// Codex methods codex and codex-reply. A session serves a method only
// while its tool set has those tools, so tools.allow/tools.deny and a
// disabled [codex] or [shell] govern the methods as they govern the
// tools, reloads included. The methods themselves are built once: a
// reload can take them away, but what [codex] and [shell] configure in
// them (the binary, the sandbox profile) changes at the next start, and a
// method missing at start (no Codex binary, management_methods off)
// stays missing until then (reload.go says so).
func (a *App) buildMethods(cfg *config.Config) (*tools.Registry, map[string][]string, error) {
	if !cfg.Codex.ManagementMethods {
		return nil, nil, nil
	}
	var ts []tools.Tool
	stand := map[string][]string{}
	if cfg.Shell.Enabled {
		stand[command.NameOneOff] = []string{command.NameShell}
		oneOff, err := command.OneOff(command.ShellOptions{Workspace: a.ws.Dir(), SandboxProfile: cfg.Shell.SandboxProfile,
			AllowNetwork: cfg.Shell.AllowNetwork, Sandbox: a.sb, Limits: sandboxLimits(cfg), Timeout: cfg.Shell.Timeout,
			KillGrace: cfg.Sandbox.KillGrace})
		if err != nil {
			a.regLog.Warn("execOneOffCommand is not served", "err", err)
		} else {
			ts = append(ts, oneOff)
		}
	}
	if opts, ok := codexOptions(cfg, a.ws.Dir(), a.sb, a.regLog); ok {
		methods, err := codexagent.Methods(opts, codexagent.MethodOptions{ShareConversations: cfg.Codex.ShareConversations,
			MaxProcesses: cfg.Codex.MaxProcesses})
		if err != nil {
			a.regLog.Warn("Codex's management methods are not served", "binary", opts.Binary, "err", err)
		} else {
			ts = append(ts, methods...)
			// newConversation starts a conversation as codex does,
			// sendUserTurn continues one as codex-reply does, and the
			// rest read or change the same Codex: an operator who takes
			// either tool away takes the methods away too.
			for _, m := range methods {
				stand[m.Spec().Name] = []string{codexagent.NameCodex, codexagent.NameReply}
			}
		}
	}
	if len(ts) == 0 {
		return nil, nil, nil
	}
	reg, err := tools.NewRegistry(ts...)
	return reg, stand, err
}
