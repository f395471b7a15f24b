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
	if len(os.Args) > 1 && os.Args[1] == sandbox.HelperArg {
		os.Exit(sandbox.HelperMain(os.Args[1:]))
	}
	os.Exit(m.Run())
}
