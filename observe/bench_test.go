package observe

import (
	"context"
	"strconv"
	"testing"
	"time"

	"troupe/actors"
	"troupe/audit"
)

// t0ctx is the context a host passes to CallStarted.
func t0ctx() context.Context { return context.Background() }

// BenchmarkRecordCall is the cost a call pays for being observed with
// tracing off: CallStarted, CallStateChanged(running) and CallFinished, in
// a Hub that knows the tool and already has the call's series (the steady
// state). The issue asks for at most 1 µs.
func BenchmarkRecordCall(b *testing.B) {
	h := New(Options{Version: "bench"})
	h.SetTools(testTools())
	h.SessionStarted("s1", "http", "local")
	h.SessionInitialized("s1", "2025-06-18", "bench")
	ids := make([]string, 1024)
	for i := range ids {
		ids[i] = "c-" + strconv.Itoa(i)
	}
	now := time.Now()
	views := make([]actors.CallView, len(ids))
	r := &audit.Record{Event: "call", Session: "s1", Tool: "shell", Approval: "not_required",
		Started: now, Stopped: now.Add(20 * time.Millisecond), Outcome: "ok"}
	ctx := t0ctx()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		c := &views[i%len(views)]
		*c = actors.CallView{ID: ids[i%len(ids)], Session: "s1", Identity: "token:alice", Tool: "shell", Version: "2025-06-18", Started: now}
		h.CallStarted(ctx, c)
		h.CallStateChanged(c, actors.CallRunning)
		h.CallFinished(c, r)
	}
}

// BenchmarkRecordCallParallel is the same on every core at once: the
// Hub's one mutex is shared by all calls.
func BenchmarkRecordCallParallel(b *testing.B) {
	h := New(Options{Version: "bench"})
	h.SetTools(testTools())
	now := time.Now()
	r := &audit.Record{Tool: "shell", Started: now, Stopped: now.Add(time.Millisecond), Outcome: "ok"}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		var c actors.CallView
		i := 0
		for pb.Next() {
			i++
			c = actors.CallView{ID: "c-" + strconv.Itoa(i), Session: "s1", Tool: "shell", Version: "2025-06-18", Started: now}
			h.CallStarted(context.Background(), &c)
			h.CallStateChanged(&c, actors.CallRunning)
			h.CallFinished(&c, r)
		}
	})
}
