package config

import (
	"encoding/json"
	"maps"
	"net"
	"net/url"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"troupe/gate/approvalstate"
	"troupe/mcphttp/origin"
)

// problems collects validation errors (each a *keyError naming its key),
// so a user sees every invalid value in one run rather than one per run.
type problems []error

// add records a problem about the key at path.
func (ps *problems) add(path []string, format string, args ...any) {
	*ps = append(*ps, errKey(path, format, args...))
}

// require records that the key at path is missing, which the value of the
// key at because requires.
func (ps *problems) require(path, because []string, format string, args ...any) {
	*ps = append(*ps, errRequired(path, because, format, args...))
}

// validate checks values the types cannot express and returns every
// problem found, each naming its key; nil when there is none.
func (c *Config) validate() []error {
	var ps problems
	l := c.Limits
	if l.MaxLineBytes < 1024 {
		ps.add(p("limits", "max_line_bytes"), "limits.max_line_bytes must be at least 1024, got %d", l.MaxLineBytes)
	}
	if l.MaxInFlight < 1 {
		ps.add(p("limits", "max_in_flight"), "limits.max_in_flight must be at least 1, got %d", l.MaxInFlight)
	}
	if l.PageSize < 1 {
		ps.add(p("limits", "page_size"), "limits.page_size must be at least 1, got %d", l.PageSize)
	}
	if l.CallTimeout <= 0 {
		ps.add(p("limits", "call_timeout"), "limits.call_timeout must be positive, got %s", l.CallTimeout)
	}
	if l.ShutdownGrace < 0 {
		ps.add(p("limits", "shutdown_grace"), "limits.shutdown_grace must not be negative, got %s", l.ShutdownGrace)
	}
	if l.McpServersStartupWait < 0 || l.McpServersStartupWait > time.Minute {
		ps.add(p("limits", "mcp_servers_startup_wait"), "limits.mcp_servers_startup_wait must be from 0s to 1m, got %s", l.McpServersStartupWait)
	}
	switch c.Logging.Format {
	case "text", "json":
	default:
		ps.add(p("logging", "format"), "logging.format must be text or json, got %q", c.Logging.Format)
	}
	switch strings.ToLower(c.Logging.Level) {
	case "debug", "info", "warn", "warning", "error":
	default:
		ps.add(p("logging", "level"), "logging.level must be debug, info, warn or error, got %q", c.Logging.Level)
	}
	c.validateHTTP(&ps)
	c.validateAuth(&ps)
	for _, list := range []struct {
		key      string
		patterns []string
		table    string
	}{{"allow", c.Tools.Allow, "tools"}, {"deny", c.Tools.Deny, "tools"},
		{"allow", c.Prompts.Allow, "prompts"}, {"deny", c.Prompts.Deny, "prompts"},
		{"allow", c.Resources.Allow, "resources"}, {"deny", c.Resources.Deny, "resources"}} {
		for _, pat := range list.patterns {
			if _, err := path.Match(pat, ""); err != nil || pat == "" {
				ps.add(p(list.table, list.key), "%s.%s: %q is not a valid glob", list.table, list.key, pat)
			}
		}
	}
	if c.Tools.Separator == "" || len(c.Tools.Separator) > 4 || strings.IndexFunc(c.Tools.Separator, badNameRune) >= 0 {
		ps.add(p("tools", "separator"), "tools.separator must be 1 to 4 of A-Z a-z 0-9 _ - ., got %q", c.Tools.Separator)
	}
	for _, d := range c.Docs.AllowedDomains {
		host := strings.TrimPrefix(d, "*.")
		if host == "" || strings.ContainsAny(host, "/:*@ ") {
			ps.add(p("docs", "allowed_domains"), "docs.allowed_domains: %q is not a host name or *.suffix", d)
		}
	}
	c.validateExecution(&ps)
	c.validateObserve(&ps)
	c.validateCluster(&ps)
	for _, name := range c.Sessions.AllowedEnv {
		if name == "" || strings.ContainsAny(name, "=\x00") {
			ps.add(p("sessions", "allowed_env"), "sessions.allowed_env: %q is not an environment variable name", name)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(c.Mcp)) {
		c.Mcp[name].validate(name, &ps)
	}
	for _, name := range slices.Sorted(maps.Keys(c.McpServers)) {
		c.McpServers[name].validate(name, &ps)
	}
	return ps
}

func (c *Config) validateHTTP(ps *problems) {
	h := c.HTTP
	if !strings.HasPrefix(h.Path, "/") || slices.Contains([]string{"/healthz", "/metrics", "/status", "/status/", "/status/accept"}, h.Path) {
		ps.add(p("http", "path"), "http.path must start with / and not be /healthz, /metrics, /status or /status/accept, got %q", h.Path)
	}
	for _, min := range []struct {
		key       string
		got, want int
	}{
		{"max_sessions", h.MaxSessions, 1}, {"max_stateless_requests", h.MaxStatelessRequests, 1},
		{"max_subscriptions", h.MaxSubscriptions, 1}, {"max_body_bytes", h.MaxBodyBytes, 1024},
		{"stream_buffer_events", h.StreamBufferEvents, 1}, {"stream_buffer_bytes", h.StreamBufferBytes, 1024},
	} {
		if min.got < min.want {
			ps.add(p("http", min.key), "http.%s must be at least %d, got %d", min.key, min.want, min.got)
		}
	}
	for _, d := range []struct {
		key string
		d   time.Duration
	}{
		{"session_idle_timeout", h.SessionIdleTimeout}, {"read_header_timeout", h.ReadHeaderTimeout},
		{"read_timeout", h.ReadTimeout}, {"write_timeout", h.WriteTimeout}, {"keepalive_interval", h.KeepaliveInterval},
	} {
		if d.d <= 0 {
			ps.add(p("http", d.key), "http.%s must be positive", d.key)
		}
	}
	for _, o := range h.AllowedOrigins {
		if _, err := origin.Parse(o); err != nil { // the parser the HTTP front matches with
			ps.add(p("http", "allowed_origins"), "http.allowed_origins: %q is not an origin like https://host[:port] or null: %v", o, err)
		}
	}
}

// validateObserve checks [metrics] and [tracing]: an address troupe can
// listen on, apart from http.listen, and an OTLP/HTTP URL.
func (c *Config) validateObserve(ps *problems) {
	if l := c.Metrics.Listen; l != "" {
		host, port, err := net.SplitHostPort(l)
		if n, perr := strconv.Atoi(port); err != nil || perr != nil || n < 0 || n > 65535 || strings.ContainsAny(host, "/ ") {
			ps.add(p("metrics", "listen"), "metrics.listen must be \"\" or HOST:PORT, got %q", l)
		} else if l == c.HTTP.Listen {
			ps.add(p("metrics", "listen"), "metrics.listen must differ from http.listen (%q): leave it \"\" to serve /metrics "+
				"and /status on the HTTP listener, behind its token", l)
		}
	}
	if e := c.Tracing.Endpoint; e != "" {
		u, err := url.Parse(e)
		switch {
		case err == nil && u.User != nil:
			ps.add(p("tracing", "endpoint"), "tracing.endpoint must not carry credentials (user:password@)")
		case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
			ps.add(p("tracing", "endpoint"), "tracing.endpoint must be an http(s) URL such as http://127.0.0.1:4318/v1/traces, got %q", e)
		}
	}
}

// maxStatesPerCaller bounds approvals.max_states_per_caller: the process
// remembers up to 16 callers' shares (gate/approvalstate), about 150 bytes
// a state, so this keeps that memory in tens of megabytes.
const maxStatesPerCaller = 16384

// minAuditMaxBytes is audit.max_bytes's least non-zero value: a record's
// largest line (64 KiB), so that a file holds at least one.
const minAuditMaxBytes = 64 << 10

// maxAuditFiles bounds audit.max_files: sandboxed runs are kept from
// reading each rotated file (OwnPaths), one path each.
const maxAuditFiles = 1000

// validateExecution checks [sandbox], [approvals], [audit], [output],
// [shell] and [codex].
func (c *Config) validateExecution(ps *problems) {
	sb := c.Sandbox
	switch sb.Driver {
	case "auto", "builtin", "bwrap":
	default:
		ps.add(p("sandbox", "driver"), "sandbox.driver must be auto, builtin or bwrap, got %q", sb.Driver)
	}
	for _, n := range []struct {
		table, key string
		negative   bool
	}{
		{"sandbox", "max_processes", sb.MaxProcesses < 0}, {"sandbox", "max_file_bytes", sb.MaxFileBytes < 0},
		{"sandbox", "max_open_files", sb.MaxOpenFiles < 0}, {"sandbox", "max_memory_bytes", sb.MaxMemoryBytes < 0},
		{"sandbox", "cpu_seconds", sb.CPUSeconds < 0}, {"output", "max_spool_bytes", c.Output.MaxSpoolBytes < 0},
		{"output", "max_session_spool_bytes", c.Output.MaxSessionSpoolBytes < 0},
		{"output", "max_total_spool_bytes", c.Output.MaxTotalSpoolBytes < 0},
	} {
		if n.negative {
			ps.add(p(n.table, n.key), "%s.%s must not be negative", n.table, n.key)
		}
	}
	for _, d := range []struct {
		table, key string
		d          time.Duration
	}{
		{"sandbox", "kill_grace", sb.KillGrace}, {"approvals", "timeout", c.Approvals.Timeout},
		{"shell", "timeout", c.Shell.Timeout}, {"codex", "timeout", c.Codex.Timeout},
	} {
		if d.d <= 0 {
			ps.add(p(d.table, d.key), "%s.%s must be positive, got %s", d.table, d.key, d.d)
		}
	}
	if n := c.Approvals.MaxStatesPerCaller; n < 1 || n > maxStatesPerCaller {
		ps.add(p("approvals", "max_states_per_caller"), "approvals.max_states_per_caller must be between 1 and %d, got %d",
			maxStatesPerCaller, n)
	}
	if c.Audit.MaxBytes != 0 && c.Audit.MaxBytes < minAuditMaxBytes {
		ps.add(p("audit", "max_bytes"), "audit.max_bytes must be 0 (never rotate) or at least %d, got %d", minAuditMaxBytes, c.Audit.MaxBytes)
	}
	if c.Audit.MaxFiles < 1 || c.Audit.MaxFiles > maxAuditFiles {
		ps.add(p("audit", "max_files"), "audit.max_files must be between 1 and %d, got %d", maxAuditFiles, c.Audit.MaxFiles)
	}
	if c.Output.InlineBytes < 1024 {
		ps.add(p("output", "inline_bytes"), "output.inline_bytes must be at least 1024, got %d", c.Output.InlineBytes)
	}
	if c.Output.MaxOutputsPerSession < 1 {
		ps.add(p("output", "max_outputs_per_session"), "output.max_outputs_per_session must be at least 1")
	}
	if c.Codex.MaxProcesses < 1 {
		ps.add(p("codex", "max_processes"), "codex.max_processes must be at least 1, got %d", c.Codex.MaxProcesses)
	}
	if c.Codex.StateDir != "" && !filepath.IsAbs(c.Codex.StateDir) {
		ps.add(p("codex", "state_dir"), "codex.state_dir must be an absolute path, got %q", c.Codex.StateDir)
	}
	for _, pat := range c.Approvals.Trust {
		if _, err := path.Match(pat, ""); err != nil || pat == "" {
			ps.add(p("approvals", "trust"), "approvals.trust: %q is not a valid glob", pat)
		}
	}
	c.Approvals.validateStateKeys(ps)
	switch c.Shell.SandboxProfile {
	case "default", "seatbelt", "none":
	default:
		ps.add(p("shell", "sandbox_profile"), "shell.sandbox_profile must be default, seatbelt or none, got %q", c.Shell.SandboxProfile)
	}
}

func (t CommandTool) validate(name string, ps *problems) {
	key := func(k string) []string { return p("mcp", name, k) }
	if name == "" || len(name) > 128 || strings.IndexFunc(name, badNameRune) >= 0 {
		ps.add(p("mcp", name), "mcp.%q: a tool name is 1 to 128 of A-Z a-z 0-9 _ - .", name)
	}
	if strings.TrimSpace(t.Command) == "" {
		ps.add(key("command"), "mcp.%q.command is required", name)
	}
	if t.TimeoutMs < 0 {
		ps.add(key("timeout_ms"), "mcp.%q.timeout_ms must not be negative", name)
	}
	switch t.SandboxProfile {
	case "", "default", "seatbelt", "none":
	default:
		ps.add(key("sandbox_profile"), "mcp.%q.sandbox_profile must be default, seatbelt or none, got %q", name, t.SandboxProfile)
	}
	for _, f := range []struct {
		k string
		v any
	}{{"input_schema", t.InputSchema}, {"output_schema", t.OutputSchema}} {
		if _, err := schemaJSON(f.v); err != nil {
			ps.add(key(f.k), "mcp.%q.%s: %v", name, f.k, err)
		}
	}
}

// InputSchemaJSON is the tool's input schema as JSON, nil when not set.
func (t CommandTool) InputSchemaJSON() json.RawMessage { b, _ := schemaJSON(t.InputSchema); return b }

// OutputSchemaJSON is the tool's output schema as JSON, nil when not set.
func (t CommandTool) OutputSchemaJSON() json.RawMessage { b, _ := schemaJSON(t.OutputSchema); return b }

// schemaJSON accepts a schema as an inline table or as JSON text, and
// requires a JSON object with "type": "object" at its root.
func schemaJSON(v any) (json.RawMessage, error) {
	var b []byte
	switch s := v.(type) {
	case nil:
		return nil, nil
	case string:
		b = []byte(s)
	case map[string]any:
		var err error
		if b, err = json.Marshal(s); err != nil {
			return nil, err
		}
	default:
		return nil, errString("must be an inline table or a JSON string")
	}
	var root map[string]any
	if err := json.Unmarshal(b, &root); err != nil {
		return nil, errString("is not a JSON object: " + err.Error())
	}
	if root["type"] != "object" {
		return nil, errString(`must have "type": "object" at its root`)
	}
	return b, nil
}

type errString string

func (e errString) Error() string { return string(e) }

func (s McpServer) validate(name string, ps *problems) {
	key := func(k string) []string { return p("mcp_servers", name, k) }
	hasCmd, hasURL := strings.TrimSpace(s.Command) != "", s.URL != ""
	if name == "" || strings.IndexFunc(name, badNameRune) >= 0 {
		ps.add(p("mcp_servers", name), "mcp_servers.%q: a server name is A-Z a-z 0-9 _ - .", name)
	}
	if hasCmd == hasURL {
		ps.add(p("mcp_servers", name), "mcp_servers.%q needs exactly one of command (stdio) or url (streamable HTTP)", name)
	}
	if s.StartupTimeoutSec < 0 || s.StartupTimeoutMs < 0 || s.ToolTimeoutSec < 0 {
		ps.add(p("mcp_servers", name), "mcp_servers.%q: timeouts must not be negative", name)
	}
	if hasURL {
		u, err := url.Parse(s.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			ps.add(key("url"), "mcp_servers.%q.url must be an http(s) URL, got %q", name, s.URL)
		}
	}
	if hasCmd && (s.BearerTokenEnvVar != "" || len(s.HTTPHeaders) > 0) {
		ps.add(p("mcp_servers", name), "mcp_servers.%q: bearer_token_env_var and http_headers apply to url servers only", name)
	}
	switch s.SandboxProfile {
	case "", "default", "seatbelt", "none":
	default:
		ps.add(key("sandbox_profile"), "mcp_servers.%q.sandbox_profile must be default, seatbelt or none, got %q", name, s.SandboxProfile)
	}
	switch s.OnChange {
	case "", "hold", "ask", "accept":
	default:
		ps.add(key("on_change"), "mcp_servers.%q.on_change must be hold, ask or accept, got %q", name, s.OnChange)
	}
	switch s.Era {
	case "", "auto", "legacy", "modern":
	default:
		ps.add(key("era"), "mcp_servers.%q.era must be auto, legacy or modern, got %q", name, s.Era)
	}
	if s.ToolPrefix != nil && strings.IndexFunc(*s.ToolPrefix, badNameRune) >= 0 {
		ps.add(key("tool_prefix"), "mcp_servers.%q.tool_prefix: %q has characters tool names cannot have", name, *s.ToolPrefix)
	}
}

func badNameRune(r rune) bool {
	return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' || r == '.')
}

func p(parts ...string) []string { return parts }

// validateStateKeys checks approvals.state_key and previous_state_keys:
// each 32 bytes in base64 or hex, none twice, and previous keys only
// beside a current one. Errors never show a key.
func (a Approvals) validateStateKeys(ps *problems) {
	if a.StateKey == "" {
		if len(a.PreviousStateKeys) > 0 {
			ps.add(p("approvals", "previous_state_keys"), "approvals.previous_state_keys is set without approvals.state_key: "+
				"previous keys only open old states beside a current key")
		}
		return
	}
	var seen []approvalstate.Key
	if current, err := approvalstate.ParseKey(a.StateKey); err != nil {
		ps.add(p("approvals", "state_key"), "approvals.state_key %v", err)
	} else {
		seen = append(seen, current)
	}
	for i, k := range a.PreviousStateKeys {
		parsed, err := approvalstate.ParseKey(k)
		if err != nil {
			ps.add(p("approvals", "previous_state_keys"), "approvals.previous_state_keys[%d] %v", i, err)
			continue
		}
		if slices.Contains(seen, parsed) {
			ps.add(p("approvals", "previous_state_keys"), "approvals.previous_state_keys[%d] repeats state_key or an earlier previous key", i)
		}
		seen = append(seen, parsed)
	}
}
