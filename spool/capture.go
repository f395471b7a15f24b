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
	file     *os.File // opened on the first byte: a call that writes nothing costs no file
	path     string   // the file's name in its store ("" when not spooling)
	full     string   // the file's path, once made
	openFile func(name string) (*os.File, error)
	stored   int64 // bytes in the file
	fileMax  int64
	fileErr  error // the first write error; the capture goes on counting
	closed   bool
	onClosed func()
}

func newCapture(name string, headMax, tailMax int) *Capture {
	return &Capture{name: name, headMax: headMax, tailMax: tailMax}
}

// Name is "stdout" or "stderr".
func (c *Capture) Name() string { return c.name }

// Write keeps p (head, tail, file). It never fails and never blocks on
// anything but the local disk, so a program's pipe is read at full speed;
// a full disk or the file cap stops the spooling, not the counting.
func (c *Capture) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := len(p)
	if c.closed {
		return n, nil
	}
	c.total += int64(n)
	if c.file == nil && c.path != "" && c.fileErr == nil && n > 0 {
		if c.file, c.fileErr = c.openFile(c.path); c.fileErr == nil {
			c.full = c.file.Name()
		}
	}
	if c.file != nil && c.fileErr == nil {
		k := int64(len(p))
		if room := c.fileMax - c.stored; k > room {
			k = max(room, 0)
		}
		if k > 0 {
			w, err := c.file.Write(p[:k])
			c.stored += int64(w)
			if err != nil {
				c.fileErr = err
			}
		}
	}
	c.keep(p)
	return n, nil
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
	if c.closed {
		return
	}
	c.closed = true
	if c.file != nil {
		c.file.Close()
		c.file = nil
	}
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

// URI is the resource that serves the whole stream; "" when the capture
// keeps no file (or wrote nothing).
func (c *Capture) URI() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.total == 0 {
		return ""
	}
	return c.uri
}

// Spooled is the number of bytes the spool file holds: all of them unless
// the file cap or a disk error cut it short.
func (c *Capture) Spooled() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stored
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
// stream when it fits, else its head, a line saying how many bytes were
// left out (and where to read them), and its tail.
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
	where := ""
	if c.uri != "" {
		where = "; the whole " + c.name + " is at " + c.uri
	}
	return validText(string(head)) +
		fmt.Sprintf("\n[... %d bytes of %s omitted%s ...]\n", omitted, c.name, where) +
		validText(string(tail))
}

// Last is the stream's last n bytes (fewer if they are not all kept), as
// valid UTF-8, with "..." in front when anything came before them.
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
	return "..." + validText(string(b))
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
