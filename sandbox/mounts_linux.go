package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// The mount view of a confined run.
//
// Landlock decides who may write a file's contents and create or remove
// names, but not who may change a file's metadata: chmod, chown, utimes and
// extended attributes pass it. A root server's run (uid 0 without
// capabilities, still the owner of root's files) could set the setuid bit
// of a binary outside the workspace. So the builtin driver's helper starts
// in a mount namespace of its own and, before anything else, makes every
// mount read-only (mount_setattr with AT_RECURSIVE, Linux 5.12+) except
// detached copies of the writable directories (open_tree clones) that it
// moves back over their own paths. On a read-only mount the kernel refuses
// every metadata change (EROFS), whoever asks; inside the workspace
// everything still works (chmod +x build.sh).
//
// The same namespace hides what a run must not read although Landlock lets
// it read the whole filesystem: troupe's own temp root (every run's
// private temp dir and, by default, the sessions' spools) and whatever the
// server names in Options.Hidden (a spool dir elsewhere, the audit log,
// the config file). A hidden directory is covered by an empty read-only
// tmpfs, a hidden file by /dev/null; a writable directory beneath a hidden
// one (the run's own temp dir beneath the temp root) is cloned before the
// cover goes on and moved onto a mount point made in the cover.
//
// Under bubblewrap the namespace and the covers come from bwrap's
// arguments; bwrap keeps a root run's capabilities, so the helper then
// only makes everything but the writable binds read-only (bwrap's --dev
// binds the host's device nodes read-write: a root run could chmod
// /dev/null for the whole host).
//
// A run that may make user namespaces (Policy.AllowUserNamespaces) gets
// no Landlock filesystem rules (a domain that restricts the filesystem
// refuses every mount, and a sandbox inside the run is made of mounts),
// so the view carries the confinement alone: besides being read-only,
// every mount is nodev but a fresh /dev holding only the harmless devices
// (a read-only mount stops writes to files, not to device nodes), and
// /proc is one the run may write its own processes' id maps in (a nested
// sandbox needs that) while every global entry of it (sys,
// sysrq-trigger, ...) is covered read-only: a root server's run is host
// uid 0, which the kernel lets write sysctls such as core_pattern
// whenever the mount allows it. Inside a user namespace of the run's
// own, these mounts are locked: it can neither remount them writable nor
// take them off, and the kernel refuses it a new proc mount, since ours
// has covered entries (fs/namespace.c, mount_too_revealing).

// mountView is what setupMountView needs to know.
type mountView struct {
	// Writable are the directories that stay writable: the workspace and
	// the run's temp dir (absolute, symlinks resolved).
	Writable []string
	// Hidden are covered (directories by an empty tmpfs, files by
	// /dev/null). Paths that do not exist are skipped.
	Hidden []string
	// Private makes every mount private first, so nothing done here
	// propagates to the server's namespace. A fresh namespace made with
	// CLONE_NEWNS shares the peer groups of the one it was copied from.
	Private bool
	// NoDev makes every mount nodev as well, the writable ones included,
	// and mounts a fresh /dev with only devNodes, /dev/pts (a new
	// instance) and the usual links in it.
	NoDev bool
	// Proc says what becomes of /proc.
	Proc procMode
	// Tmp, when set, is a directory (/tmp) in which the run may make new
	// entries of its own, which nobody else sees: a private tmpfs over it,
	// into which every entry the directory has is bound back (read-only
	// like the rest, covers and writable directories in place). Programs
	// that write there by a fixed name need it (Codex makes
	// /tmp/codex-daemon-<uid> whatever TMPDIR says); the host's /tmp is
	// untouched.
	Tmp string
}

// procMode is what the mount view does with /proc.
type procMode int

const (
	// procReadOnly leaves /proc as it is: read-only like every mount.
	procReadOnly procMode = iota
	// procMount mounts a fresh proc on /proc (the helper is the first
	// process of a new PID namespace, so it shows only the run's
	// processes) with its global entries covered read-only.
	procMount
	// procKeep makes the /proc that is there (bubblewrap's, of the run's
	// PID namespace) writable again and covers its global entries
	// read-only.
	procKeep
)

// devNodes are the device nodes a NoDev view's /dev holds: the ones
// bubblewrap's --dev gives too.
var devNodes = []string{"null", "zero", "full", "random", "urandom", "tty"}

// setupMountView turns the calling process's mount namespace (a fresh one)
// into the run's view: hidden paths covered, everything read-only except
// the writable directories. It needs CAP_SYS_ADMIN in the namespace's
// user namespace.
func setupMountView(v mountView) error {
	if v.Private {
		if err := unix.Mount("none", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
			return fmt.Errorf("make mounts private: %w", err)
		}
	}
	trees := make([]int, len(v.Writable))
	for i := range trees {
		trees[i] = -1
	}
	defer func() {
		for _, fd := range trees {
			if fd >= 0 {
				unix.Close(fd)
			}
		}
	}()
	clone := func(i int) error {
		fd, err := unix.OpenTree(unix.AT_FDCWD, v.Writable[i], unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_RECURSIVE)
		if err != nil {
			return fmt.Errorf("clone the mount of %s: %w", v.Writable[i], err)
		}
		trees[i] = fd
		return nil
	}
	// A writable directory beneath a hidden one is cloned before the cover
	// hides it; the others after, so that a cover inside them (never
	// planned: Check refuses it) would at least be part of their clone.
	covered := v.Hidden
	if v.Tmp != "" {
		covered = append([]string{v.Tmp}, covered...)
	}
	for i, w := range v.Writable {
		if underAny(w, covered) {
			if err := clone(i); err != nil {
				return err
			}
		}
	}
	if v.Tmp != "" {
		// First, so that the covers beneath it land in it.
		if err := privateTmp(v.Tmp); err != nil {
			return err
		}
	}
	for _, h := range v.Hidden {
		if err := cover(h, v.Writable); err != nil {
			return err
		}
	}
	for i := range v.Writable {
		if trees[i] < 0 {
			if err := clone(i); err != nil {
				return err
			}
		}
	}
	attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}
	var devs []int
	defer func() {
		for _, fd := range devs {
			unix.Close(fd)
		}
	}()
	if v.NoDev {
		attr.Attr_set |= unix.MOUNT_ATTR_NODEV
		nodev := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_NODEV}
		for i, fd := range trees {
			if err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE, &nodev); err != nil {
				return fmt.Errorf("make %s nodev: %w", v.Writable[i], err)
			}
		}
		// The devices the run keeps, cloned before nodev reaches them.
		for _, name := range devNodes {
			fd, err := unix.OpenTree(unix.AT_FDCWD, "/dev/"+name, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
			if err != nil {
				return fmt.Errorf("clone /dev/%s: %w", name, err)
			}
			devs = append(devs, fd)
		}
	}
	if err := unix.MountSetattr(unix.AT_FDCWD, "/", unix.AT_RECURSIVE, &attr); err != nil {
		return fmt.Errorf("make every mount read-only: %w", err)
	}
	if v.Tmp != "" {
		rw := unix.MountAttr{Attr_clr: unix.MOUNT_ATTR_RDONLY}
		if err := unix.MountSetattr(unix.AT_FDCWD, v.Tmp, 0, &rw); err != nil {
			return fmt.Errorf("make the private %s writable: %w", v.Tmp, err)
		}
	}
	for i, w := range v.Writable {
		if err := unix.MoveMount(trees[i], "", unix.AT_FDCWD, w, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
			return fmt.Errorf("mount %s writable: %w", w, err)
		}
	}
	if v.NoDev {
		if err := mountDev(devs); err != nil {
			return err
		}
	}
	switch v.Proc {
	case procMount:
		const flags = unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC
		if err := unix.Mount("proc", "/proc", "proc", flags, ""); err != nil {
			return fmt.Errorf("mount the run's /proc: %w", err)
		}
		if err := protectProc("/proc"); err != nil {
			return err
		}
	case procKeep:
		rw := unix.MountAttr{Attr_clr: unix.MOUNT_ATTR_RDONLY}
		if err := unix.MountSetattr(unix.AT_FDCWD, "/proc", 0, &rw); err != nil {
			return fmt.Errorf("make /proc writable: %w", err)
		}
		if err := protectProc("/proc"); err != nil {
			return err
		}
	}
	// The working directory still points into the read-only mount that
	// was there before; going there again by name lands in the new one.
	if wd, err := os.Getwd(); err == nil {
		if err := unix.Chdir(wd); err != nil {
			return fmt.Errorf("chdir %s: %w", wd, err)
		}
	}
	return nil
}

// mountDev mounts a fresh /dev holding the cloned device nodes devs (in
// devNodes' order), a new devpts instance and the links programs expect,
// and makes it read-only.
func mountDev(devs []int) error {
	const flags = unix.MS_NOSUID | unix.MS_NOEXEC
	if err := unix.Mount("tmpfs", "/dev", "tmpfs", flags, "mode=0755,size=64k,nr_inodes=64"); err != nil {
		return fmt.Errorf("mount /dev: %w", err)
	}
	for i, name := range devNodes {
		path := "/dev/" + name
		fd, err := unix.Open(path, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_CLOEXEC, 0o666)
		if err != nil {
			return fmt.Errorf("mount point %s: %w", path, err)
		}
		unix.Close(fd)
		if err := unix.MoveMount(devs[i], "", unix.AT_FDCWD, path, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
			return fmt.Errorf("mount %s: %w", path, err)
		}
	}
	for name, target := range map[string]string{
		"fd": "/proc/self/fd", "stdin": "/proc/self/fd/0", "stdout": "/proc/self/fd/1",
		"stderr": "/proc/self/fd/2", "ptmx": "pts/ptmx",
	} {
		if err := unix.Symlink(target, "/dev/"+name); err != nil {
			return fmt.Errorf("link /dev/%s: %w", name, err)
		}
	}
	for _, dir := range []string{"/dev/pts", "/dev/shm"} {
		if err := unix.Mkdir(dir, 0o755); err != nil {
			return fmt.Errorf("mkdir %s: %w", dir, err)
		}
	}
	if err := unix.Mount("devpts", "/dev/pts", "devpts", flags, "newinstance,ptmxmode=0666,mode=0620"); err != nil {
		return fmt.Errorf("mount /dev/pts: %w", err)
	}
	ro := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}
	if err := unix.MountSetattr(unix.AT_FDCWD, "/dev", 0, &ro); err != nil {
		return fmt.Errorf("make /dev read-only: %w", err)
	}
	return nil
}

// protectProc covers every entry of the proc mounted at dir that is not a
// process (sys, sysrq-trigger, irq, bus, acpi, fs, ...) with a read-only
// bind of itself, so that only the run's own processes' files (their id
// maps, which a nested sandbox writes) stay writable. Links (self,
// thread-self, mounts, net) lead into a process's directory.
func protectProc(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("list %s: %w", dir, err)
	}
	ro := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}
	for _, e := range entries {
		name := e.Name()
		if e.Type()&os.ModeSymlink != 0 || name[0] >= '0' && name[0] <= '9' {
			continue
		}
		path := dir + "/" + name
		fd, err := unix.OpenTree(unix.AT_FDCWD, path, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_RECURSIVE|unix.AT_SYMLINK_NOFOLLOW)
		if err != nil {
			return fmt.Errorf("cover %s: %w", path, err)
		}
		err = unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE, &ro)
		if err == nil {
			err = unix.MoveMount(fd, "", unix.AT_FDCWD, path, unix.MOVE_MOUNT_F_EMPTY_PATH)
		}
		unix.Close(fd)
		if err != nil {
			return fmt.Errorf("cover %s read-only: %w", path, err)
		}
	}
	return nil
}

// privateTmp mounts a tmpfs on dir into which every entry of dir is bound
// back (a clone of what is mounted there, submounts included; links are
// copied), so the run sees what it saw and may add entries of its own.
func privateTmp(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("list %s: %w", dir, err)
	}
	type entry struct {
		name, link string
		dir        bool
		fd         int
	}
	var back []entry
	defer func() {
		for _, e := range back {
			if e.fd >= 0 {
				unix.Close(e.fd)
			}
		}
	}()
	for _, de := range entries {
		e := entry{name: de.Name(), dir: de.IsDir(), fd: -1}
		path := dir + "/" + e.name
		if de.Type()&os.ModeSymlink != 0 {
			if e.link, err = os.Readlink(path); err != nil {
				continue // gone meanwhile
			}
		} else if e.fd, err = unix.OpenTree(unix.AT_FDCWD, path, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_RECURSIVE|unix.AT_SYMLINK_NOFOLLOW); err != nil {
			if errors.Is(err, unix.ENOENT) {
				continue
			}
			return fmt.Errorf("clone %s: %w", path, err)
		}
		back = append(back, e)
	}
	const flags = unix.MS_NOSUID | unix.MS_NODEV
	if err := unix.Mount("tmpfs", dir, "tmpfs", flags, "mode=1777"); err != nil {
		return fmt.Errorf("mount a private %s: %w", dir, err)
	}
	for _, e := range back {
		path := dir + "/" + e.name
		var err error
		switch {
		case e.fd < 0:
			err = unix.Symlink(e.link, path)
		case e.dir:
			err = unix.Mkdir(path, 0o755)
		default:
			var fd int
			if fd, err = unix.Open(path, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_CLOEXEC, 0o644); err == nil {
				unix.Close(fd)
			}
		}
		if err == nil && e.fd >= 0 {
			err = unix.MoveMount(e.fd, "", unix.AT_FDCWD, path, unix.MOVE_MOUNT_F_EMPTY_PATH)
			if errors.Is(err, unix.ENOENT) {
				// Removed since it was cloned (the clone's source is
				// gone): the run sees it gone, as a moment later.
				if e.dir {
					_ = unix.Rmdir(path)
				} else {
					_ = unix.Unlink(path)
				}
				continue
			}
		}
		if err != nil {
			return fmt.Errorf("bind %s back: %w", path, err)
		}
	}
	return nil
}

// cover hides path: a directory under an empty tmpfs (read-only, with mount
// points made for the writable directories beneath it), a file under
// /dev/null. A path that does not exist needs no cover.
func cover(path string, writable []string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("hide %s: %w", path, err)
	}
	if !fi.IsDir() {
		if err := unix.Mount("/dev/null", path, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("hide %s: %w", path, err)
		}
		return nil
	}
	const flags = unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC
	if err := unix.Mount("tmpfs", path, "tmpfs", flags, "mode=0755,size=16k,nr_inodes=64"); err != nil {
		return fmt.Errorf("hide %s: %w", path, err)
	}
	for _, w := range writable {
		if inside(w, path) && w != path {
			if err := os.MkdirAll(w, 0o755); err != nil {
				return fmt.Errorf("mount point %s: %w", w, err)
			}
		}
	}
	if err := unix.Mount("", path, "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY|flags, ""); err != nil {
		return fmt.Errorf("hide %s read-only: %w", path, err)
	}
	return nil
}

// inside reports whether path is dir or lies beneath it (both clean and
// absolute).
func inside(path, dir string) bool {
	if path == dir {
		return true
	}
	if dir != "/" {
		dir += "/"
	}
	return len(path) >= len(dir) && path[:len(dir)] == dir
}

func underAny(path string, dirs []string) bool {
	for _, d := range dirs {
		if inside(path, d) && path != d {
			return true
		}
	}
	return false
}

// probeMountView checks, in a fresh mount namespace, that the mount API
// setupMountView uses works here (open_tree, mount_setattr: Linux 5.12+)
// and, with proc set, that the view of a run allowed user namespaces can
// be made (as its PID namespace's first process for procMount). Nothing
// is created: the temp dir is cloned and moved back over itself.
func probeMountView(proc procMode) error {
	dir, err := filepath.EvalSymlinks(os.TempDir())
	if err != nil {
		return err
	}
	return setupMountView(mountView{Writable: []string{dir}, Private: true, NoDev: proc != procReadOnly, Proc: proc})
}
