package repo_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"troupe/protocol"
	"troupe/tools"
	"troupe/tools/repo"
	"troupe/workspace"
)

// engine is one way of building repo.ripgrep for a test.
type engine struct {
	name string
	opts repo.Options
}

// engines returns the built-in search, and rg when it is installed, so
// that every behaviour test runs against both.
func engines(t *testing.T) []engine {
	es := []engine{{"builtin", repo.Options{DisableRipgrep: true}}}
	if _, err := exec.LookPath("rg"); err == nil {
		es = append(es, engine{"rg", repo.Options{}})
	} else {
		t.Log("rg is not installed; testing the built-in search only")
	}
	return es
}

func TestRipgrep(t *testing.T) {
	many := strings.Repeat("needle\n", 60)
	ws, dir := fixture{
		"a.txt":       "alpha\nbeta needle\r\ngamma\n",
		"b/c.go":      "needle := 1\n",
		"b/many.txt":  many,
		".gitignore":  "ignored.txt\n",
		"ignored.txt": "needle\n",
		".hidden":     "needle\n",
		"long.txt":    strings.Repeat("é", 1500) + " needle\n",
		"bin":         "needle\x00\n",
		"link":        "->a.txt",
	}.build(t)
	longCut := strings.Repeat("é", 1000) // 2000 bytes, cut on a character boundary

	for _, e := range engines(t) {
		t.Run(e.name, func(t *testing.T) {
			ts := newToolSet(t, ws, e.opts)
			ctx := testCtx(t, 20*time.Second)
			search := func(args map[string]any) grepResult {
				t.Helper()
				var r grepResult
				if err := ts.call(ctx, repo.NameRipgrep, args, &r); err != nil {
					t.Fatalf("%v: %v", args, err)
				}
				return r
			}

			r := search(map[string]any{"query": "needle", "globs": []string{"!many.txt"}})
			want := grepResult{Matches: []grepMatch{
				{"a.txt", 2, "beta needle"},
				{"b/c.go", 1, "needle := 1"},
				{"long.txt", 1, longCut},
			}}
			if !reflect.DeepEqual(r, want) {
				t.Errorf("search:\n got %+v\nwant %+v", r, want)
			}

			// The default limit is 50.
			r = search(map[string]any{"query": "^needle$"})
			if len(r.Matches) != 50 || !r.Truncated || r.Matches[0].FilePath != "b/many.txt" {
				t.Errorf("default limit: %d matches, truncated %v", len(r.Matches), r.Truncated)
			}
			// Exactly as many matches as the limit is not truncated.
			r = search(map[string]any{"query": "^needle$", "maxMatches": 60})
			if len(r.Matches) != 60 || r.Truncated {
				t.Errorf("maxMatches = matches: %d matches, truncated %v", len(r.Matches), r.Truncated)
			}
			r = search(map[string]any{"query": "needle", "maxMatches": 1})
			if !reflect.DeepEqual(r, grepResult{Matches: []grepMatch{{"a.txt", 2, "beta needle"}}, Truncated: true}) {
				t.Errorf("maxMatches 1: %+v", r)
			}

			r = search(map[string]any{"query": "needle", "globs": []string{"*.go"}})
			if !reflect.DeepEqual(r, grepResult{Matches: []grepMatch{{"b/c.go", 1, "needle := 1"}}}) {
				t.Errorf("glob *.go: %+v", r)
			}
			r = search(map[string]any{"query": "no such text"})
			if r.Matches == nil || len(r.Matches) != 0 || r.Truncated {
				t.Errorf("no match: %#v", r)
			}

			errCases := map[string]map[string]any{
				"unclosed group":   {"query": "(needle"},
				"bad class":        {"query": "[[:foo:]]"},
				"huge repetition":  {"query": "a{2000}"},
				"literal newline":  {"query": "a\nb"},
				"escaped newline":  {"query": `a\nb`},
				"bad glob":         {"query": "x", "globs": []string{"["}},
				"nested braces":    {"query": "x", "globs": []string{"{a,{b}}"}},
				"empty query":      {"query": ""},
				"no query":         {},
				"zero maxMatches":  {"query": "x", "maxMatches": 0},
				"large maxMatches": {"query": "x", "maxMatches": 10001},
				"unknown argument": {"query": "x", "path": "."},
			}
			for name, args := range errCases {
				err := ts.call(ctx, repo.NameRipgrep, args, nil)
				te := wantToolError(t, err, tools.KindInvalidArgument, dir)
				if name == "unclosed group" && !strings.Contains(te.Message, "regular expression") {
					t.Errorf("%s: %q", name, te.Message)
				}
			}
		})
	}
}

// TestRipgrepRgRegexError covers a query Go accepts and Rust's regex does
// not: rg's complaint becomes invalid_argument, without host paths.
func TestRipgrepRgRegexError(t *testing.T) {
	if _, err := exec.LookPath("rg"); err != nil {
		t.Skip("rg is not installed")
	}
	ws, dir := fixture{"a.txt": "a.b\n"}.build(t)
	ctx := testCtx(t, 10*time.Second)
	args := map[string]any{"query": `\Qa.b\E`}
	err := newToolSet(t, ws, repo.Options{}).call(ctx, repo.NameRipgrep, args, nil)
	te := wantToolError(t, err, tools.KindInvalidArgument, dir)
	if !strings.Contains(te.Message, "ripgrep") {
		t.Errorf("message %q should say rg refused the query", te.Message)
	}
	var r grepResult
	if err := newToolSet(t, ws, repo.Options{DisableRipgrep: true}).call(ctx, repo.NameRipgrep, args, &r); err != nil || len(r.Matches) != 1 {
		t.Errorf("built-in search of \\Q...\\E: %v %+v", err, r)
	}
}

// TestRipgrepFakeRg runs stand-ins for rg to check what the tool does with
// rg's failures.
func TestRipgrepFakeRg(t *testing.T) {
	ws, dir := fixture{"a.txt": "x\n"}.build(t)
	ctx := testCtx(t, 10*time.Second)
	cases := []struct {
		name   string
		script string
		check  func(t *testing.T, err error)
	}{
		{
			name:   "regex error naming the workspace",
			script: `echo "regex parse error: near $PWD/x" >&2; exit 2`,
			check: func(t *testing.T, err error) {
				te := wantToolError(t, err, tools.KindInvalidArgument, dir, ws.Dir())
				if !strings.Contains(te.Message, "regex parse error") {
					t.Errorf("message %q lost rg's explanation", te.Message)
				}
			},
		},
		{
			name:   "other failure",
			script: `echo "rg: something broke in $PWD" >&2; exit 2`,
			check: func(t *testing.T, err error) {
				if _, ok := tools.AsError(err); ok || err == nil {
					t.Errorf("got %v, want a plain (internal) error", err)
				}
			},
		},
		{
			name:   "garbage output",
			script: `echo "this is not JSON"`,
			check: func(t *testing.T, err error) {
				if _, ok := tools.AsError(err); ok || err == nil {
					t.Errorf("got %v, want a plain (internal) error", err)
				}
			},
		},
		{
			name: "unreadable files after a finished search",
			script: `echo '{"type":"match","data":{"path":{"text":"./a.txt"},"lines":{"bytes":"eP8K"},"line_number":1}}'
echo '{"type":"summary","data":{}}'
echo "./b.txt: Permission denied (os error 13)" >&2; exit 2`,
			check: func(t *testing.T, err error) {
				if err != nil {
					t.Errorf("got %v, want the matches found", err)
				}
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rg := fakeRg(t, tc.script)
			var r grepResult
			err := newToolSet(t, ws, repo.Options{RipgrepPath: rg}).call(ctx, repo.NameRipgrep, map[string]any{"query": "x"}, &r)
			tc.check(t, err)
			if err == nil && !reflect.DeepEqual(r.Matches, []grepMatch{{"a.txt", 1, "x\uFFFD"}}) {
				t.Errorf("matches %+v", r.Matches)
			}
		})
	}
}

// fakeRg writes an executable shell script standing in for rg.
func fakeRg(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "rg")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestRipgrepCancel checks that a cancelled call returns at once in both
// modes, and that rg, and anything rg started, is gone when it does.
func TestRipgrepCancel(t *testing.T) {
	// One file with a million lines, searched for a pattern without a
	// literal prefix, keeps the built-in search busy for a while.
	ws, dir := fixture{"big.txt": strings.Repeat("abcdefghijklmnopqrstuvwxyz0123456789\n", 1<<20)}.build(t)

	t.Run("already cancelled", func(t *testing.T) {
		for _, e := range engines(t) {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			err := newToolSet(t, ws, e.opts).call(ctx, repo.NameRipgrep, map[string]any{"query": "x"}, nil)
			if !errors.Is(err, context.Canceled) {
				t.Errorf("%s: got %v, want context.Canceled", e.name, err)
			}
		}
		checkNoChildren(t)
	})

	t.Run("builtin mid-search", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		start := time.Now()
		err := newToolSet(t, ws, repo.Options{DisableRipgrep: true}).call(ctx, repo.NameRipgrep, map[string]any{"query": "(?i)zz+"}, nil)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("got %v after %v, want context.DeadlineExceeded", err, time.Since(start))
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("took %v to notice the deadline", d)
		}
	})

	t.Run("rg stops early", func(t *testing.T) {
		if _, err := exec.LookPath("rg"); err != nil {
			t.Skip("rg is not installed")
		}
		var r grepResult
		err := newToolSet(t, ws, repo.Options{}).call(testCtx(t, 10*time.Second), repo.NameRipgrep, map[string]any{"query": "abc", "maxMatches": 3}, &r)
		if err != nil || len(r.Matches) != 3 || !r.Truncated {
			t.Fatalf("got %v, %d matches, truncated %v", err, len(r.Matches), r.Truncated)
		}
		checkNoChildren(t)
	})

	t.Run("rg process group", func(t *testing.T) {
		// rg's stand-in starts a child of its own and waits; both must
		// die when the call is cancelled. rg runs confined to reading
		// the workspace, so the stand-in only has the shell: the child is
		// a subshell that blocks opening a FIFO in the workspace, and the
		// test finds both by the script's path in their command lines.
		fifo := filepath.Join(dir, "block.fifo")
		if err := unix.Mkfifo(fifo, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Remove(fifo) })
		rg := fakeRg(t, fmt.Sprintf("read x < %[1]s &\nread y < %[1]s\nwait", fifo))
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		done := make(chan error, 1)
		go func() {
			done <- newToolSet(t, ws, repo.Options{RipgrepPath: rg}).call(ctx, repo.NameRipgrep, map[string]any{"query": "x"}, nil)
		}()
		pids := waitProcesses(t, rg, 2)
		cancel()
		select {
		case err := <-done:
			if !errors.Is(err, context.Canceled) {
				t.Errorf("got %v, want context.Canceled", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("the call did not return after cancellation")
		}
		// Whatever was orphaned is killed; it may linger as a zombie
		// until whatever adopted it reaps it.
		deadline := time.Now().Add(2 * time.Second)
		for _, pid := range pids {
			for s := processState(pid); s != "" && s != "Z"; s = processState(pid) {
				if time.Now().After(deadline) {
					t.Fatalf("a process of rg (pid %d) survived, state %s", pid, s)
				}
				time.Sleep(10 * time.Millisecond)
			}
		}
		checkNoChildren(t)
	})
}

// waitProcesses waits until n processes have script in their command line
// and returns their pids.
func waitProcesses(t *testing.T, script string, n int) []int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var pids []int
		entries, err := os.ReadDir("/proc")
		if err != nil {
			t.Skip("no /proc")
		}
		for _, e := range entries {
			pid, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			if b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline"); err == nil && strings.Contains(string(b), script) {
				pids = append(pids, pid)
			}
		}
		if len(pids) >= n {
			return pids
		}
		if time.Now().After(deadline) {
			out, _ := exec.Command("ps", "-ef", "--forest").Output()
			t.Fatalf("%d processes run %s, want %d; processes:\n%s", len(pids), script, n, out)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func waitPidFile(t *testing.T, p string) int {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		b, err := os.ReadFile(p)
		if s := strings.TrimSpace(string(b)); err == nil && s != "" {
			pid, err := strconv.Atoi(s)
			if err != nil {
				t.Fatal(err)
			}
			return pid
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never appeared", p)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// processState is the state letter of a process ("R", "S", "Z", ...), or
// "" when there is no such process.
func processState(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	// The state follows the command name, which is in parentheses.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 >= len(s) {
		return ""
	}
	return s[i+2 : i+3]
}

// checkNoChildren fails if the test process has any child process left,
// running or zombie: every rg must have been killed and waited for.
func checkNoChildren(t *testing.T) {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Skip("no /proc")
	}
	me := strconv.Itoa(os.Getpid())
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		fields := strings.Fields(s[i+1:])
		if len(fields) > 1 && fields[1] == me {
			t.Errorf("child process left behind: %s", strings.TrimSpace(s[:min(len(s), 80)]))
		}
	}
}

// TestRipgrepProgress checks that the built-in search reports progress
// that grows, no more often than every 100 ms or so.
func TestRipgrepProgress(t *testing.T) {
	fx := fixture{}
	for i := range 200 {
		fx[fmt.Sprintf("d%02d/f%03d.txt", i%20, i)] = strings.Repeat("some text without the word\n", 500)
	}
	ws, _ := fx.build(t)
	rep := &recorder{}
	reg, err := tools.NewRegistry(repo.Tools(ws, repo.Options{DisableRipgrep: true})...)
	if err != nil {
		t.Fatal(err)
	}
	e, _ := reg.Lookup(repo.NameRipgrep)
	start := time.Now()
	if _, err := e.Tool.Call(testCtx(t, 20*time.Second), &tools.Request{Arguments: []byte(`{"query":"(?i)needle"}`), Reporter: rep}); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	rep.mu.Lock()
	defer rep.mu.Unlock()
	for i := 1; i < len(rep.events); i++ {
		if prev, cur := rep.events[i-1], rep.events[i]; cur.done <= prev.done {
			t.Errorf("progress went from %v to %v", prev.done, cur.done)
		}
	}
	if limit := int(took/(100*time.Millisecond)) + 1; len(rep.events) > limit {
		t.Errorf("%d progress reports in %v; want at most one per 100 ms", len(rep.events), took)
	}
	t.Logf("%d progress reports in %v", len(rep.events), took)
}

type recorder struct {
	mu     sync.Mutex
	events []struct {
		done float64
		at   time.Time
	}
}

// Ready implements tools.Reporter; the recorder always keeps up.
func (r *recorder) Ready(context.Context) error { return nil }

func (r *recorder) Progress(done, total float64, message string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, struct {
		done float64
		at   time.Time
	}{done, time.Now()})
}

func (r *recorder) Log(protocol.LoggingLevel, any) {}

// TestRipgrepSpec checks what clients see in tools/list.
func TestRipgrepSpec(t *testing.T) {
	ws, err := workspace.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	for _, opts := range []repo.Options{{DisableRipgrep: true}, {RipgrepPath: "/nonexistent/rg"}} {
		ts := repo.Tools(ws, opts)
		if len(ts) != 3 {
			t.Fatalf("%d tools", len(ts))
		}
		for _, tool := range ts {
			s := tool.Spec()
			a := s.Annotations
			if a == nil || a.ReadOnlyHint == nil || !*a.ReadOnlyHint || a.OpenWorldHint == nil || *a.OpenWorldHint ||
				a.DestructiveHint == nil || *a.DestructiveHint {
				t.Errorf("%s: annotations %+v", s.Name, a)
			}
			if s.Title == "" || len(s.Description) < 100 || s.OutputSchema == nil {
				t.Errorf("%s: incomplete spec", s.Name)
			}
			if s.Name == repo.NameRipgrep && !strings.Contains(s.Description, "built-in") {
				t.Errorf("without rg the description should say the search is built in: %s", s.Description)
			}
		}
	}
}
