package app

import (
	"fmt"
	"maps"
	"slices"
)

// CheckDownstreams is what Run checks of each enabled [mcp_servers] entry
// before starting it (its command found, its sandbox profile enforceable
// here): Run logs a failure and serves without that server; "troupe
// config check" reports it. A credential variable that is unset or empty
// is no failure here: the server runs as unauthenticated, and New warns
// (warnMissingCredentials).
func (a *App) CheckDownstreams() []error {
	cfg := a.config()
	if !cfg.Features.EnableMcpServerSurface {
		return nil
	}
	ds := a.newDownstreams(nil)
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(cfg.McpServers)) {
		s := cfg.McpServers[name]
		if s.Enabled != nil && !*s.Enabled {
			continue
		}
		if _, err := ds.clientConfig(name, s); err != nil {
			errs = append(errs, fmt.Errorf("[mcp_servers.%q]: %w (serve would run without this server)", name, err))
		}
	}
	return errs
}
