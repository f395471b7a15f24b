package config

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// load runs Load with an environment of exactly env (nothing from the
// test process leaks in).
func load(t *testing.T, file string, env []string, overrides ...string) (*Config, error) {
	t.Helper()
	if env == nil {
		env = []string{"HOME=" + t.TempDir()}
	}
	return Load(Options{File: file, Overrides: overrides, Environ: env})
}

func writeConfig(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "config.toml")
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestDefaults(t *testing.T) {
	c, err := load(t, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Limits.MaxLineBytes != 4<<20 || c.Limits.CallTimeout != 120*time.Second || c.Server.Name != "troupe" ||
		!c.Features.EnableMcpServerSurface || !slices.Equal(c.Tools.Allow, []string{"*"}) || c.File != "" ||
		c.Audit.MaxBytes != 64<<20 || c.Audit.MaxFiles != 10 {
		t.Fatalf("unexpected defaults: %+v", c)
	}
}

func TestLayersOverrideInOrder(t *testing.T) {
	file := writeConfig(t, `
[limits]
call_timeout = "30s"
max_in_flight = 8
page_size = 7
[mcp."git.status"]
command = "git"
args = ["status"]
`)
	env := []string{"HOME=/nonexistent", "TROUPE_LIMITS__MAX_IN_FLIGHT=9", "TROUPE_TOKEN=not-an-override", "TROUPE_CONFIG=/ignored/when/flag/given"}
	c, err := load(t, file, env, "limits.page_size=3", `mcp."git.status".timeout_ms=5000`)
	if err != nil {
		t.Fatal(err)
	}
	if c.File != file || c.Limits.CallTimeout != 30*time.Second || c.Limits.MaxInFlight != 9 || c.Limits.PageSize != 3 {
		t.Fatalf("layers: %+v", c.Limits)
	}
	if g := c.Mcp["git.status"]; g.Command != "git" || g.TimeoutMs != 5000 {
		t.Fatalf("a dotted tool name must stay one table: %+v", c.Mcp)
	}
}

func TestFileLookup(t *testing.T) {
	home := t.TempDir()
	p := filepath.Join(home, ".config", "troupe", "config.toml")
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte("[server]\nname = \"from-home\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := load(t, "", []string{"HOME=" + home})
	if err != nil || c.Server.Name != "from-home" || c.File != p {
		t.Fatalf("~/.config/troupe/config.toml not read: %v %+v", err, c)
	}
	other := writeConfig(t, "[server]\nname = \"from-env\"\n")
	c, err = load(t, "", []string{"HOME=" + home, "TROUPE_CONFIG=" + other})
	if err != nil || c.Server.Name != "from-env" {
		t.Fatalf("$TROUPE_CONFIG not preferred: %v %+v", err, c)
	}
}

func TestSecrets(t *testing.T) {
	file := writeConfig(t, `
[http.auth]
bearer_token = "${MY_TOKEN}"
[mcp.deploy]
command = "deploy"
env = { API_KEY = "key-${MY_KEY}" }
`)
	c, err := load(t, file, []string{"MY_TOKEN=tok-123", "MY_KEY=k-9"})
	if err != nil {
		t.Fatal(err)
	}
	if c.HTTP.Auth.BearerToken != "tok-123" || c.Mcp["deploy"].Env["API_KEY"] != "key-k-9" {
		t.Fatalf("references not resolved: %+v", c)
	}
	if !slices.Contains(c.Secrets, "tok-123") || !slices.Contains(c.Secrets, "k-9") {
		t.Fatalf("resolved values must be recorded as secrets: %v", c.Secrets)
	}
	_, err = load(t, file, []string{"MY_KEY=x"})
	if err == nil || !strings.Contains(err.Error(), "MY_TOKEN") || !strings.Contains(err.Error(), "not set") {
		t.Fatalf("a missing variable must be named: %v", err)
	}
}

// TestUnsetCredentialsAreRecorded: an unset or empty variable that a
// command tool's or a downstream server's ${NAME} refers to does not
// refuse the config (troupe's own secrets still do): it is recorded by
// name, so the tool's calls and the server fail as unauthenticated.
func TestUnsetCredentialsAreRecorded(t *testing.T) {
	file := writeConfig(t, `
[mcp.deploy]
command = "deploy"
args = ["--key", "${ARG_KEY}"]
env = { API_KEY = "key-${MY_KEY}", REGION = "${REGION}" }
[mcp_servers.remote]
url = "https://mcp.example/mcp"
http_headers = { Authorization = "Bearer ${REMOTE_TOKEN}", X-Team = "${TEAM}" }
`)
	c, err := load(t, file, []string{"MY_KEY=", "REGION=eu", "TEAM=ops"})
	if err != nil {
		t.Fatalf("unset credentials refused the config: %v", err)
	}
	if got := c.Mcp["deploy"].MissingVars; !slices.Equal(got, []string{"MY_KEY", "ARG_KEY"}) {
		t.Errorf("the command tool's missing variables: %v", got)
	}
	s := c.McpServers["remote"]
	if !slices.Equal(s.MissingVars, []string{"REMOTE_TOKEN"}) || !slices.Equal(s.SecretVars, []string{"REMOTE_TOKEN", "TEAM"}) {
		t.Errorf("the server's variables: missing %v, referred to %v", s.MissingVars, s.SecretVars)
	}
	if c.Mcp["deploy"].Env["REGION"] != "eu" || s.HTTPHeaders["X-Team"] != "ops" {
		t.Errorf("the variables that are set are not resolved: %+v %+v", c.Mcp["deploy"], s)
	}

	file = writeConfig(t, "[http.auth]\nbearer_token = \"${MY_TOKEN}\"\n")
	if _, err := load(t, file, []string{"MY_TOKEN="}); err == nil || !strings.Contains(err.Error(), "MY_TOKEN") {
		t.Errorf("troupe's own token, empty: %v", err)
	}
}

// TestInvalidConfigIsRefusedWithSourceAndKey: every class of bad input is
// refused at load, and the message says where (which layer) and which key.
func TestInvalidConfigIsRefusedWithSourceAndKey(t *testing.T) {
	cases := []struct {
		name, file string
		env        []string
		overrides  []string
		mention    []string
	}{
		{"unknown key in file", "[limits]\nmax_line_byte = 5\n", nil, nil, []string{"config file", "max_line_byte"}},
		{"unknown table in file", "[limitz]\nx = 1\n", nil, nil, []string{"config file", "limitz"}},
		{"wrong type in file", "[limits]\nmax_in_flight = \"many\"\n", nil, nil, []string{"config file", "max_in_flight"}},
		{"TOML syntax", "[limits\n", nil, nil, []string{"config file", ":1:"}},
		{"bad value in file", "[limits]\npage_size = 0\n", nil, nil, []string{"config file", "limits.page_size"}},
		{"bad value from env", "", []string{"TROUPE_LIMITS__PAGE_SIZE=0"}, nil, []string{"environment", "limits.page_size"}},
		{"unknown key from env", "", []string{"TROUPE_LIMITS__NOPE=1"}, nil, []string{"environment", "nope"}},
		{"bad value from -c", "[limits]\npage_size = 5\n", nil, []string{"limits.page_size=0"}, []string{"-c limits.page_size=0", "limits.page_size"}},
		{"fractional int", "", nil, []string{"limits.max_in_flight=1.5"}, []string{"-c", "max_in_flight"}},
		{"not a duration", "", nil, []string{"limits.call_timeout=soon"}, []string{"-c", "call_timeout"}},
		{"malformed -c", "", nil, []string{"no-equals-sign"}, []string{"key=value"}},
		{"log format", "", nil, []string{"logging.format=xml"}, []string{"logging.format"}},
		{"session spool cap", "", nil, []string{"output.max_session_spool_bytes=-1"}, []string{"-c", "output.max_session_spool_bytes"}},
		{"audit rotation size", "[audit]\nmax_bytes = 1000\n", nil, nil, []string{"config file", "audit.max_bytes", "65536"}},
		{"audit rotation size negative", "", nil, []string{"audit.max_bytes=-1"}, []string{"-c", "audit.max_bytes"}},
		{"audit rotated files", "", []string{"TROUPE_AUDIT__MAX_FILES=0"}, nil, []string{"environment", "audit.max_files", "between 1 and 1000"}},
		{"audit rotated files many", "[audit]\nmax_files = 5000\n", nil, nil, []string{"audit.max_files"}},
		{"server spool cap", "[output]\nmax_total_spool_bytes = -1\n", nil, nil, []string{"config file", "output.max_total_spool_bytes"}},
		{"http path", "[http]\npath = \"mcp\"\n", nil, nil, []string{"config file", "http.path"}},
		{"origin", "[http]\nallowed_origins = [\"evil\"]\n", nil, nil, []string{"http.allowed_origins"}},
		{"glob", "[tools]\ndeny = [\"[\"]\n", nil, nil, []string{"tools.deny"}},
		{"domain", "[docs]\nallowed_domains = [\"https://x\"]\n", nil, nil, []string{"docs.allowed_domains"}},
		{"command tool without command", "[mcp.t]\ndescription = \"x\"\n", nil, nil, []string{"config file", "mcp.t.command"}},
		{"command tool unknown key", "[mcp.t]\ncommand = \"x\"\nshell = true\n", nil, nil, []string{"config file", "shell"}},
		{"command tool bad name", "[mcp.\"has space\"]\ncommand = \"x\"\n", nil, nil, []string{"has space"}},
		{"command tool schema", "[mcp.t]\ncommand = \"x\"\ninput_schema = \"{\"\n", nil, nil, []string{"input_schema"}},
		{"command tool schema root", "[mcp.t]\ncommand = \"x\"\ninput_schema = { type = \"string\" }\n", nil, nil, []string{"input_schema", "object"}},
		{"sandbox profile", "[mcp.t]\ncommand = \"x\"\nsandbox_profile = \"jail\"\n", nil, nil, []string{"sandbox_profile"}},
		{"server without transport", "[mcp_servers.s]\nargs = [\"x\"]\n", nil, nil, []string{"mcp_servers.s", "exactly one"}},
		{"server with both", "[mcp_servers.s]\ncommand = \"x\"\nurl = \"http://h\"\n", nil, nil, []string{"exactly one"}},
		{"server bad url", "[mcp_servers.s]\nurl = \"ftp://h\"\n", nil, nil, []string{"url"}},
		{"server unknown codex key", "[mcp_servers.s]\ncommand = \"x\"\nbogus_key = 1\n", nil, nil, []string{"bogus_key"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			file := ""
			if c.file != "" {
				file = writeConfig(t, c.file)
			}
			env := append([]string{"HOME=/nonexistent"}, c.env...)
			_, err := load(t, file, env, c.overrides...)
			if err == nil {
				t.Fatal("accepted")
			}
			for _, m := range c.mention {
				if !strings.Contains(err.Error(), m) {
					t.Fatalf("error %q does not mention %q", err, m)
				}
			}
		})
	}
}

func TestCodexBlockPastesIn(t *testing.T) {
	file := writeConfig(t, `
[mcp_servers.everything]
command = "npx"
args = ["-y", "@modelcontextprotocol/server-everything"]
env = { "FOO" = "bar" }
env_vars = ["HOME"]
startup_timeout_sec = 20
tool_timeout_sec = 60
enabled_tools = ["echo"]

[mcp_servers.remote]
url = "https://mcp.example/mcp"
bearer_token_env_var = "REMOTE_TOKEN"
http_headers = { "X-Team" = "a" }
enabled = false
`)
	c, err := load(t, file, nil)
	if err != nil {
		t.Fatal(err)
	}
	if s := c.McpServers["everything"]; s.Command != "npx" || s.ToolTimeoutSec != 60 || c.McpServers["remote"].Enabled == nil {
		t.Fatalf("%+v", c.McpServers)
	}
}

func TestEffectiveMasksSecrets(t *testing.T) {
	file := writeConfig(t, `
[http.auth]
bearer_token = "${MY_TOKEN}"
[mcp.deploy]
command = "deploy"
env = { API_KEY = "literal-key-value", LANG = "C", DB_PASSWORD = "${DB_PW}" }
`)
	c, err := load(t, file, []string{"MY_TOKEN=tok-secret-123", "DB_PW=pw-456"}, `http.max_sessions=7`)
	if err != nil {
		t.Fatal(err)
	}
	out, err := c.Effective()
	if err != nil {
		t.Fatal(err)
	}
	text := string(out)
	for _, secret := range []string{"tok-secret-123", "pw-456", "literal-key-value"} {
		if strings.Contains(text, secret) {
			t.Fatalf("effective config shows a secret %q:\n%s", secret, text)
		}
	}
	for _, want := range []string{"${MY_TOKEN}", "${DB_PW}", "<redacted>", "LANG = 'C'", "max_sessions = 7", file} {
		if !strings.Contains(text, want) {
			t.Fatalf("effective config lacks %q:\n%s", want, text)
		}
	}
}
