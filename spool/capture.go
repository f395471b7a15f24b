package spool

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"unicode/utf8"
)

// Capture is one stream (stdout or stderr) of one run: a bounded head and
// tail in memory, every byte counted, and the whole stream in a spool file
// when the capture has one.
type Capture struct {
	name string // "stdout" or "stderr"
	uri  string // "" without a file

	mu       sync.Mutex
	headMax  int
	tailMax  int
	head     []byte
	ring     []byte // the tail: a ring of tailMax bytes, made when needed
	pos      int    // where the next tail byte goes in ring
	wrapped  bool   // ring has been filled at least once
	total    int64
	file     *os.File // opened on the first byte kept: a call that writes nothing costs no file
	path     string   // the file's name in its store ("" when not spooling)
	full     string   // the file's path, once made
	store    *Store   // makes the file and holds the budgets; nil when not spooling
	stored   int64    // bytes in the file, all of them taken from the store's budgets
	cut      Cap      // the cap that stopped the file short; then nothing more is kept
	fileErr  error    // the first write error; the capture goes on counting
	closed   bool
	dropped  bool // the file is gone and its bytes were given back
	onClosed func()
}

func newCapture(name string, headMax, tailMax int) *Capture {
	return &Capture{name: name, headMax: headMax, tailMax: tailMax}
}

// Name is "stdout" or "stderr".
func (c *Capture) Name() string { return c.name }

// Write keeps p (head, tail, file). It never fails and never blocks on
// anything but the local disk, so a program's pipe is read at full speed;
// a full disk or a cap (stream, session, server) stops the spooling, not
// the counting.
func (c *Capture) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := len(p)
	if c.closed {
		return n, nil
	}
	c.total += int64(n)
	c.spool(p)
	c.keep(p)
	return n, nil
}

// spool appends to the file what the caps allow of p: the stream's own
// room, then bytes reserved from the session's and the server's budgets
// before they are written. The first byte a cap refuses ends the file, so
// it always holds a prefix of the stream (bytes freed later elsewhere do
// not resume it).
func (c *Capture) spool(p []byte) {
	if c.store == nil || c.cut != CapNone || c.fileErr != nil || len(p) == 0 {
		return
	}
	k := int64(len(p))
	if room := c.store.limits.MaxFileBytes - c.stored; k > room {
		k, c.cut = max(room, 0), CapStream
	}
	if k > 0 {
		if got, cut := c.store.reserve(k); got < k {
			k, c.cut = got, cut // the narrower cap is the one to raise
		}
	}
	if k == 0 {
		return
	}
	if c.file == nil {
		f, err := c.store.openFile(c.path)
		if err != nil {
			c.fileErr = err
			c.store.release(k)
			return
		}
		c.file, c.full = f, f.Name()
	}
	w, err := c.file.Write(p[:k])
	c.stored += int64(w)
	if int64(w) < k {
		c.store.release(k - int64(w))
	}
	if err != nil {
		c.fileErr = err
	}
}

// keep updates the in-memory head and tail.
func (c *Capture) keep(p []byte) {
	if room := c.headMax - len(c.head); room > 0 {
		k := min(room, len(p))
		c.head = append(c.head, p[:k]...)
		p = p[k:]
	}
	if len(p) == 0 || c.tailMax == 0 {
		return
	}
	if c.ring == nil {
		c.ring = make([]byte, c.tailMax)
	}
	if len(p) >= c.tailMax {
		copy(c.ring, p[len(p)-c.tailMax:])
		c.pos, c.wrapped = 0, true
		return
	}
	k := copy(c.ring[c.pos:], p)
	if k < len(p) {
		copy(c.ring, p[k:])
		c.wrapped = true
	}
	c.pos = (c.pos + len(p)) % c.tailMax
	if c.pos == 0 {
		c.wrapped = true
	}
}

// close ends the stream: no more bytes are kept.
func (c *Capture) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closeLocked()
}

func (c *Capture) closeLocked() {
	if c.closed {
		return
	}
	c.closed = true
	if c.file != nil {
		c.file.Close()
		c.file = nil
	}
}

// drop closes the stream for good and returns its file's path and, the
// first time only, the bytes the caller gives back to the budgets once it
// has removed the file.
func (c *Capture) drop() (path string, charged int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closeLocked()
	if !c.dropped {
		c.dropped, charged = true, c.stored
	}
	return c.full, charged
}

// Total is the number of bytes written so far.
func (c *Capture) Total() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.total
}

// Truncated reports whether the in-memory head and tail miss bytes in
// between: the result shows only part of the stream.
func (c *Capture) Truncated() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.truncated()
}

func (c *Capture) truncated() bool { return c.total > int64(c.headMax+c.tailMax) }

// URI is the resource that serves the stream (all of it, or the part
// Describe says); "" when the capture keeps no file or nothing in it.
func (c *Capture) URI() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stored == 0 {
		return ""
	}
	return c.uri
}

// Spooled is the number of bytes the spool file holds: all of them unless
// a cap (Cut) or a disk error cut it short.
func (c *Capture) Spooled() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stored
}

// Cut is the cap that stopped the stream's spool file short; CapNone
// while it holds every byte.
func (c *Capture) Cut() Cap {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cut
}

// Describe says, in a sentence for the client, what the spool file holds:
// the whole stream, or how much of it and which cap (with its setting)
// kept the rest out.
func (c *Capture) Describe() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.store == nil:
		return fmt.Sprintf("The %s of the call (%d bytes), kept in memory only", c.name, c.total)
	case c.stored == c.total:
		return fmt.Sprintf("The whole %s of the call (%d bytes)", c.name, c.total)
	case c.stored == 0:
		return fmt.Sprintf("The %s of the call (%d bytes), of which none was kept: %s", c.name, c.total, c.store.capNote(c.cut))
	}
	return fmt.Sprintf("The first %d of the %d bytes of the call's %s; the rest was not kept: %s",
		c.stored, c.total, c.name, c.store.capNote(c.cut))
}

// ReadChunk is the length of the ranges a result's note suggests reading
// the rest in: small enough that a client which cuts long tool results
// (Codex keeps about 12,000 bytes of one) shows a whole range.
const ReadChunk = 8192

// note is the line a partial view of the stream starts with, saying what
// it shows and where the rest is: first, so that a client which cuts a
// long result in the middle or at its end (Codex keeps the head and the
// tail of about 12,000 bytes and drops later content blocks, the
// resource_link too) still shows it. shown says what the view holds ("the
// first 2048 and the last 2048 bytes"); from is the offset of the first
// byte it leaves out. "" without a spool: there is nothing to point at.
func (c *Capture) note(shown string, from int64) string {
	if c.store == nil {
		return ""
	}
	head := fmt.Sprintf("[%s: %d bytes; this shows %s", c.name, c.total, shown)
	switch {
	case c.stored == c.total:
		return fmt.Sprintf("%s; the whole %s is at %s: read the rest with resources/read in ranges, e.g. %s]\n",
			head, c.name, c.uri, c.rangeURI(from))
	case c.stored == 0:
		return fmt.Sprintf("%s; none of it was kept on disk: %s]\n", head, c.store.capNote(c.cut))
	case from >= c.stored:
		return fmt.Sprintf("%s; the first %d bytes are at %s, the rest was not kept: %s]\n",
			head, c.stored, c.uri, c.store.capNote(c.cut))
	}
	return fmt.Sprintf("%s; the first %d bytes are at %s (read them with resources/read in ranges, e.g. %s), the rest was not kept: %s]\n",
		head, c.stored, c.uri, c.rangeURI(from), c.store.capNote(c.cut))
}

// rangeURI is the resource URI of ReadChunk bytes from offset.
func (c *Capture) rangeURI(offset int64) string {
	return fmt.Sprintf("%s?offset=%d&length=%d", c.uri, offset, ReadChunk)
}

func (c *Capture) tail() []byte {
	if !c.wrapped {
		return c.ring[:c.pos]
	}
	out := make([]byte, 0, c.tailMax)
	out = append(out, c.ring[c.pos:]...)
	return append(out, c.ring[:c.pos]...)
}

// Text is what the capture keeps in memory, as valid UTF-8: the whole
// stream when it fits, else a note (what is shown, where the whole stream
// is: see note), its head, a line saying how many bytes were left out,
// and its tail.
func (c *Capture) Text() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.truncated() {
		return validText(string(c.head) + string(c.tail()))
	}
	head, tail := c.head, c.tail()
	head = head[:cutIncomplete(head)]
	tail = tail[skipContinuation(tail):]
	omitted := c.total - int64(len(head)+len(tail))
	return c.note(fmt.Sprintf("the first %d and the last %d bytes", len(head), len(tail)), int64(len(head))) +
		validText(string(head)) +
		fmt.Sprintf("\n[... %d bytes of %s omitted ...]\n", omitted, c.name) +
		validText(string(tail))
}

// Last is the stream's last n bytes (fewer if they are not all kept), as
// valid UTF-8, with "..." in front when anything came before them, and
// then, with a spool, the note saying where the whole stream is.
func (c *Capture) Last(n int) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var b []byte
	if c.truncated() {
		b = c.tail()
	} else {
		b = append(append([]byte(nil), c.head...), c.tail()...)
	}
	if len(b) <= n && !c.truncated() {
		return validText(string(b))
	}
	b = b[max(0, len(b)-n):]
	b = b[skipContinuation(b):]
	return c.note(fmt.Sprintf("the last %d bytes", len(b)), 0) + "..." + validText(string(b))
}

// Bytes returns the whole stream when it is at most limit bytes and fully
// available (in memory, or complete in the spool file); ok is false
// otherwise. Tools whose output is a document (JSON for an output schema)
// need all of it, not a head and tail.
func (c *Capture) Bytes(limit int64) (b []byte, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.total > limit {
		return nil, false
	}
	if !c.truncated() {
		return append(append([]byte(nil), c.head...), c.tail()...), true
	}
	if c.full == "" || c.stored != c.total {
		return nil, false
	}
	f, err := os.Open(c.full)
	if err != nil {
		return nil, false
	}
	defer f.Close()
	b = make([]byte, c.total)
	if _, err := io.ReadFull(f, b); err != nil {
		return nil, false
	}
	return b, true
}

// cutIncomplete is len(b) without a UTF-8 sequence cut short at its end.
func cutIncomplete(b []byte) int {
	for s := len(b) - 1; s >= 0 && s >= len(b)-utf8.UTFMax; s-- {
		if utf8.RuneStart(b[s]) {
			if !utf8.FullRune(b[s:]) {
				return s
			}
			break
		}
	}
	return len(b)
}

// skipContinuation is how many leading bytes of b belong to a UTF-8
// sequence that started before b (at most three).
func skipContinuation(b []byte) int {
	i := 0
	for i < len(b) && i < utf8.UTFMax-1 && !utf8.RuneStart(b[i]) {
		i++
	}
	return i
}

// validText replaces each run of bytes that are not UTF-8 with U+FFFD, so
// text always encodes as a JSON string.
func validText(s string) string { return strings.ToValidUTF8(s, "\uFFFD") }
