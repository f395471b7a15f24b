package codexagent

import (
	"os"
	"testing"

	"troupe/sandbox"
)

// TestMain lets the test binary serve as the sandbox's helper: every
// Codex these tests start runs in troupe's sandbox, as in troupe.
func TestMain(m *testing.M) {
	sandbox.RunHelperIfAsked() // the sandbox re-executes this binary as its helper
	os.Exit(m.Run())
}

// testOptions completes o with what every Codex needs: troupe's sandbox
// (the default driver) and a fresh state dir for Codex's homes.
func testOptions(t testing.TB, o Options) Options {
	t.Helper()
	if o.Sandbox == nil {
		sb, err := sandbox.New(sandbox.Options{})
		if err != nil {
			t.Fatal(err)
		}
		o.Sandbox = sb
	}
	if o.StateDir == "" {
		o.StateDir = t.TempDir()
	}
	return o
}
