// Command proc measures what troupe adds around processes, for bench/run.
// It writes one JSON report (the fields summarize reads) to stdout.
//
//	proc forkexec -n 300 PROGRAM...
//
// runs PROGRAM n times with fork/exec/wait, one at a time: the floor a
// command tool is compared with.
//
//	proc cancel -n 50 -tool sleeper -- SERVER...
//
// starts the stdio MCP server SERVER, and n times calls tool (which must
// start a long-running process), waits until the process exists among the
// server's descendants, sends notifications/cancelled and measures until
// that process is dead (gone or a zombie): cancel-to-dead latency.
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// report is the subset of troupe bench's JSON report that summarize reads.
type report struct {
	Calls       int64            `json:"calls"`
	OK          int64            `json:"ok"`
	Errors      map[string]int64 `json:"errors"`
	CallsPerSec float64          `json:"calls_per_sec"`
	Latency     latency          `json:"latency"`
	Aborted     string           `json:"aborted,omitempty"`
}

type latency struct {
	P50 float64 `json:"p50_us"`
	P90 float64 `json:"p90_us"`
	P99 float64 `json:"p99_us"`
	Max float64 `json:"max_us"`
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: proc forkexec|cancel [flags] -- COMMAND...")
		os.Exit(2)
	}
	mode := os.Args[1]
	fs := flag.NewFlagSet(mode, flag.ExitOnError)
	n := fs.Int("n", 100, "repetitions")
	tool := fs.String("tool", "sleeper", "cancel: the tool that starts a long-running process")
	fs.Parse(os.Args[2:])
	if fs.NArg() == 0 || *n <= 0 {
		fmt.Fprintln(os.Stderr, "proc: a command and -n > 0 are needed")
		os.Exit(2)
	}
	var rep report
	var err error
	switch mode {
	case "forkexec":
		rep, err = forkExec(fs.Args(), *n)
	case "cancel":
		rep, err = cancel(fs.Args(), *tool, *n)
	default:
		err = fmt.Errorf("unknown mode %q", mode)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "proc:", err)
		os.Exit(1)
	}
	json.NewEncoder(os.Stdout).Encode(rep)
}

func forkExec(argv []string, n int) (report, error) {
	var took []time.Duration
	start := time.Now()
	for range n {
		t0 := time.Now()
		if err := exec.Command(argv[0], argv[1:]...).Run(); err != nil {
			return report{}, fmt.Errorf("%s: %w", argv[0], err)
		}
		took = append(took, time.Since(t0))
	}
	return summarise(took, n, time.Since(start)), nil
}

func summarise(took []time.Duration, n int, elapsed time.Duration) report {
	slices.Sort(took)
	us := func(q float64) float64 {
		if len(took) == 0 {
			return 0
		}
		i := min(len(took)-1, int(q*float64(len(took))))
		return float64(took[i].Microseconds())
	}
	r := report{Calls: int64(n), OK: int64(len(took)), CallsPerSec: float64(len(took)) / elapsed.Seconds(),
		Latency: latency{P50: us(0.5), P90: us(0.9), P99: us(0.99), Max: us(1)}}
	if lost := n - len(took); lost > 0 {
		r.Errors = map[string]int64{"not_measured": int64(lost)}
	}
	return r
}

// server is a stdio MCP server driven with raw JSON-RPC.
type server struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Scanner
}

func startServer(argv []string) (*server, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	outR, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	s := &server{cmd: cmd, in: in, out: bufio.NewScanner(outR)}
	s.out.Buffer(make([]byte, 1<<20), 16<<20)
	return s, nil
}

func (s *server) send(msg string) error {
	_, err := io.WriteString(s.in, msg+"\n")
	return err
}

// await reads messages until the response with id arrives.
func (s *server) await(id int) (json.RawMessage, error) {
	want := strconv.Itoa(id)
	for s.out.Scan() {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Result json.RawMessage `json:"result"`
			Error  json.RawMessage `json:"error"`
		}
		if json.Unmarshal(s.out.Bytes(), &m) == nil && string(m.ID) == want {
			if m.Error != nil {
				return nil, fmt.Errorf("request %d: %s", id, m.Error)
			}
			return m.Result, nil
		}
	}
	return nil, errors.New("the server closed its output")
}

func (s *server) close() {
	s.in.Close()
	done := make(chan struct{})
	go func() { s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		<-done
	}
}

func cancel(argv []string, tool string, n int) (report, error) {
	s, err := startServer(argv)
	if err != nil {
		return report{}, err
	}
	defer s.close()
	s.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"proc","version":"1"}}}`)
	if _, err := s.await(0); err != nil {
		return report{}, err
	}
	s.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	var took []time.Duration
	start := time.Now()
	for i := 1; i <= n; i++ {
		before := descendants(s.cmd.Process.Pid)
		s.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":{}}}`, i, tool))
		pid, err := waitNewProcess(s.cmd.Process.Pid, before, 10*time.Second)
		if err != nil {
			return summarise(took, n, time.Since(start)), fmt.Errorf("call %d: %w", i, err)
		}
		t0 := time.Now()
		s.send(fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":%d,"reason":"bench"}}`, i))
		for alive(pid) {
			if time.Since(t0) > 30*time.Second {
				return summarise(took, n, time.Since(start)), fmt.Errorf("call %d: pid %d outlived its cancel by 30 s", i, pid)
			}
			time.Sleep(200 * time.Microsecond)
		}
		took = append(took, time.Since(t0))
		// The cancelled call gets no answer; a ping orders what follows.
		s.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":"p%d","method":"ping"}`, i))
		if _, err := s.awaitRaw(fmt.Sprintf(`"p%d"`, i)); err != nil {
			return summarise(took, n, time.Since(start)), err
		}
	}
	return summarise(took, n, time.Since(start)), nil
}

func (s *server) awaitRaw(id string) (json.RawMessage, error) {
	for s.out.Scan() {
		var m struct {
			ID json.RawMessage `json:"id"`
		}
		if json.Unmarshal(s.out.Bytes(), &m) == nil && string(m.ID) == id {
			return nil, nil
		}
	}
	return nil, errors.New("the server closed its output")
}

// waitNewProcess waits for a live descendant of root that is not in before
// and runs no Go sandbox helper (it has exec'd its program).
func waitNewProcess(root int, before map[int]bool, limit time.Duration) (int, error) {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		for pid := range descendants(root) {
			if !before[pid] && alive(pid) && !isHelper(pid) {
				return pid, nil
			}
		}
		time.Sleep(200 * time.Microsecond)
	}
	return 0, errors.New("the tool's process did not appear")
}

func isHelper(pid int) bool {
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	if err != nil {
		return true // not readable yet: not known to be the program
	}
	base := filepath.Base(exe)
	return strings.HasPrefix(base, "troupe")
}

// descendants lists root's descendants through /proc/<pid>/task/*/children.
func descendants(root int) map[int]bool {
	seen := map[int]bool{}
	queue := []int{root}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", p))
		for _, t := range tasks {
			b, _ := os.ReadFile(t)
			for _, f := range strings.Fields(string(b)) {
				if c, err := strconv.Atoi(f); err == nil && !seen[c] {
					seen[c] = true
					queue = append(queue, c)
				}
			}
		}
	}
	return seen
}

// alive: the process exists and is not a zombie.
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i > 0 && i+2 < len(s) && s[i+2] != 'Z' && s[i+2] != 'X'
}
