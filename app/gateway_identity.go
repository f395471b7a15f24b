package app

import (
	"context"
	"encoding/json"
	"slices"

	"troupe/identity"
)

// What an identity may use of the gateway. An identity's grant
// (identity.Grant: allow_tools/deny_tools, or an OAuth scope's globs)
// names tools; the gateway applies it so:
//   - prompts are named like their server's tools (the same prefix), so the
//     grant's globs match prompt names as they match tool names: "gh.*"
//     grants a server's prompts with its tools;
//   - resources keep their servers' URIs, which no tool glob could name, so
//     a server's resources and resource templates are the identity's when
//     its grant allows at least one of that server's tools: whoever may
//     use none of a server's tools sees nothing of it.
// A caller without a grant (stdio, or a token without allow_tools) sees
// all the gateway offers, as before identities existed.

// grantOf is the caller's grant; nil allows everything.
func grantOf(ctx context.Context) *identity.Grant {
	if who := identity.FromContext(ctx); who != nil {
		return who.Tools
	}
	return nil
}

// callerSpecific reports whether a list's answer may differ between
// callers (the front tells them apart): its cache scope is then private.
func callerSpecific(ctx context.Context) bool {
	who := identity.FromContext(ctx)
	return who != nil && (who.Kind == identity.Token || who.Kind == identity.OAuth)
}

// toolLister is what tells a server's tools (*downstream.Server).
type toolLister interface {
	State() (state string, tools []json.RawMessage, err error)
}

// usable reports whether the caller in ctx may use s's resources: no
// grant, or one that allows at least one of s's tools (as exposed).
func usable(ctx context.Context, s gatewayServer) bool {
	g := grantOf(ctx)
	if g == nil {
		return true
	}
	l, ok := s.src.(toolLister)
	if !ok {
		return false
	}
	_, list, _ := l.State()
	for _, raw := range list {
		var t struct {
			Name string `json:"name"`
		}
		if json.Unmarshal(raw, &t) == nil && t.Name != "" && g.Allows(s.expose(t.Name)) {
			return true
		}
	}
	return false
}

// usableOnly is servers less those the caller in ctx may not use.
func usableOnly(ctx context.Context, servers []gatewayServer) []gatewayServer {
	if grantOf(ctx) == nil {
		return servers
	}
	return slices.DeleteFunc(slices.Clone(servers), func(s gatewayServer) bool { return !usable(ctx, s) })
}
