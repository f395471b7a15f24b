package actors

import (
	"testing"
	"time"

	"go.uber.org/goleak"
)

// TestNoGoroutineLeaks runs a busy session (fast calls, a panic, a
// cancellation, a deadline) to its end and checks that every goroutine it
// started is gone once the Host is closed.
func TestNoGoroutineLeaks(t *testing.T) {
	baseline := goleak.IgnoreCurrent()
	defer func() {
		// protoactor's dead-letter throttle runs a goroutine for one
		// throttle interval (1 s) after a dead letter (a late message to a
		// stopped actor, which cancellation produces by design). It ends on
		// its own; wait for that before judging, longer than goleak would.
		for end := time.Now().Add(3 * time.Second); goleak.Find(baseline) != nil && time.Now().Before(end); {
			time.Sleep(50 * time.Millisecond)
		}
		goleak.VerifyNone(t, baseline)
	}()
	cancelled := make(chan struct{}, 4)
	c := newLeakClient(t, cancelled)
	c.initialize("2025-06-18")
	for i := 0; i < 20; i++ {
		c.request(i, "tools/call", map[string]any{"name": "echo"})
	}
	c.request("p", "tools/call", map[string]any{"name": "panic"})
	c.request("b", "tools/call", map[string]any{"name": "block"})
	for i := 0; i < 21; i++ {
		c.recv()
	}
	c.notify("notifications/cancelled", map[string]any{"requestId": "b"})
	<-cancelled
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
