// Package leakcheck is goleak with patience for goroutines that end on
// their own shortly after a test: tests import it to check that nothing
// they started is left running.
//
// protoactor's dead-letter throttle starts a goroutine that lives for one
// throttle interval (1 s) after a message reaches an actor that has
// stopped, which cancellation and shutdown produce by design. goleak's own
// retries give up after about half a second, so a busy machine turns that
// goroutine into a failure; leakcheck waits up to Patience before judging.
package leakcheck

import (
	"fmt"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// Patience is how long Find waits for goroutines to end: longer than
// protoactor's dead-letter throttle interval, with room for a loaded
// machine.
const Patience = 3 * time.Second

// Find returns goleak's report of the goroutines opts do not ignore that
// are still running after up to Patience, or nil once there are none.
func Find(opts ...goleak.Option) error {
	end := time.Now().Add(Patience)
	for {
		err := goleak.Find(opts...)
		if err == nil || time.Now().After(end) {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// VerifyNone fails t if goroutines opts do not ignore are still running
// after up to Patience.
func VerifyNone(t testing.TB, opts ...goleak.Option) {
	t.Helper()
	if err := Find(opts...); err != nil {
		t.Error(err)
	}
}

// VerifyTestMain runs m's tests and, when they pass, fails the run if
// goroutines opts do not ignore are still running after up to Patience;
// it is goleak.VerifyTestMain with Find's patience.
func VerifyTestMain(m *testing.M, opts ...goleak.Option) {
	code := m.Run()
	if code == 0 {
		if err := Find(opts...); err != nil {
			fmt.Fprintf(os.Stderr, "leakcheck: goroutines left after a successful run: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}
