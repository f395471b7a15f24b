package app

import (
	"fmt"
	"os"
	"testing"

	"troupe/sandbox"
)

// TestMain lets the test binary play troupe's sandbox helper, as the
// troupe command does: sandbox.New probes by re-executing the running
// binary. The tests' troupes keep their state (the pins of downstream
// servers' tools, audit logs) in a directory of their own, never in the
// state directory of whoever runs the tests.
func TestMain(m *testing.M) {
	sandbox.RunHelperIfAsked() // the sandbox re-executes this binary as its helper
	os.Exit(runTests(m))
}

// runTests is TestMain's body, apart so its deferred cleanup runs before
// os.Exit.
func runTests(m *testing.M) int {
	state, err := os.MkdirTemp("", "troupe-app-state-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "app tests: %v\n", err)
		return 1
	}
	defer os.RemoveAll(state)
	if err := os.Setenv("XDG_STATE_HOME", state); err != nil {
		fmt.Fprintf(os.Stderr, "app tests: %v\n", err)
		return 1
	}
	return m.Run()
}
