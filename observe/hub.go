package observe

import (
	"context"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"troupe/identity"
	"troupe/limits"
	"troupe/observe/tracing"
	"troupe/protocol"
)

// auditKept is how many audit records the status page shows.
const auditKept = 50

// Options configure a Hub.
type Options struct {
	// Version is troupe's version, for troupe_build_info and the page.
	Version string
	// Tracer, when not nil, gets a span per call (with a child for the
	// approval wait) and per request; nil: tracing is off.
	Tracer *tracing.Tracer
	// SpoolBytes, when set, reports the spool's size on every scrape
	// (troupe_spool_bytes); nil: not reported.
	SpoolBytes func() int64
	// Downstreams, when set, lists the downstream servers for the status
	// page, with their tool counts and errors; nil: the page shows the
	// states DownstreamChanged reported, without tool counts.
	Downstreams func() []DownstreamStatus
	// Held, when set, lists the held downstream tools and prompts for
	// the status page; nil: none.
	Held func() []HeldInfo
}

// Hub is troupe's one observer. It implements actors.Observer and
// sandbox.StartObserver, so the host and the sandbox report to it; it keeps
// the Prometheus registry /metrics serves, the live view (sessions, calls in
// flight, downstream servers, the last audit records) the status page
// shows, and, when tracing is on, starts and ends the trace spans. Its
// methods are safe for concurrent use and never block on I/O. A nil *Hub
// observes nothing: its methods return at once (Registry returns nil).
type Hub struct {
	opts   Options
	tracer *tracing.Tracer // nil: tracing off
	// reg is what /metrics serves: the metrics as they are, or, once
	// SetCluster has told the Hub its node, the same collectors with the
	// node label and the cluster's gauges.
	reg atomic.Pointer[prometheus.Registry]
	// cluster is this process as a cluster node (SetCluster); nil: one
	// process.
	cluster atomic.Pointer[clusterView]
	m       *metrics
	started time.Time
	// tools maps a tool name to its metric children; SetTools replaces
	// it whole, so the path of a call reads it without a lock.
	tools   atomic.Pointer[toolTable]
	unknown *toolMetrics // what a tool the table lacks records under
	// series orders the tool series' lives: SetTools holds it to mark the
	// tools that left gone and delete their series, a finishing call holds
	// it shared while it records, so no call recreates a deleted series.
	series sync.RWMutex

	mu          sync.Mutex
	sessions    map[string]*sessionView
	calls       map[string]*callView // by correlation id
	pending     int                  // calls in CallWaitingApproval
	downstreams map[string]*downstreamView
	ring        [auditKept]AuditEntry
	ringNext    int // where the next record goes
	ringLen     int
	hist        history // the page's trends (history.go)
	// now is the clock of the live view and the history: time.Now, a
	// test's own clock in tests.
	now func() time.Time
}

// toolTable is SetTools' map, read without locks once published.
type toolTable map[string]*toolMetrics

// toolMetrics are one tool's label value and the metric children its calls
// record into, looked up once (in SetTools) instead of on every call.
type toolMetrics struct {
	label string
	// durations caches call_duration_seconds' children by identity
	// label.
	durations sync.Map // string -> prometheus.Observer
	// downstream observes the call for its server; nil for tools that
	// are not proxied.
	downstream prometheus.Observer
	// counters caches calls_total's children by outcome, era and
	// identity label.
	counters sync.Map // counterKey -> prometheus.Counter
	// gone is set (under Hub.series) when the tool left the registry and
	// its series were deleted; a call that finishes later records under
	// the tool's new metrics if it came back, else under "unknown".
	gone bool
}

type counterKey struct{ outcome, era, identity string }

// sessionView is one session in the live view.
type sessionView struct {
	transport, era, version, client string
	identity                        string // who it serves (identity.Identity.String)
	started                         time.Time
	calls                           int // in flight
	total                           int // taken by an invoker since the session began
}

// callView is one call in flight: the Hub's state between CallStarted and
// CallFinished, kept in CallView.Observed.
type callView struct {
	id, session string
	identity    string // who called (identity.Identity.String)
	tool        *toolMetrics
	era         string
	started     time.Time
	state       string // guarded by Hub.mu
	ctx         context.Context
	span        trace.Span // nil when tracing is off
}

// downstreamView is one downstream server's last reported state.
type downstreamView struct {
	state string
	ready bool // it has been ready before: the next ready is a reconnect
}

// New returns a Hub with its own registry (never Prometheus' global one:
// two Hubs in one process, as in tests, do not collide), its metrics, and
// Go and process collectors registered.
func New(opts Options) *Hub {
	h := &Hub{
		opts:        opts,
		tracer:      opts.Tracer,
		started:     time.Now(),
		sessions:    map[string]*sessionView{},
		calls:       map[string]*callView{},
		downstreams: map[string]*downstreamView{},
		now:         time.Now,
	}
	h.m = newMetrics(h)
	h.reg.Store(h.m.register(nil))
	h.unknown = h.newToolMetrics(labelUnknown, "")
	h.tools.Store(&toolTable{})
	return h
}

// Registry is what /metrics serves now; read it at each scrape (SetCluster
// replaces it).
func (h *Hub) Registry() *prometheus.Registry {
	if h == nil {
		return nil
	}
	return h.reg.Load()
}

// SetTools tells the Hub the registry's tools, name -> source
// ("first-party", "[codex]", or the downstream server's name for a proxied
// tool). Only these names become tool label values; a call of any other
// name records as "unknown", so clients cannot grow the series. Call it
// again when the tools change (a downstream server comes or goes, or lists
// other tools): the series of tools that are no longer there are deleted,
// so neither a downstream server that keeps renaming its tools nor reloads
// grow /metrics. A tool that comes back starts from zero.
func (h *Hub) SetTools(tools map[string]string) {
	if h == nil {
		return
	}
	h.series.Lock()
	defer h.series.Unlock()
	old := *h.tools.Load()
	t := make(toolTable, len(tools))
	for name, source := range tools {
		server := source
		if source == sourceFirstParty || source == sourceCodex {
			server = ""
		}
		if tm, ok := old[name]; ok && tm.server() == server {
			t[name] = tm // keep its cached counters
			continue
		}
		t[name] = h.newToolMetrics(name, server)
	}
	h.tools.Store(&t)
	for name, tm := range old {
		if _, kept := t[name]; kept || name == labelUnknown {
			continue
		}
		tm.gone = true
		h.m.callDuration.DeletePartialMatch(prometheus.Labels{"tool": name})
		h.m.calls.DeletePartialMatch(prometheus.Labels{"tool": name})
	}
}

// newToolMetrics looks up a tool's metric children; server is the
// downstream server of a proxied tool, "" for others.
func (h *Hub) newToolMetrics(label, server string) *toolMetrics {
	tm := &toolMetrics{label: label}
	if server != "" {
		tm.downstream = &serverObserver{server: server, o: h.m.downstreamCall.WithLabelValues(server)}
	}
	return tm
}

// serverObserver remembers which server a proxied tool's observer is for.
type serverObserver struct {
	server string
	o      prometheus.Observer
}

func (s *serverObserver) Observe(v float64) { s.o.Observe(v) }

// server is the downstream server of a proxied tool, "" for others.
func (tm *toolMetrics) server() string {
	if s, ok := tm.downstream.(*serverObserver); ok {
		return s.server
	}
	return ""
}

// tool returns name's metrics, or "unknown"'s.
func (h *Hub) tool(name string) *toolMetrics {
	if tm, ok := (*h.tools.Load())[name]; ok {
		return tm
	}
	return h.unknown
}

// counter is calls_total's child for the tool, outcome, era and identity
// label (identity.LabelOf).
func (tm *toolMetrics) counter(m *metrics, outcome, era, who string) prometheus.Counter {
	k := counterKey{outcome, era, who}
	if c, ok := tm.counters.Load(k); ok {
		return c.(prometheus.Counter)
	}
	c, _ := tm.counters.LoadOrStore(k, m.calls.WithLabelValues(tm.label, outcome, era, who))
	return c.(prometheus.Counter)
}

// duration is call_duration_seconds' child for the tool and identity
// label.
func (tm *toolMetrics) duration(m *metrics, who string) prometheus.Observer {
	if o, ok := tm.durations.Load(who); ok {
		return o.(prometheus.Observer)
	}
	o, _ := tm.durations.LoadOrStore(who, m.callDuration.WithLabelValues(tm.label, who))
	return o.(prometheus.Observer)
}

// HTTPRefused counts a request the HTTP handler refused with status
// (mcphttp.Options.OnRefused).
func (h *Hub) HTTPRefused(status int) {
	if h == nil {
		return
	}
	label := labelOther
	if status >= 100 && status <= 599 {
		label = strconv.Itoa(status)
	}
	h.m.httpRefused.WithLabelValues(label).Inc()
	h.mu.Lock()
	h.hist.at(h.now(), h.gaugesLocked()).refused++
	h.mu.Unlock()
}

// RateLimited counts a request an identity's limits refused
// (limits.Limiter.OnExceeded), by the identity's bounded label and the
// kind of limit.
func (h *Hub) RateLimited(over *limits.Exceeded) {
	if h == nil || over == nil {
		return
	}
	limit := oneOf(over.Limit, limits.LimitCallsPerMinute, limits.LimitToolCallsPerMinute,
		limits.LimitConcurrentCalls, limits.LimitSessions)
	h.m.rateLimited.WithLabelValues(identity.LabelOf(over.Identity), limit).Inc()
}

// gaugesLocked are the live view's gauges now; h.mu is held.
func (h *Hub) gaugesLocked() gauges { return gauges{inFlight: len(h.calls), sessions: len(h.sessions)} }

// inFlight is the number of calls in flight, for troupe_calls_in_flight.
func (h *Hub) inFlight() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.calls)
}

// pendingApprovals is the number of calls waiting for a person.
func (h *Hub) pendingApprovals() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.pending
}

// Snapshot returns the live view for the status page: a copy, taken under
// the Hub's lock, with the main metrics' current values.
func (h *Hub) Snapshot() Snapshot {
	now := time.Now()
	if h != nil {
		now = h.now()
	}
	s := Snapshot{
		Time:                 now,
		Sessions:             []SessionInfo{},
		Calls:                []CallInfo{},
		Downstreams:          []DownstreamStatus{},
		Audit:                []AuditEntry{},
		History:              []HistoryPoint{},
		Held:                 []HeldInfo{},
		Metrics:              MetricsSummary{SpoolBytes: -1},
		HistoryPeriodSeconds: HistoryPeriod.Seconds(),
	}
	if h == nil {
		return s
	}
	s.Version, s.UptimeSeconds = h.opts.Version, now.Sub(h.started).Seconds()
	h.mu.Lock()
	for id, v := range h.sessions {
		s.Sessions = append(s.Sessions, SessionInfo{ID: id, Transport: v.transport, Era: v.era, Version: v.version,
			Client: v.client, Identity: v.identity, Started: v.started, AgeSeconds: now.Sub(v.started).Seconds(), Calls: v.calls, CallsTotal: v.total})
	}
	for _, c := range h.calls {
		s.Calls = append(s.Calls, CallInfo{ID: c.id, Session: c.session, Identity: c.identity, Tool: c.tool.label, State: c.state,
			Started: c.started, AgeSeconds: now.Sub(c.started).Seconds()})
	}
	for i := 1; i <= h.ringLen; i++ {
		s.Audit = append(s.Audit, h.ring[(h.ringNext-i+auditKept)%auditKept])
	}
	if h.opts.Downstreams == nil {
		for name, d := range h.downstreams {
			s.Downstreams = append(s.Downstreams, DownstreamStatus{Name: name, State: d.state})
		}
	}
	s.Metrics.CallsInFlight = len(h.calls)
	s.Metrics.Sessions = len(h.sessions)
	s.Metrics.ApprovalsPending = h.pending
	var window [latencyBuckets]uint64
	s.History, window = h.hist.points(now, h.started, h.gaugesLocked(), h.m.callBounds)
	h.mu.Unlock()
	s.Metrics.LatencyP50Seconds, s.Metrics.LatencyP99Seconds, s.Metrics.LatencyCalls = windowQuantiles(window, h.m.callBounds)
	s.Metrics.LatencyWindowSeconds = max(0, min(now.Sub(h.started), historySlots*HistoryPeriod)).Seconds()

	if f := h.opts.Downstreams; f != nil {
		for _, d := range f() {
			d.Err = clip(d.Err, maxShownErrBytes) // the server may have chosen it
			s.Downstreams = append(s.Downstreams, d)
		}
	}
	if f := h.opts.Held; f != nil {
		for _, held := range f() {
			held.Name = clip(held.Name, maxShownBytes) // the server chose it
			s.Held = append(s.Held, held)
		}
	}
	if c := h.cluster.Load(); c != nil {
		s.Cluster = c.info()
		for i := range s.Sessions {
			s.Sessions[i].Owner = c.Node // every session a node lists is its own
		}
	}
	sort.Slice(s.Sessions, func(i, j int) bool { return s.Sessions[i].Started.Before(s.Sessions[j].Started) })
	sort.Slice(s.Calls, func(i, j int) bool { return s.Calls[i].Started.Before(s.Calls[j].Started) })
	sort.Slice(s.Downstreams, func(i, j int) bool { return s.Downstreams[i].Name < s.Downstreams[j].Name })
	if f := h.opts.SpoolBytes; f != nil {
		s.Metrics.SpoolBytes = f()
	}
	h.summarize(&s.Metrics)
	return s
}

// eraOf is the era label of a protocol revision.
func eraOf(version string) string {
	switch {
	case version == "":
		return labelUnknown
	case protocol.Version(version).IsStateless():
		return "modern"
	default:
		return "legacy"
	}
}

// oneOf returns v when it is one of known, else "other": a label value
// from a fixed set.
func oneOf(v string, known ...string) string {
	for _, k := range known {
		if v == k {
			return v
		}
	}
	return labelOther
}

// outcomeLabel bounds a call's outcome: "ok" or an error kind, which are
// short snake_case words from troupe's code; anything else is "other".
func outcomeLabel(o string) string {
	if o == "" || len(o) > 40 {
		return labelOther
	}
	for i := 0; i < len(o); i++ {
		if c := o[i]; (c < 'a' || c > 'z') && c != '_' {
			return labelOther
		}
	}
	return o
}
