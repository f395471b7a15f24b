package observe

import (
	"context"
	"errors"
	"math"
	"sort"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"troupe/actors"
	"troupe/audit"
	"troupe/identity"
	"troupe/sandbox"
)

// The Hub is what the host and the sandbox report to.
var (
	_ actors.Observer       = (*Hub)(nil)
	_ sandbox.StartObserver = (*Hub)(nil)
)

// Values with a meaning of their own.
const (
	eraPending    = "pending"  // a session's era before initialize
	stateStarting = "starting" // a call taken, before its first state
	refusalStage  = "policy"   // sandbox.StartError.Stage of a refusal
)

// SessionStarted adds the session to the live view and the sessions gauge,
// in era "pending" until it initializes; who is its identity (String).
func (h *Hub) SessionStarted(id, transport, who string) {
	if h == nil {
		return
	}
	transport = oneOf(transport, "stdio", "http")
	h.mu.Lock()
	if _, dup := h.sessions[id]; dup {
		h.mu.Unlock()
		return
	}
	now := h.now()
	slot := h.hist.at(now, h.gaugesLocked())
	h.sessions[id] = &sessionView{transport: transport, identity: who, era: eraPending, started: now}
	slot.end = h.gaugesLocked()
	h.mu.Unlock()
	h.m.sessions.WithLabelValues(transport, eraPending).Inc()
}

// SessionInitialized moves the session to its era and records its
// revision and client for the page.
func (h *Hub) SessionInitialized(id, version, client string) {
	if h == nil {
		return
	}
	h.mu.Lock()
	s := h.sessions[id]
	if s == nil {
		h.mu.Unlock()
		return
	}
	from, to := s.era, eraOf(version)
	s.era, s.version, s.client = to, clip(version, maxShownBytes), clip(client, maxShownBytes)
	h.mu.Unlock()
	h.moveSession(s.transport, from, to)
}

// moveSession moves one session between eras in the sessions gauge.
func (h *Hub) moveSession(transport, from, to string) {
	if from != to {
		h.m.sessions.WithLabelValues(transport, from).Dec()
		h.m.sessions.WithLabelValues(transport, to).Inc()
	}
}

// SessionEnded removes the session from the live view and the gauge. Its
// calls stay until their own CallFinished.
func (h *Hub) SessionEnded(id string) {
	if h == nil {
		return
	}
	h.mu.Lock()
	s := h.sessions[id]
	if s != nil {
		slot := h.hist.at(h.now(), h.gaugesLocked())
		delete(h.sessions, id)
		slot.end = h.gaugesLocked()
	}
	h.mu.Unlock()
	if s != nil {
		h.m.sessions.WithLabelValues(s.transport, s.era).Dec()
	}
}

// RequestServed counts a request other than a call and, with tracing on,
// records its span after the fact. The method is one troupe knows (the
// host reports no others), so it bounds its label itself.
func (h *Hub) RequestServed(session, method string, began time.Time) {
	if h == nil {
		return
	}
	h.m.requests.WithLabelValues(method).Inc()
	h.m.requestDuration.WithLabelValues(method).Observe(time.Since(began).Seconds())
	h.traceRequest(session, method, began)
}

// CallStarted adds c to the live view and, with tracing on, starts its
// span, whose context it returns (the parent of the tool's context).
func (h *Hub) CallStarted(ctx context.Context, c *actors.CallView) context.Context {
	if h == nil {
		return ctx
	}
	v := &callView{id: c.ID, session: c.Session, identity: c.Identity, tool: h.tool(c.Tool), era: eraOf(c.Version),
		started: c.Started, state: stateStarting, ctx: ctx}
	if v.started.IsZero() {
		v.started = time.Now()
	}
	v.ctx, v.span = h.traceCall(ctx, c)
	c.Observed = v
	var move *sessionView
	from := ""
	h.mu.Lock()
	slot := h.hist.at(v.started, h.gaugesLocked()) // the invoker's clock: one time.Now less
	h.calls[c.ID] = v
	slot.end = h.gaugesLocked()
	if s := h.sessions[c.Session]; s != nil {
		s.calls++
		s.total++
		if s.era == eraPending && v.era == "modern" {
			// A hidden session serving 2026-07-28 requests never
			// initializes: its calls tell its era.
			from, s.era, s.version, move = s.era, v.era, c.Version, s
		}
	}
	h.mu.Unlock()
	if move != nil {
		h.moveSession(move.transport, from, move.era)
	}
	return v.ctx
}

// CallStateChanged records what c does now, and whether it waits for a
// person (troupe_approvals_pending).
func (h *Hub) CallStateChanged(c *actors.CallView, s actors.CallState) {
	if h == nil {
		return
	}
	v, ok := c.Observed.(*callView)
	if !ok {
		return
	}
	h.mu.Lock()
	if v.state == string(actors.CallWaitingApproval) {
		h.pending--
	}
	v.state = string(s)
	if s == actors.CallWaitingApproval {
		h.pending++
	}
	h.mu.Unlock()
}

// ApprovalDecided counts the decision, observes the wait, and with
// tracing on records the wait as the call's "approval" child span.
func (h *Hub) ApprovalDecided(c *actors.CallView, outcome string, waited time.Duration) {
	if h == nil {
		return
	}
	label := oneOf(outcome, "approved", "denied", "expired", "unavailable", "trusted")
	h.m.approvals.WithLabelValues(label).Inc()
	// A trusted call never waited: its zero would only pull the
	// distribution down.
	if waited > 0 || outcome != "trusted" {
		h.m.approvalWait.WithLabelValues(label).Observe(waited.Seconds())
	}
	if c != nil {
		if v, ok := c.Observed.(*callView); ok {
			h.traceApproval(v, outcome, waited)
		}
	}
}

// CallFinished removes c from the live view, counts and times the call,
// keeps its audit record for the page, and ends its span. c is nil for a
// call cancelled before an invoker took it: it is counted from r alone.
func (h *Hub) CallFinished(c *actors.CallView, r *audit.Record) {
	if h == nil {
		return
	}
	var v *callView
	if c != nil {
		v, _ = c.Observed.(*callView)
	}
	outcome := labelOther
	if r != nil {
		outcome = outcomeLabel(r.Outcome)
	}
	var tm *toolMetrics
	era, who := labelUnknown, ""
	switch {
	case v != nil:
		tm, era, who = v.tool, v.era, v.identity
	case c != nil:
		tm, era, who = h.tool(c.Tool), eraOf(c.Version), c.Identity
	case r != nil:
		tm, who = h.tool(r.Tool), r.Identity
	default:
		return
	}
	who = identity.LabelOf(who) // bounded: a token's name, or the kind
	var took time.Duration
	if r != nil && !r.Started.IsZero() && !r.Stopped.IsZero() {
		took = r.Stopped.Sub(r.Started)
	} else if v != nil {
		took = time.Since(v.started)
	}

	ended := time.Time{}
	if r != nil {
		ended = r.Stopped
	}
	if ended.IsZero() {
		ended = h.now()
	}
	h.mu.Lock()
	slot := h.hist.at(ended, h.gaugesLocked())
	slot.calls++
	if outcome != "ok" {
		slot.failed++
	}
	slot.latency[latencyBucket(h.m.callBounds, took.Seconds())]++
	if v != nil {
		if _, ok := h.calls[v.id]; ok {
			delete(h.calls, v.id)
			if v.state == string(actors.CallWaitingApproval) {
				h.pending--
			}
			if s := h.sessions[v.session]; s != nil {
				s.calls--
			}
		}
	}
	if r != nil {
		e := &h.ring[h.ringNext]
		*e = AuditEntry{Time: r.Stopped, Tool: tm.label, Outcome: r.Outcome, Approval: r.Approval,
			DurationSeconds: took.Seconds(), CorrelationID: r.CorrelationID, Session: r.Session, Identity: r.Identity}
		if tm == h.unknown {
			e.Tool = clip(r.Tool, maxShownBytes) // the page may show the asked name; it is no label
		}
		h.ringNext = (h.ringNext + 1) % auditKept
		if h.ringLen < auditKept {
			h.ringLen++
		}
	}
	slot.end = h.gaugesLocked()
	h.mu.Unlock()

	h.series.RLock()
	if tm.gone {
		tm = h.tool(tm.label)
	}
	tm.counter(h.m, outcome, era, who).Inc()
	secs := took.Seconds()
	tm.duration(h.m, who).Observe(secs)
	if tm.downstream != nil {
		tm.downstream.Observe(secs)
	}
	h.series.RUnlock()
	if v != nil && v.span != nil {
		h.endCall(v, outcome)
	}
}

// AuditFlushed observes one batch of the audit log: its size and how long
// its write and fsync took.
func (h *Hub) AuditFlushed(records int, fsync time.Duration) {
	if h == nil {
		return
	}
	h.m.auditBatch.Observe(float64(records))
	h.m.auditFlush.Observe(fsync.Seconds())
}

// DownstreamChanged sets the server's state gauge (1 for state, 0 for the
// others) and counts a reconnect when it is ready again.
func (h *Hub) DownstreamChanged(server, state string) {
	if h == nil {
		return
	}
	states := [...]string{"connecting", "ready", "failed", "closed", "unauthenticated", labelOther}
	state = oneOf(state, states[:5]...)
	h.mu.Lock()
	d := h.downstreams[server]
	if d == nil {
		d = &downstreamView{}
		h.downstreams[server] = d
	}
	reconnect := state == "ready" && d.state != "ready" && d.ready
	d.state = state
	if state == "ready" {
		d.ready = true
	}
	// The gauge is set under the lock: two changes of one server must
	// not leave two states at 1.
	for _, s := range states {
		val := 0.0
		if s == state {
			val = 1
		}
		h.m.downstreamState.WithLabelValues(server, s).Set(val)
	}
	h.mu.Unlock()
	if reconnect {
		h.m.reconnects.WithLabelValues(server).Inc()
	}
}

// SandboxStarted counts a start, a refusal (a profile this host cannot
// enforce) or a failure at some stage, and observes a start's latency.
func (h *Hub) SandboxStarted(profile sandbox.Profile, took time.Duration, err error) {
	if h == nil {
		return
	}
	p := oneOf(string(profile), string(sandbox.ProfileNone), string(sandbox.ProfileDefault), string(sandbox.ProfileSeatbelt))
	if err == nil {
		h.m.sandboxStarts.WithLabelValues(p).Inc()
		h.m.sandboxStartTime.WithLabelValues(p).Observe(took.Seconds())
		return
	}
	stage := labelOther
	var se *sandbox.StartError
	if errors.As(err, &se) {
		if se.Stage == refusalStage {
			h.m.sandboxRefusals.WithLabelValues(p).Inc()
			return
		}
		stage = oneOf(se.Stage, "command", "tempdir", "runtime", "cgroup", "start", "helper", "rlimit",
			"capabilities", "landlock", "seccomp", "cgroup-join", "exec")
	}
	h.m.sandboxFailures.WithLabelValues(p, stage).Inc()
}

// summarize fills the page's counters from the metrics /metrics serves:
// calls_total summed over its series. (The latency quantiles come from the
// history's window: Snapshot.)
func (h *Hub) summarize(s *MetricsSummary) {
	for _, m := range collect(h.m.calls) {
		n := uint64(m.GetCounter().GetValue())
		s.CallsTotal += n
		for _, l := range m.GetLabel() {
			if l.GetName() == "outcome" && l.GetValue() != "ok" {
				s.CallsFailed += n
			}
		}
	}
	for _, m := range collect(h.m.httpRefused) {
		s.HTTPRefusedTotal += uint64(m.GetCounter().GetValue())
	}
}

// collect reads a collector's current series.
func collect(c prometheus.Collector) []*dto.Metric {
	ch := make(chan prometheus.Metric, 64)
	go func() { c.Collect(ch); close(ch) }()
	var out []*dto.Metric
	for m := range ch {
		var d dto.Metric
		if m.Write(&d) == nil {
			out = append(out, &d)
		}
	}
	return out
}

// quantile estimates the q-quantile from cumulative bucket counts, as
// Prometheus' histogram_quantile does: linear within the bucket, the
// highest finite bound for the overflow bucket, 0 without samples.
func quantile(q float64, bounds []float64, cum []uint64, total uint64) float64 {
	if total == 0 {
		return 0
	}
	rank := q * float64(total)
	i := sort.Search(len(cum), func(i int) bool { return float64(cum[i]) >= rank })
	if i == len(cum) {
		return bounds[len(bounds)-1]
	}
	lo, below := 0.0, uint64(0)
	if i > 0 {
		lo, below = bounds[i-1], cum[i-1]
	}
	in := cum[i] - below
	if in == 0 {
		return bounds[i]
	}
	v := lo + (bounds[i]-lo)*(rank-float64(below))/float64(in)
	return math.Min(v, bounds[i])
}
