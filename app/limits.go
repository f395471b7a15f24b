package app

import (
	"troupe/config"
	"troupe/limits"
)

// limitRules are the identities' limits the config sets: [limits.rate]
// and [limits.identity] for every identity, and each [[auth.tokens]]
// entry's own rate and identity tables for its holder.
func limitRules(cfg *config.Config) limits.Rules {
	r := limits.Rules{Default: limitsOf(cfg.Limits.Rate, cfg.Limits.Identity)}
	for _, t := range cfg.Auth.Tokens {
		own := limitsOf(t.Rate, t.Identity)
		if own.CallsPerMinute == 0 && len(own.Tools) == 0 && own.MaxConcurrentCalls == 0 && own.MaxSessions == 0 {
			continue
		}
		if r.Tokens == nil {
			r.Tokens = map[string]limits.Limits{}
		}
		r.Tokens[t.Name] = own
	}
	return r
}

func limitsOf(rate config.RateLimits, id config.IdentityLimits) limits.Limits {
	return limits.Limits{CallsPerMinute: rate.CallsPerMinute, Tools: rate.Tools,
		MaxConcurrentCalls: id.MaxConcurrentCalls, MaxSessions: id.MaxSessions}
}

// newLimiter is the limiter of a running server: its counters live in
// this process (a cluster node gives its own store with UseStore once it
// has joined).
func newLimiter(cfg *config.Config) *limits.Limiter {
	return limits.NewLimiter(limits.NewLocal(), limitRules(cfg))
}

// setLimits puts a reload's limits into force for later requests.
func setLimits(_ *App, run *running, next *config.Config) {
	run.limits.Set(limitRules(next))
}
