package leakcheck

import (
	"testing"
	"time"

	"go.uber.org/goleak"
)

// A goroutine that ends on its own a second after the test, as
// protoactor's dead-letter throttle does, is waited for, where goleak
// alone reports it; one that outlives Patience is reported.
func TestFindWaitsForGoroutinesThatEnd(t *testing.T) {
	baseline := goleak.IgnoreCurrent()
	go func() { time.Sleep(1200 * time.Millisecond) }()
	if goleak.Find(baseline) == nil {
		t.Fatal("goleak alone waited 1.2 s: leakcheck would not be needed")
	}
	if err := Find(baseline); err != nil {
		t.Fatalf("a goroutine that ended after 1.2 s was reported: %v", err)
	}

	stop := make(chan struct{})
	defer close(stop)
	go func() { <-stop }()
	start := time.Now()
	if Find(baseline) == nil {
		t.Fatal("a goroutine still running was not reported")
	}
	if waited := time.Since(start); waited < Patience {
		t.Fatalf("gave up after %v, before Patience (%v)", waited, Patience)
	}
}
