package command

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Output limits.
const (
	// MaxOutputBytes is how much of each of stdout and stderr a call keeps:
	// the first half and the last half of it. Everything is counted; what
	// lies between the halves is dropped and the result says how much.
	MaxOutputBytes = 1 << 20
	// stderrExcerptBytes is how much of stderr's end an error shows.
	stderrExcerptBytes = 2 << 10
	// stdoutExcerptBytes is how much of stdout's end an error shows.
	stdoutExcerptBytes = 16 << 10
)

// capture keeps the head and the tail of a stream in bounded memory and
// counts every byte. One goroutine writes; readers look only after it has
// finished.
type capture struct {
	headMax, tailMax int
	head             []byte
	ring             []byte // the tail: a ring buffer of tailMax bytes, allocated when needed
	pos              int    // where the next tail byte goes in ring
	wrapped          bool   // ring has been filled at least once
	total            int64
}

func newCapture(max int) *capture {
	return &capture{headMax: max / 2, tailMax: max - max/2}
}

// Write never fails, so the process is never blocked on a full buffer.
func (c *capture) Write(p []byte) (int, error) {
	n := len(p)
	c.total += int64(n)
	if room := c.headMax - len(c.head); room > 0 {
		k := min(room, len(p))
		c.head = append(c.head, p[:k]...)
		p = p[k:]
	}
	if len(p) == 0 || c.tailMax == 0 {
		return n, nil
	}
	if c.ring == nil {
		c.ring = make([]byte, c.tailMax)
	}
	if len(p) >= c.tailMax {
		copy(c.ring, p[len(p)-c.tailMax:])
		c.pos, c.wrapped = 0, true
		return n, nil
	}
	k := copy(c.ring[c.pos:], p)
	if k < len(p) {
		copy(c.ring, p[k:])
		c.wrapped = true
	}
	c.pos = (c.pos + len(p)) % c.tailMax
	if c.pos == 0 && len(p) > 0 {
		c.wrapped = true
	}
	return n, nil
}

// tail is the kept end of the stream, in order.
func (c *capture) tail() []byte {
	if !c.wrapped {
		return c.ring[:c.pos]
	}
	out := make([]byte, 0, c.tailMax)
	out = append(out, c.ring[c.pos:]...)
	return append(out, c.ring[:c.pos]...)
}

// truncated reports whether bytes were dropped between head and tail.
func (c *capture) truncated() bool { return c.total > int64(c.headMax+c.tailMax) }

// text is what was kept, as valid UTF-8: the whole stream when it fit,
// else its head, a line saying how many bytes were left out, and its tail.
func (c *capture) text() string {
	if !c.truncated() {
		return validText(string(c.head) + string(c.tail()))
	}
	head, tail := c.head, c.tail()
	head = head[:cutIncomplete(head)]
	tail = tail[skipContinuation(tail):]
	omitted := c.total - int64(len(head)+len(tail))
	return validText(string(head)) +
		fmt.Sprintf("\n[... %d bytes of output omitted ...]\n", omitted) +
		validText(string(tail))
}

// last is the stream's last n bytes (fewer if they are not all kept), as
// valid UTF-8, with "..." in front when anything came before them.
func (c *capture) last(n int) string {
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
// results always encode as JSON strings.
func validText(s string) string { return strings.ToValidUTF8(s, "\uFFFD") }
