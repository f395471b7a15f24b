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
// through shell.exec's sandbox and approval and is served while [shell] is
// enabled. nil when there are none. The Codex methods run with the same
// options as the codex tools (codexOptions), so features.
// enable_mcp_server_surface keeps Codex's sandbox within workspace-write
// for their threads and turns too. It is built once: changes to [codex]
// and [shell] reach the methods at the next start (reload.go says so).
func (a *App) buildMethods(cfg *config.Config) (*tools.Registry, error) {
	if !cfg.Codex.ManagementMethods {
		return nil, nil
	}
	var ts []tools.Tool
	if cfg.Shell.Enabled {
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
		}
	}
	if len(ts) == 0 {
		return nil, nil
	}
	return tools.NewRegistry(ts...)
}
