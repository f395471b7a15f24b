package redact

import (
	"errors"
	"io"
)

// chunkSize bounds how much of one Write is redacted at a time, so a
// writer's buffers stay small however large the writes are.
const chunkSize = 32 << 10

// errClosed is returned by writes after Close.
var errClosed = errors.New("redact: write after close")

// Writer returns a writer that writes to w what is written to it, with r's
// values masked as Replace would mask the whole stream, also when a value
// is split across Write calls. To see the end of a split value it holds
// back at most one byte less than r's longest value, and only while those
// bytes could still begin a value: output that cannot is passed on at once, so a line-wise
// stream is not delayed. Close writes what is held back; it does not close
// w. Memory is bounded by the longest value plus 32 KiB whatever the
// writes' sizes.
//
// The writer is not safe for concurrent use. After w fails, every later
// Write and Close returns w's error. With a nil or empty r the writes go
// straight to w.
func (r *Redactor) Writer(w io.Writer) io.WriteCloser {
	if r.Len() == 0 {
		return passWriter{w}
	}
	return &writer{r: r, w: w}
}

// passWriter is the Writer of a Redactor with nothing to mask.
type passWriter struct{ io.Writer }

func (passWriter) Close() error { return nil }

// writer is the streaming redactor.
type writer struct {
	r       *Redactor
	w       io.Writer
	held    []byte // undecided tail, then the chunk being redacted
	out     []byte // redacted output, reused between writes
	covered int    // leading bytes of held already masked
	err     error  // sticky: w's first error, or errClosed
}

func (x *writer) Write(p []byte) (int, error) {
	if x.held == nil {
		x.held = make([]byte, 0, x.r.maxLen+chunkSize) // never grows
	}
	n := 0
	for x.err == nil && len(p) > 0 {
		c := min(len(p), chunkSize)
		x.held = append(x.held, p[:c]...)
		if x.flush(false) != nil {
			break
		}
		n += c
		p = p[c:]
	}
	return n, x.err
}

// Close writes the held-back bytes, redacted. It does not close the
// underlying writer.
func (x *writer) Close() error {
	if x.err == errClosed {
		return nil
	}
	if x.err != nil {
		return x.err
	}
	if err := x.flush(true); err != nil {
		return err
	}
	x.err = errClosed
	return nil
}

// flush redacts held and writes what is decided; with final, all of it.
func (x *writer) flush(final bool) error {
	out, used, covered := redactInto(x.r, x.out[:0], x.held, x.covered, final)
	x.out, x.covered = out, covered
	x.held = x.held[:copy(x.held, x.held[used:])]
	if len(out) > 0 {
		if _, err := x.w.Write(out); err != nil {
			x.err = err
			return err
		}
	}
	return nil
}
