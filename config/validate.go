package config

import (
	"encoding/json"
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

// validate checks values the types cannot express. Every error names its
// key.
func (c *Config) validate() error {
	l := c.Limits
	switch {
	case l.MaxLineBytes < 1024:
		return errKey(p("limits", "max_line_bytes"), "limits.max_line_bytes must be at least 1024, got %d", l.MaxLineBytes)
	case l.MaxInFlight < 1:
		return errKey(p("limits", "max_in_flight"), "limits.max_in_flight must be at least 1, got %d", l.MaxInFlight)
	case l.PageSize < 1:
		return errKey(p("limits", "page_size"), "limits.page_size must be at least 1, got %d", l.PageSize)
	case l.CallTimeout <= 0:
		return errKey(p("limits", "call_timeout"), "limits.call_timeout must be positive, got %s", l.CallTimeout)
	case l.ShutdownGrace < 0:
		return errKey(p("limits", "shutdown_grace"), "limits.shutdown_grace must not be negative, got %s", l.ShutdownGrace)
	case l.McpServersStartupWait < 0 || l.McpServersStartupWait > time.Minute:
		return errKey(p("limits", "mcp_servers_startup_wait"), "limits.mcp_servers_startup_wait must be from 0s to 1m, got %s", l.McpServersStartupWait)
	}
	switch c.Logging.Format {
	case "text", "json":
	default:
		return errKey(p("logging", "format"), "logging.format must be text or json, got %q", c.Logging.Format)
	}
	switch strings.ToLower(c.Logging.Level) {
	case "debug", "info", "warn", "warning", "error":
	default:
		return errKey(p("logging", "level"), "logging.level must be debug, info, warn or error, got %q", c.Logging.Level)
	}
	if err := c.validateHTTP(); err != nil {
		return err
	}
	for _, list := range []struct {
		key      string
		patterns []string
	}{{"allow", c.Tools.Allow}, {"deny", c.Tools.Deny}} {
		for _, pat := range list.patterns {
			if _, err := path.Match(pat, ""); err != nil || pat == "" {
				return errKey(p("tools", list.key), "tools.%s: %q is not a valid glob", list.key, pat)
			}
		}
	}
	if c.Tools.Separator == "" || len(c.Tools.Separator) > 4 || strings.IndexFunc(c.Tools.Separator, badNameRune) >= 0 {
		return errKey(p("tools", "separator"), "tools.separator must be 1 to 4 of A-Z a-z 0-9 _ - ., got %q", c.Tools.Separator)
	}
	for _, d := range c.Docs.AllowedDomains {
		host := strings.TrimPrefix(d, "*.")
		if host == "" || strings.ContainsAny(host, "/:*@ ") {
			return errKey(p("docs", "allowed_domains"), "docs.allowed_domains: %q is not a host name or *.suffix", d)
		}
	}
	if err := c.validateExecution(); err != nil {
		return err
	}
	if err := c.validateObserve(); err != nil {
		return err
	}
	for _, name := range c.Sessions.AllowedEnv {
		if name == "" || strings.ContainsAny(name, "=\x00") {
			return errKey(p("sessions", "allowed_env"), "sessions.allowed_env: %q is not an environment variable name", name)
		}
	}
	for name, t := range c.Mcp {
		if err := t.validate(name); err != nil {
			return err
		}
	}
	for name, s := range c.McpServers {
		if err := s.validate(name); err != nil {
			return err
		}
	}
	return nil
}

func (c *Config) validateHTTP() error {
	h := c.HTTP
	switch {
	case !strings.HasPrefix(h.Path, "/") || slices.Contains([]string{"/healthz", "/metrics", "/status", "/status/"}, h.Path):
		return errKey(p("http", "path"), "http.path must start with / and not be /healthz, /metrics or /status, got %q", h.Path)
	case h.MaxSessions < 1:
		return errKey(p("http", "max_sessions"), "http.max_sessions must be at least 1, got %d", h.MaxSessions)
	case h.MaxStatelessRequests < 1:
		return errKey(p("http", "max_stateless_requests"), "http.max_stateless_requests must be at least 1, got %d", h.MaxStatelessRequests)
	case h.MaxSubscriptions < 1:
		return errKey(p("http", "max_subscriptions"), "http.max_subscriptions must be at least 1, got %d", h.MaxSubscriptions)
	case h.MaxBodyBytes < 1024:
		return errKey(p("http", "max_body_bytes"), "http.max_body_bytes must be at least 1024, got %d", h.MaxBodyBytes)
	case h.StreamBufferEvents < 1:
		return errKey(p("http", "stream_buffer_events"), "http.stream_buffer_events must be at least 1, got %d", h.StreamBufferEvents)
	case h.StreamBufferBytes < 1024:
		return errKey(p("http", "stream_buffer_bytes"), "http.stream_buffer_bytes must be at least 1024, got %d", h.StreamBufferBytes)
	}
	for key, d := range map[string]time.Duration{
		"session_idle_timeout": h.SessionIdleTimeout, "read_header_timeout": h.ReadHeaderTimeout,
		"read_timeout": h.ReadTimeout, "write_timeout": h.WriteTimeout, "keepalive_interval": h.KeepaliveInterval,
	} {
		if d <= 0 {
			return errKey(p("http", key), "http.%s must be positive", key)
		}
	}
	for _, o := range h.AllowedOrigins {
		if _, err := origin.Parse(o); err != nil { // the parser the HTTP front matches with
			return errKey(p("http", "allowed_origins"), "http.allowed_origins: %q is not an origin like https://host[:port] or null: %v", o, err)
		}
	}
	return nil
}

// validateObserve checks [metrics] and [tracing]: an address troupe can
// listen on, apart from http.listen, and an OTLP/HTTP URL.
func (c *Config) validateObserve() error {
	if l := c.Metrics.Listen; l != "" {
		host, port, err := net.SplitHostPort(l)
		if n, perr := strconv.Atoi(port); err != nil || perr != nil || n < 0 || n > 65535 || strings.ContainsAny(host, "/ ") {
			return errKey(p("metrics", "listen"), "metrics.listen must be \"\" or HOST:PORT, got %q", l)
		}
		if l == c.HTTP.Listen {
			return errKey(p("metrics", "listen"), "metrics.listen must differ from http.listen (%q): leave it \"\" to serve /metrics "+
				"and /status on the HTTP listener, behind its token", l)
		}
	}
	if e := c.Tracing.Endpoint; e != "" {
		u, err := url.Parse(e)
		if err == nil && u.User != nil {
			return errKey(p("tracing", "endpoint"), "tracing.endpoint must not carry credentials (user:password@)")
		}
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return errKey(p("tracing", "endpoint"), "tracing.endpoint must be an http(s) URL such as http://127.0.0.1:4318/v1/traces, got %q", e)
		}
	}
	return nil
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

// validateExecution checks [sandbox], [approvals], [audit], [output] and
// [shell].
func (c *Config) validateExecution() error {
	sb := c.Sandbox
	switch sb.Driver {
	case "auto", "builtin", "bwrap":
	default:
		return errKey(p("sandbox", "driver"), "sandbox.driver must be auto, builtin or bwrap, got %q", sb.Driver)
	}
	switch {
	case sb.MaxProcesses < 0:
		return errKey(p("sandbox", "max_processes"), "sandbox.max_processes must not be negative")
	case sb.MaxFileBytes < 0:
		return errKey(p("sandbox", "max_file_bytes"), "sandbox.max_file_bytes must not be negative")
	case sb.MaxOpenFiles < 0:
		return errKey(p("sandbox", "max_open_files"), "sandbox.max_open_files must not be negative")
	case sb.MaxMemoryBytes < 0:
		return errKey(p("sandbox", "max_memory_bytes"), "sandbox.max_memory_bytes must not be negative")
	case sb.CPUSeconds < 0:
		return errKey(p("sandbox", "cpu_seconds"), "sandbox.cpu_seconds must not be negative")
	case sb.KillGrace <= 0:
		return errKey(p("sandbox", "kill_grace"), "sandbox.kill_grace must be positive, got %s", sb.KillGrace)
	case c.Approvals.Timeout <= 0:
		return errKey(p("approvals", "timeout"), "approvals.timeout must be positive, got %s", c.Approvals.Timeout)
	case c.Approvals.MaxStatesPerCaller < 1 || c.Approvals.MaxStatesPerCaller > maxStatesPerCaller:
		return errKey(p("approvals", "max_states_per_caller"), "approvals.max_states_per_caller must be between 1 and %d, got %d",
			maxStatesPerCaller, c.Approvals.MaxStatesPerCaller)
	case c.Audit.MaxBytes != 0 && c.Audit.MaxBytes < minAuditMaxBytes:
		return errKey(p("audit", "max_bytes"), "audit.max_bytes must be 0 (never rotate) or at least %d, got %d", minAuditMaxBytes, c.Audit.MaxBytes)
	case c.Audit.MaxFiles < 1 || c.Audit.MaxFiles > maxAuditFiles:
		return errKey(p("audit", "max_files"), "audit.max_files must be between 1 and %d, got %d", maxAuditFiles, c.Audit.MaxFiles)
	case c.Output.InlineBytes < 1024:
		return errKey(p("output", "inline_bytes"), "output.inline_bytes must be at least 1024, got %d", c.Output.InlineBytes)
	case c.Output.MaxSpoolBytes < 0:
		return errKey(p("output", "max_spool_bytes"), "output.max_spool_bytes must not be negative")
	case c.Output.MaxSessionSpoolBytes < 0:
		return errKey(p("output", "max_session_spool_bytes"), "output.max_session_spool_bytes must not be negative")
	case c.Output.MaxTotalSpoolBytes < 0:
		return errKey(p("output", "max_total_spool_bytes"), "output.max_total_spool_bytes must not be negative")
	case c.Output.MaxOutputsPerSession < 1:
		return errKey(p("output", "max_outputs_per_session"), "output.max_outputs_per_session must be at least 1")
	case c.Shell.Timeout <= 0:
		return errKey(p("shell", "timeout"), "shell.timeout must be positive, got %s", c.Shell.Timeout)
	case c.Codex.Timeout <= 0:
		return errKey(p("codex", "timeout"), "codex.timeout must be positive, got %s", c.Codex.Timeout)
	case c.Codex.MaxProcesses < 1:
		return errKey(p("codex", "max_processes"), "codex.max_processes must be at least 1, got %d", c.Codex.MaxProcesses)
	case c.Codex.StateDir != "" && !filepath.IsAbs(c.Codex.StateDir):
		return errKey(p("codex", "state_dir"), "codex.state_dir must be an absolute path, got %q", c.Codex.StateDir)
	}
	for _, pat := range c.Approvals.Trust {
		if _, err := path.Match(pat, ""); err != nil || pat == "" {
			return errKey(p("approvals", "trust"), "approvals.trust: %q is not a valid glob", pat)
		}
	}
	if err := c.Approvals.validateStateKeys(); err != nil {
		return err
	}
	switch c.Shell.SandboxProfile {
	case "default", "seatbelt", "none":
	default:
		return errKey(p("shell", "sandbox_profile"), "shell.sandbox_profile must be default, seatbelt or none, got %q", c.Shell.SandboxProfile)
	}
	return nil
}

func (t CommandTool) validate(name string) error {
	key := func(k string) []string { return p("mcp", name, k) }
	switch {
	case name == "" || len(name) > 128 || strings.IndexFunc(name, badNameRune) >= 0:
		return errKey(p("mcp", name), "mcp.%q: a tool name is 1 to 128 of A-Z a-z 0-9 _ - .", name)
	case strings.TrimSpace(t.Command) == "":
		return errKey(key("command"), "mcp.%q.command is required", name)
	case t.TimeoutMs < 0:
		return errKey(key("timeout_ms"), "mcp.%q.timeout_ms must not be negative", name)
	}
	switch t.SandboxProfile {
	case "", "default", "seatbelt", "none":
	default:
		return errKey(key("sandbox_profile"), "mcp.%q.sandbox_profile must be default, seatbelt or none, got %q", name, t.SandboxProfile)
	}
	for _, f := range []struct {
		k string
		v any
	}{{"input_schema", t.InputSchema}, {"output_schema", t.OutputSchema}} {
		if _, err := schemaJSON(f.v); err != nil {
			return errKey(key(f.k), "mcp.%q.%s: %v", name, f.k, err)
		}
	}
	return nil
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

func (s McpServer) validate(name string) error {
	key := func(k string) []string { return p("mcp_servers", name, k) }
	hasCmd, hasURL := strings.TrimSpace(s.Command) != "", s.URL != ""
	switch {
	case name == "" || strings.IndexFunc(name, badNameRune) >= 0:
		return errKey(p("mcp_servers", name), "mcp_servers.%q: a server name is A-Z a-z 0-9 _ - .", name)
	case hasCmd == hasURL:
		return errKey(p("mcp_servers", name), "mcp_servers.%q needs exactly one of command (stdio) or url (streamable HTTP)", name)
	case s.StartupTimeoutSec < 0 || s.StartupTimeoutMs < 0 || s.ToolTimeoutSec < 0:
		return errKey(p("mcp_servers", name), "mcp_servers.%q: timeouts must not be negative", name)
	}
	if hasURL {
		u, err := url.Parse(s.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return errKey(key("url"), "mcp_servers.%q.url must be an http(s) URL, got %q", name, s.URL)
		}
	}
	if hasCmd && (s.BearerTokenEnvVar != "" || len(s.HTTPHeaders) > 0) {
		return errKey(p("mcp_servers", name), "mcp_servers.%q: bearer_token_env_var and http_headers apply to url servers only", name)
	}
	switch s.SandboxProfile {
	case "", "default", "seatbelt", "none":
	default:
		return errKey(key("sandbox_profile"), "mcp_servers.%q.sandbox_profile must be default, seatbelt or none, got %q", name, s.SandboxProfile)
	}
	switch s.Era {
	case "", "auto", "legacy", "modern":
	default:
		return errKey(key("era"), "mcp_servers.%q.era must be auto, legacy or modern, got %q", name, s.Era)
	}
	if s.ToolPrefix != nil && strings.IndexFunc(*s.ToolPrefix, badNameRune) >= 0 {
		return errKey(key("tool_prefix"), "mcp_servers.%q.tool_prefix: %q has characters tool names cannot have", name, *s.ToolPrefix)
	}
	return nil
}

func badNameRune(r rune) bool {
	return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' || r == '.')
}

func p(parts ...string) []string { return parts }

// validateStateKeys checks approvals.state_key and previous_state_keys:
// each 32 bytes in base64 or hex, none twice, and previous keys only
// beside a current one. Errors never show a key.
func (a Approvals) validateStateKeys() error {
	if a.StateKey == "" {
		if len(a.PreviousStateKeys) > 0 {
			return errKey(p("approvals", "previous_state_keys"), "approvals.previous_state_keys is set without approvals.state_key: "+
				"previous keys only open old states beside a current key")
		}
		return nil
	}
	current, err := approvalstate.ParseKey(a.StateKey)
	if err != nil {
		return errKey(p("approvals", "state_key"), "approvals.state_key %v", err)
	}
	seen := []approvalstate.Key{current}
	for i, k := range a.PreviousStateKeys {
		parsed, err := approvalstate.ParseKey(k)
		if err != nil {
			return errKey(p("approvals", "previous_state_keys"), "approvals.previous_state_keys[%d] %v", i, err)
		}
		if slices.Contains(seen, parsed) {
			return errKey(p("approvals", "previous_state_keys"), "approvals.previous_state_keys[%d] repeats state_key or an earlier previous key", i)
		}
		seen = append(seen, parsed)
	}
	return nil
}
