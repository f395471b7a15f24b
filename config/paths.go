package config

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"troupe/audit"
	"troupe/internal/statedir"
	"troupe/sandbox"
)

// RunWritable says where a tool run of the default sandbox profile may
// write: the workspace, and the private temp dir each run gets under the
// sandbox's temp dir. troupe's own files must lie elsewhere: a run that
// could rewrite the config file would reload itself out of its sandbox, one
// that could rewrite the audit log would erase its own trail, and one that
// could write the spool directory could change the outputs results link.
type RunWritable struct {
	// Workspace is the served workspace (--workspace, else
	// server.workspace, else the current directory).
	Workspace string
	// RunTempDir is the sandbox's temp dir (sandbox.Options.TempDir, where
	// "" = os.TempDir()): runs get their private temp dirs in troupe's temp
	// root there (sandbox.TempRoot).
	RunTempDir string
}

// PlaceError is one of troupe's own paths in a place it must not be, or a
// spool directory that cannot hold outputs. Its message names the path
// and the fix, for the person who configured it.
type PlaceError struct {
	// What names the path: "config file", "audit.path", "output.spool_dir".
	What string
	// Path is the path as configured.
	Path string
	// Resolved is Path with its symlinks resolved, when that differs.
	Resolved string
	// Problem says what is wrong ("lies inside the workspace /ws, ...").
	Problem string
	// Fix says what to do about it.
	Fix string
}

// Error says what, where (resolved too), the problem and the fix.
func (e *PlaceError) Error() string {
	path := e.Path
	if e.Resolved != "" && e.Resolved != e.Path {
		path += " (resolved: " + e.Resolved + ")"
	}
	return fmt.Sprintf("%s %s %s; %s", e.What, path, e.Problem, e.Fix)
}

// CheckOwnFiles refuses a configuration that puts troupe's own files where
// a run may write (w): the config file, the audit log and the spool
// directory. Each path is compared with every symlink on it resolved (a
// dangling last one included: creating through it creates its target),
// so neither a symlinked workspace nor a symlinked file dodges the check;
// a path reached through a symlink that itself lies where runs write is
// refused too, since a run could point it elsewhere (for the config file,
// in the directory the reload watcher watches). A config file or audit
// log with several hard links is refused, as one of them could lie there.
// It also refuses a spool directory that is missing, not a directory or
// not writable, where results would link outputs that were never kept.
// Every problem found is reported (errors.Join of *PlaceError).
//
// The environment and -c layers have no file; a config file found at the
// default place or through $TROUPE_CONFIG is checked like --config.
func CheckOwnFiles(cfg *Config, w RunWritable) error {
	places, err := w.resolve()
	if err != nil {
		return err
	}
	var errs []error
	if cfg.File != "" {
		errs = append(errs, places.checkConfigFile(cfg.File)...)
	}
	if cfg.Audit.Enabled {
		what := "audit.path"
		if cfg.Audit.Path == "" {
			what = "audit log (the default for audit.path)"
		}
		path, err := cfg.AuditFile()
		if err != nil {
			errs = append(errs, err)
		} else {
			errs = append(errs, places.checkFile(what, path, "a run could truncate or rewrite the log",
				"set audit.path outside the workspace or choose another workspace")...)
		}
	}
	errs = append(errs, places.checkSpool(cfg.Output.SpoolDir)...)
	if cfg.HasDownstreamServers() {
		what := "pins.path"
		if cfg.Pins.Path == "" {
			what = "pins file (the default for pins.path)"
		}
		if path, err := cfg.PinsFile(); err != nil {
			errs = append(errs, err)
		} else {
			errs = append(errs, places.checkFile(what, path, "a run could trust a changed downstream tool for everyone",
				"set pins.path outside the workspace or choose another workspace")...)
		}
	}
	return errors.Join(errs...)
}

// writablePlaces is RunWritable with its directories resolved.
type writablePlaces struct {
	workspace string
	runTemp   string
}

func (w RunWritable) resolve() (writablePlaces, error) {
	if w.Workspace == "" {
		return writablePlaces{}, errors.New("checking troupe's own files: no workspace given")
	}
	ws, _, err := realPath(w.Workspace)
	if err != nil {
		return writablePlaces{}, fmt.Errorf("workspace %s: %w", w.Workspace, err)
	}
	tmp := w.RunTempDir
	if tmp == "" {
		tmp = os.TempDir()
	}
	runTemp, _, err := realPath(tmp)
	if err != nil {
		return writablePlaces{}, fmt.Errorf("sandbox temp dir %s: %w", tmp, err)
	}
	return writablePlaces{workspace: ws, runTemp: runTemp}, nil
}

// checkConfigFile refuses file when a run could change it (the config
// file part of CheckOwnFiles), for the watcher.
func (w RunWritable) checkConfigFile(file string) error {
	places, err := w.resolve()
	if err != nil {
		return err
	}
	return errors.Join(places.checkConfigFile(file)...)
}

// checkConfigFile refuses a config file a run could change: its target,
// or a name on the way to it (the file itself, a symlink), which a run
// could replace in a directory the watcher watches.
func (p writablePlaces) checkConfigFile(file string) []error {
	return p.checkFile("config file", file,
		"a run could rewrite it, and the reload would put what it wrote in force",
		"move the config file outside the workspace or choose another workspace")
}

// checkFile refuses a file (as configured: path) that lies where a run may
// write, that is reached through a symlink lying there, or that has more
// than one hard link (another name could lie there).
func (p writablePlaces) checkFile(what, path, why, fix string) []error {
	real, err := p.placed(what, path, why, fix)
	if err != nil {
		return []error{err}
	}
	var st syscall.Stat_t
	if err := syscall.Stat(real, &st); err == nil && st.Nlink > 1 {
		return []error{&PlaceError{What: what, Path: path, Resolved: real,
			Problem: fmt.Sprintf("has %d hard links, and troupe cannot tell whether another one lies where tool runs may write", st.Nlink),
			Fix:     "give it a single name (copy it instead of linking it)"}}
	}
	return nil
}

// placed resolves path and refuses it (a *PlaceError) when it, or a
// symlink followed on the way to it, lies where a run may write.
func (p writablePlaces) placed(what, path, why, fix string) (string, error) {
	real, links, err := realPath(path)
	if err != nil {
		return "", &PlaceError{What: what, Path: path, Problem: "cannot be resolved (" + errorText(err) + ")", Fix: fix}
	}
	if where := p.where(real); where != "" {
		return "", &PlaceError{What: what, Path: path, Resolved: real,
			Problem: "lies inside " + where + ", where tool runs may write: " + why, Fix: fix}
	}
	for _, link := range links {
		if where := p.where(filepath.Dir(link)); where != "" {
			return "", &PlaceError{What: what, Path: path, Resolved: real,
				Problem: "is reached through the symlink " + link + ", inside " + where + ", where tool runs may replace it: " + why, Fix: fix}
		}
	}
	return real, nil
}

// checkSpool refuses a spool directory a run could write, and one that
// cannot hold outputs: missing, not a directory, or not writable (probed
// by creating and removing a file in it).
func (p writablePlaces) checkSpool(dir string) []error {
	what := "output.spool_dir"
	if dir == "" {
		dir = os.TempDir()
		what = `output.spool_dir ("": the system temp directory)`
	}
	fix := "set output.spool_dir to an existing, writable directory outside the workspace"
	real, err := p.placed(what, dir, "a run could change the outputs results link",
		"set output.spool_dir outside the workspace or choose another workspace")
	if err != nil {
		return []error{err}
	}
	fi, err := os.Stat(real)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return []error{&PlaceError{What: what, Path: dir, Resolved: real, Problem: "does not exist",
			Fix: "create it, or " + fix}}
	case err != nil:
		return []error{&PlaceError{What: what, Path: dir, Resolved: real, Problem: "cannot be read (" + errorText(err) + ")", Fix: fix}}
	case !fi.IsDir():
		return []error{&PlaceError{What: what, Path: dir, Resolved: real, Problem: "is not a directory", Fix: fix}}
	}
	probe, err := os.CreateTemp(real, ".troupe-probe-*")
	if err != nil {
		return []error{&PlaceError{What: what, Path: dir, Resolved: real, Problem: "is not writable (" + errorText(err) + ")", Fix: fix}}
	}
	name := probe.Name()
	probe.Close()
	if err := os.Remove(name); err != nil {
		return []error{&PlaceError{What: what, Path: dir, Resolved: real,
			Problem: "does not let troupe remove the files it makes (" + errorText(err) + ")", Fix: fix}}
	}
	return nil
}

// where names the run-writable place that holds real (resolved), "" when
// none does.
func (p writablePlaces) where(real string) string {
	if within(real, p.workspace) {
		return "the workspace " + p.workspace
	}
	if root := sandbox.TempRoot(p.runTemp); within(real, root) {
		return "troupe's temp root " + root + ", where runs get their temp dirs"
	}
	return ""
}

// within reports whether path is dir or lies below it; both are clean
// absolute paths.
func within(path, dir string) bool {
	if path == dir || dir == string(filepath.Separator) {
		return true
	}
	return strings.HasPrefix(path, dir+string(filepath.Separator))
}

// errorText is err without the *PathError's operation and path, which the
// PlaceError already names.
func errorText(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

// maxSymlinks bounds the symlinks realPath follows, as the kernel's
// ELOOP limit does.
const maxSymlinks = 40

// realPath is path made absolute with every symlink on it resolved, as
// the kernel would resolve it to open or create the file: symlinks in
// existing components are followed, a dangling one included (creating
// through it creates its target), and components that do not exist yet
// are kept as they are (filepath.EvalSymlinks fails on those). links are
// the symlinks it followed, each named by its resolved directory: whoever
// may write one of those directories can redirect path.
func realPath(path string) (real string, links []string, err error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", nil, err
	}
	sep := string(filepath.Separator)
	pending := strings.Split(strings.TrimPrefix(abs, sep), sep)
	resolved := sep
	for len(pending) > 0 {
		c := pending[0]
		pending = pending[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			resolved = filepath.Dir(resolved)
			continue
		}
		next := filepath.Join(resolved, c)
		fi, err := os.Lstat(next)
		if errors.Is(err, fs.ErrNotExist) {
			resolved = next // nothing below a missing name can be a symlink
			continue
		}
		if err != nil {
			return "", nil, err
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			resolved = next
			continue
		}
		if len(links) == maxSymlinks {
			return "", nil, &fs.PathError{Op: "resolve", Path: path, Err: syscall.ELOOP}
		}
		links = append(links, next)
		target, err := os.Readlink(next)
		if err != nil {
			return "", nil, err
		}
		if filepath.IsAbs(target) {
			resolved = sep
		}
		pending = append(strings.Split(target, sep), pending...)
	}
	return resolved, links, nil
}

// OwnPaths are the files of troupe's own that runs must not read although
// they may read the rest of the filesystem (sandbox.Options.Hidden): the
// config file, the audit log (other sessions' calls, arguments included)
// with the rotated files it will have (PATH.1 … PATH.max_files, hidden by
// each run when they exist) and those an earlier max_files left, and the
// spool directory when one is configured (the default lies in the
// sandbox's temp root, which is hidden anyway), the pins file and its
// lock when there are downstream servers (a run that read them would learn
// which versions are trusted; one that wrote them could trust its own),
// and a cluster node's TLS key (with it a run could speak to the other
// nodes as this one).
func (c *Config) OwnPaths() []string {
	var paths []string
	if c.File != "" {
		paths = append(paths, c.File)
	}
	if c.Audit.Enabled {
		if path, err := c.AuditFile(); err == nil {
			paths = append(paths, path)
			seen := map[string]bool{path: true}
			if c.Audit.MaxBytes > 0 {
				for n := 1; n <= c.Audit.MaxFiles; n++ {
					name := path + "." + strconv.Itoa(n)
					paths, seen[name] = append(paths, name), true
				}
			}
			if files, err := audit.Files(path); err == nil {
				for _, f := range files {
					if !seen[f] {
						paths = append(paths, f)
					}
				}
			}
		}
	}
	if c.Output.SpoolDir != "" {
		paths = append(paths, c.Output.SpoolDir)
	}
	if c.HasDownstreamServers() {
		if path, err := c.PinsFile(); err == nil {
			paths = append(paths, path, path+".lock")
		}
	}
	if c.Codex.Enabled {
		if dir, err := c.CodexStateDir(); err == nil {
			paths = append(paths, dir)
		}
	}
	if c.Clustered() && c.Cluster.TLSKeyFile != "" {
		if abs, err := filepath.Abs(c.Cluster.TLSKeyFile); err == nil {
			paths = append(paths, abs)
		}
	}
	return paths
}

// CodexStateDir is where troupe keeps Codex's homes: codex.state_dir, else
// $XDG_STATE_HOME/troupe/codex, else ~/.local/state/troupe/codex (beside
// the audit log's default).
func (c *Config) CodexStateDir() (string, error) {
	if c.Codex.StateDir != "" {
		return c.Codex.StateDir, nil
	}
	dir, err := statedir.Dir()
	if err != nil {
		return "", fmt.Errorf("codex.state_dir: %w", err)
	}
	return filepath.Join(dir, "codex"), nil
}

// HasDownstreamServers reports whether the configuration serves
// [mcp_servers] (enabled or not: a reload may enable one), whose tools and
// prompts troupe pins (PinsFile).
func (c *Config) HasDownstreamServers() bool {
	return c.Features.EnableMcpServerSurface && len(c.McpServers) > 0
}

// PinsFile is the file of pinned downstream tools and prompts: pins.path,
// else pins.json in the state directory ($XDG_STATE_HOME/troupe, else
// ~/.local/state/troupe), beside the audit log's default.
func (c *Config) PinsFile() (string, error) {
	if c.Pins.Path != "" {
		return c.Pins.Path, nil
	}
	dir, err := statedir.Dir()
	if err != nil {
		return "", fmt.Errorf("pins.path: %w", err)
	}
	return filepath.Join(dir, "pins.json"), nil
}

// AuditFile is the audit log this configuration writes: audit.path, or
// audit.DefaultPath when that is "" (whether auditing is on is for the
// caller to ask). A cluster node writes a file of its own, named by the
// address other nodes dial it at (NodeAuditFile): nodes that share a
// config and a disk never append to one chain, and a node started again
// finds its own file again (its member id is new at every start, its
// address is not).
func (c *Config) AuditFile() (string, error) {
	path := c.Audit.Path
	if path == "" {
		var err error
		if path, err = audit.DefaultPath(); err != nil {
			return "", err
		}
	}
	if c.Clustered() {
		addr := c.Cluster.Advertise
		if addr == "" {
			addr = c.Cluster.Listen
		}
		return NodeAuditFile(path, addr), nil
	}
	return path, nil
}

// NodeAuditFile is the audit log of the cluster node at addr (its
// cluster.advertise, else cluster.listen) when the configured log is path:
// the address goes before path's extension, its colons (and anything else
// that is not a letter, a digit, '.' or '-') as '_':
// audit.jsonl → audit.127.0.0.1_7001.jsonl.
func NodeAuditFile(path, addr string) string {
	name := addr
	if host, port, err := net.SplitHostPort(addr); err == nil {
		name = host + "_" + port
	}
	name = strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '-' {
			return r
		}
		return '_'
	}, name)
	dir, base := filepath.Split(path)
	ext := filepath.Ext(base)
	if ext == base { // ".jsonl": a name that is all extension
		ext = ""
	}
	return dir + strings.TrimSuffix(base, ext) + "." + name + ext
}
