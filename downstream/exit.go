package downstream

import (
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"syscall"
)

// Bounds of the stderr a stdio server leaves behind for its exit error.
const (
	// tailLines is how many of the last stderr lines are kept.
	tailLines = 20
	// tailBytes bounds the kept lines together.
	tailBytes = 4 << 10
	// tailLineBytes bounds one kept line, so one long line does not push
	// out every other.
	tailLineBytes = 1 << 10
)

// ExitError says a stdio server's process ended: with which status or
// signal, and the last lines it wrote to stderr, where a server that
// cannot start says why (npm's EROFS, a missing module, a bad flag).
// Errors of a lost connection wrap it (beside ErrClosed), so an owner can
// show it where the operator looks.
type ExitError struct {
	// Status is the exit status; -1 when a signal ended the process.
	Status int
	// Signal is the signal that killed it ("killed", "terminated"); ""
	// when it exited.
	Signal string
	// Stderr is the last lines of its stderr (at most 20 lines and
	// 4 KiB), secrets masked (Config.Redact); nil when it wrote none.
	Stderr []string
}

// Error implements error, on one line: the status, then the stderr lines
// separated by " | ".
func (e *ExitError) Error() string {
	var b strings.Builder
	if e.Signal != "" {
		fmt.Fprintf(&b, "the server was killed by signal %s", e.Signal)
	} else {
		fmt.Fprintf(&b, "the server exited with status %d", e.Status)
	}
	if len(e.Stderr) > 0 {
		b.WriteString("; its stderr ended with: ")
		b.WriteString(strings.Join(e.Stderr, " | "))
	}
	return b.String()
}

// exitError turns cmd.Wait's answer into an *ExitError; other errors
// (the wait itself failed) are kept, wrapped.
func exitError(waitErr error, stderr []string) error {
	e := &ExitError{Stderr: stderr}
	var ee *exec.ExitError
	switch {
	case waitErr == nil:
	case errors.As(waitErr, &ee):
		e.Status = ee.ExitCode()
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			e.Status, e.Signal = -1, ws.Signal().String()
		}
	default:
		return fmt.Errorf("the server process ended: %w", waitErr)
	}
	return e
}

// stderrTail keeps the last lines of a server's stderr, bounded by
// tailLines and tailBytes, each masked as it is kept.
type stderrTail struct {
	mask func(string) string // nil: nothing to mask

	mu    sync.Mutex
	lines []string
	size  int
}

// add keeps line (already without its newline), dropping the oldest lines
// past the bounds.
func (t *stderrTail) add(line string) {
	if t.mask != nil {
		line = t.mask(line)
	}
	if len(line) > tailLineBytes {
		line = strings.ToValidUTF8(line[:tailLineBytes], "") + "…"
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.lines = append(t.lines, line)
	t.size += len(line)
	for len(t.lines) > tailLines || t.size > tailBytes {
		t.size -= len(t.lines[0])
		t.lines = t.lines[1:]
	}
}

// last returns a copy of the kept lines.
func (t *stderrTail) last() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.lines) == 0 {
		return nil
	}
	return append([]string(nil), t.lines...)
}
