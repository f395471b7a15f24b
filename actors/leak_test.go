package actors

import (
	"testing"
	"time"

	"go.uber.org/goleak"

	"troupe/internal/leakcheck"
)

// TestNoGoroutineLeaks runs a busy session (fast calls, a panic, a
// cancellation, a deadline) to its end and checks that every goroutine it
// started is gone once the Host is closed.
func TestNoGoroutineLeaks(t *testing.T) {
	baseline := goleak.IgnoreCurrent()
	// A cancellation leaves late messages to a stopped actor by design,
	// so protoactor's dead-letter throttle lingers a second: leakcheck
	// waits for it.
	defer leakcheck.VerifyNone(t, baseline)
	cancelled := make(chan struct{}, 4)
	c := newLeakClient(t, cancelled)
	c.initialize("2025-06-18")
	for i := 0; i < 20; i++ {
		c.request(i, "tools/call", map[string]any{"name": "echo"})
	}
	c.request("p", "tools/call", map[string]any{"name": "panic"})
	// The block call's progress says its tool runs: a cancellation that
	// overtook its start would leave the tool unstarted (and recorded so),
	// with nothing for this test to wait for.
	c.request("b", "tools/call", map[string]any{"name": "block", "_meta": map[string]any{"progressToken": "b"}})
	for answers, started := 0, false; answers < 21 || !started; {
		if m := c.recv(); m.Method == "notifications/progress" {
			started = true
		} else {
			answers++
		}
	}
	c.notify("notifications/cancelled", map[string]any{"requestId": "b"})
	select {
	case <-cancelled:
	case <-time.After(10 * time.Second):
		t.Fatal("the cancelled tool's context did not end")
	}
	c.closeInput()
	select {
	case <-c.done:
	case <-time.After(5 * time.Second):
		t.Fatal("connection did not end")
	}
	if !c.host.Close(5 * time.Second) {
		t.Fatal("tools still running")
	}
}

func newLeakClient(t *testing.T, cancelled chan struct{}) *client {
	// Cleanup of newClient closes again; both are idempotent.
	return newClient(t, Options{}, echoTool(), panicTool(), blockTool(cancelled, nil))
}
