package spool

import (
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"
)

// Defaults of Limits.
const (
	// DefaultInlineBytes is the head and the tail each, per stream: a
	// result that shows both streams (shell.exec) stays under the
	// 12,000 bytes Codex keeps of a tool result, note and JSON included.
	DefaultInlineBytes   = 2 << 10
	DefaultMaxFileBytes  = 1 << 30  // per stream
	DefaultMaxStoreBytes = 4 << 30  // per store: every stream of a session's outputs
	DefaultMaxTotalBytes = 16 << 30 // per Budget: what NewBudget(0) allows
	DefaultMaxOutputs    = 64       // per store
	// MaxReadBytes bounds one resources/read: larger streams are read in
	// ranges (?offset=N&length=M).
	MaxReadBytes = 4 << 20
)

// URIPrefix starts every spooled output's resource URI.
const URIPrefix = "troupe://output/"

// Limits bound what a Store keeps. Zero values mean the defaults.
type Limits struct {
	// InlineBytes is the size of the head and of the tail a Capture keeps
	// in memory, and so the most of a stream a result shows.
	InlineBytes int
	// MaxFileBytes caps one stream's spool file; beyond it, bytes are
	// counted but not kept.
	MaxFileBytes int64
	// MaxStoreBytes caps the spool files of all the store's outputs
	// together (one session's). A stream that reaches it keeps what fit
	// and counts the rest, like one that reaches MaxFileBytes; a new
	// output first evicts the oldest finished ones to make room for
	// itself (two streams of MaxFileBytes, at most MaxStoreBytes).
	MaxStoreBytes int64
	// MaxOutputs is how many calls' outputs a store keeps; the oldest
	// finished one is removed to make room.
	MaxOutputs int
	// Shared, when set, is the budget of every store of the server
	// together: each byte a store keeps is taken from its own
	// MaxStoreBytes and from Shared. nil bounds the store by its own
	// limits only.
	Shared *Budget
}

func (l Limits) withDefaults() Limits {
	if l.InlineBytes <= 0 {
		l.InlineBytes = DefaultInlineBytes
	}
	if l.MaxFileBytes <= 0 {
		l.MaxFileBytes = DefaultMaxFileBytes
	}
	if l.MaxStoreBytes <= 0 {
		l.MaxStoreBytes = DefaultMaxStoreBytes
	}
	if l.MaxOutputs <= 0 {
		l.MaxOutputs = DefaultMaxOutputs
	}
	return l
}

// ErrNotFound means a URI names no output the store keeps.
var ErrNotFound = errors.New("no such output")

// ErrClosed means the store has been closed.
var ErrClosed = errors.New("output store closed")

// Store is the spooled output of one session's calls. It makes its
// directory on first use and removes it, with every file, on Close.
type Store struct {
	parent string
	limits Limits
	own    *Budget // limits.MaxStoreBytes

	mu      sync.Mutex
	outputs map[string]*Output
	order   []string // ids, oldest first
	closed  bool

	// dirMu guards dir, which the first file made creates. Captures make
	// files while holding their own lock, so this lock is never held while
	// taking mu or a capture's.
	dirMu sync.Mutex
	dir   string
	gone  atomic.Bool // Close has begun: no more files
}

// NewStore returns a store whose directory will be made under parent
// ("" = the system temp directory).
func NewStore(parent string, limits Limits) *Store {
	l := limits.withDefaults()
	return &Store{parent: parent, limits: l, own: NewBudget(l.MaxStoreBytes)}
}

// Output is what one call's programs wrote: stdout and stderr.
type Output struct {
	ID     string
	Stdout *Capture
	Stderr *Capture
	store  *Store
	closed bool

	mu   sync.Mutex
	exit *int
}

// SetExitStatus records how the call's program ended (its exit code, or
// 128+signal), for the audit log.
func (o *Output) SetExitStatus(code int) {
	o.mu.Lock()
	o.exit = &code
	o.mu.Unlock()
}

// ExitStatus is what SetExitStatus recorded; nil when no program ended.
func (o *Output) ExitStatus() *int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.exit
}

// NewOutput returns an output that keeps head and tail in memory only:
// for callers without a store (tests, one-off runs).
func NewOutput(limits Limits) *Output {
	l := limits.withDefaults()
	return &Output{
		Stdout: newCapture("stdout", l.InlineBytes, l.InlineBytes),
		Stderr: newCapture("stderr", l.InlineBytes, l.InlineBytes),
	}
}

// Create starts the output of call id (a correlation id: letters and
// digits). Its files exist until the store drops it or closes.
func (s *Store) Create(id string) (*Output, error) {
	if id == "" || strings.ContainsAny(id, "/\\.?#") {
		return nil, fmt.Errorf("spool: invalid output id %q", id)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrClosed
	}
	if _, dup := s.outputs[id]; dup {
		return nil, fmt.Errorf("spool: output %q exists", id)
	}
	s.evict()
	o := &Output{ID: id, store: s,
		Stdout: newCapture("stdout", s.limits.InlineBytes, s.limits.InlineBytes),
		Stderr: newCapture("stderr", s.limits.InlineBytes, s.limits.InlineBytes)}
	for _, c := range []*Capture{o.Stdout, o.Stderr} {
		// The file is made on the stream's first byte (most calls write
		// nothing: in-process tools), in the store's directory, which is
		// itself made then.
		c.path, c.store = id+"."+c.name, s
		c.uri = URIPrefix + id + "/" + c.name
	}
	if s.outputs == nil {
		s.outputs = map[string]*Output{}
	}
	s.outputs[id] = o
	s.order = append(s.order, id)
	return o, nil
}

// openFile creates a stream's spool file (name relative to the store's
// directory, which is made on first use) and records its full path.
func (s *Store) openFile(name string) (*os.File, error) {
	s.dirMu.Lock()
	defer s.dirMu.Unlock()
	if s.gone.Load() {
		return nil, ErrClosed
	}
	if s.dir == "" {
		// The server's pid in the name lets a later server remove what
		// a crashed one left (sandbox.MakeTempRoot).
		dir, err := os.MkdirTemp(s.parent, fmt.Sprintf("troupe-output-%d-", os.Getpid()))
		if err != nil {
			return nil, fmt.Errorf("spool: %w", err)
		}
		s.dir = dir
	}
	f, err := os.OpenFile(filepath.Join(s.dir, name), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, fmt.Errorf("spool: %w", err)
	}
	return f, nil
}

// evict drops the oldest finished outputs while the store has no room
// for one more: MaxOutputs outputs, or less than a new call's two full
// streams (at most all of MaxStoreBytes) of its byte budget left.
func (s *Store) evict() {
	room := s.own.Max()
	if f := s.limits.MaxFileBytes; f < room/2 {
		room = 2 * f
	}
	for len(s.order) >= s.limits.MaxOutputs || s.own.Used() > s.own.Max()-room {
		victim := -1
		for i, id := range s.order {
			if s.outputs[id].closed {
				victim = i
				break
			}
		}
		if victim < 0 {
			return // every output is still being written; keep them
		}
		id := s.order[victim]
		s.outputs[id].removeFiles()
		delete(s.outputs, id)
		s.order = append(s.order[:victim], s.order[victim+1:]...)
	}
}

// Close ends the output: its streams take no more bytes and their files
// stay readable until the store drops them. An output that took no byte
// leaves the store at once: there is nothing to read, and most calls
// (in-process tools) write nothing, so keeping them would only fill the
// store with empty entries for eviction to scan.
func (o *Output) Close() {
	o.Stdout.close()
	o.Stderr.close()
	if o.store == nil {
		o.closed = true
		return
	}
	empty := o.Stdout.Total() == 0 && o.Stderr.Total() == 0
	s := o.store
	s.mu.Lock()
	defer s.mu.Unlock()
	o.closed = true
	if empty && s.outputs[o.ID] == o {
		delete(s.outputs, o.ID)
		for i := len(s.order) - 1; i >= 0; i-- { // usually the newest
			if s.order[i] == o.ID {
				s.order = append(s.order[:i], s.order[i+1:]...)
				break
			}
		}
	}
}

// removeFiles ends the output's streams for good, removes their files and
// then gives their bytes back to the budgets (so the disk never holds
// more than the budgets allow, even for a moment).
func (o *Output) removeFiles() {
	for _, c := range []*Capture{o.Stdout, o.Stderr} {
		full, charged := c.drop()
		if full != "" {
			os.Remove(full)
		}
		o.store.release(charged)
	}
}

// Close removes every output and the store's directory, and gives their
// bytes back to the shared budget. Captures still being written keep
// counting but write no file.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	s.gone.Store(true)
	for _, o := range s.outputs {
		o.removeFiles()
	}
	s.outputs, s.order = nil, nil
	s.dirMu.Lock()
	defer s.dirMu.Unlock()
	if s.dir == "" {
		return nil
	}
	return os.RemoveAll(s.dir)
}

// Resource describes one spooled stream, as resources/list shows it.
type Resource struct {
	URI  string
	Name string // "<id> stdout"
	Size int64
}

// List returns the streams the store keeps that have output, oldest
// first.
func (s *Store) List() []Resource {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Resource
	for _, id := range s.order {
		o := s.outputs[id]
		for _, c := range []*Capture{o.Stdout, o.Stderr} {
			if n := c.Spooled(); n > 0 {
				out = append(out, Resource{URI: c.uri, Name: id + " " + c.name, Size: n})
			}
		}
	}
	return out
}

// Chunk is one read of a spooled stream.
type Chunk struct {
	Data   []byte
	Text   bool  // Data is valid UTF-8
	Offset int64 // where Data starts
	Total  int64 // bytes in the spool file now
	Next   int64 // offset of the rest; 0 when Data reaches the end
}

// Read serves uri: troupe://output/<id>/<stream>, optionally with
// ?offset=N&length=M. At most MaxReadBytes are returned; Next says where to
// go on. A range boundary that splits a UTF-8 sequence is moved back so
// text chunks stay valid.
func (s *Store) Read(uri string) (*Chunk, error) {
	id, stream, offset, length, err := parseURI(uri)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	o, ok := s.outputs[id]
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return nil, ErrClosed
	}
	if !ok {
		return nil, ErrNotFound
	}
	c := o.Stdout
	if stream == "stderr" {
		c = o.Stderr
	}
	c.mu.Lock()
	path, total := c.full, c.stored
	c.mu.Unlock()
	if offset > total {
		return nil, fmt.Errorf("offset %d is past the end (%d bytes)", offset, total)
	}
	if length <= 0 || length > MaxReadBytes {
		length = MaxReadBytes
	}
	n := min(length, total-offset)
	f, err := os.Open(path)
	if err != nil {
		return nil, ErrNotFound // dropped meanwhile
	}
	defer f.Close()
	buf := make([]byte, n)
	if _, err := f.ReadAt(buf, offset); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("reading %s: %w", uri, err)
	}
	ch := &Chunk{Data: buf, Offset: offset, Total: total}
	if offset+n < total {
		// Do not split a UTF-8 sequence at the end of a text range.
		if cut := cutIncomplete(buf); cut > 0 && cut < len(buf) {
			ch.Data = buf[:cut]
		}
		ch.Next = offset + int64(len(ch.Data))
	}
	ch.Text = utf8.Valid(ch.Data)
	return ch, nil
}

// parseURI splits a spool URI.
func parseURI(uri string) (id, stream string, offset, length int64, err error) {
	rest, ok := strings.CutPrefix(uri, URIPrefix)
	if !ok {
		return "", "", 0, 0, ErrNotFound
	}
	path, query, _ := strings.Cut(rest, "?")
	id, stream, ok = strings.Cut(path, "/")
	if !ok || (stream != "stdout" && stream != "stderr") || id == "" {
		return "", "", 0, 0, ErrNotFound
	}
	q, err := url.ParseQuery(query)
	if err != nil {
		return "", "", 0, 0, fmt.Errorf("bad query in %s: %w", uri, err)
	}
	num := func(key string) (int64, error) {
		v := q.Get(key)
		if v == "" {
			return 0, nil
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("%s must be a non-negative integer, not %q", key, v)
		}
		return n, nil
	}
	if offset, err = num("offset"); err != nil {
		return "", "", 0, 0, err
	}
	if length, err = num("length"); err != nil {
		return "", "", 0, 0, err
	}
	return id, stream, offset, length, nil
}
