package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestStdioClientThatStopsReadingBoundsMemory is the attack of issue 13: a
// client writes 20,000 requests without reading stdout. troupe must stop
// reading its input once it owes the client too much (back-pressure), so its
// memory stays bounded, and once the client reads, every request is still
// answered exactly once.
//
// Before the back-pressure, troupe read everything, answered into an
// unbounded mailbox and stream queue, and peaked at hundreds of MB.
func TestStdioClientThatStopsReadingBoundsMemory(t *testing.T) {
	const requests = 20000
	// A -race binary carries the race detector's shadow memory (several
	// times the heap), so the bound is looser there; both are far below
	// what the unbounded server reached.
	limitKB := int64(100 << 10)
	if raceEnabled() {
		limitKB = 250 << 10
	}
	fx := newFixture(t)
	cmd := exec.Command(troupeBinary(t), "serve", "--workspace", fx.dir, "--log-level", "warn",
		"-c", "tools.benchmark_echo=true")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	// Our end of stdout is a plain pipe nobody reads until we say so: the
	// kernel's pipe buffer fills and troupe's writes block.
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout = outW
	stderr := &lockedWriter{b: &strings.Builder{}}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	outW.Close()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		stdin.Close()
		outR.Close() // unblocks troupe if the test stopped reading early
		select {
		case <-exited:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
			t.Errorf("troupe did not exit after stdin closed")
		}
		if t.Failed() {
			t.Logf("server stderr:\n%s", stderr.String())
		}
	})
	out := bufio.NewReaderSize(outR, 1<<20)
	// Only what the test checks is decoded: the client's own work should
	// not dominate the test's time.
	type reply struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Result json.RawMessage `json:"result"`
		Error  *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	readLine := func() reply {
		t.Helper()
		line, err := out.ReadBytes('\n')
		if err != nil {
			t.Fatalf("reading troupe's stdout: %v", err)
		}
		var m reply
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatalf("stdout line is not a JSON-RPC message: %q", line)
		}
		return m
	}
	if _, err := fmt.Fprintln(stdin, `{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"e2e","version":"1"}}}`); err != nil {
		t.Fatal(err)
	}
	if m := readLine(); string(m.ID) != `"init"` || m.Error != nil {
		t.Fatalf("initialize: %+v", m)
	}

	// The flood, from a goroutine: with back-pressure its writes block
	// once troupe stops reading.
	wrote := make(chan error, 1)
	go func() {
		w := bufio.NewWriterSize(stdin, 64<<10)
		fmt.Fprintln(w, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
		for i := range requests {
			var err error
			switch {
			case i%4 == 0: // the largest answer there is (~14 KB)
				_, err = fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%d,"method":"tools/list"}`+"\n", i)
			case i%4 == 3:
				_, err = fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%d,"method":"ping"}`+"\n", i)
			default:
				_, err = fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"text":"request number %d, padded to look like a small real argument"}}}`+"\n", i, i)
			}
			if err != nil {
				wrote <- err
				return
			}
		}
		wrote <- w.Flush()
	}()
	// Give troupe time to read (and, unbounded, to buffer) all it will.
	var writeErr error
	writing := true
	select {
	case writeErr = <-wrote:
		writing = false
		time.Sleep(time.Second)
	case <-time.After(3 * time.Second):
	}
	stalled := peakRSSKB(t, cmd.Process.Pid)
	if !writing {
		// 20,000 requests are megabytes; the pipes and buffers between us
		// hold a few hundred kilobytes.
		t.Errorf("troupe read all %d requests although nothing read its stdout: no back-pressure", requests)
	}

	// Now read: every request gets exactly one response.
	if err := outR.SetReadDeadline(time.Now().Add(90 * time.Second)); err != nil {
		t.Fatal(err)
	}
	seen := make(map[int]int, requests)
	for len(seen) < requests {
		m := readLine()
		if m.ID == nil && m.Method != "" {
			continue // a notification
		}
		id, err := strconv.Atoi(string(m.ID))
		if err != nil || id < 0 || id >= requests {
			t.Fatalf("response to an id never sent: %+v", m)
		}
		seen[id]++
		if seen[id] > 1 {
			t.Fatalf("id %d answered twice", id)
		}
		switch {
		case m.Error != nil && m.Error.Code != -32000:
			// -32000: more calls than max_in_flight at once, which a
			// flood may well cause; anything else is a bug.
			t.Fatalf("id %d: unexpected error %+v", id, *m.Error)
		case m.Error == nil && len(m.Result) == 0:
			t.Fatalf("id %d: a response with neither result nor error", id)
		}
	}
	if writing {
		writeErr = <-wrote
	}
	if writeErr != nil {
		t.Fatalf("writing requests: %v", writeErr)
	}
	peak := peakRSSKB(t, cmd.Process.Pid)
	t.Logf("troupe's peak RSS: %d KB while the client did not read, %d KB in all", stalled, peak)
	if peak > limitKB {
		t.Fatalf("troupe's peak RSS was %d KB (%d KB while the client did not read), want at most %d KB: "+
			"it buffers what a client that does not read is owed", peak, stalled, limitKB)
	}
}

// peakRSSKB returns the process's peak resident set size (VmHWM), in KB.
func peakRSSKB(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				t.Fatalf("VmHWM line %q: %v", line, err)
			}
			return n
		}
	}
	t.Fatal("no VmHWM in /proc/<pid>/status")
	return 0
}
