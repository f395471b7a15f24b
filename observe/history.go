package observe

import (
	"sort"
	"time"
)

// The status page's trends come from the Hub, not from the page: a page
// opened now shows the last five minutes at once. The Hub keeps one slot
// per period of the page's sampling (2 s), written when something happens
// (a call finishes, a session or call comes or goes, a request is
// refused), so an idle troupe does no work for it and no goroutine keeps
// it; a period in which nothing happened is filled in when a snapshot is
// taken. Its size is fixed: historySlots slots of a few hundred bytes.
const (
	// HistoryPeriod is the length of one point of Snapshot.History: the
	// page's sampling period.
	HistoryPeriod = 2 * time.Second
	// historySlots is how many periods the Hub keeps: five minutes.
	historySlots = 150
	// latencyBuckets is the number of call_duration_seconds' buckets,
	// the overflow included (newMetrics' callBuckets).
	latencyBuckets = 18
)

// gauges are the values of the live view that a trend shows as they were
// at a moment rather than as counts in a period.
type gauges struct{ inFlight, sessions int }

// historySlot is one period: what was counted in it, and the gauges at
// its start (before its first event) and at its end (after its last).
type historySlot struct {
	n                      int64 // the period's number (UnixNano / HistoryPeriod); 0: unused
	calls, failed, refused uint32
	start, end             gauges
	latency                [latencyBuckets]uint32 // the period's calls by call_duration bucket
}

// history is the Hub's ring of periods, guarded by Hub.mu.
type history struct {
	slots [historySlots]historySlot
	// stale takes an event dated before the period its slot holds now
	// (older than five minutes): it is counted nowhere.
	stale historySlot
}

// period is the number of the period t falls in.
func period(t time.Time) int64 { return t.UnixNano() / int64(HistoryPeriod) }

// at is the slot of the period now falls in; g are the gauges before the
// event being recorded, which a new slot takes as its start and end. The
// caller updates end once the event has changed them.
func (hs *history) at(now time.Time, g gauges) *historySlot {
	n := period(now)
	s := &hs.slots[n%historySlots]
	if s.n > n {
		hs.stale = historySlot{}
		return &hs.stale
	}
	if s.n != n {
		*s = historySlot{n: n, start: g, end: g}
	}
	return s
}

// HistoryPoint is one period of Snapshot.History.
type HistoryPoint struct {
	// Calls counts the calls that finished in the period; Failed those
	// whose outcome was not "ok".
	Calls  uint32 `json:"calls,omitempty"`
	Failed uint32 `json:"failed,omitempty"`
	// HTTPRefused counts the HTTP requests refused in the period.
	HTTPRefused uint32 `json:"http_refused,omitempty"`
	// CallsInFlight and Sessions are the values at the period's end.
	CallsInFlight int `json:"calls_in_flight,omitempty"`
	Sessions      int `json:"sessions,omitempty"`
	// LatencyP50Seconds and LatencyP99Seconds estimate the latency of the
	// calls that finished in the period (0 when none did).
	LatencyP50Seconds float64 `json:"latency_p50_seconds,omitempty"`
	LatencyP99Seconds float64 `json:"latency_p99_seconds,omitempty"`
}

// points are the periods from the first one after started (at most
// historySlots back) to now's, oldest first; now are the gauges at the
// moment. It also returns the latency buckets of all the calls that
// finished in them, for the quantiles of the whole window. Gauges of a
// period without events are those of the next period's start, walking back
// from now.
func (hs *history) points(now, started time.Time, cur gauges, bounds []float64) ([]HistoryPoint, [latencyBuckets]uint64) {
	var window [latencyBuckets]uint64
	last, first := period(now), period(started)
	// At least the period now running, should the wall clock have been
	// set back since the Hub began.
	n := max(1, min(int64(historySlots), last-first+1))
	out := make([]HistoryPoint, n)
	for i := n - 1; i >= 0; i-- {
		p := last - (n - 1 - i)
		s := &hs.slots[p%historySlots]
		if s.n != p {
			out[i] = HistoryPoint{CallsInFlight: cur.inFlight, Sessions: cur.sessions}
			continue
		}
		pt := HistoryPoint{Calls: s.calls, Failed: s.failed, HTTPRefused: s.refused,
			CallsInFlight: s.end.inFlight, Sessions: s.end.sessions}
		var cum [latencyBuckets]uint64
		var total uint64
		for b, c := range s.latency {
			window[b] += uint64(c)
			total += uint64(c)
			cum[b] = total
		}
		pt.LatencyP50Seconds = quantile(0.5, bounds, cum[:len(bounds)], total)
		pt.LatencyP99Seconds = quantile(0.99, bounds, cum[:len(bounds)], total)
		out[i] = pt
		cur = s.start
	}
	return out, window
}

// windowQuantiles are p50 and p99 of the calls counted in buckets, and
// how many there are.
func windowQuantiles(buckets [latencyBuckets]uint64, bounds []float64) (p50, p99 float64, calls uint64) {
	var cum [latencyBuckets]uint64
	for b, c := range buckets {
		calls += c
		cum[b] = calls
	}
	return quantile(0.5, bounds, cum[:len(bounds)], calls), quantile(0.99, bounds, cum[:len(bounds)], calls), calls
}

// latencyBucket is the call_duration bucket a call of secs falls in (le:
// the first bound at or above it; the overflow bucket past the last).
func latencyBucket(bounds []float64, secs float64) int {
	return sort.SearchFloat64s(bounds, secs)
}
