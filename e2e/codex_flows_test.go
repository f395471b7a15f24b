package e2e

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The real Codex CLI driving troupe through whole flows, over stdio and over
// streamable HTTP with a bearer token: discovery and a read, a command tool,
// tools troupe's own approval gate refuses (Codex exec declines every
// elicitation), and a call that outlives Codex's tool_timeout_sec. Each
// transport is one `codex exec` run whose scripted model makes every call in
// turn; the subtests assert on what Codex handed back to the model.
// (That read-only tools run under Codex's default approval policy, with no
// approval setting at all, is TestCodexListsAndCallsTools*'s subject.)

// codexFlowsConfig is troupe's config for these flows. slow ignores SIGTERM
// in a whole process tree, so only troupe's SIGKILL after kill_grace ends
// it; SLOW_MARK is replaced by a number unique to the run, which is in the
// command line of every process of the tree (the sleeps' too).
const codexFlowsConfig = `
[mcp.greet]
command = "echo"
args = ["hello", "{name}"]
description = "Greets someone."
input_schema = { type = "object", properties = { name = { type = "string" } }, required = ["name"], additionalProperties = false }
side_effects = []
requires_approval = false

[mcp.stamp]
command = "touch"
args = ["stamped.txt"]
description = "Leaves a stamp in the workspace; needs approval (the default)."
side_effects = []

[mcp.slow]
command = "sh"
args = ["-c", "trap '' TERM; sleep SLOW_MARK & sleep SLOW_MARK & wait"]
description = "Outlives any client timeout."
side_effects = []
requires_approval = false
`

// codexToolTimeout is Codex's tool_timeout_sec in these flows: long enough
// for the quick calls under -race, short for the slow one.
const codexToolTimeout = 3

// codexKillWait bounds how long after Codex gave up on slow its processes
// may live: troupe's kill grace (2 s by default) plus slack.
const codexKillWait = 8 * time.Second

// codexCall is one tool call the scripted model makes through Codex, in
// namespace mcp__troupe (tool is the name Codex shows, e.g. repo_readFile).
type codexCall struct {
	id, tool string
	args     any
}

// codexRun is what one scripted Codex run left: the tools Codex offered in
// mcp__troupe, the text of each call's function_call_output, and Codex's
// JSON events.
type codexRun struct {
	offered []string
	outputs map[string]string
	events  []map[string]any
}

// runCodexCalls runs Codex on workspace with mcpServers (a TOML fragment
// naming troupe "troupe"), whose scripted model waits for troupe's tools,
// then makes calls one after another and ends the turn. onOutput, when not
// nil, runs in the model once per call as its output arrives, while Codex
// and troupe still run (Codex waits for the model meanwhile).
func runCodexCalls(t *testing.T, workspace, mcpServers string, calls []codexCall, onOutput func(id, output string), env ...string) codexRun {
	t.Helper()
	waits := 0
	seen := map[string]bool{}
	model := newScriptedModel(t, func(req modelRequest) modelItem {
		if _, ok := req.namespace("mcp__troupe"); !ok {
			// Codex does not wait for MCP servers before its first model
			// request; keep the turn going until troupe's tools show up.
			waits++
			return functionCall(fmt.Sprintf("call_wait_%d", waits), "", "wait_for_tools", map[string]any{})
		}
		done := req.outputs()
		for _, c := range calls {
			out, ok := done[c.id]
			if !ok {
				return functionCall(c.id, "mcp__troupe", c.tool, c.args)
			}
			if !seen[c.id] {
				seen[c.id] = true
				if onOutput != nil {
					onOutput(c.id, outputText(out))
				}
			}
		}
		return message("all tools called")
	})
	events := runCodex(t, model, workspace, mcpServers, "use troupe's tools", env...)

	model.mu.Lock()
	defer model.mu.Unlock()
	run := codexRun{outputs: map[string]string{}, events: events}
	for _, req := range model.requests {
		if names, ok := req.namespace("mcp__troupe"); ok {
			run.offered = names
			break
		}
	}
	if len(model.requests) > 0 {
		for id, out := range model.requests[len(model.requests)-1].outputs() {
			run.outputs[id] = outputText(out)
		}
	}
	return run
}

// outputText is the text of a function_call_output as outputs() returns it
// (its JSON): the input_text items joined by newlines, or the string itself.
func outputText(raw string) string {
	var s string
	if json.Unmarshal([]byte(raw), &s) == nil {
		return s
	}
	var items []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal([]byte(raw), &items) != nil {
		return raw
	}
	var texts []string
	for _, it := range items {
		texts = append(texts, it.Text)
	}
	return strings.Join(texts, "\n")
}

// output returns call id's output, failing the test when Codex sent none.
func (r codexRun) output(t *testing.T, id string) string {
	t.Helper()
	out, ok := r.outputs[id]
	if !ok {
		t.Fatalf("no function_call_output for %s; outputs: %v", id, r.outputs)
	}
	return out
}

// wantAll fails unless s contains every one of wants.
func wantAll(t *testing.T, what, s string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(s, w) {
			t.Errorf("%s: want %q in:\n%s", what, w, s)
		}
	}
}

// treeSnapshot maps each regular file under dir (slash paths) to its
// content, and each symlink to its target.
func treeSnapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	snap := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		switch {
		case d.Type()&os.ModeSymlink != 0:
			target, err := os.Readlink(p)
			snap[filepath.ToSlash(rel)] = "-> " + target
			return err
		case d.Type().IsRegular():
			b, err := os.ReadFile(p)
			snap[filepath.ToSlash(rel)] = string(b)
			return err
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

// slowMarks makes the markers of slow unique across runs and processes.
var slowMarks atomic.Int64

// TestCodexFlows runs the flows over stdio and over HTTP with a bearer token.
func TestCodexFlows(t *testing.T) {
	codexBinary(t) // skip before building and starting servers
	for _, transport := range []string{"stdio", "http bearer token"} {
		t.Run(transport, func(t *testing.T) {
			fx := newFixture(t)
			// A number sleep accepts and nothing else on the machine runs.
			mark := fmt.Sprintf("300.%d%03d", os.Getpid(), slowMarks.Add(1))
			cfg := filepath.Join(t.TempDir(), "troupe.toml")
			if err := os.WriteFile(cfg, []byte(strings.ReplaceAll(codexFlowsConfig, "SLOW_MARK", mark)), 0o600); err != nil {
				t.Fatal(err)
			}
			// shell.exec is not annotated read-only: under exec's approval
			// policy (never) Codex would refuse it itself. approval_mode
			// "approve" lets the call reach troupe, whose gate must refuse it.
			// The key is the MCP name; Codex ignores tools.shell_exec.
			// The command tools declare no side effects (destructiveHint and
			// openWorldHint false), which Codex runs without asking.
			codexSettings := fmt.Sprintf("tool_timeout_sec = %d\n\n[mcp_servers.troupe.tools.\"shell.exec\"]\napproval_mode = \"approve\"\n", codexToolTimeout)
			var servers string
			var env []string
			if transport == "stdio" {
				servers = fmt.Sprintf("[mcp_servers.troupe]\ncommand = %q\nargs = [\"serve\", \"--workspace\", %q, \"--config\", %q]\nenv = { XDG_STATE_HOME = %q }\n",
					troupeBinary(t), fx.dir, cfg, stateHome)
			} else {
				token := newToken(t)
				srv := startHTTPServer(t, fx.dir, token, "--config", cfg)
				servers = fmt.Sprintf("[mcp_servers.troupe]\nurl = %q\nbearer_token_env_var = %q\n", srv.url, tokenEnv)
				env = append(env, tokenEnv+"="+token)
				t.Cleanup(func() {
					if strings.Contains(srv.log.String(), "status=401") {
						t.Errorf("troupe refused some of Codex's requests as unauthenticated")
					}
				})
			}
			servers += codexSettings
			codexFlows(t, fx, servers, mark, env...)
		})
	}
}

// codexFlows makes every call of the flows in one Codex run and checks each.
func codexFlows(t *testing.T, fx fixture, servers, mark string, env ...string) {
	before := treeSnapshot(t, fx.dir)

	// Watch slow's process tree from outside for the whole run: it must
	// have been there (sh and both sleeps), and be gone soon after Codex
	// gave up on the call.
	var peak atomic.Int64
	stop := make(chan struct{})
	var watching sync.WaitGroup
	watching.Add(1)
	go func() {
		defer watching.Done()
		for {
			peak.Store(max(peak.Load(), int64(processesWith(mark))))
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(func() {
		// Whatever happened, leave no slow process behind.
		for _, pid := range pidsWith(mark) {
			if p, err := os.FindProcess(pid); err == nil {
				_ = p.Kill()
			}
		}
	})

	var slowGone time.Duration = -1
	var slowLeft int
	onOutput := func(id, _ string) {
		if id != "call_slow" {
			return
		}
		// Codex has given up and sent notifications/cancelled; troupe must
		// SIGTERM the group, then SIGKILL it after kill_grace.
		start := time.Now()
		for time.Since(start) < codexKillWait {
			if slowLeft = processesWith(mark); slowLeft == 0 {
				slowGone = time.Since(start)
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	calls := []codexCall{
		{"call_read", "repo_readFile", map[string]any{"path": "README.md"}},
		{"call_greet", "greet", map[string]any{"name": "codex"}},
		{"call_shell", "shell_exec", map[string]any{"command": []string{"sh", "-c", "echo pwned > pwned.txt"}}},
		{"call_stamp", "stamp", map[string]any{}},
		{"call_slow", "slow", map[string]any{}},
	}
	start := time.Now()
	run := runCodexCalls(t, fx.dir, servers, calls, onOutput, env...)
	close(stop)
	watching.Wait()
	t.Logf("codex exec took %v", time.Since(start).Round(time.Millisecond))
	if slowGone >= 0 {
		t.Logf("slow's processes were gone %v after Codex's timeout", slowGone.Round(time.Millisecond))
	}

	t.Run("lists troupe's tools", func(t *testing.T) {
		want := []string{"docs_fetch", "fs_writeFile", "greet", "repo_listDir", "repo_readFile", "repo_ripgrep", "shell_exec", "slow", "stamp"}
		if !slices.Equal(run.offered, want) {
			t.Fatalf("Codex offered %v in mcp__troupe, want %v", run.offered, want)
		}
	})
	t.Run("repo.readFile returns the content", func(t *testing.T) {
		// repo.readFile has structuredContent, which is all Codex passes on.
		out := run.output(t, "call_read")
		_, js, _ := strings.Cut(out, "Output:\n")
		var file struct {
			Path    string `json:"path"`
			Content string `json:"content"`
		}
		if err := json.Unmarshal([]byte(js), &file); err != nil || file.Path != "README.md" || file.Content != fx.readme {
			t.Fatalf("repo.readFile: want README.md with %q, got (%v):\n%s", fx.readme, err, out)
		}
	})
	t.Run("a command tool's output arrives", func(t *testing.T) {
		out := run.output(t, "call_greet")
		if !strings.HasSuffix(out, "\nhello codex\n") {
			t.Fatalf("greet: want its output %q, got:\n%s", "hello codex\n", out)
		}
	})
	t.Run("troupe refuses shell.exec after Codex declines", func(t *testing.T) {
		wantAll(t, "shell.exec", run.output(t, "call_shell"),
			"shell.exec was not run: the client declined the approval request",
			"too soon for anyone to have read it",
			"Codex exec",
			"It is high-risk, so troupe always asks a person first")
	})
	t.Run("troupe refuses a command tool needing approval, saying how to allow it", func(t *testing.T) {
		wantAll(t, "stamp", run.output(t, "call_stamp"),
			"stamp was not run: the client declined the approval request",
			`requires_approval = false in its [mcp."stamp"] table`)
	})
	t.Run("the refused tools changed nothing", func(t *testing.T) {
		if after := treeSnapshot(t, fx.dir); !maps.Equal(before, after) {
			t.Fatalf("the workspace changed:\nbefore %v\nafter  %v", before, after)
		}
	})
	t.Run("a call past tool_timeout_sec", func(t *testing.T) {
		wantAll(t, "slow", run.output(t, "call_slow"),
			"tool call error: tool call failed for `troupe/slow`",
			fmt.Sprintf("timed out awaiting tools/call after %ds", codexToolTimeout))
		if p := peak.Load(); p < 3 {
			t.Errorf("saw at most %d of slow's processes running, want sh and two sleeps", p)
		}
		if slowGone < 0 {
			t.Fatalf("%d of slow's processes still ran %v after Codex's timeout", slowLeft, codexKillWait)
		}
	})
}

// pidsWith lists the processes whose command line contains marker.
func pidsWith(marker string) []int {
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		var pid int
		if _, err := fmt.Sscanf(e.Name(), "%d", &pid); err != nil {
			continue
		}
		b, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if strings.Contains(string(b), marker) {
			pids = append(pids, pid)
		}
	}
	return pids
}
