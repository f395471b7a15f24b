package app

import (
	"errors"
	"fmt"
	"reflect"
	"slices"

	"troupe/config"
	"troupe/identity"
	"troupe/logging"
)

// Reload puts next, a whole effective configuration, into force while Run
// runs. Every reload rebuilds the tool registry (sessions whose list
// changed get notifications/tools/list_changed; calls in flight finish with
// the tools they started with), restarts the downstream servers that were
// added, removed or changed, and keeps the log redactor in step with the
// secrets. Then each part of the configuration in reloadRules that differs
// from the one in force is applied, or, when only a restart applies it,
// named in one warning. A next whose tool set is invalid is refused as a
// whole: the error says why, and the configuration in force stays.
func (a *App) Reload(next *config.Config) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	run := a.run
	if run == nil {
		return errors.New("config reload: troupe is not running")
	}
	reg, err := a.buildRegistry(next, run.ds.snapshot())
	if err != nil {
		logProblems(a.log, "config reload: the new tool set is invalid; keeping the last good configuration", err)
		return fmt.Errorf("config reload: the new tool set is invalid: %w", err)
	}
	// Servers removed or changed go now, new ones start connecting (their
	// tools arrive with a rebuild once they are up).
	run.ds.apply(next)
	if again, err := a.buildRegistry(next, run.ds.snapshot()); err == nil {
		reg = again
	}
	if a.opts.Secrets != nil {
		a.opts.Secrets.Store(Secrets(next))
	}
	if run.gw != nil {
		a.offerGateway(run.host, run.gw, next)
	}
	a.setRegistry(run.host, reg)
	a.warnUnenforceable(next, reg)
	warnMissingCredentials(next, a.log)
	var atStart []string
	for _, r := range reloadRules {
		if reflect.DeepEqual(r.part(a.cfg), r.part(next)) {
			continue
		}
		if r.apply == nil {
			atStart = append(atStart, r.key)
			continue
		}
		r.apply(a, run, next)
	}
	if len(atStart) > 0 {
		a.log.Warn("config reload: changes that take effect at the next start", "keys", atStart)
	}
	a.cfg = next
	a.log.Info("configuration reloaded", "tools", reg.Len())
	return nil
}

// A reloadRule is one part of the configuration, and what a reload does
// when that part changed.
type reloadRule struct {
	key  string                   // the part as the config file names it
	part func(*config.Config) any // the values compared (reflect.DeepEqual)
	// apply puts the change into force; nil when the part is read only at
	// start, so a change is reported and waits for the next start.
	apply func(a *App, run *running, next *config.Config)
}

// reloadRules are the parts of the configuration a reload compares, beyond
// the tool set (tools, docs, mcp, mcp_servers, features, shell, codex and
// the sandbox's limits), which every reload rebuilds.
var reloadRules = []reloadRule{
	{key: "logging.level", part: func(c *config.Config) any { return c.Logging.Level }, apply: setLogLevel},
	{key: "auth", part: func(c *config.Config) any { return [3]any{staticTokens(c), c.Auth.OAuth, c.Auth.Operators} }, apply: setAuth},
	{key: "limits.rate, limits.identity and the tokens' own", part: func(c *config.Config) any { return limitRules(c) }, apply: setLimits},
	// on_change needs no rule: every reload reviews the listings again.
	{key: "pins.path", part: func(c *config.Config) any {
		path, _ := c.PinsFile()
		return [2]any{path, c.HasDownstreamServers()}
	}, apply: setPins},

	{key: "logging.format", part: func(c *config.Config) any { return c.Logging.Format }},
	{key: "[server]", part: func(c *config.Config) any { return c.Server }},
	{key: "[sessions]", part: func(c *config.Config) any { return c.Sessions }},
	{key: "[limits]", part: func(c *config.Config) any {
		l := c.Limits
		l.Rate, l.Identity = config.RateLimits{}, config.IdentityLimits{} // applied by the rule above
		return l
	}},
	{key: "[http] (all but auth.bearer_token)", part: func(c *config.Config) any {
		h := c.HTTP
		h.Auth = config.HTTPAuth{}
		return h
	}},
	{key: "sandbox.driver", part: func(c *config.Config) any { return c.Sandbox.Driver }},
	{key: "[approvals]", part: func(c *config.Config) any { return c.Approvals }},
	{key: "[audit]", part: func(c *config.Config) any { return c.Audit }},
	{key: "[output]", part: func(c *config.Config) any { return c.Output }},
	{key: "[metrics]", part: func(c *config.Config) any { return c.Metrics }},
	{key: "[tracing]", part: func(c *config.Config) any { return c.Tracing }},
	// A node joins a cluster, and leaves it, only as a new process: the
	// actor system's remote and membership are made once, at start.
	{key: "[cluster]", part: func(c *config.Config) any { return c.Cluster }},
	// The management methods (methods.go) are built once; their tools
	// keep per-session state (Codex processes, listeners) a rebuild would
	// orphan. Whether each is served follows the tool set every reload
	// rebuilds (actors.SessionOptions.MethodTools), so a reload can take
	// them away at once; what [codex] and [shell] configure in them waits.
	{key: "the management methods ([codex], [shell] as execOneOffCommand uses it)", part: func(c *config.Config) any {
		return [2]any{c.Codex, c.Shell}
	}},
}

// setLogLevel makes logging.level the log handler's level.
func setLogLevel(a *App, _ *running, next *config.Config) {
	if l, err := logging.ParseLevel(next.Logging.Level); err == nil && a.opts.Level != nil {
		a.opts.Level.Set(l)
	}
}

// setAuth makes the config's tokens (http.auth.bearer_token as
// "default", [[auth.tokens]]) and [auth.oauth] the ones later HTTP
// requests must carry; a changed [auth.oauth] gets a new validator, which
// fetches the issuer's keys anew. The sessions of a token it removed or
// renamed end: the holder could no longer reach them, and their calls
// stop. A token whose value changed under the same name keeps its
// sessions (the identity is the name).
func setAuth(a *App, run *running, next *config.Config) {
	if run.web == nil {
		return
	}
	chain := authChain(next, a.log)
	run.web.handler.SetAuth(chain)
	names := chain.Tokens.Names()
	if n := run.web.handler.EndSessionsOf(func(who *identity.Identity) bool {
		return who.Kind == identity.Token && !slices.Contains(names, who.Name)
	}); n > 0 {
		a.log.Info("reload: ended the sessions of tokens it removed", "sessions", n)
	}
}
