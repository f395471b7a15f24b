package config

import (
	"fmt"
	"maps"
	"net"
	"net/url"
	"path"
	"regexp"
	"slices"
	"strings"
	"time"
)

// DefaultTokenName is the name of http.auth.bearer_token (and serve's
// --bearer-token-env) among the named tokens.
const DefaultTokenName = "default"

// tokenName is what a token's name may be: it is shown in the audit log,
// the status page and metric labels, so it is short and plain.
var tokenName = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// envVarName is what token_env may name.
var envVarName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// maxLeeway bounds auth.oauth.leeway: a larger skew would accept tokens
// long expired.
const maxLeeway = 5 * time.Minute

// tokenKey is the path of a key of the i-th [[auth.tokens]] entry (from 0).
func tokenKey(i int, key ...string) []string {
	return append(p("auth", "tokens", entryPart(i+1)), key...)
}

// resolveTokens reads each [[auth.tokens]] entry's token from the
// variable its token_env names. An unset or empty variable is an error
// naming the variable and the token (never a value); the tokens join
// Secrets, so every redaction path hides them.
func (c *Config) resolveTokens(env map[string]string) []error {
	var errs []error
	for i := range c.Auth.Tokens {
		t := &c.Auth.Tokens[i]
		t.Token = ""
		if t.TokenEnv == "" || !envVarName.MatchString(t.TokenEnv) {
			continue // validateAuth says so
		}
		v := env[t.TokenEnv]
		if v == "" {
			errs = append(errs, errKey(tokenKey(i, "token_env"),
				"%s: the environment variable %s, which holds the token %q, is not set or empty",
				dotted(tokenKey(i, "token_env")), t.TokenEnv, t.Name))
			continue
		}
		t.Token = v
		c.Secrets = append(c.Secrets, v)
	}
	return errs
}

// validateAuth checks [auth], [[auth.tokens]], [auth.oauth] and
// http.public_url.
func (c *Config) validateAuth(ps *problems) {
	names := map[string]int{} // name → entry (from 0)
	if c.HTTP.Auth.BearerToken != "" {
		names[DefaultTokenName] = -1
	}
	byValue := map[string]string{} // token → name
	if c.HTTP.Auth.BearerToken != "" {
		byValue[c.HTTP.Auth.BearerToken] = DefaultTokenName
	}
	for i, t := range c.Auth.Tokens {
		at := func(key string) []string { return tokenKey(i, key) }
		switch prev, dup := names[t.Name]; {
		case t.Name == "":
			ps.add(at("name"), "%s is required: the token's name, shown in the audit log and the status page", dotted(at("name")))
		case !tokenName.MatchString(t.Name):
			ps.add(at("name"), "%s must be 1 to 64 of A-Z a-z 0-9 . _ -, got %q", dotted(at("name")), t.Name)
		case dup && prev < 0:
			ps.add(at("name"), "%s: %q is the name of http.auth.bearer_token (or --bearer-token-env): name this token otherwise, "+
				"or leave http.auth.bearer_token unset", dotted(at("name")), t.Name)
		case dup:
			ps.add(at("name"), "%s: the name %q is already %s's", dotted(at("name")), t.Name, dotted(tokenKey(prev, "name")))
		default:
			names[t.Name] = i
		}
		switch {
		case t.TokenEnv == "":
			ps.add(at("token_env"), "%s is required: the environment variable that holds the token", dotted(at("token_env")))
		case !envVarName.MatchString(t.TokenEnv):
			ps.add(at("token_env"), "%s must be an environment variable name such as CI_TOKEN, got %q", dotted(at("token_env")), t.TokenEnv)
		}
		if t.Token != "" {
			if other, dup := byValue[t.Token]; dup {
				ps.add(at("token_env"), "%s: the token %q has the same value as the token %q: each identity needs its own token",
					dotted(at("token_env")), t.Name, other)
			} else {
				byValue[t.Token] = t.Name
			}
		}
		validGlobs(ps, at("allow_tools"), t.AllowTools)
		validGlobs(ps, at("deny_tools"), t.DenyTools)
		validLimits(ps, tokenKey(i), t.Rate, t.Identity)
	}
	validLimits(ps, p("limits"), c.Limits.Rate, c.Limits.Identity)
	c.validateOAuth(ps)
	for _, op := range c.Auth.Operators {
		scope, isScope := strings.CutPrefix(op, "scope:")
		switch {
		case isScope && (scope == "" || strings.ContainsAny(scope, " \t\"")):
			ps.add(p("auth", "operators"), "auth.operators: %q: write scope:<scope>, with one scope and no spaces", op)
		case isScope && c.Auth.OAuth.Issuer == "":
			ps.add(p("auth", "operators"), "auth.operators: %q names an OAuth scope, but [auth.oauth] has no issuer", op)
		case isScope:
		default:
			if _, known := names[op]; !known {
				ps.add(p("auth", "operators"), "auth.operators: %q is neither a token's name (%s) nor scope:<scope>", op, knownNames(names))
			}
		}
	}
}

// knownNames lists the token names for a message.
func knownNames(names map[string]int) string {
	if len(names) == 0 {
		return "there are none"
	}
	list := make([]string, 0, len(names))
	for n := range names {
		list = append(list, fmt.Sprintf("%q", n))
	}
	slices.Sort(list)
	return "known: " + strings.Join(list, ", ")
}

// validGlobs checks globs over tool names (path.Match syntax).
func validGlobs(ps *problems, key []string, globs []string) {
	for _, g := range globs {
		if _, err := path.Match(g, ""); err != nil || g == "" {
			ps.add(key, "%s: %q is not a valid glob (path.Match syntax: *, ?, [a-z])", dotted(key), g)
		}
	}
}

// validLimits checks a [limits.rate] and [limits.identity] pair, the
// server's (at = limits) or a token's (at = auth.tokens[N]).
func validLimits(ps *problems, at []string, r RateLimits, id IdentityLimits) {
	for _, n := range []struct {
		key []string
		v   int
	}{
		{p("rate", "calls_per_minute"), r.CallsPerMinute},
		{p("identity", "max_concurrent_calls"), id.MaxConcurrentCalls},
		{p("identity", "max_sessions"), id.MaxSessions},
	} {
		if n.v < 0 {
			key := append(slices.Clone(at), n.key...)
			ps.add(key, "%s must not be negative (0 = no bound), got %d", dotted(key), n.v)
		}
	}
	for _, g := range slices.Sorted(maps.Keys(r.Tools)) {
		key := append(slices.Clone(at), "rate", "tools", g)
		if _, err := path.Match(g, ""); err != nil || g == "" {
			ps.add(key, "%s: %q is not a valid glob over tool names (path.Match syntax: *, ?, [a-z])", dotted(key[:len(key)-1]), g)
		}
		if r.Tools[g] < 0 {
			ps.add(key, "%s must not be negative (0 = no bound), got %d", dotted(key), r.Tools[g])
		}
	}
}

// validateOAuth checks [auth.oauth] and http.public_url.
func (c *Config) validateOAuth(ps *problems) {
	if u := c.HTTP.PublicURL; u != "" {
		pu, err := url.Parse(u)
		if err != nil || (pu.Scheme != "http" && pu.Scheme != "https") || pu.Host == "" || pu.User != nil ||
			pu.RawQuery != "" || pu.Fragment != "" || !strings.HasPrefix(pu.Path, "/") {
			ps.add(p("http", "public_url"), "http.public_url must be the MCP endpoint's absolute http(s) URL, with a path and "+
				"no user, query or fragment, such as https://mcp.example.com/mcp, got %q", u)
		}
	}
	o := c.Auth.OAuth
	if o.Leeway < 0 || o.Leeway > maxLeeway {
		ps.add(p("auth", "oauth", "leeway"), "auth.oauth.leeway must be from 0s to 5m, got %s", o.Leeway)
	}
	if o.SubjectClaim == "" {
		ps.add(p("auth", "oauth", "subject_claim"), "auth.oauth.subject_claim must name a claim, such as sub")
	}
	if o.Issuer == "" {
		if o.Audience != "" || len(o.RequiredScopes) > 0 || len(o.Scopes) > 0 {
			ps.add(p("auth", "oauth", "issuer"), "auth.oauth.issuer is required: [auth.oauth] sets other keys, "+
				"which need the authorization server")
		}
		return
	}
	iu, err := url.Parse(o.Issuer)
	switch {
	case err != nil || iu.Host == "" || (iu.Scheme != "https" && iu.Scheme != "http") || iu.User != nil ||
		iu.RawQuery != "" || iu.Fragment != "":
		ps.add(p("auth", "oauth", "issuer"), "auth.oauth.issuer must be the authorization server's absolute URL "+
			"without user, query or fragment, such as https://id.example.com/realms/main, got %q", o.Issuer)
	case iu.Scheme == "http" && !loopbackHost(iu.Hostname()):
		ps.add(p("auth", "oauth", "issuer"), "auth.oauth.issuer must be https:// (http:// only on a loopback host "+
			"such as 127.0.0.1 or localhost), got %q", o.Issuer)
	}
	if a := o.Audience; a != "" {
		if au, err := url.Parse(a); err != nil || !au.IsAbs() || au.Fragment != "" {
			ps.add(p("auth", "oauth", "audience"), "auth.oauth.audience must be an absolute URI without fragment "+
				"(RFC 8707's resource, such as https://mcp.example.com/mcp), got %q", a)
		}
	}
	for _, s := range o.RequiredScopes {
		if !validScope(s) {
			ps.add(p("auth", "oauth", "required_scopes"), "auth.oauth.required_scopes: %q is not a scope (no spaces or quotes)", s)
		}
	}
	for _, s := range slices.Sorted(maps.Keys(o.Scopes)) {
		key := p("auth", "oauth", "scopes", s)
		if !validScope(s) {
			ps.add(key, "auth.oauth.scopes: %q is not a scope (no spaces or quotes)", s)
		}
		validGlobs(ps, key, o.Scopes[s])
	}
	if c.HTTP.PublicURL == "" {
		switch {
		case c.Cluster.Provider != "":
			ps.require(p("http", "public_url"), p("auth", "oauth", "issuer"), "http.public_url is required with [auth.oauth] "+
				"in a cluster: the URL clients reach through the load balancer, which tokens must be issued for")
		case c.HTTP.Listen != "" && !loopbackListen(c.HTTP.Listen):
			ps.require(p("http", "public_url"), p("auth", "oauth", "issuer"), "http.public_url is required with [auth.oauth] "+
				"when http.listen (%s) is not loopback: the URL clients reach, which tokens must be issued for", c.HTTP.Listen)
		}
	}
}

// validScope reports whether s can be one scope (RFC 6749 §3.3: printable
// ASCII without space, " or \).
func validScope(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r <= ' ' || r > '~' || r == '"' || r == '\\' {
			return false
		}
	}
	return true
}

// loopbackHost reports whether a URL's host is this machine only:
// localhost, 127.0.0.0/8 or ::1.
func loopbackHost(h string) bool {
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// loopbackListen reports whether a HOST:PORT listens on loopback only (an
// empty host listens everywhere).
func loopbackListen(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	return err == nil && loopbackHost(host)
}

// CheckBearerFlag checks serve's --bearer-token-env token, which the
// flags set after Load (flag is how to name it, "--bearer-token-env NAME"), against [[auth.tokens]] as validateAuth checks
// http.auth.bearer_token: it is the token named "default", so no entry
// may have that name or the same value.
func (c *Config) CheckBearerFlag(flag, token string) error {
	for i, t := range c.Auth.Tokens {
		switch {
		case t.Name == DefaultTokenName:
			return fmt.Errorf("%s is the token named %q, and %s is named so too: name that token otherwise",
				flag, DefaultTokenName, dotted(tokenKey(i, "name")))
		case token != "" && t.Token == token:
			return fmt.Errorf("%s: the token has the same value as the token %q: each identity needs its own token", flag, t.Name)
		}
	}
	return nil
}
