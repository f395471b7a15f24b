package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os/exec"
	"strings"
	"syscall"
	"testing"
)

func TestParseProfile(t *testing.T) {
	for in, want := range map[string]Profile{"": ProfileDefault, "default": ProfileDefault, "none": ProfileNone, "seatbelt": ProfileSeatbelt} {
		if got, err := ParseProfile(in); err != nil || got != want {
			t.Errorf("ParseProfile(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"Default", "strict", " none"} {
		if _, err := ParseProfile(in); err == nil || !strings.Contains(err.Error(), `"default"`) {
			t.Errorf("ParseProfile(%q) = %v; want an error listing the profiles", in, err)
		}
	}
}

// TestStartErrorText: what a client sees names the stage and the errno,
// never a host path, while errors.Is still finds the errno.
func TestStartErrorText(t *testing.T) {
	pathErr := &fs.PathError{Op: "fork/exec", Path: "/home/secret/bin/tool", Err: syscall.ENOENT}
	for _, c := range []struct {
		err      *StartError
		want     string
		errno    syscall.Errno
		notFound bool
	}{
		{&StartError{Stage: "exec", Err: pathErr}, "sandbox: exec: no such file or directory", syscall.ENOENT, false},
		{&StartError{Stage: "exec", Err: fmt.Errorf("%w: %w", &exec.Error{Name: "/opt/x", Err: exec.ErrNotFound}, syscall.ENOENT)}, "sandbox: exec: executable file not found in $PATH", syscall.ENOENT, true},
		{&StartError{Stage: "landlock", Err: errors.New("open /srv/private: denied")}, "sandbox: landlock: setup failed (details in the server log)", 0, false},
		{&StartError{Stage: "policy", Err: &UnenforceableError{Profile: ProfileDefault, Reason: "why"}}, `sandbox: policy: sandbox profile "default" cannot be enforced here: why`, 0, false},
	} {
		if got := c.err.Error(); got != c.want {
			t.Errorf("Error() = %q, want %q", got, c.want)
		}
		if c.errno != 0 && !errors.Is(c.err, c.errno) {
			t.Errorf("%v does not unwrap to %v", c.err, c.errno)
		}
		if errors.Is(c.err, exec.ErrNotFound) != c.notFound {
			t.Errorf("%v: errors.Is(ErrNotFound) = %v", c.err, !c.notFound)
		}
	}
}

func TestIsolationString(t *testing.T) {
	for _, c := range []struct {
		iso  Isolation
		want string
	}{
		{Isolation{Driver: "builtin", OS: "linux", Root: true, LandlockABI: 7, Seccomp: true, NetNS: true, MountNS: true, PidsCgroup: "v1", MemoryCgroup: "v1"}, "landlock abi 7, seccomp, netns, mountns, memory cgroup v1, pids cgroup v1, driver builtin"},
		{Isolation{Driver: "builtin", OS: "linux", LandlockABI: 3, Seccomp: true, UserNS: false}, "landlock abi 3, seccomp, no netns (network off by seccomp only), no userns, no mountns (metadata changes off by seccomp), no memory cgroup (RLIMIT_AS), no pids cgroup, driver builtin"},
		{Isolation{Driver: "bwrap", OS: "linux", UserNS: true, NetNS: true, MountNS: true, PidNS: true, Seccomp: true}, "no landlock, seccomp, netns, userns, mountns, no memory cgroup (RLIMIT_AS), no pids cgroup (pidns), driver bwrap"},
	} {
		if got := c.iso.String(); got != c.want {
			t.Errorf("String() = %q, want %q", got, c.want)
		}
	}
}
