package sandbox

import (
	"os/exec"
	"testing"
)

// The bwrap driver runs the same escape tests as the builtin one: bwrap
// makes the namespaces and the read-only view, the helper inside still
// applies rlimits, the capability drop, Landlock and seccomp.

func requireBwrap(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("bwrap"); err != nil {
		t.Skip("bubblewrap (bwrap) is not installed; scripts/test installs it")
	}
	s := newSandbox(t, DriverBwrap)
	if s.Isolation().Bwrap == "" {
		// Installed but broken here is worth a failure, not a skip: the
		// probe says why.
		t.Fatalf("bwrap is installed but does not work: %v", s.Isolation().Missing)
	}
}

func TestBwrapFilesystemEscapes(t *testing.T) {
	requireBwrap(t)
	testFilesystemEscapes(t, DriverBwrap)
}

func TestBwrapNetworkEscapes(t *testing.T) {
	requireBwrap(t)
	testNetworkEscapes(t, DriverBwrap)
}

func TestBwrapKillTakesTheWholeTree(t *testing.T) {
	requireBwrap(t)
	testKillTree(t, DriverBwrap)
}

func TestBwrapCapabilitiesAndSeccomp(t *testing.T) {
	requireBwrap(t)
	s := newSandbox(t, DriverBwrap)
	ws, _ := workspace(t)
	r := runIn(t, s, policy(ProfileDefault, ws), testBinary(t), probeArg, "caps")
	for _, want := range []string{"CapEff: 0000000000000000", "CapBnd: 0000000000000000", "NoNewPrivs: 1", "Seccomp: 2"} {
		if !containsLine(r.stdout, want) {
			t.Errorf("want %q in %v", want, r)
		}
	}
}
