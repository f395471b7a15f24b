package observe

import (
	"testing"
	"time"

	"troupe/actors"
	"troupe/audit"
)

// fakeClock is a Hub's clock that a test moves.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time          { return c.t }
func (c *fakeClock) advance(d time.Duration) { c.t = c.t.Add(d) }
func newClockedHub(c *fakeClock) *Hub        { h := New(Options{}); h.now, h.started = c.now, c.t; return h }

// The trends a page draws when it opens come from the Hub: one point per
// period since the Hub began (at most five minutes), periods without
// events carrying the gauges over, counts per period, and the tiles'
// quantiles over the same window.
func TestHistoryIsServedFromTheHub(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1_000_000, 0)}
	h := newClockedHub(clock)
	h.SetTools(testTools())
	h.SessionStarted("s1", "http", "local")
	clock.advance(10 * time.Second)

	c := &actors.CallView{ID: "c-1", Session: "s1", Tool: "shell", Version: "2025-06-18", Started: clock.t}
	h.CallStarted(t0ctx(), c)
	clock.advance(4 * time.Second)
	h.CallFinished(c, &audit.Record{Session: "s1", Tool: "shell", Started: c.Started, Stopped: clock.t, Outcome: "ok", CorrelationID: "c-1"})
	h.HTTPRefused(401)
	clock.advance(6 * time.Second)

	s := h.Snapshot()
	if s.HistoryPeriodSeconds != 2 || len(s.History) != 11 {
		t.Fatalf("history: period %v, %d points; want 2 s, 11 points for 20 s", s.HistoryPeriodSeconds, len(s.History))
	}
	var calls, refused uint32
	for i, p := range s.History {
		calls += p.Calls
		refused += p.HTTPRefused
		if p.Sessions != 1 {
			t.Errorf("point %d: sessions %d, want 1 throughout", i, p.Sessions)
		}
		wantInFlight := 0
		if i >= 5 && i < 7 { // the call ran from 10 s to 14 s
			wantInFlight = 1
		}
		if p.CallsInFlight != wantInFlight {
			t.Errorf("point %d: in flight %d, want %d", i, p.CallsInFlight, wantInFlight)
		}
	}
	if calls != 1 || refused != 1 || s.History[7].Calls != 1 || s.History[7].LatencyP50Seconds <= 2.5 {
		t.Errorf("history counts: calls %d, refused %d, point 7 %+v", calls, refused, s.History[7])
	}
	m := s.Metrics
	if m.LatencyCalls != 1 || m.LatencyP50Seconds <= 2.5 || m.LatencyP50Seconds > 5 || m.LatencyWindowSeconds != 20 {
		t.Errorf("tiles' window: %+v", m)
	}

	// Ten minutes later: five minutes of points, none with the call, and
	// the tiles' window is five minutes without calls.
	clock.advance(10 * time.Minute)
	s = h.Snapshot()
	if len(s.History) != historySlots {
		t.Fatalf("%d points, want %d", len(s.History), historySlots)
	}
	for _, p := range s.History {
		if p.Calls != 0 || p.Sessions != 1 {
			t.Fatalf("a point of the last five minutes: %+v", p)
		}
	}
	if m := s.Metrics; m.LatencyCalls != 0 || m.LatencyP50Seconds != 0 || m.LatencyWindowSeconds != 300 || m.CallsTotal != 1 {
		t.Errorf("tiles after ten idle minutes: %+v", m)
	}
}

// A session's calls column counts the calls it made, not only those in
// flight.
func TestSessionCountsItsCalls(t *testing.T) {
	h := New(Options{})
	h.SetTools(testTools())
	h.SessionStarted("s1", "stdio", "local")
	h.SessionInitialized("s1", "2025-06-18", "codex")
	call(h, "c-1", "s1", "shell", "2025-06-18", "ok", time.Millisecond)
	call(h, "c-2", "s1", "shell", "2025-06-18", "ok", time.Millisecond)
	c := &actors.CallView{ID: "c-3", Session: "s1", Tool: "shell", Version: "2025-06-18", Started: time.Now()}
	h.CallStarted(t0ctx(), c)
	s := h.Snapshot().Sessions
	if len(s) != 1 || s[0].CallsTotal != 3 || s[0].Calls != 1 {
		t.Fatalf("sessions = %+v, want 3 calls made, 1 in flight", s)
	}
}

// A wall clock set back since the Hub began gives the period now running,
// not a panic.
func TestHistoryWithTheClockSetBack(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1_000_000, 0)}
	h := newClockedHub(clock)
	h.SessionStarted("s1", "stdio", "local")
	clock.advance(-time.Hour)
	h.SessionStarted("s2", "stdio", "local")
	if s := h.Snapshot(); len(s.History) != 1 || s.History[0].Sessions != 2 {
		t.Fatalf("history = %+v", s.History)
	}
}
