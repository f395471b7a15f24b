package sandbox

import (
	"path/filepath"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// Runs that may make user namespaces (Policy.AllowUserNamespaces): a
// sandbox inside troupe's, such as the bubblewrap Codex puts around the
// commands it runs.
//
// Such a sandbox needs three things troupe's default run does not give:
//
//   - mount(2) in its own namespaces, which Landlock refuses to a domain
//     that restricts the filesystem. The run gets no Landlock filesystem
//     rules (TCP and scoping stay); the mount view carries the
//     filesystem confinement alone (mounts_linux.go: read-only and nodev
//     but the writable directories, a /dev with the harmless devices,
//     covers over hidden paths, a private /tmp). Inside the run's own user
//     namespaces these mounts are locked: they cannot be made writable or
//     taken off.
//   - a /proc it may write its id maps in (/proc/<pid>/uid_map), which
//     the view's read-only /proc refuses. The run gets a PID namespace and
//     a fresh /proc of it, with every global entry (sys, sysrq-trigger,
//     ...) covered read-only: only its own processes' files are writable,
//     and no other process of the host is visible. The helper is the
//     namespace's first process (the builtin driver starts it with
//     CLONE_NEWPID, so it can mount that /proc) and stays as the run's
//     reaper (runAsReaper).
//   - a uid whose nested id maps the kernel accepts. A root server's run
//     is uid 0 without capabilities, and since Linux 5.12 mapping uid 0 of
//     the parent namespace takes CAP_SETFCAP. So a root server's run is
//     nestedUID inside a user namespace that maps it to uid 0: it is root
//     to the host's permission checks as before, and may map nestedUID
//     into namespaces of its own. A non-root server's run keeps its uid.
//
// Because the run is then host uid 0 in every namespace it makes, no proc
// it mounts may be writable: the kernel lets host uid 0 write sysctls such
// as kernel.core_pattern whenever the mount allows it. The kernel refuses
// a run a new proc mount while the only proc mounts it can see have
// covered entries (mount_too_revealing), which ours do; a nested sandbox
// then uses the /proc it inherited (Codex's bubblewrap retries without
// --proc).

// privateTmpDir is the /tmp a run allowed user namespaces gets as a
// private tmpfs (symlinks resolved): Codex creates /tmp/codex-daemon-<uid>
// whatever TMPDIR says, and its bubblewrap makes mount points in /tmp.
func privateTmpDir() string {
	if dir, err := filepath.EvalSymlinks("/tmp"); err == nil {
		return dir
	}
	return "/tmp"
}

// nestedUID is a root server's run's uid inside its user namespace, mapped
// to uid 0 outside.
const nestedUID = 1000

// nestedIDs are the run's uid and gid inside its user namespace, and the
// server's, which they map to.
func (s *Sandbox) nestedIDs() (inUID, inGID int) {
	if s.iso.Root {
		return nestedUID, nestedUID
	}
	return s.uid, s.gid
}

// nestedAttr is the builtin driver's SysProcAttr for a run that may make
// user namespaces: a new session as always, and new user, mount, PID and
// IPC namespaces (and network, unless allowed) made together, so that
// the user namespace owns them all and the helper, the PID namespace's
// first process, may mount its /proc. The helper keeps CAP_SYS_ADMIN as
// an ambient capability (its uid inside is not 0) and drops it with the
// others before the target runs.
func (s *Sandbox) nestedAttr(network bool) *syscall.SysProcAttr {
	flags := uintptr(syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS | syscall.CLONE_NEWPID | syscall.CLONE_NEWIPC)
	if !network {
		flags |= syscall.CLONE_NEWNET
	}
	uid, gid := s.nestedIDs()
	return &syscall.SysProcAttr{
		Setsid: true, Pdeathsig: syscall.SIGKILL, Cloneflags: flags,
		UidMappings:                []syscall.SysProcIDMap{{ContainerID: uid, HostID: s.uid, Size: 1}},
		GidMappings:                []syscall.SysProcIDMap{{ContainerID: gid, HostID: s.gid, Size: 1}},
		GidMappingsEnableSetgroups: false,
		AmbientCaps:                []uintptr{unix.CAP_SYS_ADMIN},
	}
}

// bwrapNestedArgs are bubblewrap's further arguments for a run that may
// make user namespaces: a user namespace (as root too, with the run's uid
// nestedUID mapped to 0) in which the helper keeps CAP_SYS_ADMIN, to make
// the mount view (the /dev of it too) and cover /proc's global entries;
// it drops it with the others before the target runs. Such a run gets no
// --dev: bwrap mounts devpts for it with uid 0 mapped, and then runs the
// target in a second user namespace, whose capabilities do not reach
// the mounts.
func (s *Sandbox) bwrapNestedArgs() []string {
	args := []string{"--unshare-user"}
	if s.iso.Root {
		uid, gid := s.nestedIDs()
		args = append(args, "--uid", strconv.Itoa(uid), "--gid", strconv.Itoa(gid))
	}
	return append(args, "--cap-add", "CAP_SYS_ADMIN")
}

// checkNested says whether a run under p, which allows user namespaces,
// can be confined here: it needs the mount view (Landlock's filesystem
// rules cannot apply), and the probe (once) must have made such a view.
func (s *Sandbox) checkNested(p Policy, profile Profile) error {
	refuse := func(reason string) error { return &UnenforceableError{Profile: profile, Reason: reason} }
	if p.ReadOnlyWorkspace {
		return refuse("a read-only run cannot also make user namespaces")
	}
	if s.driver == DriverBuiltin && !s.iso.MountNS {
		return refuse("a run that may make user namespaces needs a mount namespace (root, or unprivileged user namespaces) to confine its filesystem; allow user namespaces or use the bwrap driver")
	}
	s.nested.once.Do(func() { s.nested.err = s.probeNested() })
	if s.nested.err != nil {
		return refuse("a run that may make user namespaces needs a PID namespace with a fresh /proc of its own, which could not be made here (inside a container, /proc must not be masked); see the server log")
	}
	return nil
}

// probeNested runs the helper as a run allowed user namespaces would be
// started, making that run's mount view, fresh /proc included.
func (s *Sandbox) probeNested() error {
	var err error
	if s.driver == DriverBwrap {
		var helper string
		if helper, err = s.bwrapHelper(); err == nil {
			args := []string{"--ro-bind", "/", "/", "--proc", "/proc", "--unshare-pid", "--unshare-ipc", "--die-with-parent"}
			args = append(append(args, s.bwrapNestedArgs()...), "--", helper, HelperArg, "probe", "nested-bwrap")
			err = s.probeHelper(s.iso.Bwrap, args, s.cloneAttr(0))
		}
	} else {
		err = s.probeHelper(s.helper, []string{HelperArg, "probe", "nested"}, s.nestedAttr(false))
	}
	if err != nil {
		s.log.Warn("sandbox: runs that may make user namespaces cannot be confined here", "err", err)
	}
	return err
}
