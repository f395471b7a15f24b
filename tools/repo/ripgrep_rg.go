package repo

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"go.opentelemetry.io/otel/trace"

	"troupe/observe/tracing"
	"troupe/protocol"
	"troupe/sandbox"
	"troupe/tools"
	"troupe/workspace"
)

// rgSearch runs the rg binary, confined: through the sandbox with a
// read-only workspace policy, so Landlock lets rg read the workspace and
// its own program files and nothing else. Checking paths before rg opens
// them cannot work (a directory swapped for a symlink to outside between
// rg's look and its open wins that race); the kernel's check at every open
// does. rg runs in the workspace directory with an empty environment and
// no config file, so neither the host's RIPGREP_CONFIG_PATH nor its global
// gitignore changes what a call finds, and the built-in search can give
// the same results.
type rgSearch struct {
	ws  *workspace.Root
	bin string
	sb  *sandbox.Sandbox
	log *slog.Logger
	// fallback runs instead once rg cannot be confined here (the policy
	// is refused, or rg's runtime files cannot be worked out); the
	// built-in search reads through the workspace's os.Root, which no
	// swapped symlink leads out of.
	fallback  *builtinSearch
	disabled  atomic.Bool
	disableMu sync.Once
}

// policy is every rg run's sandbox policy.
func (s *rgSearch) policy() sandbox.Policy {
	return sandbox.Policy{Profile: sandbox.ProfileDefault, Workspace: s.ws.Dir(), ReadOnlyWorkspace: true}
}

// disable makes this and every later call use the built-in search, and
// says why in the server log, once.
func (s *rgSearch) disable(reason error) {
	s.disabled.Store(true)
	s.disableMu.Do(func() {
		s.log.Warn("repo.ripgrep: rg cannot run confined to the workspace here; using the built-in search instead",
			"rg", s.bin, "reason", reason)
	})
}

func (s *rgSearch) describe() string {
	return "This server searches with ripgrep, whose \\w, \\d and \\b are Unicode-aware."
}

// rgStderrMax bounds how much of rg's stderr is kept; it only ever holds
// a few diagnostic lines.
const rgStderrMax = 16 << 10

// rgMessage is the part of one line of rg --json output the tool reads.
// Paths and lines come as "text" when they are valid UTF-8 and as base64
// "bytes" otherwise.
type rgMessage struct {
	Type string `json:"type"`
	Data struct {
		Path       rgData `json:"path"`
		Lines      rgData `json:"lines"`
		LineNumber int64  `json:"line_number"`
	} `json:"data"`
}

type rgData struct {
	Text  *string `json:"text"`
	Bytes []byte  `json:"bytes"` // encoding/json decodes base64 into []byte
}

func (d rgData) value() []byte {
	if d.Text != nil {
		return []byte(*d.Text)
	}
	return d.Bytes
}

// run starts rg and reads its matches as they stream in. rg leads its own
// process group, and every way out of run (enough matches, cancellation,
// bad output) kills that group, waits for it and releases the sandbox's
// run, so no rg outlives a call and no goroutine or descriptor is left
// behind.
func (s *rgSearch) run(ctx context.Context, req *tools.Request, q *query, c *collector) error {
	if s.disabled.Load() {
		return s.fallback.run(ctx, req, q, c)
	}
	args := []string{
		"--json", "--no-config", "--sort", "path",
		// Honour .gitignore files even outside a git repository, and
		// nothing from the host outside the workspace.
		"--no-require-git", "--no-ignore-global", "--no-ignore-parent", "--no-ignore-exclude",
	}
	for _, g := range q.globs {
		args = append(args, "--glob", g)
	}
	args = append(args, "--regexp", q.pattern, "--")
	if len(q.rgPaths) == 0 {
		args = append(args, ".")
	}
	args = append(args, q.rgPaths...)

	cmd := exec.CommandContext(ctx, s.bin, args...)
	cmd.Dir = s.ws.Dir()
	cmd.Env = []string{} // non-nil: an empty environment, not the server's
	cmd.Cancel = func() error { return killGroup(cmd) }
	// Should anything in the group keep the output pipes open after the
	// kill, Wait still returns.
	cmd.WaitDelay = 2 * time.Second
	stderr := &cappedBuffer{max: rgStderrMax}
	cmd.Stderr = stderr
	// Our own pipe, not StdoutPipe: Start may fail before exec.Cmd ever
	// sees it, and both ends must still be closed.
	stdout, stdoutW, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("rg: %w", err)
	}
	defer stdout.Close()
	cmd.Stdout = stdoutW
	policy := s.policy()
	_, span := tracing.Child(ctx, "sandbox.start", trace.SpanKindInternal,
		tracing.SandboxProfileKey.String(string(policy.Profile)))
	proc, err := s.sb.Start(policy, cmd)
	endStartSpan(span, err)
	stdoutW.Close() // rg holds its own copy now
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return ctxErr
		}
		var se *sandbox.StartError
		if errors.As(err, &se) && (se.Stage == "policy" || se.Stage == "runtime") {
			reason := err
			if se.Stderr != "" {
				reason = fmt.Errorf("%w (%s)", err, se.Stderr)
			}
			s.disable(reason)
			return s.fallback.run(ctx, req, q, c)
		}
		return fmt.Errorf("rg: start: %w", err)
	}

	sawSummary, stopped, decodeErr := s.read(ctx, req, stdout, c)
	if stopped || decodeErr != nil {
		_ = killGroup(cmd)
	}
	waitErr := cmd.Wait()
	// Release kills what is left of the run and removes what the sandbox
	// made for it; it logs its own trouble.
	_ = proc.Release()

	if err := ctx.Err(); err != nil {
		return err
	}
	if decodeErr != nil {
		return fmt.Errorf("rg: reading output: %w", decodeErr)
	}
	if stopped {
		return nil // killed on purpose; its exit status means nothing
	}
	var exit *exec.ExitError
	switch {
	case waitErr == nil:
		return nil
	case errors.As(waitErr, &exit) && exit.ExitCode() == 1:
		return nil // no match
	case errors.As(waitErr, &exit) && exit.ExitCode() == 2 && sawSummary:
		// The search ran to the end but some files could not be read
		// (rg names them on stderr): a symlink swapped in while rg
		// walked, which the sandbox refused, or plain permissions. The
		// built-in search skips such files silently; so does this one,
		// but it tells the log.
		req.Log(protocol.LevelDebug, map[string]any{
			"tool": NameRipgrep, "message": "some files could not be searched",
			"detail": s.sanitize(stderr.String()),
		})
		return nil
	}
	msg := s.sanitize(stderr.String())
	if isRegexError(msg) {
		return tools.Errorf(tools.KindInvalidArgument, "query is not a valid regular expression for ripgrep: %s", msg)
	}
	return fmt.Errorf("rg: %w: %s", waitErr, msg)
}

// read decodes rg's output until it ends, the collector is full or ctx is
// done. stopped means rg should be killed because enough is known.
func (s *rgSearch) read(ctx context.Context, req *tools.Request, stdout io.Reader, c *collector) (sawSummary, stopped bool, err error) {
	dec := json.NewDecoder(bufio.NewReaderSize(stdout, 64<<10))
	var lastReport time.Time
	for {
		var m rgMessage
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) || ctx.Err() != nil {
				return sawSummary, false, nil
			}
			return sawSummary, false, err
		}
		switch m.Type {
		case "summary":
			sawSummary = true
		case "match":
			p := strings.TrimPrefix(string(m.Data.Path.value()), "./")
			if !c.add(p, m.Data.LineNumber, m.Data.Lines.value()) {
				return sawSummary, true, nil
			}
			if now := time.Now(); now.Sub(lastReport) >= progressInterval {
				lastReport = now
				req.Progress(float64(len(c.matches)), 0, fmt.Sprintf("%d matching lines so far", len(c.matches)))
			}
		}
	}
}

// sanitize keeps the first lines of rg's diagnostics, with the workspace's
// host path (should rg ever print it) replaced by ".".
func (s *rgSearch) sanitize(msg string) string {
	msg = strings.ReplaceAll(msg, s.ws.Dir(), ".")
	msg = strings.TrimSpace(msg)
	if len(msg) > 2000 {
		msg = msg[:tools.UTF8Cut([]byte(msg), 2000)] + "..."
	}
	return msg
}

// isRegexError recognizes rg's complaints about the pattern, as opposed to
// failures of rg itself.
func isRegexError(msg string) bool {
	return strings.Contains(msg, "regex parse error") ||
		strings.Contains(msg, "is not allowed in a regex") ||
		strings.Contains(msg, "exceeds size limit") ||
		strings.Contains(msg, "error parsing regex")
}

// killGroup kills rg and anything it started: the sandbox starts rg as
// the leader of a new process group, so its pid is the group id.
func killGroup(cmd *exec.Cmd) error {
	if cmd.Process == nil {
		return nil
	}
	err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	if errors.Is(err, syscall.ESRCH) {
		return nil
	}
	return err
}

// cappedBuffer is an io.Writer that keeps the first max bytes and drops
// the rest, so a chatty rg cannot grow the server's memory.
type cappedBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (b *cappedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if room := b.max - len(b.buf); room > 0 {
		b.buf = append(b.buf, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

func (b *cappedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}

// endStartSpan ends the span of rg's sandbox start: a failed start is
// marked with its stage ("policy", "runtime": rg falls back to the
// built-in search), never its message.
func endStartSpan(span trace.Span, err error) {
	var se *sandbox.StartError
	switch {
	case err == nil:
	case errors.As(err, &se):
		tracing.Fail(span, err, "the sandbox could not start rg", se.Stage)
	default:
		tracing.Fail(span, err, "the sandbox could not start rg", "")
	}
	span.End()
}
