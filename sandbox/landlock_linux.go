package sandbox

import (
	"errors"
	"fmt"

	"github.com/landlock-lsm/go-landlock/landlock"
	llsys "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// Landlock on the helper's one thread.
//
// go-landlock's Config.Restrict applies a ruleset to every thread of the
// process, as a Go library must: on kernels before Landlock ABI 8 it runs
// prctl(PR_SET_NO_NEW_PRIVS) and landlock_restrict_self once on each
// thread (the runtime stops the world and signals every thread), which
// cost the helper a quarter of a millisecond, and several milliseconds
// when the machine is busy and each thread waits for a CPU. The helper
// needs only the thread that execs the target: exec keeps that thread's
// credentials (its Landlock domain, like its capabilities and
// no_new_privs, which the helper also sets on that thread alone) and
// ends every other thread, and the helper runs nothing but the Go
// runtime on them. So the helper builds the ruleset with the library's
// system calls and restricts itself with landlock_restrict_self on the
// locked thread (HelperMain), without TSYNC.
//
// What is handled comes from the library's presets (landlock.V1 …): for
// the running ABI, every right that ABI can restrict, as Restrict's
// best-effort mode picks it. The rules are those of go-landlock's RODirs,
// RWDirs and RWFiles, spelled out below, each narrowed to what is handled.

// Access rights as go-landlock's canned rules grant them.
const (
	// accessRead is RODirs: read files, list directories, execute.
	accessRead = llsys.AccessFSExecute | llsys.AccessFSReadFile | llsys.AccessFSReadDir
	// accessWrite is the write half of RWDirs: everything that writes a
	// file or changes a directory's entries; not "refer" (linking or
	// moving files between directories: added where wanted), not device
	// ioctls, not connecting to pathname UNIX sockets.
	accessWrite = llsys.AccessFSWriteFile | llsys.AccessFSRemoveDir | llsys.AccessFSRemoveFile |
		llsys.AccessFSMakeChar | llsys.AccessFSMakeDir | llsys.AccessFSMakeReg | llsys.AccessFSMakeSock |
		llsys.AccessFSMakeFifo | llsys.AccessFSMakeBlock | llsys.AccessFSMakeSym | llsys.AccessFSTruncate
	// accessFile are the rights that apply to a file (not a directory):
	// RWFiles grants (accessRead|accessWrite) & accessFile.
	accessFile = llsys.AccessFSExecute | llsys.AccessFSWriteFile | llsys.AccessFSTruncate | llsys.AccessFSReadFile
)

// landlockRule grants access to the file hierarchies under paths.
type landlockRule struct {
	access        uint64
	paths         []string
	ignoreMissing bool // a path that does not exist is skipped
}

// landlockPreset is what Landlock ABI abi (≥ 1) can restrict, as
// go-landlock's preset for it says; a newer kernel gets the newest preset
// the library knows.
func landlockPreset(abi int) landlock.Config {
	presets := []landlock.Config{landlock.V1, landlock.V2, landlock.V3, landlock.V4, landlock.V5, landlock.V6,
		landlock.V7, landlock.V8, landlock.V9, landlock.V10, landlock.V11}
	return presets[min(max(abi, 1), len(presets))-1]
}

// restrictThread confines the calling thread with Landlock ABI abi: every
// right the ABI can restrict is handled (network ones too unless network
// is allowed), and rules grant back what they name; nil rules handle no
// filesystem access at all. The caller has set
// no_new_privs on this thread.
func restrictThread(abi int, network bool, rules []landlockRule) error {
	c := landlockPreset(abi)
	attr := llsys.RulesetAttr{
		HandledAccessFS:  uint64(c.HandledAccessFS),
		HandledAccessNet: uint64(c.HandledAccessNet),
		Scoped:           uint64(c.Scoped),
	}
	if network {
		attr.HandledAccessNet = 0
	}
	if rules == nil {
		// No filesystem rules (a run allowed user namespaces): a domain
		// that handles any filesystem access refuses every mount.
		attr.HandledAccessFS = 0
		if attr.HandledAccessNet == 0 && attr.Scoped == 0 {
			return nil // nothing this ABI could restrict then
		}
	}
	ruleset, err := llsys.LandlockCreateRuleset(&attr, 0)
	if err != nil {
		return fmt.Errorf("landlock_create_ruleset: %w", err)
	}
	defer unix.Close(ruleset)
	for _, r := range rules {
		access := r.access & attr.HandledAccessFS
		if access == 0 {
			continue // nothing this ABI handles: the rule would be refused as empty
		}
		for _, path := range r.paths {
			err := addPathRule(ruleset, path, access)
			if errors.Is(err, unix.ENOENT) && r.ignoreMissing {
				continue
			}
			if err != nil {
				return err
			}
		}
	}
	if err := llsys.LandlockRestrictSelf(ruleset, 0); err != nil {
		return fmt.Errorf("landlock_restrict_self: %w", err)
	}
	return nil
}

// addPathRule adds "access beneath path" to the ruleset.
func addPathRule(ruleset int, path string, access uint64) error {
	fd, err := unix.Open(path, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("landlock rule for %s: open: %w", path, err)
	}
	defer unix.Close(fd)
	if err := llsys.LandlockAddPathBeneathRule(ruleset, &llsys.PathBeneathAttr{ParentFd: fd, AllowedAccess: access}, 0); err != nil {
		return fmt.Errorf("landlock rule for %s: %w", path, err)
	}
	return nil
}

// applyLandlock restricts the calling thread, and so the target it execs,
// to: read and execute everywhere, write to the workspace, the private
// temp dir and the harmless devices. On ABI 4+ with the network off, TCP
// bind and connect are handled with no port allowed; on ABI 6+ signals
// and abstract UNIX sockets cannot reach outside the sandbox (the server
// included). That the kernel has Landlock at all was checked by the
// server, and is checked again here: the helper refuses to run the target
// with less than the server probed.
func applyLandlock(cfg helperConfig) error {
	abi, err := llsys.LandlockGetABIVersion()
	if err != nil || abi < 1 {
		return fmt.Errorf("landlock not available in the helper (server probed ABI %d): %v", cfg.LandlockABI, err)
	}
	if abi < cfg.LandlockABI {
		return fmt.Errorf("landlock ABI %d in the helper, server probed %d", abi, cfg.LandlockABI)
	}
	if cfg.ReadOnly {
		// Reading the workspace and the program's files, nothing else;
		// no network whatever cfg.Network says (readonly_linux.go).
		return restrictThread(abi, false, readOnlyRules(cfg))
	}
	if cfg.UserNS {
		// The mount view confines the filesystem (mounts_linux.go); TCP,
		// signals and abstract sockets stay Landlock's.
		return restrictThread(abi, cfg.Network, nil)
	}
	var rw uint64 = accessRead | accessWrite
	if abi >= 2 {
		// Moving files between directories of the workspace (mv a/x b/,
		// git) needs "refer", which ABI 1 cannot grant (there it is
		// always refused).
		rw |= llsys.AccessFSRefer
	}
	return restrictThread(abi, cfg.Network, []landlockRule{
		{access: accessRead, paths: []string{"/"}},
		{access: rw, paths: append([]string{cfg.Workspace, cfg.TempDir}, cfg.Writable...)},
		{access: (accessRead | accessWrite) & accessFile, paths: []string{"/dev/null", "/dev/zero", "/dev/full"}},
		// No ioctls: a run has no controlling terminal, and a terminal
		// fd is no business of a confined program.
		{access: (accessRead | accessWrite) & accessFile, paths: []string{"/dev/tty"}, ignoreMissing: true},
	})
}
