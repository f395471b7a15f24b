package app

import (
	"os"
	"testing"

	"troupe/sandbox"
)

// TestMain lets the test binary play troupe's sandbox helper, as the
// troupe command does: sandbox.New probes by re-executing the running
// binary.
func TestMain(m *testing.M) {
	sandbox.RunHelperIfAsked() // the sandbox re-executes this binary as its helper
	os.Exit(m.Run())
}
