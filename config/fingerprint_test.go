package config

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"maps"
	"slices"
	"strings"
	"testing"
)

// fingerprintBase is a configuration with something in every part the
// fingerprint covers, secrets included.
const fingerprintBase = `
[tools]
deny = ["shell.exec"]
[mcp.a]
command = "echo"
args = ["a"]
env = { API_TOKEN = "tool-secret-value" }
[mcp.b]
command = "echo"
args = ["b"]
[mcp.c]
command = "echo"
[mcp_servers.everything]
command = "npx"
args = ["-y", "@modelcontextprotocol/server-everything"]
[approvals]
timeout = "2m"
state_key = "${STATE_KEY}"
[http.auth]
bearer_token = "${TOKEN}"
`

func fingerprintOf(t *testing.T, text, stateKey string, overrides ...string) map[string]string {
	t.Helper()
	env := []string{"HOME=" + t.TempDir(), "STATE_KEY=" + stateKey, "TOKEN=bearer-secret-value"}
	c, err := load(t, writeConfig(t, text), env, overrides...)
	if err != nil {
		t.Fatal(err)
	}
	return c.ClusterFingerprint()
}

// TestClusterFingerprint: the same configuration gives the same map; a
// change shows in its own part only, one outside every part in none; a
// different state key changes every part; the same key written in hex
// or base64 is the same key.
func TestClusterFingerprint(t *testing.T) {
	raw := []byte(strings.Repeat("k", 32))
	key := base64.StdEncoding.EncodeToString(raw)
	base := fingerprintOf(t, fingerprintBase, key)
	if got := slices.Sorted(maps.Keys(base)); !slices.Equal(got, []string{"approvals", "auth", "limits", "mcp_servers", "tools"}) {
		t.Fatalf("parts: %q", got)
	}
	for name, v := range base {
		if b, err := hex.DecodeString(v); err != nil || len(b) != sha256.Size {
			t.Errorf("%s: %q is not a hex HMAC-SHA256", name, v)
		}
	}
	for i := 0; i < 5; i++ { // map order must not matter
		if d := DiffFingerprints(base, fingerprintOf(t, fingerprintBase, key)); len(d) != 0 {
			t.Fatalf("the same configuration differs in %q", d)
		}
	}
	if d := DiffFingerprints(base, fingerprintOf(t, fingerprintBase, hex.EncodeToString(raw))); len(d) != 0 {
		t.Fatalf("the same key in hex differs in %q", d)
	}
	for _, tc := range []struct {
		override string
		want     []string
	}{
		{`mcp.b.args=["B"]`, []string{"tools"}},
		{`tools.deny=[]`, []string{"tools"}},
		{`codex.enabled=false`, []string{"tools"}},
		{`mcp_servers.everything.enabled=false`, []string{"mcp_servers"}},
		{`approvals.timeout="3m"`, []string{"approvals"}},
		{`approvals.previous_state_keys=["` + hex.EncodeToString([]byte(strings.Repeat("p", 32))) + `"]`, []string{"approvals"}},
		{`http.auth.bearer_token="another"`, []string{"auth"}},
		{`auth.operators=["default"]`, []string{"auth"}},
		{`http.listen="127.0.0.1:8080"`, nil},
		{`limits.page_size=7`, nil},
		{`limits.rate.calls_per_minute=60`, []string{"limits"}},
		{`limits.rate.tools={"repo.*"=5}`, []string{"limits"}},
		{`limits.identity.max_sessions=3`, []string{"limits"}},
		{`cluster.name="other"`, nil},
	} {
		got := DiffFingerprints(base, fingerprintOf(t, fingerprintBase, key, tc.override))
		if !slices.Equal(got, tc.want) {
			t.Errorf("-c %s: differs in %q, want %q", tc.override, got, tc.want)
		}
	}
	other := base64.StdEncoding.EncodeToString([]byte(strings.Repeat("o", 32)))
	if got := DiffFingerprints(base, fingerprintOf(t, fingerprintBase, other)); !slices.Equal(got, []string{"approvals", "auth", "limits", "mcp_servers", "tools"}) {
		t.Errorf("another state key differs in %q, want every part", got)
	}
}

// TestClusterFingerprintHidesSecrets: no secret, nor its plain hash,
// appears in the fingerprint.
func TestClusterFingerprintHidesSecrets(t *testing.T) {
	key := base64.StdEncoding.EncodeToString([]byte(strings.Repeat("k", 32)))
	fp := fingerprintOf(t, fingerprintBase, key)
	all := strings.Join(slices.Collect(maps.Values(fp)), " ")
	for _, secret := range []string{"bearer-secret-value", "tool-secret-value", key, hex.EncodeToString([]byte(strings.Repeat("k", 32)))} {
		sum := sha256.Sum256([]byte(secret))
		if strings.Contains(all, secret) || strings.Contains(all, hex.EncodeToString(sum[:])) {
			t.Errorf("the fingerprint shows %q or its hash: %v", secret, fp)
		}
	}
}

// TestDiffFingerprints: a part one side lacks differs; the names come
// sorted.
func TestDiffFingerprints(t *testing.T) {
	a := map[string]string{"tools": "1", "auth": "2", "approvals": "3"}
	b := map[string]string{"tools": "1", "auth": "x", "mcp_servers": "4"}
	if got := DiffFingerprints(a, b); !slices.Equal(got, []string{"approvals", "auth", "mcp_servers"}) {
		t.Fatalf("DiffFingerprints = %q", got)
	}
	if got := DiffFingerprints(a, a); got != nil {
		t.Fatalf("equal maps differ in %q", got)
	}
	if got := DiffFingerprints(nil, map[string]string{"tools": "1"}); !slices.Equal(got, []string{"tools"}) {
		t.Fatalf("against nothing: %q", got)
	}
}
