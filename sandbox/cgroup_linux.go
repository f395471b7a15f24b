package sandbox

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Per-run pids cgroups are the fork-bomb guard for a server running as root
// (the kernel exempts uid 0 from RLIMIT_NPROC) and the net that catches
// processes which left the run's process group with setsid: Kill signals
// every member of the run's cgroup, wherever it has wandered in the
// process tree.
//
// Layout: <our own cgroup>/troupe/run-<server pid>-<token>-<n>. The troupe
// directory is shared by every server whose cgroup it sits in; a run
// directory belongs to the server whose pid it names, and a server that
// finds run directories of a pid that no longer exists (a crashed server)
// empties and removes them at New.

// The same layout serves the memory limit: a v1 memory hierarchy gets
// <own>/troupe/run-… too, whose memory.limit_in_bytes is the run's
// MaxMemoryBytes. (cgroup v2 is used for pids only: memory is a domain
// controller, which cannot be enabled below a cgroup that holds processes,
// such as the server's own; there MaxMemoryBytes becomes RLIMIT_AS.)

// cgroupRoot is where one Sandbox makes its run cgroups of one controller.
type cgroupRoot struct {
	version    string // "v1" or "v2"
	controller string // "pids" or "memory"
	dir        string // .../troupe
}

// runCgroup is one run's cgroup.
type runCgroup struct {
	version    string
	controller string
	dir        string
}

const cgroupParentName = "troupe"

// probeCgroup finds a hierarchy of controller ("pids" or "memory") we may
// create cgroups in: for pids, cgroup v2 when our cgroup has the pids
// controller (a delegated subtree), else a v1 pids hierarchy; for memory,
// a v1 memory hierarchy. It creates the troupe parent and checks, with a
// throw-away child, that the limit can be written.
func probeCgroup(controller string) (*cgroupRoot, error) {
	mounts, err := cgroupMounts(controller)
	if err != nil {
		return nil, err
	}
	own, err := ownCgroups(controller)
	if err != nil {
		return nil, err
	}
	var errs []error
	for _, version := range []string{"v2", "v1"} {
		for _, m := range mounts {
			if m.version != version || version == "v2" && controller != "pids" {
				continue
			}
			path, ok := own[m.key]
			if !ok {
				continue
			}
			rel, ok := strings.CutPrefix(path, m.root)
			if !ok {
				continue // our cgroup is outside what this mount shows
			}
			root, err := setupCgroupRoot(version, controller, filepath.Join(m.point, rel))
			if err == nil {
				return root, nil
			}
			errs = append(errs, fmt.Errorf("%s cgroup %s: %w", controller, version, err))
		}
	}
	if len(errs) == 0 {
		if controller == "memory" {
			return nil, errors.New("no cgroup v1 memory hierarchy is mounted for this process")
		}
		return nil, errors.New("no pids cgroup hierarchy (v2 with the pids controller, or v1 pids) is mounted for this process")
	}
	return nil, errors.Join(errs...)
}

type cgroupMount struct {
	version string // "v1" or "v2"
	point   string // mount point
	root    string // the cgroup path the mount shows at its mount point
	key     string // the controller (v1) or "" (v2): the /proc/self/cgroup key
}

// cgroupMounts lists the cgroup2 mounts and the v1 mounts carrying
// controller, from /proc/self/mountinfo.
func cgroupMounts(controller string) ([]cgroupMount, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []cgroupMount
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// id parent major:minor root point options [optional...] - fstype source superoptions
		fields := strings.Fields(sc.Text())
		sep := slices.Index(fields, "-")
		if sep < 5 || len(fields) < sep+4 {
			continue
		}
		root, point := unescapeMount(fields[3]), unescapeMount(fields[4])
		switch fstype := fields[sep+1]; fstype {
		case "cgroup2":
			out = append(out, cgroupMount{version: "v2", point: point, root: root, key: ""})
		case "cgroup":
			if slices.Contains(strings.Split(fields[sep+3], ","), controller) {
				out = append(out, cgroupMount{version: "v1", point: point, root: root, key: controller})
			}
		}
	}
	return out, sc.Err()
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// ownCgroups maps controller (v1) and "" (v2) to our cgroup path in each.
func ownCgroups(controller string) (map[string]string, error) {
	data, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for line := range strings.SplitSeq(strings.TrimSpace(string(data)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[0] == "0" && parts[1] == "" {
			out[""] = parts[2]
			continue
		}
		if slices.Contains(strings.Split(parts[1], ","), controller) {
			out[controller] = parts[2]
		}
	}
	return out, nil
}

// setupCgroupRoot makes <own>/troupe usable for run cgroups.
func setupCgroupRoot(version, controller, own string) (*cgroupRoot, error) {
	dir := filepath.Join(own, cgroupParentName)
	if version == "v2" {
		ctrl, err := os.ReadFile(filepath.Join(own, "cgroup.controllers"))
		if err != nil {
			return nil, err
		}
		if !slices.Contains(strings.Fields(string(ctrl)), "pids") {
			return nil, errors.New("the pids controller is not available in our cgroup (not delegated)")
		}
		// pids is a threaded controller, so it may be enabled below a
		// cgroup that has processes (ours) without breaking the "no
		// internal processes" rule.
		if err := enableController(own); err != nil {
			return nil, err
		}
	}
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, err
	}
	if version == "v2" {
		if err := enableController(dir); err != nil {
			return nil, err
		}
	}
	root := &cgroupRoot{version: version, controller: controller, dir: dir}
	probe, err := root.create(fmt.Sprintf("probe-%d", os.Getpid()), 1<<20)
	if err != nil {
		return nil, err
	}
	if err := probe.remove(); err != nil {
		return nil, err
	}
	return root, nil
}

// enableController adds pids to dir's cgroup.subtree_control unless it is
// there already.
func enableController(dir string) error {
	file := filepath.Join(dir, "cgroup.subtree_control")
	cur, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	if slices.Contains(strings.Fields(string(cur)), "pids") {
		return nil
	}
	return os.WriteFile(file, []byte("+pids"), 0)
}

// create makes a run cgroup whose limit (pids.max, or the v1 memory
// limit in bytes) is limit; 0: no limit.
func (r *cgroupRoot) create(name string, limit int64) (*runCgroup, error) {
	dir := filepath.Join(r.dir, name)
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, err
	}
	c := &runCgroup{version: r.version, controller: r.controller, dir: dir}
	file, value := "pids.max", "max"
	if r.controller == "memory" {
		file, value = "memory.limit_in_bytes", "-1"
	}
	if limit > 0 {
		value = strconv.FormatInt(limit, 10)
	}
	if err := os.WriteFile(filepath.Join(dir, file), []byte(value), 0); err != nil {
		_ = unix.Rmdir(dir)
		return nil, err
	}
	if r.controller == "memory" && limit > 0 {
		// Swap counts too where the kernel accounts it (memsw), so a run
		// cannot go past its limit into swap.
		_ = os.WriteFile(filepath.Join(dir, "memory.memsw.limit_in_bytes"), []byte(value), 0)
	}
	return c, nil
}

// openProcs opens the cgroup's cgroup.procs for writing. The helper gets it
// and writes "0" to join just before exec. The kernel checks permission to
// move a process against the credentials of the opener, so the helper can
// do it after dropping its capabilities and under Landlock.
func (c *runCgroup) openProcs() (*os.File, error) {
	return os.OpenFile(filepath.Join(c.dir, "cgroup.procs"), os.O_WRONLY, 0)
}

// members lists the processes (thread-group ids) in the cgroup.
func (c *runCgroup) members() ([]int, error) {
	data, err := os.ReadFile(filepath.Join(c.dir, "cgroup.procs"))
	if err != nil {
		return nil, err
	}
	var pids []int
	for f := range strings.FieldsSeq(string(data)) {
		if pid, err := strconv.Atoi(f); err == nil && pid > 0 {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

// killAll sends SIGKILL to every member until the cgroup is empty or the
// deadline passes. cgroup v2's cgroup.kill does it atomically; otherwise
// members are signalled through pidfds opened before a second read of
// cgroup.procs, so a pid that exited and was reused by a process outside
// the cgroup is never signalled.
func (c *runCgroup) killAll(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	killFile := filepath.Join(c.dir, "cgroup.kill")
	useKillFile := c.version == "v2"
	for pause := time.Millisecond; ; pause = min(2*pause, 20*time.Millisecond) {
		pids, err := c.members()
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if len(pids) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cgroup still has %d processes after %v", len(pids), timeout)
		}
		if useKillFile {
			if err := os.WriteFile(killFile, []byte("1"), 0); err != nil {
				useKillFile = false // kernel before 5.14
			}
		}
		if !useKillFile {
			c.signalMembers(pids)
		}
		time.Sleep(pause)
	}
}

// signalMembers SIGKILLs those of pids that are still members.
func (c *runCgroup) signalMembers(pids []int) {
	fds := make(map[int]int, len(pids))
	for _, pid := range pids {
		fd, err := unix.PidfdOpen(pid, 0)
		if err == nil {
			fds[pid] = fd
		} else if errors.Is(err, unix.ENOSYS) {
			fds[pid] = -1 // kernel before 5.3: plain kill below
		}
	}
	still, err := c.members()
	if err == nil {
		for _, pid := range still {
			fd, ok := fds[pid]
			switch {
			case !ok:
				// a newcomer: the next round opens its pidfd.
			case fd >= 0:
				_ = unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0)
			default:
				_ = unix.Kill(pid, unix.SIGKILL)
			}
		}
	}
	for _, fd := range fds {
		if fd >= 0 {
			_ = unix.Close(fd)
		}
	}
}

// remove deletes the (empty) cgroup, retrying while the kernel still
// counts exiting members.
func (c *runCgroup) remove() error {
	deadline := time.Now().Add(2 * time.Second)
	for {
		err := unix.Rmdir(c.dir)
		if err == nil || errors.Is(err, unix.ENOENT) {
			return nil
		}
		if !errors.Is(err, unix.EBUSY) || time.Now().After(deadline) {
			return fmt.Errorf("remove cgroup %s: %w", c.dir, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// removeStale empties and removes run cgroups left by servers that are
// gone (a crash skips Release). Run cgroups of live servers, ours
// included, are left alone.
func (r *cgroupRoot) removeStale(log *slog.Logger) {
	entries, err := os.ReadDir(r.dir)
	if err != nil {
		log.Warn("sandbox: cannot list run cgroups", "dir", r.dir, "err", err)
		return
	}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		pid, ok := cgroupOwner(e.Name())
		if !ok || pid == os.Getpid() || processExists(pid) {
			continue
		}
		c := &runCgroup{version: r.version, dir: filepath.Join(r.dir, e.Name())}
		err := c.killAll(2 * time.Second)
		if err == nil {
			err = c.remove()
		}
		if err != nil {
			log.Warn("sandbox: cannot remove a stale run cgroup", "dir", c.dir, "err", err)
		} else {
			log.Info("sandbox: removed a stale run cgroup of an earlier server", "dir", c.dir)
		}
	}
}

// cgroupOwner parses the server pid out of "run-<pid>-…" or "probe-<pid>".
func cgroupOwner(name string) (int, bool) {
	rest, ok := strings.CutPrefix(name, "run-")
	if !ok {
		rest, ok = strings.CutPrefix(name, "probe-")
	}
	if !ok {
		return 0, false
	}
	digits, _, _ := strings.Cut(rest, "-")
	pid, err := strconv.Atoi(digits)
	return pid, err == nil && pid > 0
}

// processExists reports whether pid names a live process (or one we may
// not signal, which exists too).
func processExists(pid int) bool {
	err := unix.Kill(pid, 0)
	return err == nil || errors.Is(err, unix.EPERM)
}
