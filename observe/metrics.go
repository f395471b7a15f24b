package observe

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Label values the Hub substitutes for values it does not know, so that
// no client can grow a metric's series without bound.
const (
	// labelUnknown stands for a tool the registry does not have (SetTools),
	// or an era the Hub could not learn.
	labelUnknown = "unknown"
	// labelOther stands for a value outside a label's known set (a
	// transport, a profile, an outcome).
	labelOther = "other"
)

// The sources of tools that are not proxied (SetTools): every other source
// names a downstream server.
const (
	sourceFirstParty = "first-party"
	sourceCodex      = "[codex]"
)

// metrics are the Hub's Prometheus collectors, registered on its own
// registry. Every label's values come from a bounded set: the registry's
// tool names, a fixed list, or the configured downstream servers.
type metrics struct {
	calls            *prometheus.CounterVec   // tool, outcome, era, identity
	callDuration     *prometheus.HistogramVec // tool, identity
	approvals        *prometheus.CounterVec   // outcome
	approvalWait     *prometheus.HistogramVec // outcome
	sessions         *prometheus.GaugeVec     // transport, era
	requests         *prometheus.CounterVec   // method
	requestDuration  *prometheus.HistogramVec // method
	sandboxStarts    *prometheus.CounterVec   // profile
	sandboxRefusals  *prometheus.CounterVec   // profile
	sandboxFailures  *prometheus.CounterVec   // profile, stage
	sandboxStartTime *prometheus.HistogramVec // profile
	downstreamState  *prometheus.GaugeVec     // server, state
	reconnects       *prometheus.CounterVec   // server
	downstreamCall   *prometheus.HistogramVec // server
	auditBatch       prometheus.Histogram
	auditFlush       prometheus.Histogram
	httpRefused      *prometheus.CounterVec // status
	rateLimited      *prometheus.CounterVec // identity, limit
	pinEvents        *prometheus.CounterVec // server, kind, event
	held             *prometheus.GaugeVec   // server
	// callBounds are callDuration's bucket bounds, for the page's
	// quantiles.
	callBounds []float64
	// own are every troupe_* collector, registered on each registry the
	// Hub serves (a cluster node's with the node label: SetCluster);
	// runtime are the Go and process collectors, never labelled.
	own, runtime []prometheus.Collector
}

// newMetrics makes the collectors, with the gauges that read the Hub's
// live view, and the Go and process collectors; register puts them on a
// registry.
func newMetrics(h *Hub) *metrics {
	// Buckets, in seconds or records. A call may wait minutes for a person or
	// run a long build; a sandbox start and an fsync take milliseconds.
	callBuckets := []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800}
	approvalBuckets := []float64{.1, .5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800}
	startBuckets := []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5}
	fsyncBuckets := []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1}
	batchBuckets := []float64{1, 2, 4, 8, 16, 32, 64, 128, 256, 512}
	requestBuckets := []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}
	m := &metrics{
		callBounds: callBuckets,
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "troupe_calls_total",
			Help: "Tool calls finished, by tool (\"unknown\" for a name the registry does not have), outcome (\"ok\" or the error kind), protocol era (legacy: revisions with initialize; modern: 2026-07-28) and identity (token:<name>, oauth, local, anonymous).",
		}, []string{"tool", "outcome", "era", "identity"}),
		callDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "troupe_call_duration_seconds",
			Help:    "Whole tool calls, from an invoker taking the call to its result, including any approval wait, by tool and identity (token:<name>, oauth, local, anonymous).",
			Buckets: callBuckets,
		}, []string{"tool", "identity"}),
		approvals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "troupe_approvals_total",
			Help: "Approval decisions, by outcome (approved, denied, expired, unavailable, trusted).",
		}, []string{"outcome"}),
		approvalWait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "troupe_approval_wait_seconds",
			Help:    "How long calls waited for a person's approval decision, by outcome.",
			Buckets: approvalBuckets,
		}, []string{"outcome"}),
		sessions: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "troupe_sessions",
			Help: "Sessions open now, by transport (stdio, http) and era (legacy, modern, or pending before initialize).",
		}, []string{"transport", "era"}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "troupe_requests_total",
			Help: "MCP requests other than tool calls answered (initialize, tools/list, ...), by method.",
		}, []string{"method"}),
		requestDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "troupe_request_duration_seconds",
			Help:    "How long MCP requests other than tool calls took to answer, by method.",
			Buckets: requestBuckets,
		}, []string{"method"}),
		sandboxStarts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "troupe_sandbox_starts_total",
			Help: "Programs started in the sandbox, by profile.",
		}, []string{"profile"}),
		sandboxRefusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "troupe_sandbox_refusals_total",
			Help: "Sandbox starts refused because the profile cannot be enforced on this host, by profile.",
		}, []string{"profile"}),
		sandboxFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "troupe_sandbox_start_failures_total",
			Help: "Sandbox starts that failed for another reason than a refusal, by profile and the stage that failed.",
		}, []string{"profile", "stage"}),
		sandboxStartTime: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "troupe_sandbox_start_duration_seconds",
			Help:    "How long the sandbox took to start a program (confinement set up, program executed), by profile.",
			Buckets: startBuckets,
		}, []string{"profile"}),
		downstreamState: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "troupe_downstream_state",
			Help: "Downstream MCP servers' state: 1 for the server's current state (connecting, ready, failed, closed, unauthenticated: troupe's credential for it is missing or refused), 0 for the others.",
		}, []string{"server", "state"}),
		reconnects: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "troupe_downstream_reconnects_total",
			Help: "Times a downstream MCP server became ready again after its first time, by server.",
		}, []string{"server"}),
		downstreamCall: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "troupe_downstream_call_duration_seconds",
			Help:    "Whole calls of tools proxied to a downstream MCP server, by server.",
			Buckets: callBuckets,
		}, []string{"server"}),
		auditBatch: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "troupe_audit_batch_records",
			Help:    "Records the audit log wrote per batch (one write and one fsync per batch).",
			Buckets: batchBuckets,
		}),
		auditFlush: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "troupe_audit_flush_duration_seconds",
			Help:    "How long the audit log took to write and fsync one batch.",
			Buckets: fsyncBuckets,
		}),
		httpRefused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "troupe_http_refused_total",
			Help: "HTTP requests the MCP endpoint refused itself, by status code (401, 403, 404, 429, 503, ...).",
		}, []string{"status"}),
		rateLimited: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "troupe_rate_limited_total",
			Help: "Requests refused by an identity's limits, by identity (token:<name>, oauth, local, anonymous) and limit (calls_per_minute, tool_calls_per_minute, max_concurrent_calls, max_sessions).",
		}, []string{"identity", "limit"}),
		pinEvents: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "troupe_downstream_pin_events_total",
			Help: "Downstream tools and prompts whose pinned version changed hands, by server, kind (tool, prompt) and event (pinned: seen for the first time; changed: held or asked about; restored: listed as pinned again; accepted: a changed version pinned by an operator or by on_change = \"accept\").",
		}, []string{"server", "kind", "event"}),
		held: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "troupe_downstream_held",
			Help: "Downstream tools and prompts held now (changed since they were pinned, waiting for an operator's accept), by server.",
		}, []string{"server"}),
	}
	m.own = []prometheus.Collector{m.calls, m.callDuration, m.approvals, m.approvalWait, m.sessions, m.requests,
		m.requestDuration, m.sandboxStarts, m.sandboxRefusals, m.sandboxFailures, m.sandboxStartTime,
		m.downstreamState, m.reconnects, m.downstreamCall, m.auditBatch, m.auditFlush, m.httpRefused, m.rateLimited,
		m.pinEvents, m.held,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "troupe_calls_in_flight",
			Help: "Tool calls taken by an invoker and not finished yet.",
		}, func() float64 { return float64(h.inFlight()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "troupe_approvals_pending",
			Help: "Tool calls waiting for a person's approval now.",
		}, func() float64 { return float64(h.pendingApprovals()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name:        "troupe_build_info",
			Help:        "Always 1; its version label is troupe's version.",
			ConstLabels: prometheus.Labels{"version": h.opts.Version},
		}, func() float64 { return 1 }),
	}
	if f := h.opts.SpoolBytes; f != nil {
		m.own = append(m.own, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "troupe_spool_bytes",
			Help: "Bytes of call output the spool holds on disk now.",
		}, func() float64 { return float64(f()) }))
	}
	m.runtime = []prometheus.Collector{
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	}
	return m
}

// register puts the collectors on a new registry: troupe's own through
// wrap (nil: as they are; a cluster node's adds its node label), with
// extra beside them (the cluster's gauges), and the runtime's unlabelled.
// A collector may be registered on several registries: a node's registry
// shows the very counters the one it replaced did.
func (m *metrics) register(wrap func(prometheus.Registerer) prometheus.Registerer, extra ...prometheus.Collector) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	var own prometheus.Registerer = reg
	if wrap != nil {
		own = wrap(reg)
	}
	own.MustRegister(m.own...)
	own.MustRegister(extra...)
	reg.MustRegister(m.runtime...)
	return reg
}
