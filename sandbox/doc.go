// Package sandbox confines the programs troupe runs: every one starts
// through [Sandbox.Start] under a [Policy] (or, for ProfileNone, through
// [NewSession]). The server's own file access is confined by package
// workspace; this package is given the workspace's directory as the one
// place a run may write.
//
// # What a run gets
//
// Every program a tool runs is started through Sandbox.Start with a
// Policy. ProfileNone only puts it in a session (and so a process group)
// of its own, so the runner can signal -pid and it has no controlling
// terminal (NewSession: every program troupe starts begins so).
// ProfileDefault (and ProfileSeatbelt, its alias on Linux) confines it:
//
//   - Filesystem: read and execute everywhere, write only in the workspace,
//     the policy's Writable directories (a long-lived program's own state,
//     such as Codex's CODEX_HOME), a private temp dir (in troupe's temp
//     root $TMPDIR/troupe-<uid>, mode 0700; TMPDIR/TMP/TEMP point at it,
//     removed by Release) and /dev/null, /dev/zero, /dev/full. Landlock (builtin driver) or a read-only bind of
//     / (bwrap driver, with Landlock inside as well when the kernel has it).
//     Landlock does not cover metadata (chmod, chown, utimes, xattrs), so
//     the builtin driver's helper also makes a mount view in a mount
//     namespace of its own: every mount read-only but the workspace and the
//     temp dir (mounts_linux.go); without one, seccomp refuses metadata
//     changes altogether.
//   - Privacy: the run does not see troupe's temp root (other runs' temp
//     dirs, the default spool) nor Options.Hidden (a spool dir elsewhere,
//     the audit log, the config file) nor the policy's Hidden (Codex's
//     credentials): the mount view covers them. A Writable directory
//     beneath a hidden one stays visible and writable; Check refuses a
//     Writable directory (or workspace) that contains a hidden path.
//   - Network, unless AllowNetwork: a new network namespace (only a down
//     loopback; a root server makes it ahead of the run, one per run:
//     nspool_linux.go), the seccomp filter refusing every socket family but
//     AF_UNIX, and on Landlock ABI 4+ TCP bind/connect handled with no port
//     allowed. Each alone has gaps (Landlock before ABI 10 does not know
//     UDP; a namespace may be unavailable), together they hold.
//   - Privileges: no capabilities (a root server's child is uid 0 without
//     CAP_DAC_OVERRIDE, CAP_SYS_PTRACE, ...), no_new_privs, RLIMIT_CORE 0;
//     seccomp refuses ptrace, process_vm_readv/writev, io_uring, the
//     keyring and personality changes, and, unless the policy has
//     AllowUserNamespaces, user namespaces (unshare and clone with
//     CLONE_NEWUSER; clone3 answers ENOSYS, and libcs and Go then use
//     clone); Landlock ABI 6+ scopes signals and abstract UNIX sockets to
//     the run. A new IPC namespace hides System V IPC objects.
//   - Resources: RLIMIT_FSIZE, RLIMIT_NOFILE, RLIMIT_CPU, MaxProcesses as
//     pids.max of a per-run pids cgroup (root needs one: the kernel exempts
//     uid 0 from RLIMIT_NPROC), else RLIMIT_NPROC inside a fresh user
//     namespace, where it counts only the run; MaxMemoryBytes as a per-run
//     v1 memory cgroup's limit, else RLIMIT_AS.
//   - Lifetime: the pids cgroup lets Kill find every process of the run;
//     without one, the run gets a PID namespace whose init ends them all
//     (initmode_linux.go).
//   - Terminal: no controlling terminal, and seccomp refuses TIOCSTI and
//     TIOCLINUX.
//
// # Runs that may make user namespaces
//
// Policy.AllowUserNamespaces is for a program that sandboxes what it runs
// itself (the Codex app-server: bubblewrap around each command). Such a
// run gets, under both drivers (nestedmode_linux.go):
//
//   - no Landlock filesystem rules (a domain that restricts the
//     filesystem refuses every mount(2), and a nested sandbox is made of
//     mounts; TCP and scoping stay): the mount view alone confines the
//     filesystem. Every mount is read-only and nodev except the workspace,
//     the temp dir and Writable; /dev is a fresh one with null, zero,
//     full, random, urandom, tty and its own devpts; hidden paths are
//     covered; /tmp is a private tmpfs into which the host's entries are
//     bound back read-only, so the run may add entries of its own (Codex
//     makes /tmp/codex-daemon-<uid> whatever TMPDIR says, and its
//     bubblewrap makes mount points there). Inside the run's own user
//     namespaces these mounts are locked (they cannot be made writable or
//     taken off). So Check
//     refuses the policy where no mount view can be made (builtin driver,
//     not root, no user namespaces), and with ReadOnlyWorkspace.
//   - a PID namespace with a fresh /proc whose global entries (sys,
//     sysrq-trigger, acpi, ...) are covered read-only: the run may write
//     its own processes' id maps, sees no process outside it, and cannot
//     write a sysctl. That matters: a root server's run is host uid 0,
//     which the kernel lets write kernel.core_pattern whenever the mount
//     allows it. Because of those covers the kernel refuses the run (and
//     anything nested in it) a proc mount of its own; Codex's bubblewrap
//     then retries without --proc and uses the /proc it inherited.
//   - under a root server, uid 1000 inside a user namespace that maps it
//     to uid 0: root to the host's permission checks as before, and an
//     id its own nested namespaces may map (mapping uid 0 takes
//     CAP_SETFCAP since Linux 5.12). A non-root server's run keeps its
//     uid.
//
// Under the builtin driver the helper is started in that PID namespace
// and is its first process: it mounts the /proc and stays as the run's
// reaper. Under bwrap, bwrap gets --unshare-user (--uid/--gid 1000 as
// root) and --cap-add CAP_SYS_ADMIN and no --dev (with --dev, bwrap runs
// the target in a second user namespace whose capabilities do not reach
// the mounts); the helper makes the view and the /dev, covers the global
// entries of bwrap's /proc and drops every capability before the target
// runs.
//
// # How: the re-exec helper
//
// Landlock, seccomp and capability changes apply to the calling process and
// cannot be undone, so the server cannot apply them to itself before a
// fork. Start instead runs a helper (HELPER HelperArg cfgfd statusfd) with
// the namespaces as clone flags. The helper is cmd/troupe-sandbox from beside
// the server's executable when it answers the probe with this build's
// HelperProtocol, else the server binary itself (/proc/self/exe). Both run
// HelperMain; the standalone one links only this package, and a Go
// program's start-up grows with what it links: the helper built without
// cgo starts and exits about 0.7 ms later than /bin/true (0.4 ms more
// with cgo: the dynamic loader), troupe's own binary about 6.5 ms later
// on the reference machine, paid by every sandboxed run.
//
// The helper starts first. While its Go runtime starts, the server makes
// the run's temp dir and cgroups and sends the config over an inherited
// socket, with fds of the cgroups' cgroup.procs attached (wire_linux.go;
// a plain encoding, not JSON, which a fresh process decodes slowly). The
// helper joins the network and IPC namespaces the server made ahead of
// time (root: nspool_linux.go), makes the mount view, applies rlimits,
// drops capabilities, sets no_new_privs, applies Landlock
// (landlock_linux.go) and seccomp, sets RLIMIT_NPROC, joins the run
// cgroups through those fds (the kernel checks the opener's credentials,
// so this works after the capability drop) and execs the target. The
// cgroup join and RLIMIT_NPROC come last because the Go runtime in the
// helper must still be able to start threads; after exec only the
// target's one thread counts.
//
// Capabilities, no_new_privs and the Landlock domain are set on the
// helper's locked main thread only, the one that execs: exec keeps that
// thread's credentials and ends every other thread, on which only the Go
// runtime ran. The seccomp filter is installed on all threads (TSYNC).
//
// The helper runs with an environment of its own: the target's travels in
// the config, so LD_PRELOAD or GODEBUG meant for the target never act on
// the helper before the sandbox exists. Every fd from 3 + len(ExtraFiles)
// up is made close-on-exec, so nothing the server inherited leaks in.
//
// The helper reports over a close-on-exec status pipe: 'R' just before
// exec, then 'E' and a JSON failure if a stage (or exec itself) fails. The
// server reads to EOF: "R" alone means the target is running; anything
// else is a *StartError with the stage and, for exec, the errno.
//
// With Options.Driver "bwrap", bubblewrap makes the namespaces and the
// read-only view (--ro-bind / /, --dev, --proc, --tmpfs over the hidden
// directories, --unshare-pid, --unshare-ipc, --unshare-net,
// --die-with-parent) and the same helper runs inside it; as root it also
// makes bwrap's device binds read-only. bwrap itself starts in a new
// session, so there is no need for --new-session.
//
// # Failing closed
//
// New probes once; Check compares a policy with what was found and returns
// an *UnenforceableError saying what is missing and how to fix it. Start
// calls Check, so a tool whose policy cannot be enforced does not run.
//
// # Known limits
//
//   - Pathname UNIX sockets: Landlock restricts connecting to them only from
//     ABI 9, and seccomp allows AF_UNIX, so below ABI 9 a confined run can
//     talk to any socket its file permissions allow (a root server's
//     children reach /var/run/docker.sock). Run such servers without
//     those sockets, or use the bwrap driver and keep them out of view.
//   - /dev/shm and other writable system places are read-only: programs
//     needing POSIX shared memory fail.
//   - Without a pids cgroup and without a user namespace (not root), a
//     process that leaves the process group (setsid) escapes Kill; with
//     either, the cgroup or the PID namespace takes it. Under bwrap the pid
//     namespace ends with bwrap. In a PID namespace the run's /proc is the
//     host's, and a target killed by a signal is reported as such (the
//     helper outside the namespace re-enacts it).
//   - Without a mount namespace (not root, no user namespace), troupe's
//     temp root is hidden only by its 0700 mode, and metadata changes are
//     refused inside the workspace too.
//   - Under bwrap, SIGTERM to the group ends bwrap and so the whole run at
//     once; there is no grace period for the target.
//   - A root server's target has no CAP_DAC_OVERRIDE: the workspace must be
//     writable by uid 0 through its mode bits.
//   - The parent-death signal (SIGKILL) of the helper is tied to the server
//     thread that forked it; Go only ends threads whose goroutine exits
//     while locked to them, which troupe does not do (the namespace pool
//     gives its thread back, unless returning it to the server's
//     namespaces fails), and Kill/Release are the real mechanism anyway.
//   - A non-root server that called ProtectProcess is dumpable again for the
//     milliseconds of starting a run in a user namespace (the kernel would
//     not let it write the namespace's id maps otherwise); Landlock keeps
//     confined runs out of that window.
//   - 32-bit (i386 ABI) programs are killed by the filter's architecture
//     check; Limits do not apply to ProfileNone.
//   - A run allowed user namespaces: a read-only mount stops writes to
//     files and names, not to FIFOs and sockets that lie outside the
//     writable directories (Landlock, which does, is not applied); entries
//     made in the host's /tmp after the run started are not in its /tmp;
//     the run needs a /proc
//     that is not masked (a container that covers /proc entries refuses
//     it the fresh one; Check says so); under the builtin driver a target
//     killed by a signal is reported as exit code 128+signal (a PID
//     namespace's first process cannot die of a signal it sends itself).
//   - macOS (seatbelt) is not implemented: Check refuses confining profiles
//     outside Linux.
package sandbox
