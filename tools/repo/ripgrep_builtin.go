package repo

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"time"

	"troupe/tools"
	"troupe/workspace"
)

// builtinSearch is the search troupe runs when there is no rg. It mirrors
// what rg --sort path does with the flags rgSearch passes, so that a model
// gets the same answer on any host; the package comment lists where it
// cannot.
type builtinSearch struct {
	ws *workspace.Root
}

func (s *builtinSearch) describe() string {
	return "This server has no ripgrep binary and uses a built-in search with the same file selection, in which \\w, \\d and \\b are ASCII-only."
}

const (
	// progressInterval is how often a search may report progress.
	progressInterval = 100 * time.Millisecond
	// wholeFileMax is the largest file read into memory at once; only
	// whole files can be refused for a NUL byte anywhere in them.
	wholeFileMax = 64 << 20
	// streamSniff is how much of a larger file must be free of NUL bytes
	// before it is searched, as in rg's first buffer.
	streamSniff = 64 << 10
	// streamChunk is the read size for files past wholeFileMax.
	streamChunk = 1 << 20
	// readSlice is how much of a file is read between looks at ctx.
	readSlice = 4 << 20
	// ignoreFileMax bounds an ignore file's size; real ones are tiny.
	ignoreFileMax = 16 << 20
	// ctxCheckEvery is how many lines are searched between looks at ctx,
	// so a cancelled call does not finish a huge file first.
	ctxCheckEvery = 1024
)

// The ignore files rg reads in every directory, by precedence: a match
// in .rgignore at any depth beats one in .ignore, which beats .gitignore.
const (
	rgignoreFile  = ".rgignore"
	ignoreFile    = ".ignore"
	gitignoreFile = ".gitignore"
)

// utf8BOM is the UTF-8 byte order mark, which rg drops from a file's start.
const utf8BOM = "\xEF\xBB\xBF"

// dirRules is the ignore state of one directory on the walk's path.
type dirRules struct {
	dir                         string // slash path; "." for the workspace root
	rgignore, ignore, gitignore *ruleSet
	// hasGit marks a repository root: .gitignore files above it do not
	// apply below it.
	hasGit bool
}

// walk is one run of the built-in search.
type walk struct {
	ctx        context.Context
	req        *tools.Request
	q          *query
	c          *collector
	root       *os.Root
	prefix     []byte      // a literal every match starts with, if any
	stack      []*dirRules // the directories from the root to the entry being visited
	files      int
	lastReport time.Time
}

// run walks the workspace in lexical order, which is the order of
// rg --sort path, and searches the files rg would search.
func (s *builtinSearch) run(ctx context.Context, req *tools.Request, q *query, c *collector) error {
	w := &walk{ctx: ctx, req: req, q: q, c: c, root: s.ws.Root(), lastReport: time.Now()}
	if p, _ := q.re.LiteralPrefix(); p != "" {
		w.prefix = []byte(p)
	}
	err := fs.WalkDir(s.ws.Root().FS(), ".", w.visit)
	if ctxErr := ctx.Err(); ctxErr != nil {
		return ctxErr
	}
	return err
}

// visit decides about one entry. Like rg it never follows symlinks (nor
// searches them), skips FIFOs, sockets and devices, and skips entries it
// cannot read.
func (w *walk) visit(p string, d fs.DirEntry, err error) error {
	if ctxErr := w.ctx.Err(); ctxErr != nil {
		return ctxErr
	}
	if err != nil {
		if d == nil {
			return fmt.Errorf("repo: search: %w", err) // the root itself is gone
		}
		return nil // an unreadable directory: rg names it on stderr and moves on
	}
	if p == "." {
		w.push(p)
		return nil
	}
	for parent := path.Dir(p); w.stack[len(w.stack)-1].dir != parent; {
		w.stack = w.stack[:len(w.stack)-1]
	}
	switch t := d.Type(); {
	case t.IsDir():
		if w.skip(p, d.Name(), true) {
			return fs.SkipDir
		}
		w.push(p)
	case t.IsRegular():
		if w.skip(p, d.Name(), false) {
			return nil
		}
		return w.searchFile(p)
	}
	return nil
}

// skip applies rg's order of rules: globs first (a glob match decides
// outright, and with any positive glob an unmatched file is out), then the
// ignore files (a "!" line keeps even a hidden entry), then hiddenness.
func (w *walk) skip(p, name string, isDir bool) bool {
	if o := w.q.overrides; o != nil {
		switch o.match(p, isDir) {
		case matchedPositive:
			return false
		case matchedNegated:
			return true
		}
		if o.positives > 0 && !isDir {
			return true
		}
	}
	switch w.ignored(p, isDir) {
	case matchedPositive:
		return true
	case matchedNegated:
		return false
	}
	return strings.HasPrefix(name, ".")
}

// ignored asks the ignore files of p's ancestors, deepest first. Each kind
// of file gives its deepest match; .rgignore's beats .ignore's beats
// .gitignore's, and .gitignore files above a repository root are not asked.
func (w *walk) ignored(p string, isDir bool) verdict {
	var custom, plain, git verdict
	sawGit := false
	for i := len(w.stack) - 1; i >= 0; i-- {
		d := w.stack[i]
		rel := p
		if d.dir != "." {
			rel = p[len(d.dir)+1:]
		}
		if custom == noMatch {
			custom = d.rgignore.match(rel, isDir)
		}
		if plain == noMatch {
			plain = d.ignore.match(rel, isDir)
		}
		if !sawGit && git == noMatch {
			git = d.gitignore.match(rel, isDir)
		}
		sawGit = sawGit || d.hasGit
	}
	switch {
	case custom != noMatch:
		return custom
	case plain != noMatch:
		return plain
	}
	return git
}

// push enters a directory that will be searched and reads its ignore
// files.
func (w *walk) push(dir string) {
	d := &dirRules{
		dir:       dir,
		rgignore:  w.readRules(path.Join(dir, rgignoreFile)),
		ignore:    w.readRules(path.Join(dir, ignoreFile)),
		gitignore: w.readRules(path.Join(dir, gitignoreFile)),
	}
	if _, err := w.root.Lstat(path.Join(dir, ".git")); err == nil {
		d.hasGit = true
	}
	w.stack = append(w.stack, d)
}

// readRules reads one ignore file through the root; a missing or
// unreadable one has no rules.
func (w *walk) readRules(name string) *ruleSet {
	f, _, err := openRegular(w.root, name)
	if err != nil {
		return nil
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, ignoreFileMax))
	if err != nil {
		return nil
	}
	return parseRuleSet(string(data))
}

// searchFile searches one regular file. An open or read failure skips the
// file, as rg does.
func (w *walk) searchFile(p string) error {
	w.files++
	if now := time.Now(); now.Sub(w.lastReport) >= progressInterval {
		w.lastReport = now
		w.req.Progress(float64(w.files), 0, fmt.Sprintf("searched %d files, %d matching lines so far", w.files, len(w.c.matches)))
	}
	f, fi, err := openRegular(w.root, p)
	if err != nil {
		return nil
	}
	defer f.Close()
	if fi.Size() > wholeFileMax {
		return w.stream(p, f)
	}
	// One byte more than fstat promised tells whether the file grew; a
	// buffer of the right size spares io.ReadAll's copying as it grows.
	data := make([]byte, fi.Size()+1)
	n, err := w.readFull(f, data)
	switch {
	case w.ctx.Err() != nil:
		return w.ctx.Err()
	case err == nil:
		return w.stream(p, io.MultiReader(bytes.NewReader(data), f))
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		data = data[:n]
	default:
		return nil
	}
	if bytes.IndexByte(data, 0) >= 0 {
		return w.binaryHead(p, data)
	}
	_, err = w.scan(p, bytes.TrimPrefix(data, []byte(utf8BOM)), 0)
	return err
}

// readFull is io.ReadFull in slices of readSlice bytes, with a look at ctx
// between them: reading 64 MiB from a slow disk takes long enough to
// matter to a cancelled call.
func (w *walk) readFull(f io.Reader, buf []byte) (int, error) {
	n := 0
	for n < len(buf) {
		if w.ctx.Err() != nil {
			return n, w.ctx.Err()
		}
		m, err := io.ReadFull(f, buf[n:min(n+readSlice, len(buf))])
		n += m
		if err != nil {
			if errors.Is(err, io.EOF) && n > 0 {
				err = io.ErrUnexpectedEOF
			}
			return n, err
		}
	}
	return n, nil
}

// binaryHead handles a file with a NUL byte, which is binary and skipped,
// except for one quirk of rg kept for parity: rg reads a file's first three
// bytes on their own while it looks for a byte order mark, and searches the
// whole lines among them before it sees the NUL further on. So "a\nb\x00"
// matches "a"; "abc\n\x00" and "a\n\x00" match nothing.
func (w *walk) binaryHead(p string, data []byte) error {
	if len(data) < 3 || bytes.HasPrefix(data, []byte(utf8BOM)) || bytes.IndexByte(data[:3], 0) >= 0 {
		return nil
	}
	end := bytes.LastIndexByte(data[:3], '\n') + 1
	_, err := w.scan(p, data[:end], 0)
	return err
}

// stream searches a file too large to hold, chunk by chunk. It skips the
// file if its first streamSniff bytes hold a NUL and otherwise stops at
// the first line holding one, keeping the matches before it, as rg does.
func (w *walk) stream(p string, r io.Reader) error {
	chunk := make([]byte, streamChunk)
	var pending []byte // an incomplete last line, carried to the next chunk
	var lines int64
	first := true
	for {
		if err := w.ctx.Err(); err != nil {
			return err
		}
		n, readErr := io.ReadFull(r, chunk)
		eof := readErr != nil
		if eof && !errors.Is(readErr, io.EOF) && !errors.Is(readErr, io.ErrUnexpectedEOF) {
			return nil
		}
		data := append(pending, chunk[:n]...)
		if first {
			first = false
			if bytes.IndexByte(data[:min(len(data), streamSniff)], 0) >= 0 {
				return nil
			}
			data = bytes.TrimPrefix(data, []byte(utf8BOM))
		}
		end := len(data)
		if !eof {
			end = bytes.LastIndexByte(data, '\n') + 1
		}
		complete := data[:end]
		if k := bytes.IndexByte(complete, 0); k >= 0 {
			_, err := w.scan(p, complete[:bytes.LastIndexByte(complete[:k], '\n')+1], lines)
			return err
		}
		counted, err := w.scan(p, complete, lines)
		if err != nil || eof {
			return err
		}
		lines += counted
		pending = append([]byte(nil), data[end:]...)
	}
}

// scan matches the lines of data, whose first line is line number
// before+1, and returns how many lines it held. A line is matched without
// its "\n" but with any "\r", as rg does without --crlf. When the query
// has a literal prefix, only lines holding it are matched: bytes.Index
// finds them much faster than the regexp could rule the others out.
func (w *walk) scan(p string, data []byte, before int64) (int64, error) {
	var (
		lineNo  = before // line number of the line ending at counted
		counted = 0      // offset up to which lines are counted
		pos     = 0
		steps   = 0
	)
	for pos < len(data) {
		if steps++; steps%ctxCheckEvery == 0 {
			if err := w.ctx.Err(); err != nil {
				return 0, err
			}
		}
		start := pos
		if w.prefix != nil {
			j := bytes.Index(data[pos:], w.prefix)
			if j < 0 {
				break
			}
			start = bytes.LastIndexByte(data[:pos+j], '\n') + 1
		}
		end := len(data)
		if k := bytes.IndexByte(data[start:], '\n'); k >= 0 {
			end = start + k + 1
		}
		lineNo += int64(bytes.Count(data[counted:start], []byte{'\n'})) + 1
		counted = end
		pos = end
		line := data[start:end]
		if w.q.re.Match(bytes.TrimSuffix(line, []byte{'\n'})) {
			if !w.c.add(p, lineNo, line) {
				return 0, fs.SkipAll
			}
		}
		if end == len(data) || data[end-1] != '\n' {
			// The last line had no terminator; it has been counted.
			return lineNo - before, nil
		}
	}
	lineNo += int64(bytes.Count(data[counted:], []byte{'\n'}))
	return lineNo - before, nil
}
