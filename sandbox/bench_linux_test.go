package sandbox

import (
	"os/exec"
	"testing"
)

// BenchmarkStart measures one run of /bin/true, Start to Release, per
// profile and driver: the helper's cost over a direct start is the
// difference between "none" and the others.
func BenchmarkStart(b *testing.B) {
	ws, _ := workspace(b)
	for _, c := range []struct {
		name   string
		driver string
		p      Policy
	}{
		{"none", DriverBuiltin, Policy{Profile: ProfileNone, Workspace: ws}},
		{"default/network", DriverBuiltin, Policy{Profile: ProfileDefault, Workspace: ws, AllowNetwork: true}},
		{"default/no-network", DriverBuiltin, Policy{Profile: ProfileDefault, Workspace: ws}},
		{"default/no-network/max-processes", DriverBuiltin, Policy{Profile: ProfileDefault, Workspace: ws, Limits: Limits{MaxProcesses: 64}}},
		{"bwrap/no-network", DriverBwrap, Policy{Profile: ProfileDefault, Workspace: ws}},
		// The Codex app-server's: a PID namespace, a fresh /proc and /dev,
		// a private /tmp.
		{"default/user-namespaces", DriverBuiltin, Policy{Profile: ProfileDefault, Workspace: ws, AllowNetwork: true, AllowUserNamespaces: true}},
		{"bwrap/user-namespaces", DriverBwrap, Policy{Profile: ProfileDefault, Workspace: ws, AllowNetwork: true, AllowUserNamespaces: true}},
	} {
		b.Run(c.name, func(b *testing.B) {
			s := newSandbox(b, c.driver)
			if err := s.Check(c.p); err != nil {
				b.Skip(err)
			}
			for b.Loop() {
				cmd := exec.Command("/bin/true")
				proc, err := s.Start(c.p, cmd)
				if err != nil {
					b.Fatal(err)
				}
				if err := cmd.Wait(); err != nil {
					b.Fatal(err)
				}
				if err := proc.Release(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkNew measures the probe New does once per server.
func BenchmarkNew(b *testing.B) {
	for b.Loop() {
		s, err := New(Options{})
		if err != nil {
			b.Fatal(err)
		}
		s.Isolation() // waits for the probe

	}
}
