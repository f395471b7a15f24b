package main

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"troupe/internal/ptytest"
)

// openPTY opens a pseudo-terminal pair.
func openPTY(t *testing.T) (master, slave *os.File) { return ptytest.Open(t) }

// lockedBuffer collects a child's output while the test reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestServeOnATerminalSaysWhatItWaitsFor: typed at a terminal, "troupe
// serve" says on stderr that it waits for MCP messages on stdin; with
// stdin a pipe (an MCP client) it does not. Before, it sat silent.
func TestServeOnATerminalSaysWhatItWaitsFor(t *testing.T) {
	bin := buildTroupe(t)
	dir, state := t.TempDir(), t.TempDir()
	_, slave := openPTY(t)
	cmd := exec.Command(bin, "serve", "--workspace", dir, "--log-level", "error")
	cmd.Env = append(os.Environ(), "XDG_STATE_HOME="+state)
	var stderr lockedBuffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, io.Discard, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// A bound against hanging, not a timing requirement.
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(stderr.String(), "waiting for MCP messages") && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	_ = cmd.Wait()
	if !strings.Contains(stderr.String(), "waiting for MCP messages (JSON-RPC) on stdin") || !strings.Contains(stderr.String(), "Ctrl-D") {
		t.Fatalf("no hint on a terminal; stderr:\n%s", stderr.String())
	}

	// From a pipe (an MCP client), no hint.
	cmd = exec.Command(bin, "serve", "--workspace", dir, "--log-level", "error")
	cmd.Env = append(os.Environ(), "XDG_STATE_HOME="+state)
	cmd.Stdin = strings.NewReader("")
	out, err := cmd.CombinedOutput()
	if err != nil || strings.Contains(string(out), "waiting for MCP") {
		t.Fatalf("serve from a pipe: %v, output %q", err, out)
	}
}

// TestBenchSoakShowsProgressOnATerminal: with stderr a terminal, a soak
// keeps a live line: time into the duration, calls done and planned.
func TestBenchSoakShowsProgressOnATerminal(t *testing.T) {
	bin := buildTroupe(t)
	dir := t.TempDir()
	master, slave := openPTY(t)
	cmd := exec.Command(bin, "bench", "soak", "--rate", "20", "--duration", "2s", "--",
		bin, "serve", "--workspace", dir, "-c", "tools.benchmark_echo=true", "-c", "audit.enabled=false")
	var stdout bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, slave
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	slave.Close() // the child holds it; EOF (EIO) on master when it exits
	var tty bytes.Buffer
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		_, _ = io.Copy(&tty, master)
	}()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("bench soak: %v\n%s", err, tty.String())
	}
	<-copied
	got := tty.String()
	if !strings.Contains(got, "\r\033[Ksoak: ") || !strings.Contains(got, " of 2s  calls ") || !strings.Contains(got, "/40  ") {
		t.Fatalf("no live soak progress on the terminal: %q", got)
	}
	if !strings.Contains(stdout.String(), "calls") {
		t.Fatalf("no report on stdout: %q", stdout.String())
	}
}
