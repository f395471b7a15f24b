package config

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"maps"
	"slices"

	"troupe/gate/approvalstate"
)

// fingerprintSections are the parts of the configuration every node of a
// cluster must agree on, by name: a session served through one node and
// owned by another must see the same tools, downstream servers, approval
// rules and authentication whichever node it reaches.
//
//   - "tools": [tools], [mcp], [docs], [features], [sandbox], [shell],
//     [codex], [prompts] and [resources] (what a session is offered and
//     how its calls run);
//   - "mcp_servers": the downstream servers;
//   - "approvals": [approvals] without its keys (the key is what the
//     fingerprint is keyed with), but whether previous keys are set;
//   - "auth": [http.auth], [auth] (the named tokens with their values,
//     which only the HMAC carries, OAuth, operators) and http.public_url
//     (the OAuth audience by default): every node must accept the same
//     callers as the same identities, as a forwarded request is
//     authenticated again on the node that owns its session.
var fingerprintSections = map[string]func(*Config) any{
	"tools": func(c *Config) any {
		return struct {
			Tools     ToolPolicy
			Mcp       map[string]CommandTool
			Docs      Docs
			Features  Features
			Sandbox   Sandbox
			Shell     Shell
			Codex     Codex
			Prompts   NamePolicy
			Resources NamePolicy
		}{c.Tools, c.Mcp, c.Docs, c.Features, c.Sandbox, c.Shell, c.Codex, c.Prompts, c.Resources}
	},
	"mcp_servers": func(c *Config) any { return c.McpServers },
	"approvals": func(c *Config) any {
		a := c.Approvals
		previous := len(a.PreviousStateKeys) > 0
		a.StateKey, a.PreviousStateKeys = "", nil
		return struct {
			Approvals         Approvals
			PreviousStateKeys bool
		}{a, previous}
	},
	"auth": func(c *Config) any {
		return struct {
			HTTPAuth  HTTPAuth
			Auth      Auth
			PublicURL string
		}{c.HTTP.Auth, c.Auth, c.HTTP.PublicURL}
	},
}

// ClusterFingerprint is, for each part of the configuration the nodes of
// a cluster must share (fingerprintSections: "tools", "mcp_servers",
// "approvals", "auth"), an HMAC-SHA256 in hex of that part's canonical
// encoding (JSON of its typed values: struct fields in order, map keys
// sorted), keyed by approvals.state_key. Nodes exchange and compare these
// at join (DiffFingerprints) and refuse a cluster that disagrees, naming
// the parts. An HMAC rather than a hash: the parts hold secrets (the
// bearer token, env values), and a plain hash of a short token could be
// guessed back by whoever reads the exchange; without the shared key an
// HMAC says nothing. It is meaningful only with a state key, which a
// clustered configuration must have (without one it is keyed by nothing).
func (c *Config) ClusterFingerprint() map[string]string {
	key := []byte(c.Approvals.StateKey)
	if k, err := approvalstate.ParseKey(c.Approvals.StateKey); err == nil {
		key = k[:] // the same key written in base64 or hex is the same key
	}
	out := make(map[string]string, len(fingerprintSections))
	for name, part := range fingerprintSections {
		b, err := json.Marshal(part(c))
		if err != nil {
			// Only values JSON cannot carry (a NaN in a schema) get here;
			// the error names their kind, so equal parts still agree.
			b = []byte("unencodable: " + err.Error())
		}
		mac := hmac.New(sha256.New, key)
		mac.Write([]byte(name + "\x00")) // a part's MAC never stands for another's
		mac.Write(b)
		out[name] = hex.EncodeToString(mac.Sum(nil))
	}
	return out
}

// DiffFingerprints returns, sorted, the names of the parts on which two
// ClusterFingerprint maps differ; a part that only one of them has
// differs too (a node of another version that fingerprints other parts
// does not pass as agreeing).
func DiffFingerprints(a, b map[string]string) []string {
	var diff []string
	for _, name := range slices.Sorted(maps.Keys(a)) {
		if v, ok := b[name]; !ok || !hmac.Equal([]byte(v), []byte(a[name])) {
			diff = append(diff, name)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(b)) {
		if _, ok := a[name]; !ok {
			diff = append(diff, name)
		}
	}
	slices.Sort(diff)
	return diff
}
