package sandbox

import (
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"

	llsys "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// Read-only runs (Policy.ReadOnlyWorkspace).
//
// A program that only searches the workspace (rg) must not return a byte
// from outside it, whatever path it is given and whatever symlink is
// swapped in while it walks: checking paths before the program opens them
// is a race the program wins. So the check is the kernel's, at every open:
// Landlock lets the run read the workspace's file hierarchy and the files
// its program needs to start, and nothing else. Landlock judges the file
// an open resolves to, not the path that led there, so a symlink from the
// workspace to /etc opens nothing, and the rules name resolved files.
//
// What a program needs to start is the executable, its ELF interpreter
// (ld.so) and the shared libraries ld.so maps, found here the way ld.so
// finds them: DT_RPATH/DT_RUNPATH (with $ORIGIN), then the system
// directories. /etc/ld.so.cache stays unreadable: ld.so then searches its
// default directories, where programFiles looks too. Anything else ld.so
// or the program may open (/etc/ld.so.preload, /proc/self/maps, locale
// files) fails with EACCES, which ld.so and rg take in their stride. In
// init mode (initmode_linux.go) the helper's own files are allowed too:
// init is the helper exec'd again after the rules are in place.
//
// Nothing is writable but /dev/null, which holds nothing and keeps shell
// idioms working (a non-interactive shell's background job reads it as
// its stdin); not even the private temp dir is. A read-only run has no
// network: a searcher needs none. The run can
// still stat paths outside the workspace (Landlock does not govern
// lookups), so it could learn that a file exists, never what it holds.

// maxScriptDepth bounds chains of #! interpreters as the kernel does
// (BINPRM_MAX_RECURSION).
const maxScriptDepth = 4

// maxRuntimeEntries bounds the runtime cache; read-only runs start few
// distinct programs (rg), so a full cache is simply emptied.
const maxRuntimeEntries = 64

// checkReadOnly refuses the read-only policies that cannot hold here:
// Landlock does the confining, so without it (builtin or bwrap driver) a
// read-only run does not start; a read-only run has no network; and
// ProfileNone would not confine it at all.
func (s *Sandbox) checkReadOnly(p Policy) error {
	if !p.ReadOnlyWorkspace {
		return nil
	}
	refuse := func(reason string) error {
		return &UnenforceableError{Profile: p.Profile, Reason: reason}
	}
	switch {
	case p.Profile == ProfileNone:
		return refuse("a read-only workspace run must be confined; profile \"none\" cannot enforce it")
	case p.AllowNetwork:
		return refuse("a read-only workspace run has no network; do not allow it")
	case s.iso.LandlockABI == 0:
		return refuse("a read-only workspace run needs Landlock (Linux 5.13+ with landlock in the LSM list) to keep the program's reads inside the workspace")
	}
	return nil
}

// readOnlyRules are the Landlock rules of a read-only run: read files and
// list directories in the workspace; read and execute the program's
// runtime files; read and write /dev/null (no ioctls). Everything else the
// ruleset handles (every other write and read, TCP, pathname UNIX sockets)
// is denied.
func readOnlyRules(cfg helperConfig) []landlockRule {
	rules := []landlockRule{
		{access: llsys.AccessFSReadFile | llsys.AccessFSReadDir, paths: []string{cfg.Workspace}},
		{access: llsys.AccessFSReadFile | llsys.AccessFSWriteFile, paths: []string{"/dev/null"}},
	}
	if len(cfg.Runtime) > 0 {
		rules = append(rules, landlockRule{access: llsys.AccessFSReadFile | llsys.AccessFSExecute, paths: cfg.Runtime})
	}
	return rules
}

// runtimeFiles is programFiles for cmd's program, as the helper will exec
// it (a relative path is relative to cmd.Dir), and with withHelper also
// for the helper itself, which init mode execs again once the rules are
// in place. Its error is a StartError whose client text names no host
// path: a missing program is an exec ENOENT, as it would be without the
// sandbox.
func (s *Sandbox) runtimeFiles(cmd *exec.Cmd, withHelper bool) ([]string, *StartError) {
	path := cmd.Path
	if !filepath.IsAbs(path) {
		dir := cmd.Dir
		if dir == "" {
			dir = "."
		}
		abs, err := filepath.Abs(filepath.Join(dir, path))
		if err != nil {
			return nil, &StartError{Stage: "runtime", Err: err}
		}
		path = abs
	}
	files, err := s.programFiles(path)
	if err == nil && withHelper {
		var helper string
		var more []string
		if helper, err = s.bwrapHelper(); err == nil { // the helper's real path
			if more, err = s.programFiles(helper); err == nil {
				for _, f := range more {
					if !slices.Contains(files, f) {
						files = append(files, f)
					}
				}
				return files, nil
			}
		}
		return nil, &StartError{Stage: "runtime", Err: safeError("cannot tell which files the sandbox helper needs to start"), Stderr: err.Error()}
	}
	if err == nil {
		return files, nil
	}
	var pe *programError
	if errors.As(err, &pe) {
		var errno syscall.Errno
		if errors.As(pe.err, &errno) {
			return nil, &StartError{Stage: "exec", Err: errno, Stderr: err.Error()}
		}
	}
	return nil, &StartError{Stage: "runtime", Err: safeError("cannot tell which files the program needs to start"), Stderr: err.Error()}
}

// programError is the failure to open or stat the program itself (not an
// interpreter or a library), so runtimeFiles can report it as exec does.
type programError struct {
	path string
	err  error
}

func (e *programError) Error() string { return fmt.Sprintf("program %s: %v", e.path, e.err) }
func (e *programError) Unwrap() error { return e.err }

// programFiles returns the files the program at path (absolute) needs to
// start, symlinks resolved: the executable itself, its ELF interpreter and
// the transitive closure of its DT_NEEDED libraries; for a #! script, the
// script and its interpreter's files. A static executable needs only
// itself. Answers are cached in s, and a cached answer is used only while
// every file it was built from is unchanged (device, inode, size, mtime),
// so an upgraded library is found again. Safe for concurrent use; the
// returned slice is the caller's.
func (s *Sandbox) programFiles(path string) ([]string, error) {
	if !filepath.IsAbs(path) {
		return nil, fmt.Errorf("program path %q is not absolute", path)
	}
	if files, ok := s.runtime.lookup(path); ok {
		return files, nil
	}
	r := newResolver()
	if err := r.program(path, 0); err != nil {
		return nil, err
	}
	s.runtime.store(path, runtimeEntry{files: r.files, stamps: r.stamps})
	return append([]string(nil), r.files...), nil
}

// runtimeCache remembers programFiles' answers by program path. The zero
// value is ready.
type runtimeCache struct {
	mu      sync.Mutex
	entries map[string]runtimeEntry
}

type runtimeEntry struct {
	files  []string
	stamps []fileStamp
}

// fileStamp identifies what a path led to when an answer was built.
type fileStamp struct {
	path       string // as looked up: symlinks are followed when it is checked
	dev, ino   uint64
	size       int64
	mtimeNanos int64
}

func stampOf(path string) (fileStamp, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return fileStamp{}, &fs.PathError{Op: "stat", Path: path, Err: err}
	}
	return fileStamp{path: path, dev: uint64(st.Dev), ino: st.Ino, size: st.Size, mtimeNanos: st.Mtim.Nano()}, nil
}

// lookup returns a copy of the cached answer for path if every file it
// was built from is unchanged.
func (c *runtimeCache) lookup(path string) ([]string, bool) {
	c.mu.Lock()
	e, ok := c.entries[path]
	c.mu.Unlock()
	if !ok {
		return nil, false
	}
	for _, want := range e.stamps {
		if got, err := stampOf(want.path); err != nil || got != want {
			return nil, false
		}
	}
	return append([]string(nil), e.files...), true
}

func (c *runtimeCache) store(path string, e runtimeEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries == nil || len(c.entries) >= maxRuntimeEntries {
		c.entries = make(map[string]runtimeEntry)
	}
	c.entries[path] = e
}

// resolver collects one program's runtime files.
type resolver struct {
	files   []string        // resolved paths, each once, in the order found
	seen    map[string]bool // files as a set
	stamps  []fileStamp
	class   elf.Class
	machine elf.Machine
	hwcaps  map[string][]string // dir -> its glibc-hwcaps subdirectories
}

func newResolver() *resolver {
	return &resolver{seen: make(map[string]bool), hwcaps: make(map[string][]string)}
}

// add records path's resolved file and what path led to now.
func (r *resolver) add(path string) (string, error) {
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return "", err
	}
	st, err := stampOf(path)
	if err != nil {
		return "", err
	}
	r.stamps = append(r.stamps, st)
	if !r.seen[real] {
		r.seen[real] = true
		r.files = append(r.files, real)
	}
	return real, nil
}

// program adds the executable or script at path and what it needs; depth
// counts the #! interpreters above it.
func (r *resolver) program(path string, depth int) error {
	wrap := func(err error) error {
		if depth == 0 {
			return &programError{path: path, err: err}
		}
		return fmt.Errorf("interpreter %s: %w", path, err)
	}
	real, err := r.add(path)
	if err != nil {
		return wrap(err)
	}
	f, err := os.Open(real)
	if err != nil {
		return wrap(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return wrap(err)
	}
	if !fi.Mode().IsRegular() {
		return wrap(syscall.EACCES) // what execve says of a directory or a device
	}
	// The kernel looks at the first 256 bytes (BINPRM_BUF_SIZE).
	head := make([]byte, 256)
	n, err := io.ReadFull(f, head)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return wrap(err)
	}
	head = head[:n]
	switch {
	case bytes.HasPrefix(head, []byte("#!")):
		interp, err := scriptInterpreter(head)
		if err != nil {
			return fmt.Errorf("script %s: %w", path, err)
		}
		if depth+1 > maxScriptDepth {
			return fmt.Errorf("script %s: more than %d levels of #! interpreters", path, maxScriptDepth)
		}
		return r.program(interp, depth+1)
	case bytes.HasPrefix(head, []byte(elf.ELFMAG)):
		if err := r.executable(f, path); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		return nil
	}
	return wrap(syscall.ENOEXEC)
}

// scriptInterpreter parses a #! line as the kernel does: the interpreter
// is the first word after "#!" (spaces and tabs skipped), ended by a
// space, tab, newline or NUL. It must be absolute: a relative one would be
// relative to the run's working directory.
func scriptInterpreter(head []byte) (string, error) {
	line := head[2:]
	if i := bytes.IndexByte(line, '\n'); i >= 0 {
		line = line[:i]
	} else if len(head) == 256 {
		return "", errors.New("the #! line is longer than the kernel reads")
	}
	line = bytes.TrimLeft(line, " \t")
	if i := bytes.IndexAny(line, " \t\x00"); i >= 0 {
		line = line[:i]
	}
	interp := string(line)
	if interp == "" {
		return "", errors.New("the #! line names no interpreter")
	}
	if !filepath.IsAbs(interp) {
		return "", fmt.Errorf("the #! interpreter %q is not an absolute path", interp)
	}
	return interp, nil
}

// dynObject is what the library search needs to know of one loaded ELF
// object.
type dynObject struct {
	needed  []string
	runpath []string   // DT_RUNPATH, expanded
	rpaths  [][]string // DT_RPATH of this object (unless it has a DT_RUNPATH) and of its loaders, expanded
}

// executable adds the ELF executable's interpreter and libraries. path is
// the program as it will be exec'd.
func (r *resolver) executable(f *os.File, path string) error {
	ef, err := elf.NewFile(f)
	if err != nil {
		return err
	}
	r.class, r.machine = ef.Class, ef.Machine
	var interp string
	for _, p := range ef.Progs {
		if p.Type != elf.PT_INTERP {
			continue
		}
		b, err := io.ReadAll(io.LimitReader(p.Open(), 4096))
		if err != nil {
			return fmt.Errorf("read PT_INTERP: %w", err)
		}
		interp = string(bytes.TrimRight(b, "\x00"))
	}
	if interp == "" {
		return nil // static: the kernel maps it alone
	}
	if _, err := r.add(interp); err != nil {
		return fmt.Errorf("ELF interpreter: %w", err)
	}
	// $ORIGIN of the executable is where /proc/self/exe points: its
	// resolved directory.
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return err
	}
	exe, err := dynamicInfo(ef, filepath.Dir(real), nil)
	if err != nil {
		return err
	}
	return r.libraries(exe, path)
}

// dynamicInfo reads an object's DT_NEEDED, DT_RUNPATH and DT_RPATH; origin
// is its $ORIGIN and loaderRpaths the DT_RPATH chain of whoever loaded it.
func dynamicInfo(ef *elf.File, origin string, loaderRpaths [][]string) (*dynObject, error) {
	if ef.SectionByType(elf.SHT_DYNAMIC) == nil {
		for _, p := range ef.Progs {
			if p.Type == elf.PT_DYNAMIC {
				return nil, errors.New("has a dynamic segment but no section headers to find it by")
			}
		}
		return &dynObject{rpaths: loaderRpaths}, nil
	}
	needed, err := ef.DynString(elf.DT_NEEDED)
	if err != nil {
		return nil, fmt.Errorf("DT_NEEDED: %w", err)
	}
	runpath, err := ef.DynString(elf.DT_RUNPATH)
	if err != nil {
		return nil, fmt.Errorf("DT_RUNPATH: %w", err)
	}
	rpath, err := ef.DynString(elf.DT_RPATH)
	if err != nil {
		return nil, fmt.Errorf("DT_RPATH: %w", err)
	}
	o := &dynObject{needed: needed, runpath: expandSearchPath(runpath, origin)}
	if len(runpath) == 0 && len(rpath) > 0 {
		// ld.so ignores an object's DT_RPATH when it has a DT_RUNPATH.
		o.rpaths = append(o.rpaths, expandSearchPath(rpath, origin))
	}
	o.rpaths = append(o.rpaths, loaderRpaths...)
	return o, nil
}

// expandSearchPath splits colon-separated search paths and expands
// $ORIGIN. Entries ld.so would take relative to the working directory, and
// those with other tokens ($LIB, $PLATFORM), are left out: a library found
// only there is reported missing rather than guessed at.
func expandSearchPath(values []string, origin string) []string {
	var dirs []string
	for _, v := range values {
		for _, d := range strings.Split(v, ":") {
			d = strings.ReplaceAll(strings.ReplaceAll(d, "${ORIGIN}", origin), "$ORIGIN", origin)
			if d == "" || !filepath.IsAbs(d) || strings.Contains(d, "$") {
				continue
			}
			dirs = append(dirs, filepath.Clean(d))
		}
	}
	return dirs
}

// libraries adds the transitive closure of root's DT_NEEDED, breadth
// first as ld.so loads them; a name is looked up once.
func (r *resolver) libraries(root *dynObject, rootPath string) error {
	type pending struct {
		obj  *dynObject
		path string
	}
	queue := []pending{{root, rootPath}}
	done := make(map[string]bool)
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		for _, name := range cur.obj.needed {
			if done[name] {
				continue
			}
			done[name] = true
			found, obj, err := r.find(name, cur.obj)
			if err != nil {
				return fmt.Errorf("library %s (needed by %s): %w", name, cur.path, err)
			}
			queue = append(queue, pending{obj, found})
		}
	}
	return nil
}

// find looks name up for obj: a name with a slash is a path; otherwise
// obj's DT_RPATH chain (when it has no DT_RUNPATH), its DT_RUNPATH, then
// the system directories. In each directory, glibc-hwcaps variants come
// first; every variant present is added (which one ld.so picks depends
// on the CPU), and the search goes on to the plain file, whose
// dependencies are followed.
func (r *resolver) find(name string, obj *dynObject) (string, *dynObject, error) {
	if strings.Contains(name, "/") {
		if !filepath.IsAbs(name) {
			return "", nil, errors.New("a relative library path depends on the working directory")
		}
		if found, o, ok := r.candidate(name, obj); ok {
			return found, o, nil
		}
		return "", nil, fs.ErrNotExist
	}
	var dirs []string
	if len(obj.runpath) == 0 {
		for _, rp := range obj.rpaths {
			dirs = append(dirs, rp...)
		}
	}
	dirs = append(dirs, obj.runpath...)
	dirs = append(dirs, r.systemDirs()...)
	for _, d := range dirs {
		for _, sub := range r.hwcapsDirs(d) {
			if found, _, ok := r.candidate(filepath.Join(sub, name), obj); ok {
				_, _ = r.add(found)
			}
		}
		if found, o, ok := r.candidate(filepath.Join(d, name), obj); ok {
			if _, err := r.add(found); err != nil {
				return "", nil, err
			}
			return found, o, nil
		}
	}
	return "", nil, fmt.Errorf("not found in its run paths or %v", r.systemDirs())
}

// candidate reports whether path is a library ld.so would load for a
// program of this class and machine (it passes over others, as ld.so
// does), and reads its dynamic section.
func (r *resolver) candidate(path string, loader *dynObject) (string, *dynObject, bool) {
	fi, err := os.Stat(path)
	if err != nil || !fi.Mode().IsRegular() {
		return "", nil, false
	}
	ef, err := elf.Open(path)
	if err != nil {
		return "", nil, false
	}
	defer ef.Close()
	if ef.Class != r.class || ef.Machine != r.machine {
		return "", nil, false
	}
	// A library's $ORIGIN is the directory it was found in, as named.
	o, err := dynamicInfo(ef, filepath.Dir(path), loader.rpaths)
	if err != nil {
		return "", nil, false
	}
	return path, o, true
}

// hwcapsDirs lists dir/glibc-hwcaps/*, once per dir.
func (r *resolver) hwcapsDirs(dir string) []string {
	if subs, ok := r.hwcaps[dir]; ok {
		return subs
	}
	var subs []string
	if entries, err := os.ReadDir(filepath.Join(dir, "glibc-hwcaps")); err == nil {
		for _, e := range entries {
			subs = append(subs, filepath.Join(dir, "glibc-hwcaps", e.Name()))
		}
	}
	r.hwcaps[dir] = subs
	return subs
}

// systemDirs are ld.so's default directories for this class and machine:
// the Debian-style multiarch ones, then lib64, then lib. Directories that
// do not exist cost a failed stat.
func (r *resolver) systemDirs() []string {
	var dirs []string
	if t := multiarchTriplet(r.class, r.machine); t != "" {
		dirs = append(dirs, "/lib/"+t, "/usr/lib/"+t)
	}
	if r.class == elf.ELFCLASS64 {
		dirs = append(dirs, "/lib64", "/usr/lib64")
	}
	return append(dirs, "/lib", "/usr/lib")
}

// multiarchTriplet is the multiarch directory name of the common Linux
// architectures, "" for others.
func multiarchTriplet(class elf.Class, machine elf.Machine) string {
	is64 := class == elf.ELFCLASS64
	switch {
	case machine == elf.EM_X86_64 && is64:
		return "x86_64-linux-gnu"
	case machine == elf.EM_AARCH64 && is64:
		return "aarch64-linux-gnu"
	case machine == elf.EM_386:
		return "i386-linux-gnu"
	case machine == elf.EM_ARM:
		return "arm-linux-gnueabihf"
	case machine == elf.EM_RISCV && is64:
		return "riscv64-linux-gnu"
	case machine == elf.EM_PPC64 && is64:
		return "powerpc64le-linux-gnu"
	case machine == elf.EM_S390 && is64:
		return "s390x-linux-gnu"
	case machine == elf.EM_LOONGARCH && is64:
		return "loongarch64-linux-gnu"
	}
	return ""
}
