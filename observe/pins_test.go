package observe

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestPinMetrics: each event adds the tools it covered, labels outside
// the known kinds and events are "other", and SetHeld replaces the held
// gauge whole (a server no longer named loses its series).
func TestPinMetrics(t *testing.T) {
	h := New(Options{})
	h.PinEvent("fake", "tool", "changed", 3)
	h.PinEvent("fake", "tool", "changed", 1)
	h.PinEvent("fake", "prompt", "nonsense", 2)
	h.PinEvent("fake", "tool", "pinned", 0) // nothing covered: no series
	if got := testutil.ToFloat64(h.m.pinEvents.WithLabelValues("fake", "tool", "changed")); got != 4 {
		t.Fatalf("changed tools = %v, want 4", got)
	}
	if got := testutil.ToFloat64(h.m.pinEvents.WithLabelValues("fake", "prompt", "other")); got != 2 {
		t.Fatalf("other events = %v, want 2", got)
	}
	if n := testutil.CollectAndCount(h.m.pinEvents); n != 2 {
		t.Fatalf("%d pin event series, want 2", n)
	}
	h.SetHeld(map[string]int{"fake": 2, "other": 1})
	h.SetHeld(map[string]int{"fake": 1})
	if n := testutil.CollectAndCount(h.m.held); n != 1 {
		t.Fatalf("%d held series, want 1", n)
	}
	if got := testutil.ToFloat64(h.m.held.WithLabelValues("fake")); got != 1 {
		t.Fatalf("held = %v, want 1", got)
	}
	problems, err := testutil.GatherAndLint(h.Registry())
	if err != nil || len(problems) > 0 {
		t.Fatalf("lint: %v %v", err, problems)
	}
	var nilHub *Hub
	nilHub.PinEvent("fake", "tool", "changed", 1)
	nilHub.SetHeld(nil)
}
