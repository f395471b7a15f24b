package main

import (
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"

	"troupe/config"
	"troupe/gate/approvalstate"
	"troupe/sandbox"
	"troupe/tools"
)

// prepared is what serve sets up from a loaded configuration before it
// serves: the workspace, the sandbox and the tool registry without
// downstream tools (those arrive as the servers connect).
type prepared struct {
	ws       *sandbox.Workspace
	sb       *sandbox.Sandbox
	registry *tools.Registry
	writable config.RunWritable
	// approvals seals and opens the requestState of approvals for
	// stateless (2026-07-28) clients; the MRTR wiring hands it to the Host.
	approvals *approvalstate.Sealer
}

// prepare runs every check serve runs before serving, in serve's order,
// and returns what serve needs; "config check" calls it too, so that it
// refuses exactly what serve refuses. On failure it returns nil, each
// problem found, and the exit code: exitUsage when the command line or the
// configuration is wrong (a workspace that cannot be opened, troupe's own
// files where runs may write, an invalid tool set), exitRuntime when the
// machine fails troupe (the sandbox cannot be set up).
func prepare(cfg *config.Config, workspace string, log *slog.Logger) (*prepared, []error, int) {
	if cfg.HTTP.Listen != "" {
		if _, err := checkHTTPAddress(cfg); err != nil {
			return nil, []error{err}, exitUsage
		}
	}
	dir := workspace
	if dir == "" {
		dir = cfg.Server.Workspace
	}
	if dir == "" {
		var err error
		if dir, err = os.Getwd(); err != nil {
			return nil, []error{fmt.Errorf("cannot determine the current directory: %w", err)}, exitRuntime
		}
	}
	ws, err := sandbox.OpenWorkspace(dir)
	if err != nil {
		return nil, []error{fmt.Errorf("cannot open the workspace: %w", err)}, exitUsage
	}
	// troupe's own files must lie where no tool run may write.
	writable := config.RunWritable{Workspace: ws.Dir()}
	if err := config.CheckOwnFiles(cfg, writable); err != nil {
		ws.Close()
		return nil, problems(err), exitUsage
	}
	// Runs must not read troupe's own files: the sandbox hides them.
	sb, err := sandbox.New(sandbox.Options{Driver: cfg.Sandbox.Driver, Logger: log, Hidden: cfg.OwnPaths()})
	if err != nil {
		ws.Close()
		return nil, []error{fmt.Errorf("cannot set up the process sandbox: %w", err)}, exitRuntime
	}
	registry, err := buildRegistry(cfg, ws, sb, nil, log)
	if err != nil {
		ws.Close()
		return nil, []error{fmt.Errorf("cannot build the tool registry: %w", err)}, exitUsage
	}
	approvals, err := newApprovalStates(cfg, log)
	if err != nil {
		ws.Close()
		return nil, []error{err}, exitUsage
	}
	return &prepared{ws: ws, sb: sb, registry: registry, writable: writable, approvals: approvals}, nil, exitOK
}

// checkDownstreams is what serve checks of each enabled [mcp_servers]
// entry before starting it (its command found, its sandbox profile
// enforceable here, its token variable set): serve logs a failure and
// serves without that server; "config check" reports it.
func checkDownstreams(cfg *config.Config, p *prepared, log *slog.Logger) []error {
	if !cfg.Features.EnableMcpServerSurface {
		return nil
	}
	ds := &downstreams{sb: p.sb, ws: p.ws, log: log}
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(cfg.McpServers)) {
		s := cfg.McpServers[name]
		if s.Enabled != nil && !*s.Enabled {
			continue
		}
		if _, err := ds.upstreamConfig(name, s); err != nil {
			errs = append(errs, fmt.Errorf("[mcp_servers.%q]: %w (serve would run without this server)", name, err))
		}
	}
	return errs
}
