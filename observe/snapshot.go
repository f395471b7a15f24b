package observe

import (
	"time"
	"unicode/utf8"
)

// What the page shows that a client or a downstream server chose — a
// client's name, the name of a tool that does not exist, a server's error —
// is clipped to these many bytes (and "…"), so that neither the Hub's
// memory nor /status/ grows with what they send. initialize refuses longer
// client names already (protocol.MaxClientInfoBytes); the Hub does not rely
// on that.
const (
	maxShownBytes    = 256
	maxShownErrBytes = 1024
)

// clip returns s cut to at most n bytes at a rune boundary, with "…" when
// it was cut. The result never shares s's memory when it is cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// Snapshot is the Hub's view of the host at one moment, as the status page
// shows it: the sessions and the calls in flight, the downstream servers,
// the last audit records and the current values of the main metrics. It is
// a copy: the caller may keep it, encode it as JSON, or change it, without
// touching the Hub. Slices are never nil (they encode as [], not null), and
// sessions and calls come oldest first.
type Snapshot struct {
	// Version is troupe's version (Options.Version).
	Version string `json:"version"`
	// Time is when the snapshot was taken.
	Time time.Time `json:"time"`
	// UptimeSeconds is how long the Hub has been observing.
	UptimeSeconds float64 `json:"uptime_seconds"`
	// Sessions are the sessions that exist now.
	Sessions []SessionInfo `json:"sessions"`
	// Calls are the calls in flight now.
	Calls []CallInfo `json:"calls"`
	// Downstreams are the downstream MCP servers (Options.Downstreams,
	// or else the states DownstreamChanged reported), by name.
	Downstreams []DownstreamStatus `json:"downstreams"`
	// Audit holds the last audit records (at most 50), newest first.
	Audit []AuditEntry `json:"audit"`
	// Metrics are the current values of the main metrics, for the page's
	// tiles.
	Metrics MetricsSummary `json:"metrics"`
	// History is the last five minutes (since the Hub began, when that
	// is shorter), one point per HistoryPeriodSeconds, oldest first, the
	// last the period now running: the page's trend charts, drawn in full
	// as soon as the page opens.
	History              []HistoryPoint `json:"history"`
	HistoryPeriodSeconds float64        `json:"history_period_seconds"`
	// Cluster is the cluster this process is a node of (Hub.SetCluster);
	// nil, and absent from the JSON, for one process.
	Cluster *ClusterInfo `json:"cluster,omitempty"`
	// Held are the downstream tools and prompts held since they changed
	// (Options.Held), for operators to accept; a tenant's view has none.
	Held []HeldInfo `json:"held"`
	// AcceptToken is the value the page sends back with an Accept (POST
	// /status/accept), which a page of another origin cannot read: set
	// by package status for an operator only, "" otherwise.
	AcceptToken string `json:"accept_token,omitempty"`
	// Viewer is the identity whose own view this is (TenantView): a
	// tenant's page shows its sessions, calls and audit entries only, and
	// no server-wide numbers. "" for an operator's view of everything.
	Viewer string `json:"viewer,omitempty"`
}

// SessionInfo is one session in a Snapshot.
type SessionInfo struct {
	// ID is the session's id.
	ID string `json:"id"`
	// Transport is "stdio" or "http".
	Transport string `json:"transport"`
	// Era is "legacy" (a revision with initialize), "modern"
	// (2026-07-28, stateless) or "pending" (not initialized yet).
	Era string `json:"era"`
	// Version is the negotiated protocol revision; "" before initialize.
	Version string `json:"version,omitempty"`
	// Client is the client's name from initialize; "" when unknown.
	Client string `json:"client,omitempty"`
	// Identity is who the session serves ("token:<name>",
	// "oauth:<subject>", "local", "anonymous"), never a credential.
	Identity string `json:"identity,omitempty"`
	// Started is when the session began.
	Started time.Time `json:"started"`
	// AgeSeconds is how long ago it began.
	AgeSeconds float64 `json:"age_seconds"`
	// Calls counts the session's calls in flight.
	Calls int `json:"calls"`
	// CallsTotal counts the calls the session has made (each taken by an
	// invoker), those in flight included.
	CallsTotal int `json:"calls_total"`
	// Owner is the member id of the node that owns the session: on a
	// cluster node, the node itself (a session lives where it was
	// initialized); "" for one process.
	Owner string `json:"owner,omitempty"`
}

// CallInfo is one call in flight in a Snapshot.
type CallInfo struct {
	// ID is the call's correlation id (c-…).
	ID string `json:"id"`
	// Session is the id of the session it came in on.
	Session string `json:"session"`
	// Identity is who called (as SessionInfo.Identity).
	Identity string `json:"identity,omitempty"`
	// Tool is the tool's name (as bounded for metrics: "unknown" when the
	// registry has no such tool).
	Tool string `json:"tool"`
	// State is "starting" (taken, not yet running), "waiting_approval",
	// "running" or "streaming".
	State string `json:"state"`
	// Started is when an invoker took the call.
	Started time.Time `json:"started"`
	// AgeSeconds is how long ago it started.
	AgeSeconds float64 `json:"age_seconds"`
}

// DownstreamStatus is one downstream MCP server: its configured name, its
// state (connecting, ready, failed, closed), how many tools it offers and
// why it failed (client-safe text; "" when it did not).
type DownstreamStatus struct {
	// Name is the server's name in the configuration.
	Name string `json:"name"`
	// State is connecting, ready, down (reconnecting), unauthenticated
	// (troupe's credential for it is missing or refused: Err names the
	// variable to set), failed or closed.
	State string `json:"state"`
	// Tools counts the tools it offers (0 when unknown).
	Tools int `json:"tools"`
	// Exposed counts those of its tools sessions see: after
	// enabled_tools, disabled_tools, tools.allow and tools.deny (0 when
	// unknown, as Tools).
	Exposed int `json:"tools_exposed"`
	// Err says why it failed, fit for a client: no host paths, no
	// secrets.
	Err string `json:"error,omitempty"`
}

// HeldInfo is one held version of a downstream tool or prompt: it changed
// since troupe trusted it, and waits for an operator's accept.
type HeldInfo struct {
	// Server is the downstream server's name in [mcp_servers].
	Server string `json:"server"`
	// Kind is "tool" or "prompt".
	Kind string `json:"kind"`
	// Name is its name on the server.
	Name string `json:"name"`
	// Since is when troupe first saw the changed version.
	Since time.Time `json:"since"`
	// Summary says what changed ("description and input schema
	// changed").
	Summary string `json:"summary"`
	// Diff is the change line by line, every invisible or control
	// character already escaped (pins.Change.Lines).
	Diff []string `json:"diff"`
	// Hash is the held version's: an Accept names it, and is refused
	// when what is held changed again since.
	Hash string `json:"hash"`
}

// AuditEntry is one finished call, from its audit record, in a Snapshot.
// It holds no arguments, only what the audit log already shows.
type AuditEntry struct {
	// Time is when the call stopped.
	Time time.Time `json:"time"`
	// Tool is the called tool's name.
	Tool string `json:"tool"`
	// Outcome is "ok" or the error kind.
	Outcome string `json:"outcome"`
	// Approval is how the call was approved (not_required, approved, …).
	Approval string `json:"approval"`
	// DurationSeconds is how long the call took, Started to Stopped.
	DurationSeconds float64 `json:"duration_seconds"`
	// CorrelationID is the call's id (c-…).
	CorrelationID string `json:"correlation_id"`
	// Session is the session's id.
	Session string `json:"session"`
	// Identity is who called (the audit record's identity).
	Identity string `json:"identity,omitempty"`
}

// MetricsSummary is the handful of numbers the status page charts, read
// from the same counters /metrics serves.
type MetricsSummary struct {
	// CallsTotal counts the calls finished since start; CallsFailed those
	// whose outcome was not "ok". A page derives calls/s from two samples.
	CallsTotal  uint64 `json:"calls_total"`
	CallsFailed uint64 `json:"calls_failed"`
	// CallsInFlight is the number of calls in flight.
	CallsInFlight int `json:"calls_in_flight"`
	// Sessions is the number of sessions that exist.
	Sessions int `json:"sessions"`
	// ApprovalsPending is the number of calls waiting for a person.
	ApprovalsPending int `json:"approvals_pending"`
	// LatencyP50Seconds and LatencyP99Seconds estimate the whole-call
	// latency's median and 99th percentile over all tools, of the
	// LatencyCalls calls that finished in the last LatencyWindowSeconds
	// (five minutes, or the Hub's age when shorter), from the latency
	// histogram's buckets; 0 without calls.
	LatencyP50Seconds    float64 `json:"latency_p50_seconds"`
	LatencyP99Seconds    float64 `json:"latency_p99_seconds"`
	LatencyCalls         uint64  `json:"latency_calls"`
	LatencyWindowSeconds float64 `json:"latency_window_seconds"`
	// HTTPRefusedTotal counts the HTTP requests refused (4xx, 5xx).
	HTTPRefusedTotal uint64 `json:"http_refused_total"`
	// SpoolBytes is the spool's size now (-1 when not reported).
	SpoolBytes int64 `json:"spool_bytes"`
}
