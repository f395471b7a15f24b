package actors

import (
	"testing"
	"time"

	"go.uber.org/goleak"
)

// TestWorkerPool checks the pool's promises: a busy worker never holds up
// another run (a blocked function does not stop the next from running),
// idle workers are reused, and close ends them all.
func TestWorkerPool(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	p := newWorkerPool()
	release := make(chan struct{})
	p.Schedule(func() { <-release }) // holds its worker
	ran := make(chan int, 100)
	for i := range 100 {
		p.Schedule(func() { ran <- i })
	}
	seen := map[int]bool{}
	for range 100 {
		select {
		case i := <-ran:
			seen[i] = true
		case <-time.After(5 * time.Second):
			t.Fatalf("runs stalled behind a blocked one; %d of 100 ran", len(seen))
		}
	}
	close(release)
	p.close()
	// Workers end once idle; goleak waits for them.
}
