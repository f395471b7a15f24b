package app

import (
	"log/slog"
	"maps"
	"slices"

	"troupe/config"
)

// warnMissingCredentials names, at start and at each reload, the
// credentials troupe holds for others that are unset or empty: the
// variables a command tool's ${NAME} references or a downstream server's
// bearer_token_env_var and ${NAME} references name. troupe serves all the
// same (the rule: a missing credential fails the calls that need
// it, as unauthenticated, not the whole server), so this warning is what
// tells the operator before a caller does. Names only, never values.
func warnMissingCredentials(cfg *config.Config, log *slog.Logger) {
	for _, name := range slices.Sorted(maps.Keys(cfg.Mcp)) {
		if vars := cfg.Mcp[name].MissingVars; len(vars) > 0 {
			log.Warn("a command tool's credential is not set: its calls fail as unauthenticated until it is",
				"tool", name, "set", vars)
		}
	}
	if !cfg.Features.EnableMcpServerSurface {
		return
	}
	for _, name := range slices.Sorted(maps.Keys(cfg.McpServers)) {
		s := cfg.McpServers[name]
		if s.Enabled != nil && !*s.Enabled {
			continue
		}
		if _, missing := credentialVars(s); len(missing) > 0 {
			log.Warn("a downstream server's credential is not set: it shows as unauthenticated until it is",
				"server", name, "set", missing)
		}
	}
}
