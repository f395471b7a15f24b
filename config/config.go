// Package config loads troupe's configuration the way Codex users expect:
// a TOML file, environment overrides and "-c key=value" flags, each layer
// over the embedded defaults (defaults.toml, which documents every key).
//
// The file is --config PATH, else $TROUPE_CONFIG, else
// ~/.config/troupe/config.toml when it exists, else none. Environment
// variables TROUPE_<TABLE>__<KEY> (double underscore between levels) and
// then -c flags override it; their values are read as TOML and, when they
// are not TOML, as plain strings (as Codex reads -c). Unknown keys, wrong
// types and invalid values are errors (Error) naming the layer (with the
// file's line), the dotted key, the value, the reason and the nearest known
// key; every problem of every layer (unknown keys, wrong types, unset
// references, invalid values) is reported at once. "${NAME}" in
// any string value is replaced by the environment variable NAME at load;
// such values are secrets and are never printed.
package config

import (
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/go-viper/mapstructure/v2"
	"github.com/knadh/koanf/providers/confmap"
	"github.com/knadh/koanf/v2"
	gotoml "github.com/pelletier/go-toml/v2"
)

//go:embed defaults.toml
var defaults []byte

// delim separates key levels inside koanf. It is not "." because table
// names may contain dots (a tool named "git.status" is [mcp."git.status"]);
// override keys are split with TOML's own dotted-key rules instead.
const delim = "\x1f"

// EnvPrefix starts the environment variables that override config keys.
const EnvPrefix = "TROUPE_"

// Config is troupe's effective configuration.
type Config struct {
	Server     Server                 `koanf:"server"`
	Limits     Limits                 `koanf:"limits"`
	Logging    Logging                `koanf:"logging"`
	HTTP       HTTP                   `koanf:"http"`
	Tools      ToolPolicy             `koanf:"tools"`
	Prompts    NamePolicy             `koanf:"prompts"`
	Resources  NamePolicy             `koanf:"resources"`
	Docs       Docs                   `koanf:"docs"`
	Mcp        map[string]CommandTool `koanf:"mcp"`
	McpServers map[string]McpServer   `koanf:"mcp_servers"`
	Features   Features               `koanf:"features"`
	Sandbox    Sandbox                `koanf:"sandbox"`
	Approvals  Approvals              `koanf:"approvals"`
	Audit      Audit                  `koanf:"audit"`
	Pins       Pins                   `koanf:"pins"`
	Output     Output                 `koanf:"output"`
	Shell      Shell                  `koanf:"shell"`
	Codex      Codex                  `koanf:"codex"`
	Sessions   Sessions               `koanf:"sessions"`
	Metrics    Metrics                `koanf:"metrics"`
	Tracing    Tracing                `koanf:"tracing"`
	Cluster    Cluster                `koanf:"cluster"`
	Auth       Auth                   `koanf:"auth"`

	// File is the config file that was read, "" for none.
	File string `koanf:"-"`
	// Secrets holds every value that came from a "${NAME}" reference, and
	// the approval state keys however written, for redaction; never print
	// it.
	Secrets []string `koanf:"-"`
	raw     map[string]any
}

// Server is the [server] table.
type Server struct {
	Workspace    string `koanf:"workspace"`
	Name         string `koanf:"name"`
	Instructions string `koanf:"instructions"`
}

// Sessions is the [sessions] table: what a client may set for its own
// session in initialize's _meta."dev.troupe/session" (working directory,
// environment variables), which applies to that session's calls only.
type Sessions struct {
	// AllowOverrides lets clients set them; off, a request to is refused.
	AllowOverrides bool `koanf:"allow_overrides"`
	// AllowedEnv lists the variable names (exact) a session may set.
	AllowedEnv []string `koanf:"allowed_env"`
}

// Metrics is the [metrics] table: where operators read troupe's
// Prometheus metrics (/metrics) and its live status page (/status).
type Metrics struct {
	// Listen is "" (served only on the HTTP listener, behind its bearer
	// token, when there is one) or HOST:PORT: a plain HTTP server of its
	// own for /metrics and /status, without authentication (bind it to
	// loopback or a private network), also when troupe serves stdio only.
	Listen string `koanf:"listen"`
}

// Tracing is the [tracing] table: OpenTelemetry traces, off by default.
type Tracing struct {
	// Endpoint is the OTLP/HTTP traces URL
	// (http://127.0.0.1:4318/v1/traces), or the collector's base URL, to
	// which /v1/traces is added; "" leaves it to the standard
	// OTEL_EXPORTER_OTLP_*ENDPOINT variables (tracing.ResolveEndpoint),
	// and with none sends no traces.
	Endpoint string `koanf:"endpoint"`
}

// Cluster is the [cluster] table: several troupe nodes as one. With
// Provider "" (the default) troupe is one process, no remote is started
// and every other key here is ignored (and not checked).
type Cluster struct {
	// Provider is "" (one process) or "etcd" (membership on etcd).
	Provider string `koanf:"provider"`
	// Name is the cluster's name and its etcd key prefix (default
	// "troupe"): nodes with the same name and etcd are one cluster.
	Name string `koanf:"name"`
	// Listen is the host:port of node-to-node traffic (required with a
	// provider).
	Listen string `koanf:"listen"`
	// Advertise is the host:port other nodes dial; "" = Listen.
	Advertise string `koanf:"advertise"`
	// EtcdEndpoints are etcd's host:port entries, as etcd clients take
	// them (required with provider "etcd").
	EtcdEndpoints []string `koanf:"etcd_endpoints"`
	// TLSCertFile is this node's certificate (PEM) for mutual TLS between
	// nodes: protoactor's remote delivers any message from anyone who
	// reaches its port, so nodes must prove who they are.
	TLSCertFile string `koanf:"tls_cert_file"`
	// TLSKeyFile is that certificate's private key (PEM); a secret, hidden
	// from sandboxed runs.
	TLSKeyFile string `koanf:"tls_key_file"`
	// TLSCAFile is the CA (PEM) every node's certificate must chain to.
	TLSCAFile string `koanf:"tls_ca_file"`
	// TLSInsecure sends node-to-node traffic in plaintext, without the
	// TLS files: for tests only, logged loudly at start.
	TLSInsecure bool `koanf:"tls_insecure"`
}

// Limits is the [limits] table.
type Limits struct {
	MaxLineBytes  int           `koanf:"max_line_bytes"`
	MaxInFlight   int           `koanf:"max_in_flight"`
	PageSize      int           `koanf:"page_size"`
	CallTimeout   time.Duration `koanf:"call_timeout"`
	ShutdownGrace time.Duration `koanf:"shutdown_grace"`
	// McpServersStartupWait bounds how long troupe waits at start for its
	// downstream servers before serving: clients that list tools once
	// (Codex) see the servers ready by then, and troupe's own tools early
	// enough for Codex's first model request (~0.85 s after it starts its
	// servers). Servers ready later arrive with list_changed.
	McpServersStartupWait time.Duration `koanf:"mcp_servers_startup_wait"`
	// Rate and Identity bound each identity (named token or OAuth
	// subject), not each session: a new initialize resets nothing.
	Rate     RateLimits     `koanf:"rate"`
	Identity IdentityLimits `koanf:"identity"`
}

// RateLimits is the [limits.rate] table (and a token's own): calls per
// minute per identity, and per identity and tool.
type RateLimits struct {
	// CallsPerMinute bounds an identity's counted requests (tools/call,
	// prompts/get, resources/read, completion/complete); 0: no bound.
	CallsPerMinute int `koanf:"calls_per_minute"`
	// Tools bounds calls per minute per identity and tool, keyed by a glob
	// over exposed tool names ([limits.rate.tools] "repo.*" = 10).
	Tools map[string]int `koanf:"tools"`
}

// IdentityLimits is the [limits.identity] table (and a token's own).
type IdentityLimits struct {
	// MaxConcurrentCalls bounds an identity's calls running at once; 0: no bound.
	MaxConcurrentCalls int `koanf:"max_concurrent_calls"`
	// MaxSessions bounds an identity's live sessions (apart from
	// http.max_sessions, the server's total); 0: no bound.
	MaxSessions int `koanf:"max_sessions"`
}

// Logging is the [logging] table.
type Logging struct {
	Level  string `koanf:"level"`
	Format string `koanf:"format"`
}

// HTTP is the [http] table: the streamable HTTP transport.
type HTTP struct {
	Listen                     string        `koanf:"listen"`
	Path                       string        `koanf:"path"`
	AllowedOrigins             []string      `koanf:"allowed_origins"`
	AllowUnauthenticatedRemote bool          `koanf:"allow_unauthenticated_remote"`
	MaxSessions                int           `koanf:"max_sessions"`
	MaxStatelessRequests       int           `koanf:"max_stateless_requests"`
	MaxSubscriptions           int           `koanf:"max_subscriptions"`
	MaxBodyBytes               int           `koanf:"max_body_bytes"`
	SessionIdleTimeout         time.Duration `koanf:"session_idle_timeout"`
	ReadHeaderTimeout          time.Duration `koanf:"read_header_timeout"`
	ReadTimeout                time.Duration `koanf:"read_timeout"`
	WriteTimeout               time.Duration `koanf:"write_timeout"`
	KeepaliveInterval          time.Duration `koanf:"keepalive_interval"`
	StreamBufferEvents         int           `koanf:"stream_buffer_events"`
	StreamBufferBytes          int           `koanf:"stream_buffer_bytes"`
	Auth                       HTTPAuth      `koanf:"auth"`
	// PublicURL is the MCP endpoint's URL as clients reach it (behind a
	// proxy or a cluster's load balancer): the OAuth audience and the
	// protected resource metadata's "resource".
	PublicURL string `koanf:"public_url"`
}

// Auth is the [auth] table: who may call, by name.
type Auth struct {
	// Tokens are the named static bearer tokens ([[auth.tokens]]).
	Tokens []AuthToken `koanf:"tokens"`
	// OAuth makes troupe an OAuth 2.1 resource server; zero Issuer: off.
	OAuth OAuth `koanf:"oauth"`
	// Operators names the identities that may use /status, /metrics and
	// operator actions: token names, or "scope:<scope>" for OAuth.
	Operators []string `koanf:"operators"`
}

// AuthToken is one [[auth.tokens]] entry: a named static token.
type AuthToken struct {
	Name string `koanf:"name"`
	// TokenEnv is the environment variable that holds the token.
	TokenEnv string `koanf:"token_env"`
	// Token is the resolved token (from TokenEnv); never printed.
	Token string `koanf:"-"`
	// AllowTools and DenyTools are globs over exposed tool names; deny
	// wins; empty AllowTools: every tool the server exposes.
	AllowTools []string `koanf:"allow_tools"`
	DenyTools  []string `koanf:"deny_tools"`
	// Rate and Identity override [limits.rate] and [limits.identity]
	// for this token; zero fields keep the server's.
	Rate     RateLimits     `koanf:"rate"`
	Identity IdentityLimits `koanf:"identity"`
}

// OAuth is the [auth.oauth] table.
type OAuth struct {
	// Issuer is the authorization server (https://, or http:// on loopback).
	Issuer string `koanf:"issuer"`
	// Audience is the resource tokens must be issued for (RFC 8707);
	// default http.public_url, else the served MCP URL.
	Audience       string   `koanf:"audience"`
	RequiredScopes []string `koanf:"required_scopes"`
	// SubjectClaim names the claim that identifies the caller (default "sub").
	SubjectClaim string        `koanf:"subject_claim"`
	Leeway       time.Duration `koanf:"leeway"`
	// Scopes maps a scope to the tool globs it grants; empty: a valid
	// token grants every tool the server exposes.
	Scopes map[string][]string `koanf:"scopes"`
}

// HTTPAuth is the [http.auth] table.
type HTTPAuth struct {
	// BearerToken is the resolved token.
	BearerToken string `koanf:"bearer_token"`
}

// ToolPolicy is the [tools] table: which tools sessions see, by glob over
// tool names (path.Match syntax); deny wins over allow.
type ToolPolicy struct {
	Allow []string `koanf:"allow"`
	Deny  []string `koanf:"deny"`
	// Separator joins a downstream server's prefix and its tool names.
	Separator string `koanf:"separator"`
	// BenchmarkEcho serves the `echo` tool the side-by-side benchmarks
	// call on every server.
	BenchmarkEcho bool `koanf:"benchmark_echo"`
}

// NamePolicy is the [prompts] table: which downstream servers' prompts
// sessions see, by glob over the names troupe shows (path.Match syntax,
// the server's prefix included); deny wins over allow. It is the
// [resources] table too, whose globs are over resource URIs and
// templates' uriTemplates (there a * also spans "/").
type NamePolicy struct {
	Allow []string `koanf:"allow"`
	Deny  []string `koanf:"deny"`
}

// Docs is the [docs] table, for docs.fetch.
type Docs struct {
	AllowedDomains []string `koanf:"allowed_domains"`
}

// Features is the [features] table.
type Features struct {
	// EnableMcpServerSurface exposes config-declared command tools and the
	// tools of downstream MCP servers, and puts Codex behind troupe's gate
	// and sandbox defaults. Off, only troupe's first-party tools and Codex
	// are served (the "legacy surface": Codex as its own MCP server served
	// it, no troupe gate on codex calls); the other tables are still checked.
	EnableMcpServerSurface bool `koanf:"enable_mcp_server_surface"`
}

// Sandbox is the [sandbox] table: how programs are isolated.
type Sandbox struct {
	// Driver enforces the default profile on Linux: auto (= builtin),
	// builtin (troupe's helper: rlimits, Landlock, seccomp, namespaces)
	// or bwrap (bubblewrap, which must be installed).
	Driver       string `koanf:"driver"`
	MaxProcesses int    `koanf:"max_processes"`
	MaxFileBytes int64  `koanf:"max_file_bytes"`
	MaxOpenFiles int    `koanf:"max_open_files"`
	CPUSeconds   int    `koanf:"cpu_seconds"`
	// MaxMemoryBytes is what one run's processes may use together (a
	// memory cgroup, else RLIMIT_AS per process); 0 = no limit.
	MaxMemoryBytes int64 `koanf:"max_memory_bytes"`
	// KillGrace is the time between SIGTERM and SIGKILL when a run is
	// stopped.
	KillGrace time.Duration `koanf:"kill_grace"`
}

// Approvals is the [approvals] table: the approval gate.
type Approvals struct {
	// Timeout is how long a person has to answer an approval request.
	Timeout time.Duration `koanf:"timeout"`
	// Trust lists globs of tools no session needs to approve; high-risk
	// tools are never trusted this way.
	Trust []string `koanf:"trust"`
	// StateKey seals the requestState of approvals in the stateless
	// revision (32 bytes, base64 or hex; a secret). "" = a key generated
	// per process, so a state opens only in the process that issued it.
	StateKey string `koanf:"state_key"`
	// PreviousStateKeys still open states sealed before a rotation.
	PreviousStateKeys []string `koanf:"previous_state_keys"`
	// MaxStatesPerCaller is one caller's share of outstanding approval
	// states (stateless revision): sealed and not yet expired, answered or
	// not. A caller past it is refused new ones; other callers are not.
	MaxStatesPerCaller int `koanf:"max_states_per_caller"`
}

// Audit is the [audit] table.
type Audit struct {
	Enabled bool `koanf:"enabled"`
	// Path is the JSON-lines file; "" means the user's state directory.
	Path string `koanf:"path"`
	// MaxBytes rotates the file (to PATH.1, …) before an append would take
	// it past this size; 0 never rotates.
	MaxBytes int64 `koanf:"max_bytes"`
	// MaxFiles is how many rotated files are kept; older ones are deleted.
	MaxFiles int `koanf:"max_files"`
}

// Pins is the [pins] table: where troupe keeps the versions of its
// downstream servers' tools and prompts it trusts (package pins).
type Pins struct {
	// Path is the pins file; "" means the user's state directory
	// (PinsFile).
	Path string `koanf:"path"`
}

// Output is the [output] table: what calls keep of programs' output.
type Output struct {
	// SpoolDir holds sessions' full outputs ("" = the temp directory).
	SpoolDir string `koanf:"spool_dir"`
	// InlineBytes is the head and the tail of each stream a result shows.
	InlineBytes int `koanf:"inline_bytes"`
	// MaxSpoolBytes caps one stream's spool file.
	MaxSpoolBytes int64 `koanf:"max_spool_bytes"`
	// MaxSessionSpoolBytes caps the spool files of one session together.
	MaxSessionSpoolBytes int64 `koanf:"max_session_spool_bytes"`
	// MaxTotalSpoolBytes caps the spool files of all sessions together.
	MaxTotalSpoolBytes int64 `koanf:"max_total_spool_bytes"`
	// MaxOutputsPerSession is how many calls' outputs a session keeps.
	MaxOutputsPerSession int `koanf:"max_outputs_per_session"`
}

// Shell is the [shell] table: the shell.exec tool.
type Shell struct {
	Enabled        bool          `koanf:"enabled"`
	SandboxProfile string        `koanf:"sandbox_profile"`
	AllowNetwork   bool          `koanf:"allow_network"`
	Timeout        time.Duration `koanf:"timeout"`
}

// Codex is the [codex] table: the codex and codex-reply tools.
type Codex struct {
	// Enabled offers the tools when a Codex binary is found.
	Enabled bool `koanf:"enabled"`
	// Binary is the codex executable; "" looks it up on PATH.
	Binary string `koanf:"binary"`
	// Timeout is the ceiling of one Codex turn.
	Timeout time.Duration `koanf:"timeout"`
	// ManagementMethods serves the JSON-RPC management methods of Codex's
	// former MCP server (newConversation, sendUserTurn, ...,
	// execOneOffCommand) on every MCP connection, beside MCP.
	ManagementMethods bool `koanf:"management_methods"`
	// ShareConversations lets every session see and drive every Codex
	// conversation; off, a session sees only those it created or resumed.
	ShareConversations bool `koanf:"share_conversations"`
	// MaxProcesses bounds the Codex app-server processes the management
	// methods keep at once (one per session that uses them).
	MaxProcesses int `koanf:"max_processes"`
	// StateDir is where troupe keeps Codex's homes (one per session that
	// uses the management methods, one for the tools); "" means the
	// user's state directory (CodexStateDir).
	StateDir string `koanf:"state_dir"`
}

// CommandTool is one [mcp.<name>] table: a tool that runs a program.
type CommandTool struct {
	Command          string            `koanf:"command"`
	Args             []string          `koanf:"args"`
	Cwd              string            `koanf:"cwd"`
	Env              map[string]string `koanf:"env"`
	Description      string            `koanf:"description"`
	DisplayName      string            `koanf:"display_name"`
	InputSchema      any               `koanf:"input_schema"`  // inline table or JSON text
	OutputSchema     any               `koanf:"output_schema"` // inline table or JSON text
	SandboxProfile   string            `koanf:"sandbox_profile"`
	AllowNetwork     bool              `koanf:"allow_network"`
	RequiresApproval *bool             `koanf:"requires_approval"`
	TimeoutMs        int               `koanf:"timeout_ms"`
	Streaming        bool              `koanf:"streaming"`
	SideEffects      []string          `koanf:"side_effects"`
	Version          string            `koanf:"version"`

	// MissingVars are the environment variables its env and args refer
	// to ("${NAME}") that are unset or empty (their references resolve
	// to ""): the tool is served, and its calls fail as unauthenticated
	// naming them.
	MissingVars []string `koanf:"-"`
}

// McpServer is one [mcp_servers.<name>] table, with Codex's keys, so a
// block from ~/.codex/config.toml can be pasted in.
type McpServer struct {
	Command           string            `koanf:"command"`
	Args              []string          `koanf:"args"`
	Env               map[string]string `koanf:"env"`
	EnvVars           []string          `koanf:"env_vars"`
	Cwd               string            `koanf:"cwd"`
	URL               string            `koanf:"url"`
	BearerTokenEnvVar string            `koanf:"bearer_token_env_var"`
	HTTPHeaders       map[string]string `koanf:"http_headers"`
	Enabled           *bool             `koanf:"enabled"`
	EnabledTools      []string          `koanf:"enabled_tools"`
	DisabledTools     []string          `koanf:"disabled_tools"`
	StartupTimeoutSec float64           `koanf:"startup_timeout_sec"`
	StartupTimeoutMs  int               `koanf:"startup_timeout_ms"`
	ToolTimeoutSec    float64           `koanf:"tool_timeout_sec"`

	// troupe's own keys (Codex ignores none of them: they live only in
	// troupe's config).

	// SandboxProfile isolates a stdio server's process (default "default").
	SandboxProfile string `koanf:"sandbox_profile"`
	// AllowNetwork lets a sandboxed stdio server use the network.
	AllowNetwork bool `koanf:"allow_network"`
	// RequiresApproval: nil means "ask unless the tool is annotated
	// read-only"; true or false apply to every tool of the server.
	RequiresApproval *bool `koanf:"requires_approval"`
	// ToolPrefix names the server's tools "<prefix><separator><tool>";
	// nil means the server's name, "" means no prefix at all.
	ToolPrefix *string `koanf:"tool_prefix"`
	// Era is which protocol revisions troupe speaks to the server: "auto"
	// (the default: probe with server/discover, use 2026-07-28 when the
	// server speaks it, else initialize), "legacy" (initialize only, for
	// a server that misbehaves on the probe) or "modern" (2026-07-28 only).
	Era string `koanf:"era"`
	// OnChange is what troupe does with a tool or prompt the server lists
	// differently from the version troupe pinned at first use (package
	// pins): "hold" (the default: hidden, calls refused until an operator
	// accepts), "ask" (listed; every call asks a person, showing the
	// change) or "accept" (the change is pinned at once: for servers the
	// operator controls).
	OnChange string `koanf:"on_change"`
	// Sampling relays the server's sampling/createMessage requests during
	// a call to the calling client (troupe declares the sampling
	// capability to this server only then). Off by default: a server that
	// may drive the client's model must be trusted.
	Sampling bool `koanf:"sampling"`

	// MissingVars are the environment variables its env and http_headers
	// refer to ("${NAME}") that are unset or empty: troupe does not start
	// or dial the server, which shows as unauthenticated naming them.
	MissingVars []string `koanf:"-"`
	// SecretVars are every environment variable its env and http_headers
	// refer to: a server that refuses troupe's credential is told to be
	// checked in them (names only).
	SecretVars []string `koanf:"-"`
}

// Options say where configuration comes from. The zero value reads the
// default file locations and the process environment.
type Options struct {
	// File is --config; "" means $TROUPE_CONFIG, else the user's config
	// file when it exists.
	File string
	// Overrides are -c flags, "dotted.key=value" each.
	Overrides []string
	// Environ is the environment (for TROUPE_ overrides, $TROUPE_CONFIG,
	// $HOME and ${NAME} references); nil means os.Environ().
	Environ []string
}

// source is one layer of configuration, named for error messages.
type source struct {
	name string
	data map[string]any
	// lines maps a file layer's keys (delim-joined) to where they are
	// written; nil for other layers.
	lines map[string]pos
	// vars maps the environment layer's keys (delim-joined) to the
	// variables that set them; nil for other layers.
	vars map[string]string
}

// Load reads the configuration. A configuration troupe refuses returns
// Errors with every problem of every layer at once: syntax, unknown keys,
// wrong types, unset ${NAME} references and invalid values, so a user
// fixes them in one pass rather than one per run.
func Load(o Options) (*Config, error) {
	env := envMap(o.Environ)
	var sources []source
	var errs Errors
	var def map[string]any
	if err := gotoml.Unmarshal(defaults, &def); err != nil {
		return nil, fmt.Errorf("embedded defaults: %w", err)
	}
	file, err := findFile(o.File, env)
	if err != nil {
		return nil, err
	}
	if file != "" {
		// A file that does not parse is left out; the other layers are
		// still checked.
		if s, err := readFile(file); err != nil {
			errs = append(errs, asErrors(err)...)
		} else {
			sources = append(sources, *s)
		}
	}
	s, envErrs := envSource(env)
	errs = append(errs, envErrs...)
	if s != nil {
		sources = append(sources, *s)
	}
	for _, ov := range o.Overrides {
		data, err := parseOverride(ov)
		if err != nil {
			errs = append(errs, &Error{Layer: "-c " + ov, Problem: err.Error()})
			continue
		}
		sources = append(sources, source{name: "-c " + ov, data: data})
	}

	// Each layer alone must use known keys with the right types, so an
	// error names the layer that has it. The keys at fault are left out of
	// the merge, so the values around them are still validated.
	found, dropped := checkSources(sources)
	errs = append(errs, found...)
	for i := range sources {
		var probe Config
		if err := decode(sources[i].data, &probe); err != nil {
			errs = append(errs, &Error{Layer: sources[i].name, Problem: err.Error()})
			sources[i].data = nil
		}
	}
	k := koanf.New(delim)
	if err := k.Load(confmap.Provider(flatten(def), delim), nil); err != nil {
		return nil, fmt.Errorf("embedded defaults: %w", err)
	}
	for _, s := range sources {
		if err := k.Load(confmap.Provider(flatten(s.data), delim), nil); err != nil {
			return nil, fmt.Errorf("%s: %w", s.name, err)
		}
	}
	raw := k.Raw()
	c := &Config{File: file, raw: raw}
	if err := decode(raw, c); err != nil {
		return nil, append(errs, &Error{Layer: "config", Problem: err.Error()})
	}
	for _, err := range append(c.resolveSecrets(env), c.validate()...) {
		var ke *keyError
		if errors.As(err, &ke) {
			set := slices.ContainsFunc(sources, func(s source) bool { _, ok := lookup(s.data, ke.key); return ok })
			if slices.ContainsFunc(dropped, func(d droppedKey) bool { return d.repeats(ke.key, set) }) {
				continue
			}
		}
		errs = append(errs, locateKeyError(sources, err))
	}
	if len(errs) > 0 {
		return nil, errs.ordered()
	}
	return c, nil
}

// asErrors turns an error from reading a layer into its problems.
func asErrors(err error) Errors {
	var es Errors
	if errors.As(err, &es) {
		return es
	}
	var e *Error
	if errors.As(err, &e) {
		return Errors{e}
	}
	return Errors{{Layer: "config", Problem: err.Error()}}
}

func envMap(environ []string) map[string]string {
	if environ == nil {
		environ = os.Environ()
	}
	m := make(map[string]string, len(environ))
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok {
			m[k] = v
		}
	}
	return m
}

// findFile applies the lookup order: --config, $TROUPE_CONFIG, the user's
// config file if it exists.
func findFile(flag string, env map[string]string) (string, error) {
	if flag != "" {
		return flag, nil
	}
	if p := env["TROUPE_CONFIG"]; p != "" {
		return p, nil
	}
	base := env["XDG_CONFIG_HOME"]
	if base == "" {
		if home := env["HOME"]; home != "" {
			base = filepath.Join(home, ".config")
		}
	}
	if base == "" {
		return "", nil
	}
	p := filepath.Join(base, "troupe", "config.toml")
	if _, err := os.Stat(p); err == nil {
		return p, nil
	}
	return "", nil
}

// envSource reads TROUPE_<TABLE>__<KEY>=value variables. Variables without
// a double underscore (TROUPE_CONFIG, or a token such as TROUPE_TOKEN) are
// not overrides. A malformed name is a problem, and the others are still
// read.
func envSource(env map[string]string) (*source, Errors) {
	names := slices.Sorted(maps.Keys(env))
	data := map[string]any{}
	vars := map[string]string{}
	var errs Errors
	for _, name := range names {
		rest, ok := strings.CutPrefix(name, EnvPrefix)
		if !ok || !strings.Contains(rest, "__") {
			continue
		}
		parts := strings.Split(strings.ToLower(rest), "__")
		if slices.Contains(parts, "") {
			errs = append(errs, &Error{Layer: "environment " + name,
				Problem: "empty key part: levels are separated by exactly two underscores, as in " + EnvPrefix + "LIMITS__CALL_TIMEOUT"})
			continue
		}
		setPath(data, parts, parseValue(env[name]))
		vars[strings.Join(parts, delim)] = name
	}
	if len(data) == 0 {
		return nil, errs
	}
	return &source{name: "environment (" + EnvPrefix + "…__…)", data: data, vars: vars}, errs
}

// parseOverride reads "key=value" as the TOML line "key = value", so keys
// follow TOML's dotted-key rules (mcp."git.status".timeout_ms=5) and the
// value is TOML; a value that is not TOML is taken as a string.
func parseOverride(ov string) (map[string]any, error) {
	key, val, ok := strings.Cut(ov, "=")
	key = strings.TrimSpace(key)
	if !ok || key == "" {
		return nil, errors.New("want key=value")
	}
	var data map[string]any
	if err := gotoml.Unmarshal([]byte(key+" = "+val), &data); err == nil {
		return data, nil
	}
	quoted, _ := json.Marshal(val) // a JSON string is a valid TOML basic string
	if err := gotoml.Unmarshal([]byte(key+" = "+string(quoted)), &data); err != nil {
		return nil, fmt.Errorf("%q is not a valid key: %w", key, err)
	}
	return data, nil
}

// parseValue reads an environment value as TOML, or as a plain string.
func parseValue(v string) any {
	var doc struct{ V any }
	if err := gotoml.Unmarshal([]byte("V = "+v), &doc); err == nil {
		return doc.V
	}
	return v
}

func setPath(m map[string]any, path []string, v any) {
	for _, p := range path[:len(path)-1] {
		next, ok := m[p].(map[string]any)
		if !ok {
			next = map[string]any{}
			m[p] = next
		}
		m = next
	}
	m[path[len(path)-1]] = v
}

// flatten turns nested tables into delim-joined keys for koanf.
func flatten(m map[string]any) map[string]any {
	out := map[string]any{}
	var walk func(prefix string, m map[string]any)
	walk = func(prefix string, m map[string]any) {
		for k, v := range m {
			if sub, ok := v.(map[string]any); ok && len(sub) > 0 {
				walk(prefix+k+delim, sub)
				continue
			}
			out[prefix+k] = v
		}
	}
	walk("", m)
	return out
}

// decode fills v from data strictly: unknown keys and wrong types fail.
func decode(data map[string]any, v any) error {
	dec, err := mapstructure.NewDecoder(&mapstructure.DecoderConfig{
		ErrorUnused: true,
		Result:      v,
		TagName:     "koanf",
		DecodeHook: mapstructure.ComposeDecodeHookFunc(
			mapstructure.StringToTimeDurationHookFunc(),
			exactInt,
		),
	})
	if err != nil {
		return err
	}
	return dec.Decode(data)
}

// exactInt lets TOML integers (int64) fill int fields without enabling weak
// typing (which would also turn "abc" into 0), and refuses floats there:
// mapstructure would truncate 1.5 to 1 without a word.
func exactInt(from, to reflect.Type, data any) (any, error) {
	if to.Kind() != reflect.Int {
		return data, nil
	}
	switch from.Kind() {
	case reflect.Int64:
		return int(data.(int64)), nil
	case reflect.Float32, reflect.Float64:
		return nil, fmt.Errorf("want an integer, got %v", data)
	}
	return data, nil
}

// secretRef matches a ${NAME} reference.
var secretRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// resolveSecrets replaces ${NAME} references in every string value. A
// reference to a variable that is unset or empty is, for troupe's own
// secrets (http.auth.bearer_token, the state keys), an error naming key
// and variable (never a value); for a credential troupe holds for a
// command tool or a downstream server, it is recorded in the tool's or
// server's MissingVars instead: troupe serves, and that tool's calls (or
// that server) fail as unauthenticated naming the variable.
func (c *Config) resolveSecrets(env map[string]string) []error {
	var errs []error
	var missing *[]string // where resolve records an unset variable; nil: it is an error
	var refs *[]string    // where resolve records the variables referred to, when not nil
	resolve := func(key []string, v string) string {
		return secretRef.ReplaceAllStringFunc(v, func(ref string) string {
			name := ref[2 : len(ref)-1]
			val, ok := env[name]
			if refs != nil && !slices.Contains(*refs, name) {
				*refs = append(*refs, name)
			}
			switch {
			case (!ok || val == "") && missing != nil:
				if !slices.Contains(*missing, name) {
					*missing = append(*missing, name)
				}
				return ""
			case !ok || val == "":
				errs = append(errs, errKey(key, "%s refers to the environment variable %s, which is not set", dotted(key), name))
				return ""
			}
			c.Secrets = append(c.Secrets, val)
			return val
		})
	}
	c.HTTP.Auth.BearerToken = resolve(p("http", "auth", "bearer_token"), c.HTTP.Auth.BearerToken)
	// State keys are secrets even when written literally: redacted too.
	c.Approvals.StateKey = resolve(p("approvals", "state_key"), c.Approvals.StateKey)
	for i, k := range c.Approvals.PreviousStateKeys {
		c.Approvals.PreviousStateKeys[i] = resolve(p("approvals", "previous_state_keys"), k)
	}
	for _, k := range append([]string{c.Approvals.StateKey}, c.Approvals.PreviousStateKeys...) {
		if k != "" {
			c.Secrets = append(c.Secrets, k)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(c.Mcp)) {
		t := c.Mcp[name]
		t.MissingVars = nil
		missing = &t.MissingVars
		for _, k := range slices.Sorted(maps.Keys(t.Env)) {
			t.Env[k] = resolve(p("mcp", name, "env", k), t.Env[k])
		}
		for i := range t.Args {
			t.Args[i] = resolve(p("mcp", name, "args"), t.Args[i])
		}
		c.Mcp[name] = t
	}
	for _, name := range slices.Sorted(maps.Keys(c.McpServers)) {
		s := c.McpServers[name]
		s.MissingVars, s.SecretVars = nil, nil
		missing, refs = &s.MissingVars, &s.SecretVars
		for _, k := range slices.Sorted(maps.Keys(s.Env)) {
			s.Env[k] = resolve(p("mcp_servers", name, "env", k), s.Env[k])
		}
		for _, k := range slices.Sorted(maps.Keys(s.HTTPHeaders)) {
			s.HTTPHeaders[k] = resolve(p("mcp_servers", name, "http_headers", k), s.HTTPHeaders[k])
		}
		c.McpServers[name] = s
	}
	return append(errs, c.resolveTokens(env)...)
}

// keyError is a validation error about one key, so Load can say which
// layer set it.
type keyError struct {
	key []string // path of the key
	msg string
	// because is the key whose value makes key required (cluster.provider
	// for cluster.listen): when no layer sets key, the layer that set
	// because is the one at fault, rather than whichever made the table.
	because []string
}

func (e *keyError) Error() string { return e.msg }

func errKey(path []string, format string, args ...any) error {
	return &keyError{key: path, msg: fmt.Sprintf(format, args...)}
}

// errRequired is the error of a key that because's value requires.
func errRequired(path, because []string, format string, args ...any) error {
	return &keyError{key: path, because: because, msg: fmt.Sprintf(format, args...)}
}
